package bench

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/vpa-inplace/vpa-inplace/bench/internal/metricstext"
	"github.com/vpa-inplace/vpa-inplace/pkg/shard"
)

// updaterMetrics is what a replica holding shards 4 to 7 of 12 serves,
// the names as the updater registers them.
func updaterMetrics(owned, synced []int, members int, leader float64, foreign float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# TYPE vpa_inplace_updater_leader gauge\nvpa_inplace_updater_leader %g\n", leader)
	fmt.Fprintf(&b, "# TYPE vpa_inplace_updater_shard_members gauge\nvpa_inplace_updater_shard_members %d\n", members)
	b.WriteString("# TYPE vpa_inplace_updater_shard_owned gauge\n")
	for i := range 12 {
		v := 0
		if contains(owned, i) {
			v = 1
		}
		fmt.Fprintf(&b, "vpa_inplace_updater_shard_owned{shard=\"%d\"} %d\n", i, v)
	}
	b.WriteString("# TYPE vpa_inplace_updater_shard_synced gauge\n")
	for i := range 12 {
		v := 0
		if contains(synced, i) {
			v = 1
		}
		fmt.Fprintf(&b, "vpa_inplace_updater_shard_synced{shard=\"%d\"} %d\n", i, v)
	}
	fmt.Fprintf(&b, "# TYPE vpa_inplace_updater_shard_foreign_objects_total counter\n"+
		"vpa_inplace_updater_shard_foreign_objects_total{resource=\"pods\"} %g\n"+
		"vpa_inplace_updater_shard_foreign_objects_total{resource=\"verticalpodautoscalers\"} 5\n", foreign)
	return b.String()
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestParseReplicaState(t *testing.T) {
	f, err := metricstext.Parse([]byte(updaterMetrics([]int{7, 4, 5, 6}, []int{4, 5}, 3, 1, 100)))
	require.NoError(t, err)
	s := parseReplicaState(f)
	assert.True(t, s.Leader)
	assert.Equal(t, []int{4, 5, 6, 7}, s.Owned, "in order")
	assert.Equal(t, []int{4, 5}, s.Synced)
	assert.Equal(t, 3, s.Members)
	assert.Equal(t, 105.0, s.Foreign, "every resource's")

	f, err = metricstext.Parse([]byte("# TYPE vpa_inplace_updater_leader gauge\nvpa_inplace_updater_leader 0\n"))
	require.NoError(t, err)
	assert.Equal(t, replicaState{}, parseReplicaState(f), "a standby under leader election: no shard metrics")
}

func TestScrapeState(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, updaterMetrics([]int{0, 1}, []int{0, 1}, 2, 1, 0))
	}))
	defer srv.Close()
	s, err := scrapeState(t.Context(), strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, s.Owned)

	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusInternalServerError) })
	_, err = scrapeState(t.Context(), strings.TrimPrefix(srv.URL, "http://"))
	assert.Error(t, err)
}

func TestSettledShards(t *testing.T) {
	all := func(from, to int) []int {
		var out []int
		for i := from; i < to; i++ {
			out = append(out, i)
		}
		return out
	}
	held := func(members int, owned ...int) replicaState {
		return replicaState{Leader: len(owned) > 0, Owned: owned, Synced: owned, Members: members}
	}
	for _, tc := range []struct {
		name   string
		shards int
		states []replicaState
		ok     bool
	}{
		{"one leader", 1, []replicaState{{Leader: true}}, true},
		{"a leader and a standby", 1, []replicaState{{Leader: true}, {}}, true},
		{"no leader yet", 1, []replicaState{{}}, false},
		{"twelve shared four each", 12, []replicaState{held(3, all(0, 4)...), held(3, all(4, 8)...), held(3, all(8, 12)...)}, true},
		{"the first up holds them all", 12, []replicaState{held(3, all(0, 12)...), held(3), held(3)}, false},
		{"a member not yet counted", 12, []replicaState{held(2, all(0, 4)...), held(3, all(4, 8)...), held(3, all(8, 12)...)}, false},
		{"a shard no one holds", 12, []replicaState{held(3, all(0, 4)...), held(3, all(4, 8)...), held(3, all(8, 11)...)}, false},
		{"a shard held twice", 12, []replicaState{held(3, all(0, 4)...), held(3, all(3, 7)...), held(3, all(7, 12)...)}, false},
		{"a shard not synced", 12, []replicaState{held(3, all(0, 4)...), held(3, all(4, 8)...), {Leader: true, Owned: all(8, 12), Synced: all(8, 11), Members: 3}}, false},
		{"uneven within the share", 10, []replicaState{held(3, all(0, 4)...), held(3, all(4, 7)...), held(3, all(7, 10)...)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := settledShards(tc.states, tc.shards)
			assert.Equal(t, tc.ok, ok, why)
			if !ok {
				assert.NotEmpty(t, why)
			}
		})
	}
}

func TestShardList(t *testing.T) {
	assert.Equal(t, "0-3,7,9-10", shardList([]int{0, 1, 2, 3, 7, 9, 10}, true))
	assert.Equal(t, "5", shardList([]int{5}, true))
	assert.Equal(t, "leader", shardList(nil, true))
	assert.Equal(t, "nothing", shardList(nil, false))
}

// Each namespace is the work of the replica holding its shard; with one
// shard, the leader's.
func TestNamespaceOwners(t *testing.T) {
	o := &Options{Namespace: "resize-bench", Namespaces: 100}
	namespaces := o.NamespaceNames()
	replicas := []*replica{{name: "a"}, {name: "b"}, {name: "c"}}
	layout, err := shard.NewLayout(12)
	require.NoError(t, err)
	states := []replicaState{{Owned: []int{0, 1, 2, 3}}, {Owned: []int{4, 5, 6, 7}}, {Owned: []int{8, 9, 10, 11}}}
	owners := namespaceOwners(layout, namespaces, replicas, states)
	require.Len(t, owners, 100)
	for _, ns := range namespaces {
		want := replicas[layout.Of(ns)/4].name
		assert.Equal(t, want, owners[ns], ns)
	}

	one, err := shard.NewLayout(1)
	require.NoError(t, err)
	owners = namespaceOwners(one, namespaces, replicas[:2], []replicaState{{}, {Leader: true}})
	for _, ns := range namespaces {
		assert.Equal(t, "b", owners[ns], "the leader works every namespace")
	}
}

func TestBurstByReplica(t *testing.T) {
	owner := map[string]string{"n1": "a", "n2": "a", "n3": "b"}
	got := burstByReplica([]acceptance{
		{namespace: "n1", after: 3 * time.Second},
		{namespace: "n2", after: 9 * time.Second},
		{namespace: "n3", after: 4 * time.Second},
		{namespace: "elsewhere", after: time.Minute},
	}, owner)
	assert.Equal(t, map[string]replicaBurst{"a": {Accepted: 2, Last: 9 * time.Second}, "b": {Accepted: 1, Last: 4 * time.Second}}, got)
}

func TestSameOwnership(t *testing.T) {
	a := []replicaState{{Leader: true, Owned: []int{0, 1}}, {Leader: true, Owned: []int{2}}}
	assert.True(t, sameOwnership(a, []replicaState{{Leader: true, Owned: []int{0, 1}, Members: 2}, {Leader: true, Owned: []int{2}}}))
	assert.False(t, sameOwnership(a, []replicaState{{Leader: true, Owned: []int{0}}, {Leader: true, Owned: []int{1, 2}}}))
	assert.False(t, sameOwnership(a, a[:1]))
}
