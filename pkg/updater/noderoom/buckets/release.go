package buckets

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
)

// Release removes the reservation of a pod's resize, if this replica holds
// one: the resize was not sent, was refused or failed before it could be
// applied, or the pod is gone. The removal is written by Run's worker,
// never by the caller.
func (r *Reservations) Release(pod *corev1.Pod) {
	r.end(pod, removedReleased, 0)
}

// Seen removes, after Linger, the reservation of a pod that the node view
// (pod is its object) shows resized: the pod holds at least the requests
// reserved, and counts through its own from now on. A pod that terminated
// never will: its reservation is released. It is called for every update of
// the node view; a pod without a reservation costs a hash and a map lookup.
func (r *Reservations) Seen(pod *corev1.Pod) {
	if pod.Spec.NodeName == "" {
		return
	}
	b := r.bucketOf(pod.Spec.NodeName)
	b.mu.Lock()
	o, ok := b.mine[pod.UID]
	b.mu.Unlock()
	if !ok {
		return
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		r.end(pod, removedReleased, 0)
		return
	}
	if covers(resize.HeldRequests(pod), o.requests) {
		r.end(pod, removedShown, Linger)
	}
}

// end queues the removal of the pod's reservation, after delay.
func (r *Reservations) end(pod *corev1.Pod, reason string, delay time.Duration) {
	if pod.Spec.NodeName == "" {
		return
	}
	b := r.bucketOf(pod.Spec.NodeName)
	b.mu.Lock()
	o, ok := b.mine[pod.UID]
	if ok {
		delete(b.mine, pod.UID)
		b.pending[o.key] = removal{value: o.value, due: r.clock.Now().Add(delay), reason: reason}
	}
	b.mu.Unlock()
	if !ok {
		return
	}
	if delay > 0 {
		r.queue.AddAfter(b.index, delay)
	} else {
		r.queue.Add(b.index)
	}
}

// Run removes the reservations released, shown or expired until ctx is
// done: one worker, one bucket at a time, a bucket's removals in one write.
func (r *Reservations) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	for r.next(ctx) {
	}
}

func (r *Reservations) next(ctx context.Context) bool {
	index, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(index)
	b := r.buckets[index]
	if err := r.clean(ctx, b); err != nil {
		klog.FromContext(ctx).V(2).Info("Cannot remove node room reservations yet; trying again", "bucket", klog.KRef(r.namespace, b.name), "err", err)
		r.queue.AddRateLimited(index)
		return true
	}
	r.queue.Forget(index)
	return true
}

// clean writes, in one write, the removals of the bucket that are due and
// the entries that expired or are invalid, with the version read, reading
// again on a conflict.
func (r *Reservations) clean(ctx context.Context, b *bucket) error {
	b.write.Lock()
	defer b.write.Unlock()
	cm, err := r.read(ctx, b)
	fresh := false
	for attempt := 1; ; attempt++ {
		if apierrors.IsNotFound(err) {
			// Nothing to remove from a bucket that is gone.
			b.forget(nil)
			return nil
		}
		if err != nil {
			return err
		}
		now := r.clock.Now()
		v := b.view(cm, now, r.ttl)
		if v.over && now.Before(v.overUntil) {
			r.queue.AddAfter(b.index, v.overUntil.Sub(now))
			return nil
		}
		remove, next, unsure := b.due(v, now)
		if len(remove) == 0 {
			if unsure && !fresh {
				// A removal whose entry the view lacks: gone, or the
				// view is stale. The API server tells.
				cm, err = r.get(ctx, b)
				fresh = true
				continue
			}
			if fresh {
				b.forget(cm.Data)
			}
			r.after(b, next, now)
			return nil
		}
		data := make(map[string]string, len(cm.Data))
		for k, value := range cm.Data {
			if _, ok := remove[k]; !ok {
				data[k] = value
			}
		}
		err = r.update(ctx, b, withData(cm, data))
		if err == nil {
			b.forget(data)
			r.removed(remove)
			r.notify(freed(cm.Data, remove))
			r.after(b, next, now)
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		r.metrics.conflict()
		if attempt >= maxAttempts {
			return err
		}
		cm, err = r.get(ctx, b)
		fresh = true
	}
}

// due returns the keys to remove from the bucket as seen in v, with the
// reason: the entries to drop, and the removals due whose entry still holds
// what this replica wrote. next is when the first removal not due yet is;
// unsure, that the entry of a removal is not in v.
func (b *bucket) due(v view, now time.Time) (remove map[string]string, next time.Time, unsure bool) {
	remove = make(map[string]string, len(v.drop))
	for k, reason := range v.drop {
		remove[k] = reason
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, p := range b.pending {
		e, ok := v.live[k]
		switch {
		case !ok || e.value != p.value:
			// Expired (dropped anyway), another's now, or gone.
			unsure = unsure || !ok
		case p.due.After(now):
			if next.IsZero() || p.due.Before(next) {
				next = p.due
			}
		default:
			remove[k] = p.reason
		}
	}
	return remove, next, unsure
}

// forget drops the removals and the reservations of this replica whose
// entries data, the bucket as the API server holds it, no longer holds.
func (b *bucket) forget(data map[string]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, p := range b.pending {
		if data[k] != p.value {
			delete(b.pending, k)
		}
	}
	for uid, o := range b.mine {
		if data[o.key] != o.value {
			delete(b.mine, uid)
		}
	}
}

// after queues the bucket again for the first removal not due yet.
func (r *Reservations) after(b *bucket, next, now time.Time) {
	if !next.IsZero() {
		r.queue.AddAfter(b.index, next.Sub(now))
	}
}

// removed counts the entries removed, by reason.
func (r *Reservations) removed(remove map[string]string) {
	for _, reason := range remove {
		r.metrics.removedEntry(reason)
	}
}

// freed returns the nodes whose entries of data were removed.
func freed(data map[string]string, remove map[string]string) sets.Set[string] {
	nodes := sets.New[string]()
	for k := range remove {
		if e, err := parse(k, data[k]); err == nil {
			nodes.Insert(e.node)
		}
	}
	return nodes
}

// Changed is told of every change of a bucket the cache watches (old nil:
// added; obj nil: deleted): entries first seen start their TTL, and the
// nodes whose reservations went are told to the subscribers, whose pods
// waiting for room there may fit now.
func (r *Reservations) Changed(old, obj *corev1.ConfigMap) {
	name := ""
	switch {
	case obj != nil:
		name = obj.Name
	case old != nil:
		name = old.Name
	}
	b, ok := r.byName[name]
	if !ok {
		return
	}
	if obj != nil {
		b.view(obj, r.clock.Now(), r.ttl)
	}
	if old == nil {
		return
	}
	if ok, _ := within(old.Data, old.BinaryData); !ok {
		return
	}
	var now map[string]string
	if obj != nil {
		now = obj.Data
	}
	gone := map[string]string{}
	for k, value := range old.Data {
		if v, ok := now[k]; !ok || v != value {
			gone[k] = ""
		}
	}
	r.notify(freed(old.Data, gone))
}

// Subscribe calls fn with each node whose reservations went (any
// replica's), until the returned function is called.
func (r *Reservations) Subscribe(fn func(node string)) (cancel func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := r.nextSub
	r.nextSub++
	r.subs[id] = fn
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.subs, id)
	}
}

// notify tells the subscribers of the nodes.
func (r *Reservations) notify(nodes sets.Set[string]) {
	if nodes.Len() == 0 {
		return
	}
	r.mu.Lock()
	subs := make([]func(string), 0, len(r.subs))
	for _, fn := range r.subs {
		subs = append(subs, fn)
	}
	r.mu.Unlock()
	for node := range nodes {
		for _, fn := range subs {
			fn(node)
		}
	}
}
