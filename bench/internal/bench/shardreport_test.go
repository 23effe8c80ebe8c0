package bench

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vpa-inplace/vpa-inplace/bench/internal/proxy"
)

// shardedReport is a report of both configurations: the single replica at
// 100 MiB and a burst of 200 s, the sharded ones at the given peak RSS
// and burst.
func shardedReport(t *testing.T, shardedRSS int64, shardedBurst time.Duration) *Report {
	t.Helper()
	o, errs := shardedOptions(t)
	require.Empty(t, errs)
	durations := func(d ...time.Duration) []time.Duration { return d }
	burstOf := func(last time.Duration) groupResult {
		return groupResult{Expected: 1000, Accepted: make([]time.Duration, 1000), Completed: make([]time.Duration, 1000), LastAccepted: last, LastCompleted: 2 * last}
	}
	startup := func(n int) []Phase {
		return []Phase{{Name: "startup", Duration: 20 * time.Second, Requests: proxy.Counts{{Verb: "list", Resource: "pods"}: n}}}
	}
	single := &Result{
		Spec: UpdaterSpec{Name: "single"}, Config: &configuration{Name: "single", Replicas: 1, Shards: 1},
		PeakRSS: 100 << 20, Burst: burstOf(200 * time.Second),
		Isolated: groupResult{Expected: 2, Accepted: durations(50*time.Millisecond, 200*time.Millisecond)},
		Phases:   startup(10),
		Replicas: []*ReplicaResult{
			{Name: "single-0", Leader: true, Pods: 1000, Namespaces: 10, Before: figures{PeakRSS: 100 << 20}, Phases: startup(10), Killed: true},
			{Name: "single-1", Standby: true, LeaderAtEnd: true},
		},
		Failover: &FailoverResult{Victim: "single-0", Namespaces: 10, Apps: 10, Pods: 100, Accepted: 100, First: 17 * time.Second, EveryNamespace: 18 * time.Second, Last: 20 * time.Second, NamespacesResized: 10, Standby: "single-1"},
	}
	sharded := &Result{
		Spec: UpdaterSpec{Name: "sharded"}, Config: &configuration{Name: "sharded", Replicas: 3, Shards: 12},
		PeakRSS: shardedRSS, Burst: burstOf(shardedBurst),
		Isolated: groupResult{Expected: 2, Accepted: durations(40*time.Millisecond, 100*time.Millisecond)},
		Phases:   startup(30),
		Replicas: []*ReplicaResult{
			{Name: "sharded-0", ShardsAtStart: []int{0, 1, 2, 3}, Pods: 300, Before: figures{PeakRSS: shardedRSS - 1<<20}, Phases: startup(9)},
			{Name: "sharded-1", ShardsAtStart: []int{4, 5, 6, 7}, Pods: 400, Before: figures{PeakRSS: shardedRSS}, Phases: startup(11), Killed: true},
			{Name: "sharded-2", ShardsAtStart: []int{8, 9, 10, 11}, Pods: 300, Before: figures{PeakRSS: shardedRSS - 2<<20}, Phases: startup(10), ShardsAtEnd: []int{4, 5, 8, 9, 10, 11}},
		},
		BurstAPI: &APIWindow{Wall: shardedBurst, APIServerCPU: shardedBurst, MachineBusy: 9 * time.Second, MachineTotal: 10 * time.Second, Resizes: 1000, P50: 0.02, P99: 0.3,
			MaxInflight: map[string]float64{"mutating": 12, "readOnly": 4}, MaxInQueue: 3, APF: true},
		Failover: &FailoverResult{Victim: "sharded-1", Shards: []int{4, 5, 6, 7}, Namespaces: 4, Apps: 4, Pods: 40, Accepted: 40, First: 18 * time.Second, EveryNamespace: 19 * time.Second, Last: 19 * time.Second, NamespacesResized: 4},
	}
	return &Report{Options: o, Results: []*Result{single, sharded}, CPUs: 2}
}

func TestShardedReportGoalsMet(t *testing.T) {
	rep := shardedReport(t, 38<<20, 70*time.Second)
	md := rep.Markdown("make bench BENCH_SHARDED=3")
	assert.Contains(t, section(md, "## What was found"), "Not yet written", "a place for what the figures show, never words of the driver's")
	goals := section(md, "## Goals")
	assert.Contains(t, goals, "| each sharded replica's peak RSS ≤ 0.4 × the single replica's | largest 38.0 MiB ÷ 100.0 MiB = 0.38x (each: 37.0 MiB, 38.0 MiB, 36.0 MiB) | met |")
	assert.Contains(t, goals, "70.0 s ÷ 200.0 s = 0.35x; the busiest replica, sharded-1, had 400 of 1000 pods (floor 8.00 s, 0.40x the single's) | met |")
	assert.Contains(t, goals, "| isolated p99 recommendation → resize accepted ≤ 0.25 s, as without shards | sharded 0.10 s, single 0.20 s | met |")
	assert.Contains(t, goals, "sharded 18.0 s, single (to its standby) 17.0 s; lease duration 15s, renew deadline 10s, retry period 2s | no goal: measured |")
	assert.NotContains(t, md, "missed")

	table := rep.Table()
	assert.Contains(t, table, "| metric | single (1 replica) | sharded (3 replicas, 12 shards) | sharded ÷ single |")
	assert.Contains(t, table, "| burst: last resize accepted | 200.0 s | 70.0 s | 0.35 |")
	assert.Contains(t, table, "| API requests at start, all replicas | 10 | 30 | 3.00 |")
	assert.Contains(t, table, "| API requests at start, each replica | 10 | 9, 11, 10 | |")
	assert.Contains(t, table, "| failover: kill -9 → first resize accepted in its namespaces (lease duration 15s) | 17.0 s | 18.0 s | 1.06 |")

	api := section(md, "## The API server during the bursts")
	assert.Contains(t, api, "| API server CPU, cores on average (the machine has 2) | n/a | 1.00 |", "the single's burst was not watched")
	assert.Contains(t, api, "| machine CPU busy | n/a | 90% |")
	assert.Contains(t, api, "| their latency at the API server, p50 / p99 (`apiserver_request_duration_seconds`, interpolated) | n/a | 0.02 s / 0.30 s |")
	assert.Contains(t, api, "| most requests executing / waiting in priority and fairness's queues | n/a | 0 / 3 |")
	rep.Results[1].BurstAPI.APF, rep.Results[1].BurstAPI.MaxInflight = false, nil
	api = section(rep.Markdown(""), "## The API server during the bursts")
	assert.Contains(t, api, "| most requests executing / waiting in priority and fairness's queues | n/a | not exported |", "not zeros")
	assert.Contains(t, api, "| n/a | not exported |\n| requests rejected")
	assert.Contains(t, md, "| sharded-1 (killed) | 4-7 |")
	assert.Contains(t, md, "| single-1 (standby, started for the failover: its requests from its start to the failover's end) | nothing |")
	assert.Contains(t, md, "| sharded-2 | 8-11 | 0 | 300 |")
	assert.Contains(t, md, "| 4-5,8-11 |")
	assert.Contains(t, md, "single-0, which led, was killed with SIGKILL")
	assert.Contains(t, md, "sharded-1, which held shards 4-7, was killed with SIGKILL")
	per, err := namespacesPerShard(12, rep.Options.NamespaceNames())
	require.NoError(t, err)
	sum := 0
	for _, n := range per {
		sum += n
	}
	assert.Equal(t, 10, sum)
	assert.Contains(t, md, "shard 0 first: "+strings.Trim(fmt.Sprint(per), "[]")+".")
}

// A goal missed is said so, and for the burst the report points at the
// API server's figures.
func TestShardedReportGoalsMissed(t *testing.T) {
	rep := shardedReport(t, 45<<20, 90*time.Second)
	goals := section(rep.Markdown(""), "## Goals")
	assert.Contains(t, goals, "= 0.45x (each: 44.0 MiB, 45.0 MiB, 43.0 MiB) | **missed** |")
	assert.Contains(t, goals, "90.0 s ÷ 200.0 s = 0.45x")
	assert.Contains(t, goals, "| **missed**: [the API server](#the-api-server-during-the-bursts) says whether it was the bottleneck |")

	rep.Results[1].Burst.Accepted = rep.Results[1].Burst.Accepted[:999]
	goals = section(rep.Markdown(""), "## Goals")
	assert.Contains(t, goals, "not every resize accepted: single 1000/1000, sharded 999/1000")
	assert.Contains(t, goals, "| not measured |")
}

// A run stopped after the single configuration still reports it, with no
// goals and the sharded column not run.
func TestShardedReportOfOneConfiguration(t *testing.T) {
	rep := shardedReport(t, 38<<20, 70*time.Second)
	rep.Results = rep.Results[:1]
	md := rep.Markdown("")
	assert.NotContains(t, md, "## Goals")
	assert.Contains(t, md, "| metric | single (1 replica) | sharded (not run) | sharded ÷ single |")
	assert.Contains(t, md, "| burst: last resize accepted | 200.0 s | n/a |  |")
}

// section returns md from heading to the next heading of its level.
func section(md, heading string) string {
	i := strings.Index(md, heading+"\n")
	if i < 0 {
		return ""
	}
	rest := md[i+len(heading)+1:]
	if j := strings.Index(rest, "\n"+heading[:strings.Index(heading, " ")+1]); j >= 0 {
		return rest[:j]
	}
	return rest
}
