// Package owner shares the shards of namespaces (pkg/shard) among the
// replicas of the updater through coordination.k8s.io Leases, with
// client-go's leader election on each and the API server's optimistic
// concurrency deciding every race: nothing is coordinated otherwise.
//
// Each replica takes one membership Lease (<prefix>-member-<i>, one of as
// many as there are shards: a replica beyond them has nothing to do), and
// holds shard Leases (<prefix>-shard-<i>) up to its share: the shards split
// evenly among the live members, the members of the lowest slots taking one
// more when they do not divide evenly (Target), so that each holds at most
// ceil(shards / members). A replica past its share (a new member appeared)
// gives its highest shards up; one under it takes the shards given up, and
// those of a dead replica once their Leases expire. A replica writes for a
// shard only through Guard, which lets a write through only while no other
// replica can hold the shard (fence.go).
package owner

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationinformers "k8s.io/client-go/informers/coordination/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vpa-inplace/vpa-inplace/pkg/shard"
)

// Config configures an Owner.
type Config struct {
	// Namespace holds the Leases.
	Namespace string
	// Prefix begins the Leases' names.
	Prefix string
	Layout shard.Layout
	// Identity names this replica in the Leases; unique per process.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's leader
	// election's, for every Lease.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// OnChange is told the shards to work, in order, after each change: a
	// shard taken, given up or lost. Calls are never concurrent. It returns
	// once no work remains of the shards no longer listed (it may start the
	// work of new ones after returning).
	OnChange func(ctx context.Context, working []int)
	// Clock measures the fence; nil: the real clock.
	Clock clock.WithTicker
	// Metrics may be nil.
	Metrics *Metrics
}

// RequestTimeout is the longest a write let through by Guard may take:
// the lease duration less the renew deadline. The fence lets a write
// through only while the shard stays this replica's that long, so it
// closes when client-go's elector, failing to renew, would give up.
func (c Config) RequestTimeout() time.Duration {
	return c.LeaseDuration - c.RenewDeadline
}

// RenewInterval is how long a Lease this replica holds goes without a
// write: client-go's elector renews every retry period, and the lock
// (leaseLock.Update) sends a renewal only once the last accepted write is
// this old: a third of the lease duration, and no more than half the renew
// deadline less a retry period.
//
// The fence runs from a write's send for the lease duration and lets a
// write through only while the request timeout fits in it: it closes a
// renew deadline after the last renewal accepted, unless the next one is
// accepted before. Renewals sent a renew interval plus a retry period apart
// leave the next one at least half the renew deadline to be answered, for
// an API server that slows down (every retry period would leave it the
// renew deadline less a retry period). With the defaults (15 s, 10 s, 2 s)
// that is a write every 4 s instead of every 2 s, and at least 5 s of
// slack instead of 8 s. A takeover does not wait for it: candidates read
// the Leases from the cache every retry period.
func (c Config) RenewInterval() time.Duration {
	return max(0, min(c.LeaseDuration/3, c.RenewDeadline/2-c.RetryPeriod))
}

// ShardLeaseName is the name of shard i's Lease.
func ShardLeaseName(prefix string, i int) string { return fmt.Sprintf("%s-shard-%d", prefix, i) }

// MemberLeaseName is the name of membership slot i's Lease.
func MemberLeaseName(prefix string, i int) string { return fmt.Sprintf("%s-member-%d", prefix, i) }

type kind int

const (
	kindShard kind = iota
	kindMember
)

// leaseRef names one of the Owner's Leases.
type leaseRef struct {
	kind  kind
	index int
	name  string
}

// runner is one run of an elector on a Lease.
type runner struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// seenLease is when this replica last saw a Lease change.
type seenLease struct {
	resourceVersion string
	at              time.Time
}

// Owner takes and gives up this replica's shards.
type Owner struct {
	cfg    Config
	client coordinationv1client.LeasesGetter
	leases coordinationlisters.LeaseNamespaceLister
	synced cache.InformerSynced
	clock  clock.WithTicker
	kick   chan struct{}

	mu   sync.Mutex
	cond *sync.Cond
	// shards and members are the fences of the shard and membership
	// Leases, by index.
	shards, members []*fence
	// target is this replica's share, as last computed.
	target int
	// shardRunners are the electors' current runs, by shard; nil before
	// the replica first becomes a member.
	shardRunners []*runner
	// memberRunner is the run on membership slot memberTrying, nil when
	// none runs.
	memberRunner *runner
	memberTrying int
	seen         map[string]seenLease
	nextGuard    uint64
	// ctx is Run's, for OnChange; runners is the electors' context,
	// cancelled once the work has stopped.
	ctx     context.Context
	runners context.Context

	publishMu sync.Mutex
	published []int
}

// New returns the Owner of cfg's shards; leases is an informer of the
// Leases of cfg.Namespace, started by the caller.
func New(client coordinationv1client.LeasesGetter, leases coordinationinformers.LeaseInformer, cfg Config) (*Owner, error) {
	if cfg.Namespace == "" || cfg.Prefix == "" || cfg.Identity == "" {
		return nil, fmt.Errorf("the shard Leases need a namespace, a prefix and an identity")
	}
	if cfg.OnChange == nil {
		return nil, fmt.Errorf("the shard owner needs OnChange")
	}
	if cfg.RequestTimeout() <= 0 || cfg.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(cfg.RetryPeriod)) ||
		cfg.LeaseDuration < time.Second {
		return nil, fmt.Errorf("the shard Leases need a lease duration of at least 1s, longer than the renew deadline (%s), longer than %v retry periods (%s)",
			cfg.RenewDeadline, leaderelection.JitterFactor, cfg.RetryPeriod)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	n := cfg.Layout.Shards()
	o := &Owner{
		cfg: cfg, client: client, leases: leases.Lister().Leases(cfg.Namespace), synced: leases.Informer().HasSynced,
		clock: cfg.Clock, kick: make(chan struct{}, 1), shards: make([]*fence, n), members: make([]*fence, n),
		memberTrying: -1, seen: map[string]seenLease{},
	}
	o.cond = sync.NewCond(&o.mu)
	for i := range n {
		o.shards[i], o.members[i] = &fence{}, &fence{}
	}
	if _, err := leases.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    o.onLease,
		UpdateFunc: func(_, obj any) { o.onLease(obj) },
		DeleteFunc: func(any) { o.poke() },
	}); err != nil {
		return nil, fmt.Errorf("watching the shard Leases: %w", err)
	}
	return o, nil
}

// onLease notes when a Lease changed, for the members' liveness.
func (o *Owner) onLease(obj any) {
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	now := o.clock.Now()
	o.mu.Lock()
	if s := o.seen[lease.Name]; s.resourceVersion != lease.ResourceVersion {
		o.seen[lease.Name] = seenLease{resourceVersion: lease.ResourceVersion, at: now}
	}
	o.mu.Unlock()
	o.poke()
}

// poke asks Run to look at the shares again.
func (o *Owner) poke() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// Run takes and gives up shards until ctx is cancelled; then it stops the
// work (OnChange with none), gives every Lease up and returns.
func (o *Owner) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), o.synced) {
		return nil
	}
	runners, stopRunners := context.WithCancel(context.WithoutCancel(ctx))
	o.mu.Lock()
	o.ctx, o.runners = ctx, runners
	o.mu.Unlock()
	logger.Info("Sharing the shards", "shards", o.cfg.Layout.Shards(), "identity", o.cfg.Identity,
		"leases", o.cfg.Namespace+"/"+o.cfg.Prefix+"-shard-*", "requestTimeout", o.cfg.RequestTimeout(), "renewInterval", o.cfg.RenewInterval())
	var wg sync.WaitGroup
	t := o.clock.NewTicker(o.cfg.RetryPeriod)
	defer t.Stop()
	for ctx.Err() == nil {
		o.rebalance(ctx, &wg)
		select {
		case <-ctx.Done():
		case <-t.C():
		case <-o.kick:
		}
	}
	// Stop the work first, then give the Leases up.
	o.mu.Lock()
	for _, f := range o.shards {
		o.quiesceLocked(f)
	}
	o.mu.Unlock()
	o.publish(ctx)
	stopRunners()
	wg.Wait()
	logger.Info("Gave every shard up", "identity", o.cfg.Identity)
	return nil
}

// rebalance takes a membership slot when it has none, starts the shards'
// electors once a member, and gives up the shards past its share.
func (o *Owner) rebalance(ctx context.Context, wg *sync.WaitGroup) {
	now := o.clock.Now()
	members := o.liveMembers(now)
	target := Target(o.cfg.Layout.Shards(), members, o.cfg.Identity)
	o.mu.Lock()
	o.target = target
	o.ensureMemberLocked(ctx, wg, now)
	if o.memberSlotLocked() >= 0 && o.shardRunners == nil {
		o.shardRunners = make([]*runner, len(o.shards))
		for k := range o.shards {
			wg.Go(func() { o.runShard(k) })
		}
	}
	var held []int
	for k, f := range o.shards {
		if f.held && !f.releasing {
			held = append(held, k)
		}
	}
	o.mu.Unlock()
	o.cfg.Metrics.observe(len(members), target)
	extras := Extras(held, target)
	if len(extras) == 0 || ctx.Err() != nil {
		return
	}
	klog.FromContext(ctx).Info("Giving shards up to share them", "shards", extras, "members", len(members), "share", target)
	o.release(ctx, extras)
}

// runShard runs electors on shard k's Lease one after the other until the
// Owner stops: as a candidate, admitted to take it while under its share;
// as the holder, renewing it until it is given up or lost.
func (o *Owner) runShard(k int) {
	ref := leaseRef{kind: kindShard, index: k, name: ShardLeaseName(o.cfg.Prefix, k)}
	for o.runners.Err() == nil {
		runCtx, cancel := context.WithCancel(o.runners)
		r := &runner{cancel: cancel, done: make(chan struct{})}
		o.mu.Lock()
		o.shardRunners[k] = r
		o.mu.Unlock()
		o.elect(runCtx, ref)
		cancel()
		o.lost(ref)
		close(r.done)
	}
}

// elect runs one client-go elector on ref's Lease until it loses it or ctx
// is cancelled, and then gives it up.
func (o *Owner) elect(ctx context.Context, ref leaseRef) {
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            &leaseLock{o: o, ref: ref},
		LeaseDuration:   o.cfg.LeaseDuration,
		RenewDeadline:   o.cfg.RenewDeadline,
		RetryPeriod:     o.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            ref.name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { o.acquired(ref) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		// New checked the durations.
		klog.FromContext(ctx).Error(err, "Configuring the election of a shard Lease", "lease", ref.name)
		return
	}
	le.Run(ctx)
}

// acquired is told that ref's Lease was taken.
func (o *Owner) acquired(ref leaseRef) {
	o.mu.Lock()
	ctx := o.ctx
	o.mu.Unlock()
	if ref.kind == kindMember {
		klog.FromContext(ctx).Info("Became a member of the shards' replicas", "lease", ref.name)
		o.poke()
		return
	}
	klog.FromContext(ctx).Info("Took a shard", "shard", ref.index, "lease", ref.name)
	o.cfg.Metrics.transition(transitionAcquired)
	o.publish(ctx)
}

// lost is told that an elector's run on ref's Lease ended: given up, lost
// or stopped. The work of a shard stops.
func (o *Owner) lost(ref leaseRef) {
	o.mu.Lock()
	f := o.fenceLocked(ref)
	// Held in this run and not given up on purpose: lost (a renewal that
	// failed, the Lease taken or deleted).
	lostIt := f.heldRun && !f.releasing
	f.close()
	f.releasing, f.acquiring, f.heldRun = false, false, false
	ctx := o.ctx
	o.mu.Unlock()
	if ref.kind == kindShard {
		if lostIt && ctx.Err() == nil {
			klog.FromContext(ctx).Info("No longer holds a shard", "shard", ref.index, "lease", ref.name)
			o.cfg.Metrics.transition(transitionLost)
		}
		o.publish(ctx)
	}
	o.poke()
}

// release gives the shards ks up, as one change: no new write is let
// through, the writes in flight are cancelled and waited for, the work
// stops (one OnChange for all of them, so that a replica giving up several
// shards rebuilds its spans once), and only then are the Leases given up
// (the electors' release, which frees each at once).
func (o *Owner) release(ctx context.Context, ks []int) {
	o.mu.Lock()
	var runners []*runner
	for _, k := range ks {
		f := o.shards[k]
		if !f.held || o.shardRunners == nil || o.shardRunners[k] == nil {
			continue
		}
		o.quiesceLocked(f)
		runners = append(runners, o.shardRunners[k])
	}
	o.mu.Unlock()
	if len(runners) == 0 {
		return
	}
	o.publish(ctx)
	for _, r := range runners {
		r.cancel()
	}
	for _, r := range runners {
		<-r.done
		o.cfg.Metrics.transition(transitionReleased)
	}
}

// publish tells OnChange of the shards to work, when they changed.
func (o *Owner) publish(ctx context.Context) {
	o.publishMu.Lock()
	defer o.publishMu.Unlock()
	o.mu.Lock()
	var working []int
	for k, f := range o.shards {
		if f.held && !f.releasing {
			working = append(working, k)
		}
	}
	o.mu.Unlock()
	if slices.Equal(working, o.published) {
		return
	}
	o.cfg.OnChange(ctx, working)
	o.published = working
	o.cfg.Metrics.setOwned(o.cfg.Layout.Shards(), working)
}
