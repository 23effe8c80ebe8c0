package updater

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testheap"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

func TestStateOf(t *testing.T) {
	since := t0.Add(-time.Hour)
	deferred := resize.Status{State: resize.StateDeferred, Message: "Node didn't have enough resource: cpu", Since: since}
	infeasibleRecord := &records.Record{Kind: records.KindNodeCapacity, Attempted: resources.Resources{"c": {Requests: testpod.List("8", "")}}, Message: "no room", RecordedAt: since}
	invalidRecord := &records.Record{Kind: records.KindInvalid, Attempted: resources.Resources{"c": {Requests: testpod.List("1", "")}}, Message: "qos", RecordedAt: since}
	memRecord := &records.Record{Kind: records.KindMemoryLimitRefused, Attempted: resources.Resources{"c": {Limits: testpod.List("", "100Mi")}},
		Message: "cannot decrease memory limits", RecordedAt: since}
	kept := podStatus{state: PodMemoryLimitKept, since: since, values: "c: limits memory=100Mi", message: "cannot decrease memory limits", kind: records.KindMemoryLimitRefused}
	tests := []struct {
		name      string
		reason    resize.Reason
		record    *records.Record
		memRecord *records.Record
		status    resize.Status
		want      podStatus
	}{
		{"not running", resize.ReasonPodNotRunning, nil, nil, resize.Status{}, podStatus{state: PodNotRunning}},
		{"no recommendation", resize.ReasonNoRecommendation, nil, nil, resize.Status{}, podStatus{state: PodNoRecommendation}},
		{"up to date", resize.ReasonUpToDate, nil, nil, resize.Status{}, podStatus{state: PodResized}},
		{"below threshold counts as resized", resize.ReasonBelowThreshold, nil, nil, resize.Status{}, podStatus{state: PodResized}},
		{"deferred: the kubelet's time and words", resize.ReasonResizeDeferred, nil, nil, deferred, podStatus{state: PodDeferred, since: since, message: deferred.Message}},
		{"in progress", resize.ReasonResizeInProgress, nil, nil, resize.Status{Since: since}, podStatus{state: PodInProgress, since: since}},
		{"unknown counts as in progress", resize.ReasonResizeUnknown, nil, nil, resize.Status{}, podStatus{state: PodInProgress}},
		{"kubelet error", resize.ReasonResizeError, nil, nil, resize.Status{Message: "boom"}, podStatus{state: PodError, message: "boom"}},
		{"eviction tolerance", resize.ReasonDisruptionBudget, nil, nil, resize.Status{}, podStatus{state: PodWaiting}},
		{"infeasible record", resize.ReasonRecordedSame, infeasibleRecord, nil, resize.Status{},
			podStatus{state: PodInfeasible, since: since, values: "c: requests cpu=8", message: "no room", kind: records.KindNodeCapacity}},
		{"kubelet infeasible", resize.ReasonInfeasible, infeasibleRecord, nil, resize.Status{}, podStatus{state: PodInfeasible, since: since, values: "c: requests cpu=8", message: "no room", kind: records.KindNodeCapacity}},
		{"invalid record", resize.ReasonInvalid, invalidRecord, nil, resize.Status{},
			podStatus{state: PodInvalid, since: since, values: "c: requests cpu=1", message: "qos", kind: records.KindInvalid}},
		{"memory limit unsafe, nothing else to resize: memory limit kept", resize.ReasonMemoryLimitUnsafe, nil, memRecord, resize.Status{}, kept},
		{"up to date but for a memory limit kept: memory limit kept", resize.ReasonUpToDate, nil, memRecord, resize.Status{}, kept},
		{"below threshold but for a memory limit kept: memory limit kept", resize.ReasonBelowThreshold, nil, memRecord, resize.Status{}, kept},
		{"a memory record does not hide a resize in progress", resize.ReasonResizeInProgress, nil, memRecord, resize.Status{Since: since}, podStatus{state: PodInProgress, since: since}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := stateOf(resize.Decision{Reason: tc.reason}, tc.record, tc.memRecord, tc.status)
			if tc.want.message == "" {
				got.message = "" // the decision's own wording is not under test
			}
			assert.True(t, tc.want.equal(got), "got %+v", got)
		})
	}
}

func TestTracker(t *testing.T) {
	tr := newTracker()
	web := func(name string, state PodState) podStatus {
		return podStatus{vpa: "default/web", name: name, state: state}
	}

	t.Run("a new pod changes its VPA's summary and gets a since", func(t *testing.T) {
		assert.Equal(t, []string{"default/web"}, tr.set("a", web("a", PodDeferred), t0))
		since, ok := tr.since("a")
		require.True(t, ok)
		assert.Equal(t, t0, since)
	})
	t.Run("the same state again changes nothing and keeps its since", func(t *testing.T) {
		assert.Empty(t, tr.set("a", web("a", PodDeferred), t0.Add(time.Minute)))
		since, _ := tr.since("a")
		assert.Equal(t, t0, since)
	})
	t.Run("a new state changes the summary and starts a new since", func(t *testing.T) {
		assert.Equal(t, []string{"default/web"}, tr.set("a", web("a", PodInProgress), t0.Add(2*time.Minute)))
		since, _ := tr.since("a")
		assert.Equal(t, t0.Add(2*time.Minute), since)
	})
	t.Run("a pod moving to another VPA changes both", func(t *testing.T) {
		moved := web("a", PodInProgress)
		moved.vpa = "default/db"
		assert.Equal(t, []string{"default/web", "default/db"}, tr.set("a", moved, t0))
		assert.Empty(t, tr.podsOf("default/web"))
		assert.Len(t, tr.podsOf("default/db"), 1)
	})
	t.Run("pods are listed by name", func(t *testing.T) {
		tr.set("c", web("c", PodResized), t0)
		tr.set("b", web("b", PodDeferred), t0)
		pods := tr.podsOf("default/web")
		require.Len(t, pods, 2)
		assert.Equal(t, "b", pods[0].name)
	})
	t.Run("pending counts and oldest age per state", func(t *testing.T) {
		tr.set("d", web("d", PodDeferred), t0.Add(-time.Hour))
		counts, oldest := tr.pending(t0.Add(time.Minute))
		assert.Equal(t, 2, counts[PodDeferred])
		assert.Equal(t, 61*time.Minute, oldest[PodDeferred])
		assert.Equal(t, 1, counts[PodResized])
	})
	t.Run("forget and forgetVPA", func(t *testing.T) {
		vpa, ok := tr.forget("a")
		assert.True(t, ok)
		assert.Equal(t, "default/db", vpa)
		_, ok = tr.forget("a")
		assert.False(t, ok)
		tr.forgetVPA("default/web")
		assert.Empty(t, tr.podsOf("default/web"))
		counts, _ := tr.pending(t0)
		assert.Empty(t, counts)
	})
}

func TestTrackerOnceMarks(t *testing.T) {
	tr := newTracker()
	uid := types.UID("a")
	tr.set(uid, podStatus{vpa: "default/web", name: "a", state: PodDeferred}, t0)
	assert.True(t, tr.warnOnce(uid, t0))
	assert.False(t, tr.warnOnce(uid, t0), "once per episode")
	assert.True(t, tr.warnOnce(uid, t0.Add(time.Hour)), "a new episode warns again")

	tr.set(uid, podStatus{vpa: "default/web", name: "a", state: PodWithheld, values: "x"}, t0)
	assert.True(t, tr.withheldOnce(uid, "x"))
	assert.False(t, tr.withheldOnce(uid, "x"))
	assert.True(t, tr.withheldOnce(uid, "y"), "a new target is reported")
	assert.False(t, tr.withheldOnce("unknown", "x"))
}

func TestTrackerCacheLag(t *testing.T) {
	tr := newTracker()
	tr.awaitUpdate("a", "7", "8", t0)
	behind, _ := tr.cacheLag("a", "7", t0)
	assert.False(t, behind, "an untracked pod")

	tr.markSent("a", "default/web", "a", nil, t0)
	behind, _ = tr.cacheLag("a", "7", t0)
	assert.False(t, behind, "sent, but no update awaited (the patch changed nothing)")

	tr.awaitUpdate("a", "7", "8", t0)
	behind, overdue := tr.cacheLag("a", "7", t0.Add(maxCacheLag-time.Second))
	assert.True(t, behind, "the cache still holds the pod the resize was decided on")
	assert.False(t, overdue, "its update event is awaited for a while")
	behind, overdue = tr.cacheLag("a", "7", t0.Add(maxCacheLag))
	assert.True(t, behind)
	assert.True(t, overdue, "never stuck: after a while the pod is read from the API server")

	tr.settle("a", resize.StateNone, func(resources.Resources) resources.Resources { return nil })
	behind, _ = tr.cacheLag("a", "7", t0)
	assert.True(t, behind, "the resize settled (seen on a pod read from the API server), the cache is still behind")

	behind, _ = tr.cacheLag("a", "8", t0)
	assert.False(t, behind, "the cache has seen the patch")
	behind, _ = tr.cacheLag("a", "7", t0)
	assert.False(t, behind, "and the stale version is forgotten")
}

// Decided on the pod read from the API server (version 9) while the cache
// held version 7: every cached version before the patch's is stale, not
// only the one decided on.
func TestTrackerCacheLagComparesVersions(t *testing.T) {
	tr := newTracker()
	tr.markSent("a", "default/web", "a", nil, t0)
	tr.awaitUpdate("a", "7", "10", t0)
	for _, v := range []string{"7", "9", "6"} {
		behind, _ := tr.cacheLag("a", v, t0)
		assert.True(t, behind, "version %s predates the resize", v)
	}
	behind, _ := tr.cacheLag("a", "11", t0)
	assert.False(t, behind, "a later version than the patch's has seen it")
	behind, _ = tr.cacheLag("a", "7", t0)
	assert.False(t, behind, "forgotten")

	// Versions that are not integers (or an API server that did not say
	// which version the patch made) leave the version the cache held as
	// the only one known to be stale.
	for _, c := range []struct{ cached, sent, other string }{{"7", "", "6"}, {"7", "x10", "6"}, {"b", "c", "a"}} {
		tr.awaitUpdate("a", c.cached, c.sent, t0)
		behind, _ = tr.cacheLag("a", c.cached, t0)
		assert.True(t, behind, "%+v: the cached version", c)
		behind, _ = tr.cacheLag("a", c.other, t0)
		assert.False(t, behind, "%+v: another version", c)
	}
}

// Pods sent equal targets share one: a burst keeps a target per pod until
// each resize is seen completed.
func TestTrackerSharesEqualTargets(t *testing.T) {
	tr := newTracker()
	target := func(cpu string) resources.Resources {
		return resources.Resources{"c": {Requests: testpod.List(cpu, "100Mi"), Limits: testpod.List("", "200Mi")}}
	}
	sentTarget := func(uid types.UID) resources.Resources {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		require.NotNil(t, tr.pods[uid].sent)
		return tr.pods[uid].sent.target
	}
	tr.markSent("a", "default/web", "a", target("300m"), t0)
	tr.markSent("b", "default/web", "b", target("300m"), t0)
	tr.markSent("c", "default/web", "c", target("400m"), t0)
	same := func(a, b resources.Resources) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	assert.True(t, same(sentTarget("a"), sentTarget("b")), "equal targets are one map")
	assert.False(t, same(sentTarget("a"), sentTarget("c")))
	assert.Equal(t, target("400m"), sentTarget("c"))
	assert.Len(t, tr.targets, 2)

	outcome, _ := tr.settle("a", resize.StateNone, func(resources.Resources) resources.Resources { return target("300m") })
	assert.Equal(t, outcomeCompleted, outcome)
	assert.Len(t, tr.targets, 2, "b still holds its target")
	outcome, _ = tr.settle("b", resize.StateNone, func(resources.Resources) resources.Resources { return target("350m") })
	assert.Equal(t, outcomeSuperseded, outcome, "each pod is settled against the target it was sent")
	assert.Len(t, tr.targets, 1, "a target no pod holds is dropped")

	tr.markSent("c", "default/web", "c", target("500m"), t0)
	assert.Equal(t, target("500m"), sentTarget("c"))
	assert.Len(t, tr.targets, 1, "a pod sent another resize lets go of the former target")
	tr.markSent("d", "default/other", "d", target("500m"), t0)
	tr.forget("c")
	assert.Len(t, tr.targets, 1, "d still holds it")
	tr.forgetVPA("default/other")
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
		{"applied", resize.StateNone, target, outcomeCompleted},
		{"replaced by another change", resize.StateNone, resources.Resources{"c": {Requests: testpod.List("200m", "")}}, outcomeSuperseded},
		{"marked infeasible by the kubelet", resize.StateInfeasible, target, outcomeKubeletInfeasible},
		{"refused by the kubelet for lowering a memory limit", resize.StateMemoryLimitRefused, target, outcomeKubeletMemoryLimitRefused},
		{"another kubelet error: still under way, the kubelet retries", resize.StateError, target, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			tr.markSent("a", "default/web", "a", target, t0)
			got, _ := tr.settle("a", tc.state, current(tc.current))
			assert.Equal(t, tc.want, got)
			if tc.want != "" {
				again, _ := tr.settle("a", resize.StateNone, current(target))
				assert.Empty(t, again, "settled once")
			}
		})
	}
}

// BenchmarkResizesUnderWay reports the heap the tracker holds per pod with a
// resize sent and not yet seen completed (B/pod), as after a burst: 10,000
// pods, each target built as a decision builds it. per-workload: ten pods
// of a workload are sent equal targets; distinct: every pod another one.
func BenchmarkResizesUnderWay(b *testing.B) {
	const pods = 10000
	for _, c := range []struct {
		name          string
		podsPerTarget int
	}{{"per-workload", 10}, {"distinct", 1}} {
		b.Run(c.name, func(b *testing.B) {
			var perPod float64
			for b.Loop() {
				perPod = float64(testheap.Held(func() any {
					tr := newTracker()
					for i := range pods {
						cpu := fmt.Sprintf("%dm", 100+i/c.podsPerTarget)
						target := resources.Resources{"c": {Requests: testpod.List(cpu, "256Mi"), Limits: testpod.List("", "512Mi")}}
						tr.markSent(types.UID(fmt.Sprintf("pod-%05d", i)), "bench/web", fmt.Sprintf("web-%05d", i), target, t0)
					}
					return tr
				})) / pods
			}
			b.ReportMetric(perPod, "B/pod")
		})
	}
}
