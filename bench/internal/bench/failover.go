package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/vpa-inplace/vpa-inplace/pkg/shard"
)

// failoverTarget is the recommendation written, at the kill, to one VPA of
// each namespace the killed replica worked: above the burst's, so that it
// is an increase, which nothing holds back.
var failoverTarget = resources("40m", "80Mi")

// FailoverResult is what followed the kill -9 of one replica.
type FailoverResult struct {
	// Victim is the replica killed; Shards the shards it held (none under
	// leader election, where it led).
	Victim string
	Shards []int
	// Namespaces of the workload it worked, Apps changed at the kill (the
	// first of each of those namespaces) and their Pods.
	Namespaces, Apps, Pods int
	// Accepted counts the pods whose resize was accepted.
	Accepted int
	// First is the time from the kill to the first resize accepted in one
	// of those namespaces; EveryNamespace to the time each of them had
	// one; Last to the last pod's. NamespacesResized counts the namespaces
	// with one.
	First, EveryNamespace, Last time.Duration
	NamespacesResized           int
	// Standby, under leader election, is the replica started (and ready)
	// before the kill, and StandbyReady the time it took.
	Standby      string
	StandbyReady time.Duration
	// Note says why nothing was measured.
	Note string
}

// runFailover kills one replica of f with SIGKILL and times the first
// resize accepted in a namespace it worked, from a recommendation written
// at the kill to the first VPA of each of those namespaces. Under leader
// election, a second replica is started first and waited for (a warm
// standby, as a Deployment of two runs). Its phase, "failover", ends once
// every one of those resizes is accepted (or the wait gives up) and the
// replicas left have made no write for Quiet.
func runFailover(ctx context.Context, o *Options, w *workload, f *fleet, r *Result, c configuration, layout shard.Layout, log func(string, ...any)) (*FailoverResult, error) {
	fo := &FailoverResult{}
	if c.Shards == 1 {
		name := c.replicaName(c.Replicas)
		sb, err := startReplica(ctx, o, o.Ours, name, o.configArgs(c), identity(name))
		if err != nil {
			return fo, err
		}
		f.replicas = append(f.replicas, sb)
		r.Replicas = append(r.Replicas, &ReplicaResult{Name: name, Standby: true, Args: sb.args})
		log("%s: standby: pid %d, address %s, log %s", name, sb.pid(), sb.addr, sb.log.Name())
		ok := waitUntil(ctx, 3*time.Minute, func() bool {
			if f.alive() != nil || !watching(sb) || !httpOK(ctx, "http://"+sb.addr+"/readyz") {
				return false
			}
			st, err := scrapeState(ctx, sb.addr)
			return err == nil && !st.Leader
		})
		if err := f.alive(); err != nil {
			return fo, err
		}
		if !ok {
			return fo, fmt.Errorf("the standby %s was not ready within 3m", name)
		}
		fo.Standby, fo.StandbyReady = name, time.Since(sb.start)
		r.Replicas[len(r.Replicas)-1].Ready = fo.StandbyReady
	}
	states, err := scrapeStates(ctx, f.replicas)
	if err != nil {
		return fo, err
	}
	owner := namespaceOwners(layout, w.namespaces, f.replicas, states)
	v := chooseVictim(f.replicas, owner)
	if v < 0 {
		fo.Note = "no replica works a namespace of the workload: nothing to kill"
		return fo, nil
	}
	victim := f.replicas[v]
	fo.Victim, fo.Shards = victim.name, states[v].Owned
	apps := w.firstApps(func(ns string) bool {
		if owner[ns] == victim.name {
			fo.Namespaces++
			return true
		}
		return false
	})
	fo.Apps = len(apps)
	if fig, err := victim.read(); err == nil {
		r.Replicas[v].End = fig
	}
	r.Replicas[v].Killed, r.Replicas[v].ShardsAtEnd = true, states[v].Owned
	r.Replicas[v].Phases = slices.Clone(victim.phases)

	t0 := time.Now()
	for _, app := range apps {
		fo.Pods += w.t.Expect("failover", app, failoverTarget, t0)
	}
	victim.kill()
	log("%s: killed %s (%s, %d namespaces); writing the recommendation of %d VPAs, %d pods", c.Name, victim.name,
		shardList(fo.Shards, states[v].Leader), fo.Namespaces, fo.Apps, fo.Pods)
	if err := forEach(ctx, apps, func(ctx context.Context, _ int, app string) error {
		return w.recommend(ctx, app, failoverTarget)
	}); err != nil {
		return fo, err
	}
	timeout := 5*time.Minute + 2*o.Sharded.LeaseDuration
	waitUntil(ctx, timeout, func() bool {
		g := w.t.Group("failover")
		return len(g.Accepted) == g.Expected || f.alive() != nil
	})
	acc := w.t.Acceptances("failover")
	fo.Accepted = len(acc)
	fo.First, fo.EveryNamespace, fo.Last, fo.NamespacesResized = failoverFigures(acc)
	log("%s: failover: %d/%d accepted, first %.1fs, every namespace %.1fs (%d/%d), last %.1fs", c.Name, fo.Accepted, fo.Pods,
		fo.First.Seconds(), fo.EveryNamespace.Seconds(), fo.NamespacesResized, fo.Namespaces, fo.Last.Seconds())
	if fo.Accepted < fo.Pods {
		r.Notes = append(r.Notes, fmt.Sprintf("failover: only %d of %d pods accepted their resize within %s", fo.Accepted, fo.Pods, timeout))
	}
	r.quiesce(ctx, f, "failover", log)
	r.Phases = append(r.Phases, f.endPhase("failover"))
	return fo, f.alive()
}

// chooseVictim returns the index of the live replica working the most
// namespaces of the workload (the first of a tie), -1 when none works one.
func chooseVictim(replicas []*replica, owner map[string]string) int {
	count := map[string]int{}
	for _, name := range owner {
		count[name]++
	}
	best := -1
	for i, rp := range replicas {
		if rp.killed || count[rp.name] == 0 {
			continue
		}
		if best < 0 || count[rp.name] > count[replicas[best].name] {
			best = i
		}
	}
	return best
}

// failoverFigures returns, of the acceptances after a kill, the first,
// the time every namespace with one had its first, the last, and how many
// namespaces had one.
func failoverFigures(acc []acceptance) (first, everyNamespace, last time.Duration, namespaces int) {
	firstOf := map[string]time.Duration{}
	for i, a := range acc {
		if i == 0 || a.after < first {
			first = a.after
		}
		last = max(last, a.after)
		if d, ok := firstOf[a.namespace]; !ok || a.after < d {
			firstOf[a.namespace] = a.after
		}
	}
	for _, d := range firstOf {
		everyNamespace = max(everyNamespace, d)
	}
	return first, everyNamespace, last, len(firstOf)
}
