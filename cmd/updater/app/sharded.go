package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vpa-inplace/vpa-inplace/pkg/cachetrim"
	"github.com/vpa-inplace/vpa-inplace/pkg/server"
	"github.com/vpa-inplace/vpa-inplace/pkg/shard"
	"github.com/vpa-inplace/vpa-inplace/pkg/shard/owner"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/noderoom/buckets"
)

// runSharded shares the shards of namespaces with the other replicas
// (pkg/shard/owner) and runs a controller per span of the shards this
// replica holds (unit.go), each caching and working only its namespaces.
// What stays whole is held once, for every span: the nodes, the namespaces,
// the pods bound to nodes (what fits-node reads, of every namespace), the
// kill switch.
func runSharded(ctx context.Context, b *base) error {
	o := b.o
	layout, err := shard.NewLayout(o.Shards)
	if err != nil {
		return err
	}
	identity, err := electionIdentity()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	whole := informers.NewSharedInformerFactoryWithOptions(b.kube, 0, informers.WithTransform(cachetrim.Transform))
	nodes, namespaces := whole.Core().V1().Nodes(), whole.Core().V1().Namespaces()
	// The view of the pods bound to nodes, cluster-wide (never the pods'
	// own informer: that one is a span's).
	nodePods, nodePodFactory := newNodeView(b.kube)
	leaseFactory := informers.NewSharedInformerFactoryWithOptions(b.kube, 0, informers.WithNamespace(o.LeaderElection.ResourceNamespace))
	shardMetrics, err := owner.NewMetrics(b.registry, o.Shards)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	listMetrics, err := newSelectionMetrics(b.registry)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	// The room of fits-node resizes, reserved through the API: the
	// controllers of this replica's spans and the other replicas' decide on
	// pods of the same nodes.
	room, roomInformers, err := newNodeRoom(ctx, b, identity)
	if err != nil {
		return err
	}
	u := &units{
		base: b, layout: layout, ctx: ctx, running: map[shard.Span]*unit{}, metrics: shardMetrics, lists: listMetrics,
		whole: wholeInformers{nodes: nodes, namespaces: namespaces, nodePods: nodePods}, runSpan: runUnit, leader: b.leader, room: room,
	}
	le := o.LeaderElection
	own, err := owner.New(b.kube.CoordinationV1(), leaseFactory.Coordination().V1().Leases(), owner.Config{
		Namespace: le.ResourceNamespace, Prefix: o.ShardLeasePrefix, Layout: layout, Identity: identity,
		LeaseDuration: le.LeaseDuration.Duration, RenewDeadline: le.RenewDeadline.Duration, RetryPeriod: le.RetryPeriod.Duration,
		OnChange: u.change, Metrics: shardMetrics,
	})
	if err != nil {
		return err
	}
	u.fence = own
	// Registered before the factories start.
	nodes.Informer()
	namespaces.Informer()
	nodePods.Informer()
	if b.killSwitch.informer != nil {
		b.killSwitch.informer.Informer()
	}
	whole.Start(ctx.Done())
	nodePodFactory.Start(ctx.Done())
	leaseFactory.Start(ctx.Done())
	b.killSwitch.start(ctx)
	if room != nil {
		roomInformers.Run(ctx)
		go room.Run(ctx)
	}
	defer func() {
		cancel()
		whole.Shutdown()
		nodePodFactory.Shutdown()
		leaseFactory.Shutdown()
		b.killSwitch.shutdown()
	}()

	// Ready once what stays whole is cached: the spans come and go with the
	// shards held, each reported by vpa_inplace_updater_shard_synced.
	synced := []cache.InformerSynced{nodes.Informer().HasSynced, namespaces.Informer().HasSynced, nodePods.Informer().HasSynced}
	if b.killSwitch.informer != nil {
		synced = append(synced, b.killSwitch.informer.Informer().HasSynced)
	}
	if roomInformers != nil {
		synced = append(synced, roomInformers.HasSynced)
	}
	stopProbes, err := b.serveProbes(ctx, server.CheckFunc("informers", func() error {
		for _, s := range synced {
			if !s() {
				return errors.New("node, namespace, kill switch and node room caches not synced")
			}
		}
		return nil
	}))
	if err != nil {
		return err
	}
	defer stopProbes()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil
	}
	klog.FromContext(ctx).Info("Sharing the namespaces' shards", "shards", o.Shards, "identity", identity,
		"leaseNamespace", le.ResourceNamespace, "leasePrefix", o.ShardLeasePrefix)
	err = own.Run(ctx)
	u.wait()
	return err
}

// electionIdentity names this process in the Leases: the pod's name (or
// the host's) and a UUID, new at each start.
func electionIdentity() (string, error) {
	identity := os.Getenv("POD_NAME")
	if identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("choosing a leader election identity: %w", err)
		}
		identity = host
	}
	return identity + "_" + string(uuid.NewUUID()), nil
}

// units runs a unit per span of the shards held, and stops those whose
// span is no longer held.
type units struct {
	base    *base
	layout  shard.Layout
	ctx     context.Context
	fence   *owner.Owner
	whole   wholeInformers
	metrics *owner.Metrics
	lists   *selectionMetrics
	leader  *leaderGauge
	// room reserves the node room of fits-node resizes through the API,
	// for every span; nil for a dry run.
	room *buckets.Reservations
	// runSpan runs the controller of a span until ctx is cancelled
	// (runUnit).
	runSpan func(ctx context.Context, u *units, span shard.Span) error

	mu      sync.Mutex
	running map[shard.Span]*unit
	wg      sync.WaitGroup
}

// change is the Owner's OnChange: the units of spans no longer held stop
// (and this returns once they have), those of new spans start. A span that
// stays the same keeps its unit: its caches, its queues, its records.
func (u *units) change(_ context.Context, working []int) {
	spans, err := u.layout.Merge(working)
	if err != nil {
		klog.FromContext(u.ctx).Error(err, "Merging the shards held")
		return
	}
	u.mu.Lock()
	var stopping []*unit
	for span, un := range u.running {
		if !slices.Contains(spans, span) {
			stopping = append(stopping, un)
			delete(u.running, span)
		}
	}
	u.mu.Unlock()
	for _, un := range stopping {
		un.stop()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, span := range spans {
		if _, ok := u.running[span]; ok || u.ctx.Err() != nil {
			continue
		}
		un := newUnit(u, span)
		u.running[span] = un
		u.wg.Go(un.run)
	}
	u.leader.set(len(working) > 0)
}

// sharedRoom is the node room reservations a span's controller makes: none
// for a dry run (a nil interface, not a nil pointer in one).
func (u *units) sharedRoom() updater.SharedRoom {
	if u.room == nil {
		return nil
	}
	return u.room
}

// wait returns once every unit has stopped.
func (u *units) wait() {
	u.wg.Wait()
}

// unit is the controller of one span of shards, from its start to its
// stop.
type unit struct {
	u      *units
	span   shard.Span
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

func newUnit(u *units, span shard.Span) *unit {
	ctx, cancel := context.WithCancel(u.ctx)
	return &unit{u: u, span: span, ctx: klog.NewContext(ctx, klog.FromContext(ctx).WithValues("shards", span.String())),
		cancel: cancel, done: make(chan struct{})}
}

// run builds and runs the span's controller until stopped, building it
// again with backoff when it fails.
func (un *unit) run() {
	defer close(un.done)
	logger := klog.FromContext(un.ctx)
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: time.Minute}
	for un.ctx.Err() == nil {
		err := un.u.runSpan(un.ctx, un.u, un.span)
		if un.ctx.Err() != nil {
			return
		}
		logger.Error(err, "The controller of a span of shards stopped; starting it again")
		select {
		case <-un.ctx.Done():
		case <-time.After(backoff.Step()):
		}
	}
}

// stop stops the unit and returns once its controller has returned.
func (un *unit) stop() {
	un.cancel()
	<-un.done
}

// selectionMetrics count what the API server did with the spans'
// selectors.
type selectionMetrics struct {
	serverSide *prometheus.GaugeVec
	dropped    *prometheus.CounterVec
}

// The metrics of the spans' lists and watches.
const (
	// MetricShardServerFiltered is 1 for a resource whose last list the
	// API server filtered by the span's shardSelector.
	MetricShardServerFiltered = "vpa_inplace_updater_shard_server_filtered"
	// MetricShardForeignObjects counts the objects the API server sent of
	// namespaces the span does not hold, dropped before the cache.
	MetricShardForeignObjects = "vpa_inplace_updater_shard_foreign_objects_total"
)

func newSelectionMetrics(reg prometheus.Registerer) (*selectionMetrics, error) {
	m := &selectionMetrics{
		serverSide: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricShardServerFiltered,
			Help: "1 when the API server filtered the last list of the resource by the shards' shardSelector (sharded list and watch served), 0 when it sent every object (then filtered here). A list streamed as a watch does not tell."},
			[]string{"resource"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricShardForeignObjects,
			Help: "Objects the API server sent of namespaces of shards this replica does not hold, dropped before the cache: none where it serves sharded list and watch."},
			[]string{"resource"}),
	}
	for _, c := range []prometheus.Collector{m.serverSide, m.dropped} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Listed implements shard.Observer.
func (m *selectionMetrics) Listed(resource string, serverSide bool) {
	v := 0.0
	if serverSide {
		v = 1
	}
	m.serverSide.WithLabelValues(resource).Set(v)
}

// Dropped implements shard.Observer.
func (m *selectionMetrics) Dropped(resource string, n int) {
	m.dropped.WithLabelValues(resource).Add(float64(n))
}

var _ shard.Observer = (*selectionMetrics)(nil)
