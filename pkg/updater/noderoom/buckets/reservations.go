// Package buckets reserves node room through the API server, so that the
// replicas of a sharded updater (and the controllers of one replica's spans
// of shards) never together send fits-node resizes that a node cannot take,
// each of which fits alone (docs/scaling.md, "Node room across replicas").
//
// The nodes are spread over a fixed number of buckets by the FNV-1a hash of
// their names (pkg/shard's); bucket b is a ConfigMap, <prefix>-noderoom-<b>,
// shipped empty. Before a fits-node resize on node X, Reserve reads X's
// bucket and computes X's room: its allocatable, less what the pods bound to
// X hold in the node view, less every live reservation of the bucket for X
// (and the process's own holds, noderoom.Ledger). If the resize fits, it
// writes its reservation (the pod's UID and the requests it resizes to) into
// the bucket with the resourceVersion it read: the API server refuses a
// write over a stale version (409 Conflict), and Reserve then reads the
// bucket again from the API server and decides again, a bounded number of
// times. Only once the write is accepted is the resize sent. So two
// replicas deciding on one node both write its bucket, and the second
// write, whatever its timing, is decided counting the first.
//
// A reservation is removed when the node view shows its resize (Seen, after
// a short linger for the other replicas' views), when the resize is not
// sent, refused or fails (Release), or when it expires: a TTL after this
// replica first saw it, on its own clock, so that a replica that dies
// holding one frees it. Entries that expired or are not reservations are
// ignored and removed at the next write; a bucket holding MaxEntries live
// reservations refuses new ones (the resize waits); a bucket over its bounds
// is not parsed at all, and cleared once nothing written before can be
// live.
package buckets

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/shard"
)

// The number of buckets: DefaultBuckets unless set, at most MaxBuckets
// (each is watched by every replica).
const (
	DefaultBuckets = 16
	MaxBuckets     = 64
)

const (
	// maxAttempts bounds the writes of one decision that conflict: then
	// the resize waits.
	maxAttempts = 5
	// requestTimeout bounds each read and write of a bucket.
	requestTimeout = 10 * time.Second
	// retryAfter is when a resize that waits for a conflict or an error
	// (not for room) is decided again.
	retryAfter = 5 * time.Second
	// Linger is how long a reservation the node view shows is kept before
	// it is removed: the other replicas' views of the pods may lag behind
	// their view of the bucket.
	Linger = 2 * time.Second
)

// The reasons a reservation is refused (MetricRefused).
const (
	RefusedNoRoom     = "no-room"
	RefusedBucketFull = "bucket-full"
	RefusedConflicts  = "conflicts"
	RefusedError      = "error"
)

// Name returns the name of bucket b's ConfigMap.
func Name(prefix string, b int) string {
	return fmt.Sprintf("%s-noderoom-%d", prefix, b)
}

// Names returns the names of the ConfigMaps of n buckets.
func Names(prefix string, n int) []string {
	out := make([]string, n)
	for b := range n {
		out[b] = Name(prefix, b)
	}
	return out
}

// Of returns the bucket of a node, of n.
func Of(node string, n int) int {
	return int(shard.Hash(node) % uint64(n))
}

// API reads and writes the buckets' ConfigMaps, in their namespace
// (corev1client.ConfigMapInterface).
type API interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
	Update(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error)
}

// Cache is this replica's watch of the buckets (Informers).
type Cache interface {
	Get(name string) (*corev1.ConfigMap, bool)
}

// Config configures Reservations.
type Config struct {
	// API reads and writes the buckets; Cache is the replica's watch of
	// them, nil: read from API.
	API   API
	Cache Cache
	// Namespace (for messages) and Prefix name the buckets, Buckets of
	// them (1 to MaxBuckets).
	Namespace, Prefix string
	Buckets           int
	// Identity names this replica in its reservations.
	Identity string
	// TTL is how long a reservation lasts at most.
	TTL time.Duration
	// Clock is the one clock of expiries and delays; nil: the real one.
	Clock clock.WithTicker
	// Metrics may be nil.
	Metrics *Metrics
}

// Reservations reserves node room in the buckets for one replica. Safe for
// concurrent use.
type Reservations struct {
	api       API
	cache     Cache
	namespace string
	identity  string
	ttl       time.Duration
	clock     clock.WithTicker
	metrics   *Metrics
	buckets   []*bucket
	byName    map[string]*bucket
	// queue holds the buckets whose entries are to be removed.
	queue workqueue.TypedRateLimitingInterface[int]

	mu      sync.Mutex
	subs    map[int]func(node string)
	nextSub int
}

// New returns the Reservations of one replica.
func New(cfg Config) (*Reservations, error) {
	if cfg.Buckets < 1 || cfg.Buckets > MaxBuckets {
		return nil, fmt.Errorf("the number of node room buckets must be from 1 to %d, got %d", MaxBuckets, cfg.Buckets)
	}
	if cfg.API == nil || cfg.Identity == "" || cfg.TTL <= 0 {
		return nil, errors.New("node room reservations need an API, an identity and a TTL")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	r := &Reservations{
		api: cfg.API, cache: cfg.Cache, namespace: cfg.Namespace, identity: cfg.Identity, ttl: cfg.TTL,
		clock: cfg.Clock, metrics: cfg.Metrics, subs: map[int]func(string){}, byName: map[string]*bucket{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[int](time.Second, time.Minute),
			workqueue.TypedRateLimitingQueueConfig[int]{Name: "vpa-inplace-updater-noderoom", Clock: cfg.Clock}),
	}
	for b := range cfg.Buckets {
		r.buckets = append(r.buckets, newBucket(b, Name(cfg.Prefix, b)))
		r.byName[r.buckets[b].name] = r.buckets[b]
	}
	cfg.Metrics.held(r.Len)
	return r, nil
}

// bucketOf returns the bucket of a node.
func (r *Reservations) bucketOf(node string) *bucket {
	return r.buckets[Of(node, len(r.buckets))]
}

// Request is a fits-node resize to reserve the room of.
type Request struct {
	// Pod, resized to Target, on Node.
	Pod    *corev1.Pod
	Target resources.Resources
	Node   *corev1.Node
	// Pods are the pods bound to Node in the node view.
	Pods []*corev1.Pod
	// Held are the holds of this process on Node (noderoom.Ledger.Held),
	// besides the pod's own: resizes sent that the node view does not show
	// yet, of VPAs that reserve nothing here.
	Held map[types.UID]corev1.ResourceList
}

// Answer is Reserve's answer.
type Answer struct {
	// Fits: the reservation is written; the resize may be sent.
	Fits bool
	// Reason (a Refused* constant) and Why say why not.
	Reason, Why string
	// Until is when the answer may change by time alone (a reservation
	// counted expires, a conflict or an error is tried again); zero when
	// only a change of the node's pods or of the bucket can change it.
	Until time.Time
}

// Reserve decides whether the resize fits its node, counting every live
// reservation of the node's bucket, and if it does writes its reservation
// with the version of the bucket read, deciding again on a conflict. The
// resize may be sent only when the answer fits.
func (r *Reservations) Reserve(ctx context.Context, req Request) Answer {
	pod, node := req.Pod, req.Node
	need := roomOf(resize.ResizedRequests(pod, req.Target))
	if len(need) == 0 || covers(resize.HeldRequests(pod), need) {
		// It takes no room the pod does not hold already (a decrease):
		// nothing to reserve.
		return Answer{Fits: true}
	}
	logger := klog.FromContext(ctx)
	b := r.bucketOf(node.Name)
	b.write.Lock()
	defer b.write.Unlock()
	cm, err := r.read(ctx, b)
	for attempt := 1; ; attempt++ {
		if err != nil {
			return r.refuse(RefusedError, fmt.Sprintf("the node room of node %s could not be reserved: %v", node.Name, err), r.clock.Now().Add(retryAfter))
		}
		a, p := r.decide(b, cm, req, need)
		if a != nil {
			return *a
		}
		mine := p.mine
		err = r.update(ctx, b, p.out)
		if err == nil {
			r.removed(p.drop)
			// This replica's reservation until it is removed: the caller
			// holds b.write, so nothing else of this replica wrote the
			// bucket meanwhile.
			b.mu.Lock()
			b.mine[pod.UID] = mine
			delete(b.pending, mine.key)
			b.seen[mine.key] = sighting{value: mine.value, at: r.clock.Now()}
			b.mu.Unlock()
			r.metrics.reserved()
			logger.V(4).Info("Reserved node room", "node", node.Name, "bucket", b.name, "requests", need)
			// Removed once expired, at the latest.
			r.queue.AddAfter(b.index, r.ttl)
			return Answer{Fits: true}
		}
		if !apierrors.IsConflict(err) {
			return r.refuse(RefusedError, fmt.Sprintf("the node room of node %s could not be reserved: writing the bucket %s/%s: %v",
				node.Name, r.namespace, b.name, err), r.clock.Now().Add(retryAfter))
		}
		// Another replica wrote the bucket since it was read: read it
		// again, and decide again.
		r.metrics.conflict()
		if attempt == maxAttempts {
			return r.refuse(RefusedConflicts, fmt.Sprintf("the node room bucket of node %s was written by others %d times while this resize was decided", node.Name, maxAttempts),
				r.clock.Now().Add(retryAfter))
		}
		logger.V(4).Info("Node room bucket written meanwhile; deciding again", "node", node.Name, "bucket", b.name)
		cm, err = r.get(ctx, b)
	}
}

// plan is a write of a bucket that reserves: the bucket to write, the
// reservation it holds, and the entries it removes (expired or invalid).
type plan struct {
	out  *corev1.ConfigMap
	mine own
	drop map[string]string
}

// decide decides on the bucket as read: an answer that refuses, or the
// write that reserves.
func (r *Reservations) decide(b *bucket, cm *corev1.ConfigMap, req Request, need corev1.ResourceList) (*Answer, plan) {
	pod, node := req.Pod, req.Node
	now := r.clock.Now()
	v := b.view(cm, now, r.ttl)
	if v.over && now.Before(v.overUntil) {
		a := r.refuse(RefusedBucketFull, fmt.Sprintf("the node room bucket %s/%s of node %s is not read: %s; it is cleared at %s",
			r.namespace, b.name, node.Name, v.overWhy, v.overUntil.UTC().Format(time.RFC3339)), v.overUntil)
		return &a, plan{}
	}
	others := v.heldOn(node.Name, pod.UID)
	held := make(map[types.UID]corev1.ResourceList, len(others)+len(req.Held))
	for uid, h := range others {
		held[uid] = h
	}
	for uid, h := range req.Held {
		if uid == pod.UID {
			continue
		}
		if o, ok := held[uid]; ok {
			h = resize.Larger(o, h)
		}
		held[uid] = h
	}
	if fits, why := resize.FitsNode(node, req.Pods, held, pod, req.Target); !fits {
		var until time.Time
		if len(others) > 0 {
			why += "; counted: resizes reserved on the node by the updater's replicas and not seen yet"
			until = v.earliest(node.Name, pod.UID)
		}
		a := r.refuse(RefusedNoRoom, why, until)
		return &a, plan{}
	}
	key := string(pod.UID)
	if old, ok := v.live[key]; ok && old.node == node.Name && old.holder != r.identity {
		// Another replica's resize of this pod (it held its shard
		// before) may still be applied: the larger of both.
		need = resize.Larger(roomOf(old.requests), need)
	}
	data := make(map[string]string, len(v.live)+1)
	for k, e := range v.live {
		if k != key {
			data[k] = e.value
		}
	}
	if len(data) >= MaxEntries {
		a := r.refuse(RefusedBucketFull, fmt.Sprintf("the node room bucket %s/%s of node %s holds %d reservations, as many as a bucket may",
			r.namespace, b.name, node.Name, len(data)), v.earliest("", pod.UID))
		return &a, plan{}
	}
	value, err := encode(node.Name, pod.Namespace+"/"+pod.Name, r.identity, need)
	if err != nil {
		a := r.refuse(RefusedError, err.Error(), now.Add(retryAfter))
		return &a, plan{}
	}
	data[key] = value
	return nil, plan{out: withData(cm, data), mine: own{key: key, value: value, requests: need}, drop: v.drop}
}

// refuse counts a refusal and returns it.
func (r *Reservations) refuse(reason, why string, until time.Time) Answer {
	r.metrics.refused(reason)
	return Answer{Reason: reason, Why: why, Until: until}
}

// Len returns the number of reservations this replica holds.
func (r *Reservations) Len() int {
	n := 0
	for _, b := range r.buckets {
		b.mu.Lock()
		n += len(b.mine)
		b.mu.Unlock()
	}
	return n
}
