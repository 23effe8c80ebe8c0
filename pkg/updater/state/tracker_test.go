package state

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testheap"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

var t0 = time.Unix(1_800_000_000, 0)

// since returns when the object entered its current state.
func (t *Tracker[S]) since(uid types.UID) (time.Time, bool) {
	s, ok := t.Get(uid)
	return s.Since, ok
}

func TestTracker(t *testing.T) {
	tr := New[PodState]()
	web := func(name string, state PodState) Pod {
		return Pod{VPA: "default/web", Name: name, State: state}
	}

	t.Run("a new pod changes its VPA's summary and gets a since", func(t *testing.T) {
		assert.Equal(t, []string{"default/web"}, tr.Set("a", web("a", PodDeferred), t0))
		since, ok := tr.since("a")
		require.True(t, ok)
		assert.Equal(t, t0, since)
	})
	t.Run("the same state again changes nothing and keeps its since", func(t *testing.T) {
		assert.Empty(t, tr.Set("a", web("a", PodDeferred), t0.Add(time.Minute)))
		since, _ := tr.since("a")
		assert.Equal(t, t0, since)
	})
	t.Run("a new state changes the summary and starts a new since", func(t *testing.T) {
		assert.Equal(t, []string{"default/web"}, tr.Set("a", web("a", PodInProgress), t0.Add(2*time.Minute)))
		since, _ := tr.since("a")
		assert.Equal(t, t0.Add(2*time.Minute), since)
	})
	t.Run("a pod moving to another VPA changes both", func(t *testing.T) {
		moved := web("a", PodInProgress)
		moved.VPA = "default/db"
		assert.Equal(t, []string{"default/web", "default/db"}, tr.Set("a", moved, t0))
		assert.Empty(t, tr.Of("default/web"))
		assert.Len(t, tr.Of("default/db"), 1)
	})
	t.Run("pods are listed by name", func(t *testing.T) {
		tr.Set("c", web("c", PodResized), t0)
		tr.Set("b", web("b", PodDeferred), t0)
		pods := tr.Of("default/web")
		require.Len(t, pods, 2)
		assert.Equal(t, "b", pods[0].Name)
	})
	t.Run("pending counts and oldest age per state", func(t *testing.T) {
		tr.Set("d", web("d", PodDeferred), t0.Add(-time.Hour))
		counts, oldest := tr.Counts(t0.Add(time.Minute))
		assert.Equal(t, 2, counts[PodDeferred])
		assert.Equal(t, 61*time.Minute, oldest[PodDeferred])
		assert.Equal(t, 1, counts[PodResized])
	})
	t.Run("forget and forgetVPA", func(t *testing.T) {
		vpa, ok := tr.Forget("a")
		assert.True(t, ok)
		assert.Equal(t, "default/db", vpa)
		_, ok = tr.Forget("a")
		assert.False(t, ok)
		tr.ForgetVPA("default/web")
		assert.Empty(t, tr.Of("default/web"))
		counts, _ := tr.Counts(t0)
		assert.Empty(t, counts)
	})
}

func TestTrackerOnce(t *testing.T) {
	tr := New[PodState]()
	uid := types.UID("a")
	tr.Set(uid, Pod{VPA: "default/web", Name: "a", State: PodDeferred}, t0)
	assert.True(t, tr.Once(uid, "deferred", "episode 1"))
	assert.False(t, tr.Once(uid, "deferred", "episode 1"), "once per value")
	assert.True(t, tr.Once(uid, "deferred", "episode 2"), "a new value is reported")
	assert.True(t, tr.Once(uid, "waiting", "episode 2"), "topics are apart")

	tr.Set(uid, Pod{VPA: "default/web", Name: "a", State: PodDeferred, Message: "other words"}, t0)
	assert.False(t, tr.Once(uid, "deferred", "episode 2"), "the same state: still sent")

	tr.Set(uid, Pod{VPA: "default/web", Name: "a", State: PodWithheld, Values: "x"}, t0)
	assert.True(t, tr.Once(uid, "deferred", "episode 2"), "a new state forgets what was sent")
	assert.True(t, tr.Once(uid, "withheld", "x"))
	assert.False(t, tr.Once(uid, "withheld", "x"))
	assert.False(t, tr.Once("unknown", "withheld", "x"), "an untracked object is sent nothing")
}

// Jobs share the tracker: the same grouping, the same cache-lag rule.
func TestTrackerOfJobs(t *testing.T) {
	tr := New[JobState]()
	assert.Equal(t, []string{"default/batch"}, tr.Set("j", Job{VPA: "default/batch", Name: "j", State: JobTemplateUpToDate}, t0))
	tr.AwaitUpdate("j", "5", "6", t0)
	behind, overdue := tr.CacheLag("j", "5", t0)
	assert.True(t, behind)
	assert.False(t, overdue)
	counts, _ := tr.Counts(t0)
	assert.Equal(t, map[JobState]int{JobTemplateUpToDate: 1}, counts)
	assert.Equal(t, []string{"default/batch"}, tr.Retain(func(types.UID) bool { return false }, t0))
	assert.Empty(t, tr.Of("default/batch"))
}

func TestTrackerDeletedIsNotTrackedAgain(t *testing.T) {
	tr := New[PodState]()
	tr.Set("a", Pod{VPA: "default/web", Name: "a", State: PodResized}, t0)
	vpa, ok := tr.Deleted("a", t0)
	require.True(t, ok)
	assert.Equal(t, "default/web", vpa)
	assert.Empty(t, tr.Set("a", Pod{VPA: "default/web", Name: "a", State: PodResized}, t0), "a worker that decided while it was deleted")
	tr.MarkSent("a", "default/web", "a", nil, nil, t0)
	assert.Empty(t, tr.Of("default/web"))
	tr.Retain(func(types.UID) bool { return true }, t0.Add(GoneFor+time.Second))
	assert.NotEmpty(t, tr.Set("a", Pod{VPA: "default/web", Name: "a", State: PodResized}, t0), "forgotten as deleted after GoneFor")
}

func TestTrackerCacheLag(t *testing.T) {
	tr := New[PodState]()
	tr.AwaitUpdate("a", "7", "8", t0)
	behind, _ := tr.CacheLag("a", "7", t0)
	assert.False(t, behind, "an untracked pod")

	tr.MarkSent("a", "default/web", "a", nil, nil, t0)
	behind, _ = tr.CacheLag("a", "7", t0)
	assert.False(t, behind, "sent, but no update awaited (the patch changed nothing)")

	tr.AwaitUpdate("a", "7", "8", t0)
	behind, overdue := tr.CacheLag("a", "7", t0.Add(MaxCacheLag-time.Second))
	assert.True(t, behind, "the cache still holds the pod the resize was decided on")
	assert.False(t, overdue, "its update event is awaited for a while")
	behind, overdue = tr.CacheLag("a", "7", t0.Add(MaxCacheLag))
	assert.True(t, behind)
	assert.True(t, overdue, "never stuck: after a while the pod is read from the API server")

	tr.Settle("a", resize.StateNone, func(resources.Resources) resources.Resources { return nil })
	behind, _ = tr.CacheLag("a", "7", t0)
	assert.True(t, behind, "the resize settled (seen on a pod read from the API server), the cache is still behind")

	behind, _ = tr.CacheLag("a", "8", t0)
	assert.False(t, behind, "the cache has seen the patch")
	behind, _ = tr.CacheLag("a", "7", t0)
	assert.False(t, behind, "and the stale version is forgotten")
}

// Decided on the pod read from the API server (version 9) while the cache
// held version 7: every cached version before the patch's is stale, not
// only the one decided on.
func TestTrackerCacheLagComparesVersions(t *testing.T) {
	tr := New[PodState]()
	tr.MarkSent("a", "default/web", "a", nil, nil, t0)
	tr.AwaitUpdate("a", "7", "10", t0)
	for _, v := range []string{"7", "9", "6"} {
		behind, _ := tr.CacheLag("a", v, t0)
		assert.True(t, behind, "version %s predates the resize", v)
	}
	behind, _ := tr.CacheLag("a", "11", t0)
	assert.False(t, behind, "a later version than the patch's has seen it")
	behind, _ = tr.CacheLag("a", "7", t0)
	assert.False(t, behind, "forgotten")

	// Versions that are not integers (or an API server that did not say
	// which version the patch made) leave the version the cache held as
	// the only one known to be stale.
	for _, c := range []struct{ cached, sent, other string }{{"7", "", "6"}, {"7", "x10", "6"}, {"b", "c", "a"}} {
		tr.AwaitUpdate("a", c.cached, c.sent, t0)
		behind, _ = tr.CacheLag("a", c.cached, t0)
		assert.True(t, behind, "%+v: the cached version", c)
		behind, _ = tr.CacheLag("a", c.other, t0)
		assert.False(t, behind, "%+v: another version", c)
	}
}

// Pods sent equal targets share one: a burst keeps a target per pod until
// each resize is seen completed.
func TestTrackerSharesEqualTargets(t *testing.T) {
	tr := New[PodState]()
	target := func(cpu string) resources.Resources {
		return resources.Resources{"c": {Requests: testpod.List(cpu, "100Mi"), Limits: testpod.List("", "200Mi")}}
	}
	sentTarget := func(uid types.UID) resources.Resources {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		require.NotNil(t, tr.entries[uid].sent)
		return tr.entries[uid].sent.Target
	}
	tr.MarkSent("a", "default/web", "a", nil, target("300m"), t0)
	tr.MarkSent("b", "default/web", "b", nil, target("300m"), t0)
	tr.MarkSent("c", "default/web", "c", nil, target("400m"), t0)
	same := func(a, b resources.Resources) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	assert.True(t, same(sentTarget("a"), sentTarget("b")), "equal targets are one map")
	assert.False(t, same(sentTarget("a"), sentTarget("c")))
	assert.Equal(t, target("400m"), sentTarget("c"))
	assert.Len(t, tr.targets, 2)

	outcome, _ := tr.Settle("a", resize.StateNone, func(resources.Resources) resources.Resources { return target("300m") })
	assert.Equal(t, OutcomeCompleted, outcome)
	assert.Len(t, tr.targets, 2, "b still holds its target")
	outcome, _ = tr.Settle("b", resize.StateNone, func(resources.Resources) resources.Resources { return target("350m") })
	assert.Equal(t, OutcomeSuperseded, outcome, "each pod is settled against the target it was sent")
	assert.Len(t, tr.targets, 1, "a target no pod holds is dropped")

	tr.MarkSent("c", "default/web", "c", nil, target("500m"), t0)
	assert.Equal(t, target("500m"), sentTarget("c"))
	assert.Len(t, tr.targets, 1, "a pod sent another resize lets go of the former target")
	tr.MarkSent("d", "default/other", "d", nil, target("500m"), t0)
	tr.Forget("c")
	assert.Len(t, tr.targets, 1, "d still holds it")
	tr.ForgetVPA("default/other")
	assert.Empty(t, tr.targets, "forgotten pods hold nothing")
}

func TestTrackerSettle(t *testing.T) {
	target := resources.Resources{"c": {Requests: testpod.List("300m", "")}}
	current := func(r resources.Resources) func(resources.Resources) resources.Resources {
		return func(resources.Resources) resources.Resources { return r }
	}
	tests := []struct {
		name    string
		state   resize.State
		current resources.Resources
		want    string
	}{
		{"still in progress", resize.StateInProgress, target, ""},
		{"deferred", resize.StateDeferred, target, ""},
		{"applied", resize.StateNone, target, OutcomeCompleted},
		{"replaced by another change", resize.StateNone, resources.Resources{"c": {Requests: testpod.List("200m", "")}}, OutcomeSuperseded},
		{"marked infeasible by the kubelet", resize.StateInfeasible, target, OutcomeKubeletInfeasible},
		{"refused by the kubelet for lowering a memory limit", resize.StateMemoryLimitRefused, target, OutcomeKubeletMemoryLimitRefused},
		{"another kubelet error: still under way, the kubelet retries", resize.StateError, target, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New[PodState]()
			tr.MarkSent("a", "default/web", "a", nil, target, t0)
			got, _ := tr.Settle("a", tc.state, current(tc.current))
			assert.Equal(t, tc.want, got)
			if tc.want != "" {
				again, _ := tr.Settle("a", resize.StateNone, current(target))
				assert.Empty(t, again, "settled once")
			}
		})
	}
}

// BenchmarkResizesUnderWay reports, for a burst of 10,000 pods with a
// resize sent and not yet seen completed, the heap the tracker holds per pod
// (held-B/pod) and what marking them sent allocates per pod (alloc-B/pod),
// with equal targets shared (shared) and each pod holding its own (own).
// Each target is built as a decision builds it. per-workload: ten pods of a
// workload are sent equal targets; distinct: every pod another one.
func BenchmarkResizesUnderWay(b *testing.B) {
	const pods = 10000
	for _, c := range []struct {
		name          string
		podsPerTarget int
	}{{"per-workload", 10}, {"distinct", 1}} {
		for _, share := range []bool{true, false} {
			name := c.name + "/own"
			if share {
				name = c.name + "/shared"
			}
			b.Run(name, func(b *testing.B) {
				var held, allocated float64
				for b.Loop() {
					held = float64(testheap.Held(func() any {
						targets := make([]resources.Resources, pods)
						for i := range targets {
							cpu := fmt.Sprintf("%dm", 100+i/c.podsPerTarget)
							targets[i] = resources.Resources{"c": {Requests: testpod.List(cpu, "256Mi"), Limits: testpod.List("", "512Mi")}}
						}
						tr := New[PodState]()
						tr.shareTargets = share
						allocated = float64(testheap.Allocated(func() {
							for i := range pods {
								tr.MarkSent(types.UID(fmt.Sprintf("pod-%05d", i)), "bench/web", fmt.Sprintf("web-%05d", i), nil, targets[i], t0)
							}
						})) / pods
						return tr // the decisions are done with their targets
					})) / pods
				}
				b.ReportMetric(held, "held-B/pod")
				b.ReportMetric(allocated, "alloc-B/pod")
			})
		}
	}
}

func TestOnceWhileTrackedOutlivesStateChanges(t *testing.T) {
	tr := New[PodState]()
	now := time.Unix(0, 0)
	tr.Set("u", Pod{VPA: "ns/v", Name: "p", State: PodInProgress}, now)
	assert.True(t, tr.OnceWhileTracked("u", "topic", "a"))
	assert.True(t, tr.Once("u", "topic", "a"), "the two kinds do not mix")
	tr.Set("u", Pod{VPA: "ns/v", Name: "p", State: PodResized}, now)
	assert.False(t, tr.OnceWhileTracked("u", "topic", "a"), "kept across the change of state")
	assert.True(t, tr.Once("u", "topic", "a"), "Once is forgotten with the state")
	assert.True(t, tr.OnceWhileTracked("u", "topic", "b"), "a new value")
	tr.Forget("u")
	assert.False(t, tr.OnceWhileTracked("u", "topic", "b"), "not tracked")
}

func TestSentIsWhatOnceWhileTrackedSentLast(t *testing.T) {
	tr := New[PodState]()
	_, ok := tr.Sent("u", "topic")
	assert.False(t, ok, "not tracked")
	tr.Set("u", Pod{VPA: "ns/v", Name: "p", State: PodInProgress}, time.Unix(0, 0))
	_, ok = tr.Sent("u", "topic")
	assert.False(t, ok, "nothing sent")
	tr.OnceWhileTracked("u", "topic", "a")
	tr.Once("u", "topic", "b")
	v, ok := tr.Sent("u", "topic")
	assert.True(t, ok)
	assert.Equal(t, "a", v, "what OnceWhileTracked sent, not Once")
	tr.Set("u", Pod{VPA: "ns/v", Name: "p", State: PodResized}, time.Unix(0, 0))
	v, _ = tr.Sent("u", "topic")
	assert.Equal(t, "a", v, "kept across the change of state")
}
