package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/vpa-inplace/vpa-inplace/bench/internal/metricstext"
	"github.com/vpa-inplace/vpa-inplace/pkg/shard"
	"github.com/vpa-inplace/vpa-inplace/pkg/shard/owner"
)

// The updater's metrics of leader election and of the spans' lists
// (cmd/updater/app: MetricLeader, MetricShardForeignObjects).
const (
	metricLeader  = "vpa_inplace_updater_leader"
	metricForeign = "vpa_inplace_updater_shard_foreign_objects_total"
)

// replicaState is what a replica's metrics say of the work it holds.
type replicaState struct {
	// Leader: it leads (leader election) or holds a shard.
	Leader bool
	// Owned and Synced are the shards it holds, and those whose caches it
	// has synced and records loaded, in order.
	Owned, Synced []int
	// Members is how many replicas it sees sharing the shards.
	Members int
	// Foreign counts the objects of shards it does not hold that the API
	// server sent and it dropped.
	Foreign float64
}

// parseReplicaState reads a replica's state from its metrics.
func parseReplicaState(f metricstext.Families) replicaState {
	var s replicaState
	if v, ok := f.Sum(metricLeader, nil); ok {
		s.Leader = v == 1
	}
	shards := func(name string) []int {
		var out []int
		f.Each(name, nil, func(m *dto.Metric, v float64) {
			if i, err := strconv.Atoi(metricstext.Label(m, "shard")); err == nil && v == 1 {
				out = append(out, i)
			}
		})
		slices.Sort(out)
		return out
	}
	s.Owned, s.Synced = shards(owner.MetricShardOwned), shards(owner.MetricShardSynced)
	if v, ok := f.Sum(owner.MetricShardMembers, nil); ok {
		s.Members = int(v)
	}
	s.Foreign, _ = f.Sum(metricForeign, nil)
	return s
}

// scrapeState reads the metrics of the replica serving them on addr.
func scrapeState(ctx context.Context, addr string) (replicaState, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return replicaState{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return replicaState{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, metricstext.MaxSize+1))
	if err != nil {
		return replicaState{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return replicaState{}, fmt.Errorf("%s/metrics: HTTP %d", addr, resp.StatusCode)
	}
	f, err := metricstext.Parse(raw)
	if err != nil {
		return replicaState{}, fmt.Errorf("%s/metrics: %w", addr, err)
	}
	return parseReplicaState(f), nil
}

// scrapeStates reads the state of every live replica (a killed one's is
// the zero state).
func scrapeStates(ctx context.Context, replicas []*replica) ([]replicaState, error) {
	out := make([]replicaState, len(replicas))
	for i, rp := range replicas {
		if rp.killed {
			continue
		}
		s, err := scrapeState(ctx, rp.addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rp.name, err)
		}
		out[i] = s
	}
	return out, nil
}

// settledShards tells whether the work of shards shards is shared among the
// replicas of states, and if not why: with one shard (leader election)
// exactly one leads; with several every replica counts them all as
// members, each shard is held by exactly one and synced by it, and none
// holds more than its share, ceil(shards / replicas).
func settledShards(states []replicaState, shards int) (bool, string) {
	if shards == 1 {
		leaders := 0
		for _, s := range states {
			if s.Leader {
				leaders++
			}
		}
		if leaders != 1 {
			return false, fmt.Sprintf("%d replicas lead, want 1", leaders)
		}
		return true, ""
	}
	share := (shards + len(states) - 1) / len(states)
	holder := make([]int, shards)
	for i, s := range states {
		if s.Members != len(states) {
			return false, fmt.Sprintf("replica %d sees %d members, want %d", i, s.Members, len(states))
		}
		if len(s.Owned) > share {
			return false, fmt.Sprintf("replica %d holds %d shards, more than its share of %d", i, len(s.Owned), share)
		}
		for _, k := range s.Owned {
			if k < 0 || k >= shards {
				return false, fmt.Sprintf("replica %d holds shard %d of %d", i, k, shards)
			}
			holder[k]++
			if !slices.Contains(s.Synced, k) {
				return false, fmt.Sprintf("replica %d has not synced shard %d", i, k)
			}
		}
	}
	for k, n := range holder {
		if n != 1 {
			return false, fmt.Sprintf("shard %d is held by %d replicas", k, n)
		}
	}
	return true, ""
}

// sameOwnership tells whether two readings show the same shards held by
// the same replicas.
func sameOwnership(a, b []replicaState) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Leader != b[i].Leader || !slices.Equal(a[i].Owned, b[i].Owned) {
			return false
		}
	}
	return true
}

// ownership describes who holds what: "sharded-0: 0-3, sharded-1: 4,7".
func ownership(replicas []*replica, states []replicaState) string {
	if len(states) != len(replicas) {
		return "no reading"
	}
	parts := make([]string, len(replicas))
	for i, rp := range replicas {
		parts[i] = rp.name + ": " + shardList(states[i].Owned, states[i].Leader)
	}
	return strings.Join(parts, ", ")
}

// shardList renders shards as ranges, "0-3,7"; without shards, "leader" or
// "nothing".
func shardList(shards []int, leader bool) string {
	if len(shards) == 0 {
		if leader {
			return "leader"
		}
		return "nothing"
	}
	var parts []string
	for i := 0; i < len(shards); {
		j := i
		for j+1 < len(shards) && shards[j+1] == shards[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(shards[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", shards[i], shards[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// namespaceOwners maps each namespace to the replica working it: the
// holder of its shard, or with one shard the leader.
func namespaceOwners(layout shard.Layout, namespaces []string, replicas []*replica, states []replicaState) map[string]string {
	out := make(map[string]string, len(namespaces))
	for _, ns := range namespaces {
		k := layout.Of(ns)
		for i, s := range states {
			if (layout.Shards() == 1 && s.Leader) || slices.Contains(s.Owned, k) {
				out[ns] = replicas[i].name
			}
		}
	}
	return out
}

// replicaBurst is what of the burst was accepted in one replica's
// namespaces.
type replicaBurst struct {
	Accepted int
	// Last is the latest acceptance, from the burst's start.
	Last time.Duration
}

// burstByReplica splits the burst's acceptances by the replica owning
// their namespace.
func burstByReplica(acc []acceptance, owner map[string]string) map[string]replicaBurst {
	out := map[string]replicaBurst{}
	for _, a := range acc {
		name, ok := owner[a.namespace]
		if !ok {
			continue
		}
		b := out[name]
		b.Accepted++
		b.Last = max(b.Last, a.after)
		out[name] = b
	}
	return out
}
