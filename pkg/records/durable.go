package records

import (
	"context"
	"errors"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	vpaclient "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/typed/autoscaling.k8s.io/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// durable is what the stores that keep records beyond the process share:
// the records in memory, where decisions read them; a queue of the VPAs
// whose records changed (by Owner.id: a VPA's UID), written one at a time
// by Run with backoff (500 ms to 5 min) while the records stay in memory;
// and the state of Load.
type durable struct {
	mem   *InMemoryStore
	queue workqueue.TypedRateLimitingInterface[string]
	// name is the store in logs and in the store label of the metrics.
	name    string
	metrics *Metrics
	// write brings what is kept of one VPA's records up to date.
	write func(ctx context.Context, id string) error

	mu sync.Mutex
	// owners holds, by id, each VPA records were put for or loaded from:
	// writes name it, so that a record never lands on a new VPA of the same
	// name.
	owners map[string]Owner
	// failing holds, by id, the error of the last write of a VPA's records
	// when it failed (WriteError).
	failing map[string]error
	// leftOut holds, by id, how many of a VPA's records the last value
	// written left out, to stay within its bounds.
	leftOut map[string]int
	// loadErr is what Loaded returns.
	loadErr error
}

func newDurable(name string, metrics *Metrics, write func(ctx context.Context, id string) error) durable {
	return durable{
		mem:     NewInMemoryStore(),
		name:    name,
		metrics: metrics,
		write:   write,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 5*time.Minute),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "vpa-inplace-records:" + name},
		),
		owners:  map[string]Owner{},
		failing: map[string]error{},
		leftOut: map[string]int{},
		loadErr: ErrNotLoaded,
	}
}

// ErrNotLoaded is what Loaded returns before a Load has ended, and while
// one runs.
var ErrNotLoaded = errors.New("records not loaded yet")

// Get implements Store.
func (s *durable) Get(uid types.UID) (*Record, bool) { return s.mem.Get(uid) }

// Len implements Store.
func (s *durable) Len() int { return s.mem.Len() }

// Of implements Store.
func (s *durable) Of(owner Owner) map[types.UID]*Record { return s.mem.Of(owner) }

// GetFor implements Store: a record forgotten because it is held for
// another VPA is counted (DropNotOwned) and that VPA's records written
// again without it.
func (s *durable) GetFor(owner Owner, uid types.UID) (*Record, bool) {
	r, ok, forgotten := s.mem.getFor(owner, uid)
	if forgotten != nil {
		s.metrics.recordsDropped(s.name, DropNotOwned, 1)
		s.queue.Add(forgotten.id())
	}
	return r, ok
}

// Put implements Store.
func (s *durable) Put(owner Owner, uid types.UID, r *Record) {
	id := owner.id()
	s.mu.Lock()
	s.owners[id] = owner
	s.mu.Unlock()
	previous, had := s.mem.put(owner, uid, r)
	s.queue.Add(id)
	if had && previous.id() != id {
		s.queue.Add(previous.id())
	}
}

// Delete implements Store.
func (s *durable) Delete(uid types.UID) bool {
	owner, ok := s.mem.delete(uid)
	if ok {
		s.queue.Add(owner.id())
	}
	return ok
}

// Retain implements Store.
func (s *durable) Retain(live func(types.UID) bool) []types.UID {
	forgotten, owners := s.mem.retain(live)
	for _, id := range owners {
		s.queue.Add(id)
	}
	return forgotten
}

// Loaded implements Store: nil once the last Load has succeeded,
// ErrNotLoaded before and while a Load runs, the error of the last Load if
// it failed (then the records held are those of the last Load that
// succeeded, if any).
func (s *durable) Loaded() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loadErr
}

// loadWith runs load within timeout, with the time of now (zero when now is
// nil), Loaded saying ErrNotLoaded meanwhile and load's error after.
func (s *durable) loadWith(ctx context.Context, timeout time.Duration, now func() time.Time,
	load func(ctx context.Context, now time.Time) error) error {
	s.setLoaded(ErrNotLoaded)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var at time.Time
	if now != nil {
		at = now()
	}
	err := load(ctx, at)
	s.setLoaded(err)
	return err
}

func (s *durable) setLoaded(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadErr = err
}

// Run implements Store: it writes the records of VPAs whose records changed
// until ctx is cancelled.
func (s *durable) Run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	for s.processNext(ctx) {
	}
}

func (s *durable) processNext(ctx context.Context) bool {
	id, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(id)
	err := s.write(ctx, id)
	s.settle(id, err)
	if err == nil {
		s.queue.Forget(id)
		return true
	}
	logger := klog.FromContext(ctx)
	vpa := s.vpaOf(id)
	if ctx.Err() != nil {
		logger.Error(err, "Records not written before shutdown; the next leader retries the attempt once", "vpa", vpa, "store", s.name)
		return true
	}
	logger.Error(err, "Writing records failed; kept in memory, retrying", "vpa", vpa, "store", s.name, "retries", s.queue.NumRequeues(id))
	s.queue.AddRateLimited(id)
	return true
}

// settle notes the outcome of a write of the VPA of id (WriteError) and
// sets the gauge of the records held in memory only.
func (s *durable) settle(id string, err error) {
	s.mu.Lock()
	if err != nil {
		s.failing[id] = err
	} else {
		delete(s.failing, id)
	}
	failing := make([]string, 0, len(s.failing))
	for id := range s.failing {
		failing = append(failing, id)
	}
	leftOut := 0
	for _, n := range s.leftOut {
		leftOut += n
	}
	s.mu.Unlock()
	records := 0
	for _, id := range failing {
		records += s.mem.count(id)
	}
	s.metrics.setNotDurable(s.name, records, leftOut)
}

// setLeftOut notes how many of the records of the VPA of id the value
// written leaves out.
func (s *durable) setLeftOut(id string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > 0 {
		s.leftOut[id] = n
	} else {
		delete(s.leftOut, id)
	}
}

// WriteError implements Store.
func (s *durable) WriteError(owner Owner) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failing[owner.id()]
}

// vpaOf names the VPA of an id in logs: namespace/name (UID).
func (s *durable) vpaOf(id string) string {
	s.mu.Lock()
	o, ok := s.owners[id]
	s.mu.Unlock()
	if !ok {
		return id
	}
	return o.Key() + " (" + string(o.UID) + ")"
}

// loading gathers the records a Load reads, value by value.
type loading struct {
	metrics *Metrics
	store   string
	loaded  map[types.UID]entry
	owners  map[string]Owner
	// rewrite holds the VPAs (by id) whose records are to be written
	// again: some were dropped, some were read in an earlier version's
	// shape (Decoded.Legacy), or a pod's record is also held under another
	// VPA.
	rewrite map[string]bool
	dropped int
}

func newLoading(metrics *Metrics, store string) *loading {
	return &loading{metrics: metrics, store: store, loaded: map[types.UID]entry{}, owners: map[string]Owner{}, rewrite: map[string]bool{}}
}

// add holds what was decoded of one value of owner's, read from source.
func (l *loading) add(ctx context.Context, owner Owner, source string, d Decoded) {
	id := owner.id()
	l.owners[id] = owner
	if n := d.DroppedTotal(); n > 0 {
		l.dropped += n
		l.rewrite[id] = true
		for reason, c := range d.Dropped {
			l.metrics.recordsDropped(l.store, reason, c)
		}
		klog.FromContext(ctx).Info("Dropped records", "vpa", owner.Key(), "vpaUID", owner.UID, "store", l.store, "source", source,
			"dropped", d.Dropped, "kept", len(d.Records))
	}
	if d.Legacy > 0 {
		l.rewrite[id] = true
		klog.FromContext(ctx).V(2).Info("Records read in an earlier shape, to be written again", "vpa", owner.Key(), "vpaUID", owner.UID,
			"store", l.store, "source", source, "records", d.Legacy)
	}
	for uid, r := range d.Records {
		// A pod that moved between VPAs: its newest record wins, and the
		// other VPA's records are written again without it.
		if prev, ok := l.loaded[uid]; ok {
			if !r.RecordedAt.After(prev.rec.RecordedAt) {
				l.rewrite[id] = true
				continue
			}
			l.rewrite[prev.owner.id()] = true
		}
		l.loaded[uid] = entry{owner: owner, rec: r}
	}
}

// listVPAs calls visit for each VPA of namespace ("" for all), read from
// the API server in pages, asking for those of shardSelector when set (a
// server without sharded lists sends them all).
func listVPAs(ctx context.Context, client vpaclient.VerticalPodAutoscalersGetter, namespace, shardSelector string,
	visit func(owner Owner, annotations map[string]string)) error {
	opts := metav1.ListOptions{Limit: loadPageSize, ShardSelector: shardSelector}
	for {
		list, err := client.VerticalPodAutoscalers(namespace).List(ctx, opts)
		if err != nil {
			return err
		}
		for i := range list.Items {
			vpa := &list.Items[i]
			visit(Owner{Namespace: vpa.Namespace, Name: vpa.Name, UID: vpa.UID}, vpa.Annotations)
		}
		if list.Continue == "" {
			return nil
		}
		opts.Continue = list.Continue
	}
}

// decodeOptions bound the decoding of one of owner's values and keep the
// records of the UIDs that live says may be its.
func decodeOptions(owner Owner, now time.Time, live func(Owner, types.UID) bool, maxBytes int) DecodeOptions {
	opts := DecodeOptions{MaxBytes: maxBytes, Now: now}
	if live != nil {
		opts.Keep = func(uid types.UID) bool { return live(owner, uid) }
	}
	return opts
}
