package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"github.com/vpa-inplace/vpa-inplace/bench/internal/proc"
	"github.com/vpa-inplace/vpa-inplace/bench/internal/proxy"
	"github.com/vpa-inplace/vpa-inplace/pkg/shard"
)

// ShardedOptions configure the sharded mode: our updater alone, on the same
// workload, first as one replica under leader election ("single"), then as
// Replicas replicas sharing Shards shards of the namespaces ("sharded"),
// each replica with the same client limits and behind a counting proxy of
// its own. Upstream's updater is not run.
type ShardedOptions struct {
	// Replicas of the sharded configuration; 0: not this mode.
	Replicas int
	Shards   int
	// LeasePrefix and LeaseNamespace name the shards' Leases (the chart's,
	// applied by hack/bench.sh) and the leader election's namespace.
	LeasePrefix    string
	LeaseNamespace string
	// The leader election's timings, given to every replica of both
	// configurations.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// APIServerPIDFile is the local API server's pid file: its CPU time is
	// read during the bursts. Empty: not read.
	APIServerPIDFile string
}

// defaultShardedOptions are the updater's and the chart's defaults.
func defaultShardedOptions() ShardedOptions {
	return ShardedOptions{
		Shards:         12,
		LeasePrefix:    "vpa-inplace-updater",
		LeaseNamespace: "vpa-inplace-system",
		LeaseDuration:  15 * time.Second,
		RenewDeadline:  10 * time.Second,
		RetryPeriod:    2 * time.Second,
	}
}

func (s *ShardedOptions) addFlags(fs *pflag.FlagSet) {
	fs.IntVar(&s.Replicas, "sharded-replicas", s.Replicas, "The sharded mode: our updater alone, as one replica (leader election), then as this many replicas sharing --shards, on the same workload. 0: ours and upstream's, one replica each.")
	fs.IntVar(&s.Shards, "shards", s.Shards, "Shards of the sharded configuration (--shards of each replica).")
	fs.StringVar(&s.LeasePrefix, "shard-lease-prefix", s.LeasePrefix, "--shard-lease-prefix of the replicas: the shards' Leases must exist (the chart's, with updater.shards=--shards).")
	fs.StringVar(&s.LeaseNamespace, "lease-namespace", s.LeaseNamespace, "--leader-elect-resource-namespace of the replicas: where the leader election Lease and the shards' Leases are.")
	fs.DurationVar(&s.LeaseDuration, "lease-duration", s.LeaseDuration, "--leader-elect-lease-duration of every replica of the sharded mode: how long a killed replica's Leases stay its own.")
	fs.DurationVar(&s.RenewDeadline, "renew-deadline", s.RenewDeadline, "--leader-elect-renew-deadline of every replica of the sharded mode.")
	fs.DurationVar(&s.RetryPeriod, "retry-period", s.RetryPeriod, "--leader-elect-retry-period of every replica of the sharded mode.")
	fs.StringVar(&s.APIServerPIDFile, "apiserver-pid-file", s.APIServerPIDFile, "Pid file of the API server (on this machine): its CPU time is read during the bursts of the sharded mode.")
}

// validateSharded checks the sharded mode's options.
func (o *Options) validateSharded() []error {
	s := o.Sharded
	if s.Replicas == 0 {
		return nil
	}
	var errs []error
	if _, err := shard.NewLayout(s.Shards); err != nil || s.Shards < 2 {
		errs = append(errs, fmt.Errorf("--shards must be from 2 to %d, got %d", shard.MaxShards, s.Shards))
	}
	if s.Replicas < 2 || s.Replicas > s.Shards {
		errs = append(errs, fmt.Errorf("--sharded-replicas must be from 2 to --shards (%d), got %d", s.Shards, s.Replicas))
	}
	if o.Namespaces < 2 {
		errs = append(errs, fmt.Errorf("--sharded-replicas needs --namespaces of at least 2: a namespace is never split among replicas"))
	}
	if o.Only != "" {
		errs = append(errs, fmt.Errorf("--only does not go with --sharded-replicas, which runs ours alone"))
	}
	if s.RetryPeriod <= 0 || s.RenewDeadline <= s.RetryPeriod || s.LeaseDuration <= s.RenewDeadline {
		errs = append(errs, fmt.Errorf("need 0 < --retry-period < --renew-deadline < --lease-duration, got %s, %s, %s", s.RetryPeriod, s.RenewDeadline, s.LeaseDuration))
	}
	if s.LeasePrefix == "" || s.LeaseNamespace == "" {
		errs = append(errs, fmt.Errorf("--shard-lease-prefix and --lease-namespace must be set"))
	}
	return errs
}

// configuration is one way of running ours in the sharded mode.
type configuration struct {
	// Name names the configuration ("single", "sharded") and its replicas
	// (<name>-<i>: their POD_NAME and files).
	Name     string
	Replicas int
	// Shards is 1 for leader election.
	Shards int
}

// configurations returns the sharded mode's configurations, in order.
func (o *Options) configurations() []configuration {
	return []configuration{
		{Name: "single", Replicas: 1, Shards: 1},
		{Name: "sharded", Replicas: o.Sharded.Replicas, Shards: o.Sharded.Shards},
	}
}

// String describes c in the report.
func (c configuration) String() string {
	if c.Shards == 1 {
		return "1 replica"
	}
	return fmt.Sprintf("%d replicas, %d shards", c.Replicas, c.Shards)
}

func (c configuration) replicaName(i int) string { return fmt.Sprintf("%s-%d", c.Name, i) }

// configArgs are the flags every replica of c gets after ours': leader
// election on, with the mode's timings, and c's shards.
func (o *Options) configArgs(c configuration) []string {
	s := o.Sharded
	args := []string{
		"--leader-elect=true",
		"--leader-elect-lease-duration=" + s.LeaseDuration.String(),
		"--leader-elect-renew-deadline=" + s.RenewDeadline.String(),
		"--leader-elect-retry-period=" + s.RetryPeriod.String(),
		"--leader-elect-resource-namespace=" + s.LeaseNamespace,
		fmt.Sprintf("--shards=%d", c.Shards),
	}
	if c.Shards > 1 {
		args = append(args, "--shard-lease-prefix="+s.LeasePrefix)
	}
	return args
}

// identity is the environment of replica name: its POD_NAME, which begins
// its identity in the Leases.
func identity(name string) []string { return []string{"POD_NAME=" + name} }

// notLease selects the writes that end a phase: the Leases are renewed
// whatever happens.
func notLease(k proxy.Key) bool { return k.Resource != "leases" }

// ReplicaResult is what one replica of a configuration did.
type ReplicaResult struct {
	Name string
	// Standby: started for the failover, as a second replica under leader
	// election. Killed: the failover's victim.
	Standby, Killed bool
	Args            []string
	Phases          []Phase
	// Ready is the time from its start to the configuration being ready
	// (for a standby, to its own readiness).
	Ready time.Duration
	// ShardsAtStart are the shards it held once the configuration was
	// ready (leader election: none); Leader whether it led or held any.
	ShardsAtStart []int
	Leader        bool
	// Namespaces and Pods of the workload it worked once ready.
	Namespaces, Pods int
	// Burst is what of the burst was accepted in its namespaces.
	Burst replicaBurst
	// Before is read at the end of the steady state, before the failover;
	// End at the end of the run, or just before it was killed.
	Before, End figures
	// ShardsAtEnd are the shards it held at the end; Foreign counts the
	// objects of other shards it dropped (the API server did not filter
	// them).
	ShardsAtEnd []int
	LeaderAtEnd bool
	Foreign     float64
}

// Phase returns the replica's named phase.
func (rr *ReplicaResult) Phase(name string) Phase {
	for _, p := range rr.Phases {
		if p.Name == name {
			return p
		}
	}
	return Phase{}
}

// runSharded runs the sharded mode's configurations in turn on w, each
// after a reset, into report.
func runSharded(ctx context.Context, o *Options, w *workload, report *Report, log func(string, ...any)) error {
	api := &apiObserver{kube: w.kube, note: "the API server's CPU is not read: no --apiserver-pid-file"}
	if o.Sharded.APIServerPIDFile != "" {
		// Without it the other figures stand: said in the report, not fatal.
		if pid, err := proc.ReadPIDFile(o.Sharded.APIServerPIDFile, "kube-apiserver"); err != nil {
			api.note = fmt.Sprintf("the API server's CPU is not read: --apiserver-pid-file: %v", err)
			log("%s", api.note)
		} else {
			api.pid, api.note = pid, ""
		}
	}
	for _, c := range o.configurations() {
		if err := w.reset(ctx); err != nil {
			return fmt.Errorf("resetting before %s: %w", c.Name, err)
		}
		w.t.Forget()
		log("== %s (%s): %s", c.Name, c, o.Ours.Binary)
		r, err := runConfiguration(ctx, o, w, c, api, log)
		if r != nil {
			report.Results = append(report.Results, r)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
	}
	return nil
}

// runConfiguration starts c's replicas at once, waits until they are ready
// and share the shards evenly, runs the scenarios, then the failover.
func runConfiguration(ctx context.Context, o *Options, w *workload, c configuration, api *apiObserver, log func(string, ...any)) (*Result, error) {
	spec := o.Ours
	spec.Name = c.Name
	c0 := c
	r := &Result{Spec: spec, Config: &c0}
	var replicas []*replica
	defer func() {
		for _, rp := range replicas {
			rp.stop()
		}
	}()
	for i := range c.Replicas {
		name := c.replicaName(i)
		rp, err := startReplica(ctx, o, o.Ours, name, o.configArgs(c), identity(name))
		if err != nil {
			return r, err
		}
		replicas = append(replicas, rp)
		if rp.note != "" {
			r.Notes = append(r.Notes, name+": "+rp.note)
		}
		log("%s: pid %d, address %s, proxy %s, log %s", name, rp.pid(), rp.addr, rp.proxy.URL(), rp.log.Name())
	}
	f := newFleet(notLease, replicas...)
	replicas = nil
	defer f.stop()
	r.Args = f.replicas[0].args

	states, err := awaitShared(ctx, f, c)
	if err != nil {
		return r, err
	}
	layout, err := shard.NewLayout(c.Shards)
	if err != nil {
		return r, err
	}
	owner := namespaceOwners(layout, w.namespaces, f.replicas, states)
	perNamespace := podsPerNamespace(w)
	for i, rp := range f.replicas {
		rr := &ReplicaResult{Name: rp.name, Args: rp.args, Ready: time.Since(rp.start), ShardsAtStart: states[i].Owned, Leader: states[i].Leader}
		for ns, who := range owner {
			if who == rp.name {
				rr.Namespaces++
				rr.Pods += perNamespace[ns]
			}
		}
		r.Replicas = append(r.Replicas, rr)
		log("%s: holds %s: %d namespaces, %d pods", rp.name, shardList(rr.ShardsAtStart, rr.Leader), rr.Namespaces, rr.Pods)
	}

	err = runScenarios(ctx, o, w, f, r, api, log)
	bursts := burstByReplica(w.t.Acceptances("burst"), owner)
	for _, rr := range r.Replicas {
		rr.Burst = bursts[rr.Name]
	}
	if err != nil {
		return r, err
	}
	if now, err := scrapeStates(ctx, f.replicas); err == nil && !sameOwnership(states, now) {
		r.Notes = append(r.Notes, fmt.Sprintf("the shards moved between the start and the end of the steady state: %s, then %s", ownership(f.replicas, states), ownership(f.replicas, now)))
	}
	for i, rp := range f.replicas {
		fig, err := rp.read()
		if err != nil {
			return r, err
		}
		rr := r.Replicas[i]
		rr.Before, rr.Phases = fig, slices.Clone(rp.phases)
		r.PeakRSS, r.PeakAnon, r.PeakFile = max(r.PeakRSS, fig.PeakRSS), max(r.PeakAnon, fig.PeakAnon), max(r.PeakFile, fig.PeakFile)
		r.CPU += fig.CPU
		r.Total = r.Total.Add(fig.Requests)
		r.Latencies = mergeLatencies(r.Latencies, fig.Latencies)
	}
	log("%s: before the failover: largest replica's peak RSS %.1f MiB, CPU %.1fs, %d requests", c.Name, float64(r.PeakRSS)/(1<<20), r.CPU.Seconds(), r.Total.Total())

	fo, err := runFailover(ctx, o, w, f, r, c, layout, log)
	r.Failover = fo
	finishReplicas(ctx, o, f, r)
	if csvErr := w.t.WriteCSV(filepath.Join(o.WorkDir, c.Name+"-pods.csv")); csvErr != nil {
		log("%s: writing per-pod CSV: %v", c.Name, csvErr)
	}
	if err != nil {
		return r, err
	}
	return r, ctx.Err()
}

// finishReplicas reads every live replica's figures at the end of the run,
// its shards and the objects it dropped, and its heap profile.
func finishReplicas(ctx context.Context, o *Options, f *fleet, r *Result) {
	for i, rp := range f.replicas {
		rr := r.Replicas[i]
		if rp.killed {
			continue
		}
		if fig, err := rp.read(); err == nil {
			rr.End = fig
		}
		rr.Phases = slices.Clone(rp.phases)
		if st, err := scrapeState(ctx, rp.addr); err == nil {
			rr.ShardsAtEnd, rr.LeaderAtEnd, rr.Foreign = st.Owned, st.Leader, st.Foreign
		}
		if o.Pprof {
			if p := fetchProfile(ctx, rp.addr, "heap", filepath.Join(o.WorkDir, rp.name+"-heap.pprof")); p != "" {
				r.Profiles = append(r.Profiles, p)
			}
		}
	}
}

// awaitShared waits until every replica of f serves its readiness, has
// opened its watches and, from its metrics, c's work is shared: with one
// shard one replica leads; with several each shard is held and synced by
// one replica and each holds at most its share.
func awaitShared(ctx context.Context, f *fleet, c configuration) ([]replicaState, error) {
	timeout := 3 * time.Minute
	if c.Shards > 1 {
		// The first replica up takes every shard, then gives up the others'
		// shares as they join: each change relists the spans it touches.
		timeout = 6 * time.Minute
	}
	var states []replicaState
	why := "not every replica serves /readyz and watches pods and VPAs"
	ok := waitUntil(ctx, timeout, func() bool {
		if f.alive() != nil {
			return false
		}
		for _, rp := range f.replicas {
			if !watching(rp) || !httpOK(ctx, "http://"+rp.addr+"/readyz") {
				return false
			}
		}
		var err error
		if states, err = scrapeStates(ctx, f.replicas); err != nil {
			why = err.Error()
			return false
		}
		var settled bool
		settled, why = settledShards(states, c.Shards)
		return settled
	})
	if err := f.alive(); err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("the replicas did not share the work within %s: %s (%s)", timeout, why, ownership(f.replicas, states))
	}
	return states, nil
}

// podsPerNamespace counts the workload's pods by namespace, the deferred
// ones apart.
func podsPerNamespace(w *workload) map[string]int {
	out := map[string]int{}
	for _, p := range w.t.Pods(isBenchApp) {
		out[p.Namespace]++
	}
	return out
}

// mergeLatencies adds b's observations to a's.
func mergeLatencies(a, b map[proxy.Key]proxy.Latency) map[proxy.Key]proxy.Latency {
	out := make(map[proxy.Key]proxy.Latency, len(a)+len(b))
	for _, m := range []map[proxy.Key]proxy.Latency{a, b} {
		for k, l := range m {
			sum := out[k]
			if sum.Failed == nil {
				sum.Failed = map[int]int{}
			}
			sum.Count += l.Count
			sum.Total += l.Total
			sum.Max = max(sum.Max, l.Max)
			for code, n := range l.Failed {
				sum.Failed[code] += n
			}
			out[k] = sum
		}
	}
	return out
}
