package bench

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/vpa-inplace/vpa-inplace/bench/internal/proxy"
	"github.com/vpa-inplace/vpa-inplace/pkg/shard"
)

// The sharded mode's goals: each sharded replica's peak RSS and the
// burst's last resize accepted at most these fractions of the single
// replica's, the isolated p99 as without shards.
const (
	goalShardedRSS   = 0.4
	goalShardedBurst = 0.4
	goalIsolatedP99  = 250 * time.Millisecond
)

// notYetWritten holds the place of what a reader of the figures finds, as
// the results files kept say it.
const notYetWritten = "Not yet written: what the figures below show, in words, once read: whether each goal was met, " +
	"the busiest replica's share of the pods against the burst, whether the API server was the bottleneck, " +
	"the failover gap against the lease duration, and anything odd in the notes."

// shardedResults returns the single and the sharded configuration's
// results, nil when absent.
func (rep *Report) shardedResults() (single, sharded *Result) {
	for _, r := range rep.Results {
		switch {
		case r.Config == nil:
		case r.Config.Shards == 1:
			single = r
		default:
			sharded = r
		}
	}
	return single, sharded
}

// working returns the replicas that worked from the start (no standby).
func (r *Result) working() []*ReplicaResult {
	var out []*ReplicaResult
	for _, rr := range r.Replicas {
		if !rr.Standby {
			out = append(out, rr)
		}
	}
	return out
}

// busiest returns the replica with the most pods at the start.
func (r *Result) busiest() *ReplicaResult {
	var best *ReplicaResult
	for _, rr := range r.working() {
		if best == nil || rr.Pods > best.Pods {
			best = rr
		}
	}
	return best
}

// busiestFloor is the burst's floor of the busiest replica: its pods at
// its QPS. NaN without replicas.
func (r *Result) busiestFloor(o *Options) float64 {
	b := r.busiest()
	if b == nil {
		return math.NaN()
	}
	return float64(b.Pods) / float64(o.QPS)
}

// burstLast is the burst's last resize accepted in seconds, NaN unless
// every resize was.
func (r *Result) burstLast() float64 {
	if r == nil || r.Burst.Expected == 0 || len(r.Burst.Accepted) < r.Burst.Expected {
		return math.NaN()
	}
	return r.Burst.LastAccepted.Seconds()
}

// isolatedP99 is the isolated scenario's p99 in seconds, NaN when none was
// accepted.
func (r *Result) isolatedP99() float64 {
	if r == nil {
		return math.NaN()
	}
	d, ok := percentile(r.Isolated.Accepted, 99)
	if !ok {
		return math.NaN()
	}
	return d.Seconds()
}

// failoverFirst is the failover's first resize accepted in seconds, NaN
// when none was.
func (r *Result) failoverFirst() float64 {
	if r == nil || r.Failover == nil || r.Failover.Accepted == 0 {
		return math.NaN()
	}
	return r.Failover.First.Seconds()
}

// perReplica renders each working replica's value.
func perReplica(r *Result, format func(float64) string, f func(rr *ReplicaResult) float64) string {
	if r == nil {
		return "n/a"
	}
	var parts []string
	for _, rr := range r.working() {
		parts = append(parts, format(f(rr)))
	}
	return strings.Join(parts, ", ")
}

// ratio renders a ÷ b, empty when either is not measured.
func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || b == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", a/b)
}

// shardedTable is the sharded mode's comparison: the single replica, the
// sharded replicas, and their ratio.
func (rep *Report) shardedTable() string {
	o := rep.Options
	single, sharded := rep.shardedResults()
	val := func(r *Result, f func(*Result) float64) float64 {
		if r == nil {
			return math.NaN()
		}
		return f(r)
	}
	var b strings.Builder
	head := func(r *Result, name string) string {
		if r == nil {
			return name + " (not run)"
		}
		return fmt.Sprintf("%s (%s)", name, r.Config)
	}
	fmt.Fprintf(&b, "| metric | %s | %s | sharded ÷ single |\n|---|---:|---:|---:|\n", head(single, "single"), head(sharded, "sharded"))
	row := func(name string, format func(float64) string, withRatio bool, f func(*Result) float64) {
		a, c := val(single, f), val(sharded, f)
		rt := ""
		if withRatio {
			rt = ratio(c, a)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, format(a), format(c), rt)
	}
	text := func(name string, f func(*Result) string) {
		cell := func(r *Result) string {
			if r == nil {
				return "n/a"
			}
			return f(r)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | |\n", name, cell(single), cell(sharded))
	}
	row("peak RSS (VmHWM), largest replica, before the failover", mib, true, func(r *Result) float64 { return float64(r.PeakRSS) })
	text("peak RSS of each replica", func(r *Result) string {
		return perReplica(r, mib, func(rr *ReplicaResult) float64 { return float64(rr.Before.PeakRSS) })
	})
	row("peak anonymous memory (RssAnon, sampled), largest replica", mib, true, func(r *Result) float64 { return float64(r.PeakAnon) })
	row("burst: last resize accepted", secs, true, (*Result).burstLast)
	row(fmt.Sprintf("burst: QPS floor of the busiest replica (its pods ÷ %g QPS)", o.QPS), secs, true, func(r *Result) float64 { return r.busiestFloor(o) })
	row("burst: last accepted ÷ that floor", times, false, func(r *Result) float64 { return r.burstLast() / r.busiestFloor(o) })
	row("burst: last resize completed", secs, true, func(r *Result) float64 {
		if len(r.Burst.Completed) < r.Burst.Expected || r.Burst.Expected == 0 {
			return math.NaN()
		}
		return r.Burst.LastCompleted.Seconds()
	})
	for _, p := range []float64{50, 99, 100} {
		label := fmt.Sprintf("p%.0f", p)
		if p == 100 {
			label = "max"
		}
		row("isolated: recommendation → resize accepted, "+label, secs, true, func(r *Result) float64 {
			d, ok := percentile(r.Isolated.Accepted, p)
			if !ok {
				return math.NaN()
			}
			return d.Seconds()
		})
	}
	row(fmt.Sprintf("failover: kill -9 → first resize accepted in its namespaces (lease duration %s)", o.Sharded.LeaseDuration), secs, true, (*Result).failoverFirst)
	row("failover: kill -9 → each of its namespaces had a resize accepted", secs, true, func(r *Result) float64 {
		if r.Failover == nil || r.Failover.Accepted == 0 {
			return math.NaN()
		}
		return r.Failover.EveryNamespace.Seconds()
	})
	row("API requests at start, all replicas", count, true, func(r *Result) float64 { return float64(r.Phase("startup").Requests.Total()) })
	text("API requests at start, each replica", func(r *Result) string {
		return perReplica(r, count, func(rr *ReplicaResult) float64 { return float64(rr.Phase("startup").Requests.Total()) })
	})
	row("API requests before the failover, all replicas", count, true, func(r *Result) float64 { return float64(r.Total.Total()) })
	row("writes per actuated change (events and Leases apart)", perChange, true, func(r *Result) float64 {
		c := r.changes()
		return float64(c.Writes) / float64(max(1, c.Actuated))
	})
	row(fmt.Sprintf("steady state: writes in %s, Leases apart", o.SteadyDuration), count, true, func(r *Result) float64 {
		return float64(r.Phase("steady").Requests.Writes(notLease))
	})
	row("steady state: Lease writes per minute, all replicas", perChange, true, func(r *Result) float64 {
		p := r.Phase("steady")
		if p.Duration <= 0 {
			return math.NaN()
		}
		return float64(p.Requests.Writes(func(k proxy.Key) bool { return !notLease(k) })) / p.Duration.Minutes()
	})
	row("CPU time before the failover, all replicas", secs, true, func(r *Result) float64 { return r.CPU.Seconds() })
	return b.String()
}

// shardedTargets checks the sharded mode's goals.
func (rep *Report) shardedTargets() string {
	o := rep.Options
	single, sharded := rep.shardedResults()
	if single == nil || sharded == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("| goal | measured | |\n|---|---|---|\n")
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	rss := float64(sharded.PeakRSS) / float64(single.PeakRSS)
	fmt.Fprintf(&b, "| each sharded replica's peak RSS ≤ %.1f × the single replica's | largest %s ÷ %s = %.2fx (each: %s) | %s |\n",
		goalShardedRSS, mib(float64(sharded.PeakRSS)), mib(float64(single.PeakRSS)), rss,
		perReplica(sharded, mib, func(rr *ReplicaResult) float64 { return float64(rr.Before.PeakRSS) }), verdict(single.PeakRSS > 0 && rss <= goalShardedRSS))
	a, c := single.burstLast(), sharded.burstLast()
	burstCell, burstVerdict := "", ""
	switch {
	case math.IsNaN(a) || math.IsNaN(c):
		burstCell = fmt.Sprintf("not every resize accepted: single %d/%d, sharded %d/%d", len(single.Burst.Accepted), single.Burst.Expected, len(sharded.Burst.Accepted), sharded.Burst.Expected)
		burstVerdict = "not measured"
	default:
		burstCell = fmt.Sprintf("%s ÷ %s = %.2fx", secs(c), secs(a), c/a)
		burstVerdict = verdict(c/a <= goalShardedBurst)
		if c/a > goalShardedBurst {
			burstVerdict += ": [the API server](#the-api-server-during-the-bursts) says whether it was the bottleneck"
		}
	}
	if bz := sharded.busiest(); bz != nil {
		burstCell += fmt.Sprintf("; the busiest replica, %s, had %d of %d pods (floor %s, %.2fx the single's)",
			bz.Name, bz.Pods, sharded.Burst.Expected, secs(sharded.busiestFloor(o)), sharded.busiestFloor(o)/single.floor(o).Seconds())
	}
	fmt.Fprintf(&b, "| burst: last resize accepted ≤ %.1f × the single replica's, at the same QPS per replica (%g), unless the API server is the bottleneck | %s | %s |\n",
		goalShardedBurst, o.QPS, burstCell, burstVerdict)
	p99s, p99 := single.isolatedP99(), sharded.isolatedP99()
	fullIsolated := len(single.Isolated.Accepted) == single.Isolated.Expected && len(sharded.Isolated.Accepted) == sharded.Isolated.Expected
	fmt.Fprintf(&b, "| isolated p99 recommendation → resize accepted ≤ %s, as without shards | sharded %s, single %s | %s |\n",
		secs(goalIsolatedP99.Seconds()), secs(p99), secs(p99s), verdict(fullIsolated && p99 <= goalIsolatedP99.Seconds() && p99s <= goalIsolatedP99.Seconds()))
	s := o.Sharded
	fmt.Fprintf(&b, "| failover: kill -9 → first resize accepted in the killed replica's namespaces | sharded %s, single (to its standby) %s; lease duration %s, renew deadline %s, retry period %s | no goal: measured |\n",
		secs(sharded.failoverFirst()), secs(single.failoverFirst()), s.LeaseDuration, s.RenewDeadline, s.RetryPeriod)
	return b.String()
}

// apiServerTable shows the API server over each configuration's burst.
func (rep *Report) apiServerTable() string {
	single, sharded := rep.shardedResults()
	var b strings.Builder
	b.WriteString("| from the burst's first write to its last resize accepted | single | sharded |\n|---|---:|---:|\n")
	row := func(name string, f func(r *Result) string) {
		cell := func(r *Result) string {
			if r == nil || r.BurstAPI == nil {
				return "n/a"
			}
			return f(r)
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", name, cell(single), cell(sharded))
	}
	row("wall time", func(r *Result) string { return secs(r.BurstAPI.Wall.Seconds()) })
	row("resize patches served (the API server's own count)", func(r *Result) string { return count(float64(r.BurstAPI.Resizes)) })
	row("their latency at the API server, p50 / p99 (`apiserver_request_duration_seconds`, interpolated)", func(r *Result) string {
		if r.BurstAPI.Resizes == 0 {
			return "n/a"
		}
		return secs(r.BurstAPI.P50) + " / " + secs(r.BurstAPI.P99)
	})
	row("their latency through the replicas' proxies, mean / max (whole run)", func(r *Result) string {
		l, ok := r.Latencies[proxy.Key{Verb: "patch", Resource: "pods", Subresource: "resize"}]
		if !ok || l.Count == 0 {
			return "n/a"
		}
		return secs((l.Total / time.Duration(l.Count)).Seconds()) + " / " + secs(l.Max.Seconds())
	})
	row(fmt.Sprintf("API server CPU, cores on average (the machine has %d)", rep.CPUs), func(r *Result) string {
		if c := r.BurstAPI.APIServerCores(); !math.IsNaN(c) {
			return fmt.Sprintf("%.2f", c)
		}
		return "n/a"
	})
	row("machine CPU busy", func(r *Result) string {
		if f := r.BurstAPI.MachineBusyFraction(); !math.IsNaN(f) {
			return fmt.Sprintf("%.0f%%", 100*f)
		}
		return "n/a"
	})
	row(fmt.Sprintf("most requests in flight, mutating / read-only (sampled every %s)", APISampleInterval), func(r *Result) string {
		m := r.BurstAPI.MaxInflight
		if m == nil {
			return "not exported"
		}
		return count(m["mutating"]) + " / " + count(m["readOnly"])
	})
	row("most requests executing / waiting in priority and fairness's queues", func(r *Result) string {
		if !r.BurstAPI.APF {
			return "not exported"
		}
		return count(r.BurstAPI.MaxExecuting) + " / " + count(r.BurstAPI.MaxInQueue)
	})
	row("requests rejected by priority and fairness", func(r *Result) string {
		if !r.BurstAPI.APF {
			return "not exported"
		}
		return count(r.BurstAPI.Rejected)
	})
	row("each replica: its pods accepted, last at, pods per second", func(r *Result) string {
		var parts []string
		for _, rr := range r.working() {
			rate := "n/a"
			if rr.Burst.Last > 0 {
				rate = fmt.Sprintf("%.1f/s", float64(rr.Burst.Accepted)/rr.Burst.Last.Seconds())
			}
			parts = append(parts, fmt.Sprintf("%s: %d, %s, %s", rr.Name, rr.Burst.Accepted, secs(rr.Burst.Last.Seconds()), rate))
		}
		return strings.Join(parts, "; ")
	})
	for _, r := range []*Result{single, sharded} {
		if r != nil && r.BurstAPI != nil && len(r.BurstAPI.Errors) > 0 {
			fmt.Fprintf(&b, "\n%s: not read: %s\n", r.Spec.Name, strings.Join(r.BurstAPI.Errors, "; "))
		}
	}
	return b.String()
}

// replicaTable shows each replica of r.
func replicaTable(r *Result) string {
	var b strings.Builder
	b.WriteString("| replica | held at the start | namespaces | pods | ready after | peak RSS | peak RssAnon | CPU | requests at start (writes) | requests before the failover | objects of other shards dropped | held at the end |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, rr := range r.Replicas {
		name, fig := rr.Name, rr.Before
		switch {
		case rr.Standby:
			name += " (standby, started for the failover: its requests from its start to the failover's end)"
			fig = rr.End
		case rr.Killed:
			name += " (killed)"
		}
		start := rr.Phase("startup").Requests
		if rr.Standby {
			start = rr.Phase("failover").Requests
		}
		end := shardList(rr.ShardsAtEnd, rr.LeaderAtEnd)
		if rr.Killed {
			end = "killed"
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s | %s | %s | %d (%d) | %d | %.0f | %s |\n",
			name, shardList(rr.ShardsAtStart, rr.Leader), rr.Namespaces, rr.Pods, secs(rr.Ready.Seconds()),
			mib(float64(fig.PeakRSS)), mib(float64(fig.PeakAnon)), secs(fig.CPU.Seconds()),
			start.Total(), start.Writes(nil), fig.Requests.Total(), rr.Foreign, end)
	}
	return b.String()
}

// failoverText describes r's failover.
func failoverText(o *Options, r *Result) string {
	fo := r.Failover
	if fo == nil {
		return "Not run.\n"
	}
	if fo.Note != "" {
		return fo.Note + ".\n"
	}
	var b strings.Builder
	if fo.Standby != "" {
		fmt.Fprintf(&b, "A second replica, %s, was started and ready (caches synced, not leading) after %s. ", fo.Standby, secs(fo.StandbyReady.Seconds()))
	}
	held := "which led"
	if len(fo.Shards) > 0 {
		held = "which held shards " + shardList(fo.Shards, false)
	}
	fmt.Fprintf(&b, "%s, %s, was killed with SIGKILL; at once the driver wrote a recommendation (%s) to the first VPA of each of the %d namespaces it worked: %d VPAs, %d pods. "+
		"Lease duration %s, renew deadline %s, retry period %s.\n\n",
		fo.Victim, held, fmtRes(failoverTarget), fo.Namespaces, fo.Apps, fo.Pods,
		o.Sharded.LeaseDuration, o.Sharded.RenewDeadline, o.Sharded.RetryPeriod)
	cell := func(d time.Duration) string {
		if fo.Accepted == 0 {
			return "n/a"
		}
		return secs(d.Seconds())
	}
	fmt.Fprintf(&b, "| from the kill | |\n|---|---:|\n| first resize accepted | %s |\n| each namespace had one (%d of %d) | %s |\n| last resize accepted (%d of %d pods) | %s |\n",
		cell(fo.First), fo.NamespacesResized, fo.Namespaces, cell(fo.EveryNamespace), fo.Accepted, fo.Pods, cell(fo.Last))
	return b.String()
}

// shardedMarkdown renders the sharded mode's report.
func (rep *Report) shardedMarkdown(reproduce string) string {
	o := rep.Options
	var b strings.Builder
	fmt.Fprintf(&b, "# Sharded updater benchmark: %s, %s\n\n", o.Profile, rep.Start.UTC().Format("2006-01-02"))
	if reproduce != "" {
		fmt.Fprintf(&b, "Reproduce: `%s`\n\n", reproduce)
	}
	fmt.Fprintf(&b, "Our updater alone, on one workload, two ways, one after the other: **single**, one replica under leader election, and **sharded**, "+
		"%d replicas sharing %d shards of the namespaces (`--shards=%d`, docs/scaling.md), every replica with the same client limits (`--kube-api-qps=%g --kube-api-burst=%d`). "+
		"%s pods in %d Deployments under %d VPAs in `InPlace` mode (10 pods each) over %d namespaces, round robin (`%s` to `%s`), plus %d pods of one more VPA on node `%s`, which a filler pod keeps full. "+
		"Kubernetes %s, %d hollow nodes (real kubelet code, fake runtime). Machine: %d CPUs, %s; load average %s at the start, %s at the end. Run from %s to %s (UTC).\n\n",
		o.Sharded.Replicas, o.Sharded.Shards, o.Sharded.Shards, o.QPS, o.Burst,
		thousands(o.Pods), o.Deployments, o.Deployments, o.Namespaces, o.NamespaceNames()[0], o.NamespaceNames()[len(o.NamespaceNames())-1], o.DeferredPods, o.DeferredNode,
		rep.ServerVersion, rep.Nodes, rep.CPUs, rep.MemTotal, rep.LoadStart, rep.LoadEnd, rep.Start.UTC().Format("15:04"), rep.End.UTC().Format("15:04"))
	if per, err := namespacesPerShard(o.Sharded.Shards, o.NamespaceNames()); err == nil {
		fmt.Fprintf(&b, "The namespaces in each of the %d shards (the FNV-1a hash of their names, as the API server's sharded list and watch cuts them), shard 0 first: %s.\n\n",
			o.Sharded.Shards, strings.Trim(fmt.Sprint(per), "[]"))
	}
	if o.Cluster != "" {
		fmt.Fprintf(&b, "Nodes: %s.\n\n", o.Cluster)
	}
	b.WriteString("## What was found\n\n" + notYetWritten + "\n\n")
	b.WriteString("## Results\n\n")
	b.WriteString(rep.shardedTable())
	b.WriteString("\nRatios are sharded ÷ single: below 1, the sharded replicas are faster, smaller or make fewer requests. " +
		"Memory is per replica (the largest), read at the end of the steady state, before the failover; CPU and requests are all replicas' together. " +
		"Latencies are per pod, from the start of the driver's write of the VPA status (or, for the failover, from the kill) to the moment the driver's own watch sees " +
		"the pod's generation move with the new requests in its spec (accepted), and then `status.observedGeneration` reach it with no resize condition left (completed).\n\n")
	if t := rep.shardedTargets(); t != "" {
		b.WriteString("## Goals\n\n")
		b.WriteString(t)
		b.WriteString("\n")
	}
	b.WriteString("## The API server during the bursts\n\n")
	b.WriteString(rep.apiServerTable())
	b.WriteString("\nEach replica sends its resizes at no more than its QPS: alone, the sharded burst ends at the busiest replica's floor (its share of the pods depends on how the namespaces' hashes fall into the shards it holds). " +
		"The API server is the bottleneck when the replicas send well below their QPS (pods per second above) while the resize patches' latency at the API server grows, " +
		"requests wait in priority and fairness's queues, or the API server (or the machine, which also runs the hollow kubelets at nice 19 and the replicas) has no CPU left.\n\n")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "## %s: replicas\n\n", r.Spec.Name)
		b.WriteString(replicaTable(r))
		b.WriteString("\n")
		fmt.Fprintf(&b, "### %s: failover\n\n", r.Spec.Name)
		b.WriteString(failoverText(o, r))
		b.WriteString("\n")
	}
	b.WriteString("## How it was run\n\n")
	fmt.Fprintf(&b, "- Every replica gets `--kube-api-qps=%g --kube-api-burst=%d` and a counting proxy of its own on 127.0.0.1 (plain HTTP, no credentials; the proxy forwards over TLS with the ServiceAccount's token); the driver uses %g/%d and talks to the API server directly.\n", o.QPS, o.Burst, o.DriverQPS, o.DriverBurst)
	fmt.Fprintf(&b, "- Leader election on in both configurations (`--leader-elect-lease-duration=%s --leader-elect-renew-deadline=%s --leader-elect-retry-period=%s`, the updater's defaults unless changed), the Leases in `%s`: the chart's leader election Lease, and for the sharded configuration its shards' and members' Leases (`--shard-lease-prefix=%s`). Each replica's POD_NAME is its name. Lease renewals do not hold a phase open and are counted apart.\n",
		o.Sharded.LeaseDuration, o.Sharded.RenewDeadline, o.Sharded.RetryPeriod, o.Sharded.LeaseNamespace, o.Sharded.LeasePrefix)
	b.WriteString("- The replicas of a configuration start together; the configuration is ready once every replica serves `/readyz`, watches pods and VPAs, and its metrics show the work shared: one replica leading, or every shard held and synced by exactly one replica, none holding more than its share. The shards held then decide which replica works which namespace in the figures per replica.\n")
	fmt.Fprintf(&b, "- Peak RSS is `VmHWM` of `/proc/<pid>/status`, `RssAnon` is sampled every %s, CPU time is `utime + stime`; the page cache of the binary is dropped before each start.\n", MemorySampleInterval)
	fmt.Fprintf(&b, "- Scenarios, as in `make bench`, in order: startup (ready, then %s settle, then no write for 10 s); **isolated**: %d VPAs changed one at a time, %s apart (%s → %s); "+
		"**burst**: every VPA changed at once (→ %s); **deferral**: the %d pods on `%s` asked for %s CPU; **steady state**: %s; then the **failover**: under leader election a standby is started first; "+
		"the replica working the most namespaces is killed with SIGKILL and a recommendation (→ %s) is written at once to the first VPA of each namespace it worked. "+
		"Before each configuration, with no updater running, every VPA and pod is reset to the baseline.\n",
		o.Settle, o.IsolatedChanges, o.IsolatedInterval, fmtRes(baseline), fmtRes(isolated), fmtRes(burst), o.DeferredPods, o.DeferredNode, deferred.Cpu().String(), o.SteadyDuration, fmtRes(failoverTarget))
	b.WriteString("- The API server's figures over a burst are read from its own `/metrics` (at the burst's first write, every 5 s, and once its last resize is accepted) and its CPU time from `/proc` (it runs on this machine). " +
		"`objects of other shards dropped` (`vpa_inplace_updater_shard_foreign_objects_total`) is 0 where the API server serves sharded list and watch; otherwise every replica receives every namespace's objects and keeps its own.\n\n")
	b.WriteString("| configuration | build | command line of its first replica (the others differ in `--kubeconfig`, `--address` and POD_NAME) | credentials |\n|---|---|---|---|\n")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "| %s | %s | `%s %s` | %s |\n", r.Spec.Name, r.Spec.Version, shortBinary(r.Spec.Binary), strings.Join(r.Args, " "), r.Spec.Identity)
	}
	b.WriteString("\n## Requests and CPU by phase, all replicas\n\n")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "### %s\n\n", r.Spec.Name)
		b.WriteString(phaseTable(r))
		c := r.changes()
		fmt.Fprintf(&b, "\nIsolated: %d/%d pods accepted, %d completed. Burst: %d/%d accepted, %d completed; burst write %s. "+
			"Deferral: %d/%d accepted, %d held Deferred; still Deferred at the end of the steady state: %d; resizes accepted during the steady state: %d. "+
			"Actuated changes (isolated + burst): %d; their writes: %s; events: %d; Lease writes: %d.\n\n",
			len(r.Isolated.Accepted), r.Isolated.Expected, len(r.Isolated.Completed),
			len(r.Burst.Accepted), r.Burst.Expected, len(r.Burst.Completed), secs(r.BurstWrite.Seconds()),
			len(r.Deferred.Accepted), r.Deferred.Expected, r.Deferred.Deferred, r.SteadyStillDeferred, r.SteadyGenBumps,
			c.Actuated, joinCounts(c.PodWrites, c.OtherWrites), c.Events, c.Leases)
		b.WriteString(latencyTable(r.Latencies))
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- note: %s\n", n)
		}
		for _, p := range r.Profiles {
			fmt.Fprintf(&b, "- profile: `%s`\n", p)
		}
		if len(r.Notes)+len(r.Profiles) > 0 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// namespacesPerShard counts the namespaces in each of shards shards.
func namespacesPerShard(shards int, namespaces []string) ([]int, error) {
	layout, err := shard.NewLayout(shards)
	if err != nil {
		return nil, err
	}
	out := make([]int, shards)
	for _, ns := range namespaces {
		out[layout.Of(ns)]++
	}
	return out, nil
}

// phaseTable renders r's phases.
func phaseTable(r *Result) string {
	var b strings.Builder
	b.WriteString("| phase | duration | requests | writes | CPU | requests by kind |\n|---|---:|---:|---:|---:|---|\n")
	for _, p := range r.Phases {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s |\n", p.Name, secs(p.Duration.Seconds()), p.Requests.Total(), p.Requests.Writes(nil), secs(p.CPU.Seconds()), p.Requests.String())
	}
	return b.String()
}
