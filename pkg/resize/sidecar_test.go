package resize

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testjob"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

// withSidecar is a running pod: app container "app" (500m/500Mi), a
// completed init container "setup", and sidecar "proxy" requesting
// 100m/100Mi with a 200Mi memory limit.
func withSidecar() *testpod.Builder {
	return testpod.New("p").InitContainer("setup", "1", "1Gi").Container("app", "500m", "500Mi").
		Sidecar("proxy", "100m", "100Mi").Limits("proxy", "", "200Mi")
}

// forProxy asks for requests cpu/mem and memory limit lim (empty: none) of
// the sidecar.
func forProxy(cpu, mem, lim string) recommendation.Desired {
	return recommendation.Desired{"proxy": {Requests: testpod.List(cpu, mem), Limits: testpod.List("", lim),
		LowerBound: testpod.List(cpu, mem), UpperBound: testpod.List(cpu, mem)}}
}

// outcome is what Decide answers on one version.
type outcome struct {
	action     Action
	reason     Reason
	patch      string
	disruptive bool
	hint       string
}

// everyVersion is the same outcome on every supported version and on an
// unknown one.
func everyVersion(o outcome) map[int]outcome {
	return map[int]outcome{0: o, 33: o, 34: o, 35: o, 36: o, 37: o}
}

// TestDecideSidecars: the decision table of app containers, on a sidecar,
// version by version (ServerMinor 0: unknown, version rules left to the
// API server). Each row names the rule.
func TestDecideSidecars(t *testing.T) {
	raise := `{"spec":{"containers":[],"initContainers":[{"name":"proxy","resources":{"requests":{"cpu":"300m","memory":"100Mi"},"limits":{"memory":"200Mi"}}}]}}`
	lowerLimit := `{"spec":{"containers":[],"initContainers":[{"name":"proxy","resources":{"requests":{"cpu":"100m","memory":"50Mi"},"limits":{"memory":"100Mi"}}}]}}`
	tests := []struct {
		name      string
		pod       *corev1.Pod
		desired   recommendation.Desired
		noDisrupt bool
		record    *records.Record
		want      map[int]outcome
	}{
		{
			name:    "a sidecar's cpu increase is patched in spec.initContainers",
			pod:     withSidecar().Running().Obj(),
			desired: forProxy("300m", "100Mi", "200Mi"),
			want: func() map[int]outcome {
				m := everyVersion(outcome{action: ActionPatch, reason: ReasonResize, patch: raise})
				m[32] = outcome{action: ActionSkip, reason: ReasonInvalid, hint: "sidecar proxy: Kubernetes 1.32 cannot resize sidecars in place"}
				return m
			}(),
		},
		{
			name: "an app container and a sidecar change in one patch",
			pod:  withSidecar().Running().Obj(),
			desired: recommendation.Desired{"app": {Requests: testpod.List("1", "500Mi")},
				"proxy": forProxy("300m", "100Mi", "200Mi")["proxy"]},
			want: everyVersion(outcome{action: ActionPatch, reason: ReasonResize,
				patch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"1","memory":"500Mi"}}}],` +
					`"initContainers":[{"name":"proxy","resources":{"requests":{"cpu":"300m","memory":"100Mi"},"limits":{"memory":"200Mi"}}}]}}`}),
		},
		{
			name:    "a sidecar's memory limit lowered (NotRequired): forbidden on 1.33, sent from 1.34",
			pod:     withSidecar().Running().Obj(),
			desired: forProxy("100m", "50Mi", "100Mi"),
			want: func() map[int]outcome {
				m := everyVersion(outcome{action: ActionPatch, reason: ReasonResize, patch: lowerLimit})
				m[33] = outcome{action: ActionSkip, reason: ReasonInvalid,
					hint: "sidecar proxy: Kubernetes 1.33 forbids decreasing a memory limit in place unless its memory resizePolicy is RestartContainer"}
				return m
			}(),
		},
		{
			name:    "a sidecar's memory limit lowered with RestartContainer: sent on every version, restarts the sidecar",
			pod:     withSidecar().ResizePolicy("proxy", corev1.ResourceMemory, corev1.RestartContainer).Running().Obj(),
			desired: forProxy("100m", "50Mi", "100Mi"),
			want:    everyVersion(outcome{action: ActionPatch, reason: ReasonResize, patch: lowerLimit, disruptive: true}),
		},
		{
			name:      "a restarting sidecar resize waits for the disruption budget",
			pod:       withSidecar().ResizePolicy("proxy", corev1.ResourceCPU, corev1.RestartContainer).Running().Obj(),
			desired:   forProxy("300m", "100Mi", "200Mi"),
			noDisrupt: true,
			want:      everyVersion(outcome{action: ActionWait, reason: ReasonDisruptionBudget, disruptive: true}),
		},
		{
			name:    "a restarting policy of the app container does not make a sidecar resize disruptive",
			pod:     withSidecar().ResizePolicy("app", corev1.ResourceCPU, corev1.RestartContainer).Running().Obj(),
			desired: forProxy("300m", "100Mi", "200Mi"),
			want:    everyVersion(outcome{action: ActionPatch, reason: ReasonResize, patch: raise}),
		},
		{
			name: "a Guaranteed pod stays Guaranteed: a sidecar's requests apart from its limits are refused",
			pod: testpod.New("p").Guaranteed("app", "500m", "500Mi").Sidecar("proxy", "100m", "100Mi").
				Limits("proxy", "100m", "100Mi").Running().Obj(),
			desired: recommendation.Desired{"proxy": {Requests: testpod.List("50m", "50Mi")}},
			want: everyVersion(outcome{action: ActionSkip, reason: ReasonInvalid,
				hint: "the pod's QoS class would change from Guaranteed to Burstable"}),
		},
		{
			name: "a BestEffort app container beside a sidecar with requests: the pod is Burstable and stays so",
			pod:  testpod.New("p").Container("app", "", "").Sidecar("proxy", "100m", "").Running().Obj(),
			desired: recommendation.Desired{"proxy": {Requests: testpod.List("200m", ""),
				LowerBound: testpod.List("200m", ""), UpperBound: testpod.List("200m", "")}},
			want: everyVersion(outcome{action: ActionPatch, reason: ReasonResize,
				patch: `{"spec":{"containers":[],"initContainers":[{"name":"proxy","resources":{"requests":{"cpu":"200m"}}}]}}`}),
		},
		{
			name:    "a sidecar's request above its limit is refused before patching",
			pod:     withSidecar().Running().Obj(),
			desired: forProxy("100m", "300Mi", ""),
			want: everyVersion(outcome{action: ActionSkip, reason: ReasonInvalid,
				hint: "sidecar proxy: memory request 300Mi would exceed its limit 200Mi"}),
		},
		{
			name:    "a recommendation for an init container that is not a sidecar sets nothing",
			pod:     withSidecar().Running().Obj(),
			desired: recommendation.Desired{"setup": {Requests: testpod.List("2", "2Gi")}},
			want:    everyVersion(outcome{action: ActionSkip, reason: ReasonUpToDate}),
		},
		{
			name:    "a sidecar's change within the range and below the threshold is not worth a resize",
			pod:     withSidecar().Running().Obj(),
			desired: recommendation.Desired{"proxy": {Requests: testpod.List("105m", "100Mi"), LowerBound: testpod.List("50m", "50Mi"), UpperBound: testpod.List("200m", "200Mi")}},
			want:    everyVersion(outcome{action: ActionSkip, reason: ReasonBelowThreshold}),
		},
		{
			name:    "a sidecar below its recommended range is resized whatever the threshold",
			pod:     withSidecar().Running().Obj(),
			desired: recommendation.Desired{"proxy": {Requests: testpod.List("105m", "100Mi"), LowerBound: testpod.List("102m", "50Mi"), UpperBound: testpod.List("200m", "200Mi")}},
			want: everyVersion(outcome{action: ActionPatch, reason: ReasonResize,
				patch: `{"spec":{"containers":[],"initContainers":[{"name":"proxy","resources":{"requests":{"cpu":"105m","memory":"100Mi"},"limits":{"memory":"200Mi"}}}]}}`}),
		},
		{
			name:    "a sidecar recorded infeasible at these values is not sent again",
			pod:     withSidecar().Running().Obj(),
			desired: forProxy("300m", "100Mi", "200Mi"),
			record: &records.Record{Kind: records.KindNodeCapacity, Attempted: resources.Resources{
				"proxy": {Requests: testpod.List("300m", "100Mi"), Limits: testpod.List("", "200Mi")}}},
			want: everyVersion(outcome{action: ActionSkip, reason: ReasonRecordedSame}),
		},
	}
	for _, tc := range tests {
		for _, minor := range []int{0, 32, 33, 34, 35, 36, 37} {
			want, ok := tc.want[minor]
			if !ok {
				continue
			}
			t.Run(fmt.Sprintf("%s/1.%d", tc.name, minor), func(t *testing.T) {
				d := Decide(Input{Pod: tc.pod, Desired: tc.desired, Record: tc.record, Threshold: 0.1,
					ServerMinor: minor, DisruptionAllowed: !tc.noDisrupt})
				assert.Equal(t, want.action, d.Action, d.Message)
				assert.Equal(t, want.reason, d.Reason, d.Message)
				assert.Equal(t, want.disruptive, d.Disruptive, "Disruptive")
				if want.patch != "" {
					assert.JSONEq(t, want.patch, string(d.Patch))
				} else {
					assert.Empty(t, d.Patch)
				}
				if want.hint != "" {
					assert.Contains(t, d.Message, want.hint)
				}
				if d.Action == ActionSkip && d.Reason == ReasonInvalid {
					require.NotNil(t, d.NewRecord, "an invalid resize is recorded")
					assert.Contains(t, d.NewRecord.Attempted, "proxy", "records are keyed by the sidecar's name")
				}
			})
		}
	}
}

// The patch, applied as the API server merges it, sets the sidecar's entry
// of spec.initContainers and nothing else: not the init container before
// it, not an app container.
func TestSidecarPatchAppliesToItsInitContainer(t *testing.T) {
	pod := withSidecar().Sidecar("log", "10m", "").Running().Obj()
	target := resources.Resources{
		"proxy": {Requests: testpod.List("300m", "150Mi"), Limits: testpod.List("", "300Mi")},
		"log":   {Requests: testpod.List("10m", "")}, // unchanged
	}
	patch, err := BuildPatch(pod, target)
	require.NoError(t, err)
	original, err := json.Marshal(pod)
	require.NoError(t, err)
	merged, err := strategicpatch.StrategicMergePatch(original, patch, corev1.Pod{})
	require.NoError(t, err)
	var got corev1.Pod
	require.NoError(t, json.Unmarshal(merged, &got))

	want := pod.DeepCopy()
	want.Spec.InitContainers[1].Resources = corev1.ResourceRequirements{Requests: testpod.List("300m", "150Mi"), Limits: testpod.List("", "300Mi")}
	assert.True(t, equalSpecs(want, &got), "patched:\n%s", merged)
	assert.NotContains(t, string(patch), `"log"`, "a sidecar whose values do not change is not named")
}

func equalSpecs(a, b *corev1.Pod) bool {
	ja, _ := json.Marshal(a.Spec)
	jb, _ := json.Marshal(b.Spec)
	var ma, mb any
	_ = json.Unmarshal(ja, &ma)
	_ = json.Unmarshal(jb, &mb)
	return fmt.Sprint(ma) == fmt.Sprint(mb)
}

// Memory-limit decreases of a sidecar are held and recorded as an app
// container's are: with usage (from the metrics API, per container name),
// and after the kubelet's refusal, read from initContainerStatuses.
func TestDecideSidecarMemoryLimitDecreases(t *testing.T) {
	t.Run("usage too close keeps the sidecar's limit; the rest is sent", func(t *testing.T) {
		pod := withSidecar().Running().Obj()
		desired := forProxy("200m", "50Mi", "100Mi")
		require.True(t, NeedsMemoryUsage(pod, desired, 34), "lowering a sidecar's limit needs its usage")
		assert.False(t, NeedsMemoryUsage(pod, desired, 33), "1.33 forbids it outright")
		d := Decide(Input{Pod: pod, Desired: desired, Threshold: 0.1, ServerMinor: 34, DisruptionAllowed: true,
			MemoryUsage: map[string]resource.Quantity{"proxy": resource.MustParse("150Mi")}, MemoryLimitMargin: 0.2})
		assert.Equal(t, ActionPatch, d.Action, d.Message)
		assert.Equal(t, ReasonMemoryLimitKept, d.Reason)
		assert.JSONEq(t, `{"spec":{"containers":[],"initContainers":[{"name":"proxy","resources":{"requests":{"cpu":"200m","memory":"50Mi"},"limits":{"memory":"200Mi"}}}]}}`, string(d.Patch))
		require.Len(t, d.Held, 1)
		assert.Equal(t, "proxy", d.Held[0].Container)
		require.NotNil(t, d.NewMemoryRecord)
		assert.Equal(t, records.KindMemoryLimitUnsafe, d.NewMemoryRecord.Kind)
		assert.Contains(t, d.NewMemoryRecord.Attempted, "proxy")
	})

	t.Run("the kubelet refused to lower the sidecar's limit: recorded, sent once more with the running limit", func(t *testing.T) {
		pod := withSidecar().Generation(2).Running().Condition(corev1.PodResizeInProgress, corev1.PodReasonError,
			`cannot decrease memory limits: attempting to set container "proxy" memory limit (104857600) below current usage (157286400)`).Obj()
		// The spec holds the refused resize; the sidecar still runs with the old values.
		pod.Spec.InitContainers[1].Resources = corev1.ResourceRequirements{Requests: testpod.List("200m", "50Mi"), Limits: testpod.List("", "100Mi")}
		d := Decide(Input{Pod: pod, Desired: forProxy("200m", "50Mi", "100Mi"), Threshold: 0.1, ServerMinor: 35, DisruptionAllowed: true})
		assert.Equal(t, ActionPatch, d.Action, d.Message)
		assert.Equal(t, ReasonMemoryLimitRefused, d.Reason)
		require.NotNil(t, d.NewMemoryRecord)
		assert.Equal(t, records.KindMemoryLimitRefused, d.NewMemoryRecord.Kind)
		assert.True(t, resources.Equal(resources.Resources{"proxy": {Limits: testpod.List("", "100Mi")}}, d.NewMemoryRecord.Attempted),
			"recorded %s", d.NewMemoryRecord.Attempted)
		assert.JSONEq(t, `{"spec":{"containers":[],"initContainers":[{"name":"proxy","resources":{"requests":{"cpu":"200m","memory":"50Mi"},"limits":{"memory":"200Mi"}}}]}}`, string(d.Patch))
	})

	t.Run("a memory record of the sidecar keeps later targets from its refused limit", func(t *testing.T) {
		pod := withSidecar().Running().Obj()
		rec := &records.Record{Kind: records.KindMemoryLimitRefused, Attempted: resources.Resources{"proxy": {Limits: testpod.List("", "120Mi")}}}
		d := Decide(Input{Pod: pod, Desired: forProxy("200m", "50Mi", "110Mi"), Threshold: 0.1, ServerMinor: 37, DisruptionAllowed: true, MemoryRecord: rec})
		assert.Equal(t, ReasonMemoryLimitKept, d.Reason, d.Message)
		assert.Contains(t, d.Message, "sidecar")
	})
}

// The 1.33 completion check, without observedGeneration, compares a
// sidecar's spec with what initContainerStatuses report.
func TestReadStatusOfSidecarsWithoutObservedGeneration(t *testing.T) {
	settled := func() *corev1.Pod { return withSidecar().Running().ObservedGeneration(0).Obj() }
	assert.Equal(t, StateNone, ReadStatus(settled()).State)

	p := settled()
	p.Spec.InitContainers[1].Resources.Requests = testpod.List("300m", "100Mi")
	st := ReadStatus(p)
	assert.Equal(t, StateUnknown, st.State, "the sidecar's allocated request is behind its spec")
	assert.Contains(t, st.Message, "proxy")

	p = settled()
	p.Spec.InitContainers[1].Resources.Limits = testpod.List("", "300Mi")
	assert.Equal(t, StateUnknown, ReadStatus(p).State, "the sidecar's actuated limit is behind its spec")

	p = settled()
	p.Spec.InitContainers[0].Resources.Requests = testpod.List("2", "1Gi")
	assert.Equal(t, StateNone, ReadStatus(p).State, "a completed init container is not compared")
}

func TestPendingRestartOfASidecar(t *testing.T) {
	p := withSidecar().ResizePolicy("proxy", corev1.ResourceMemory, corev1.RestartContainer).Running().Obj()
	assert.False(t, PendingRestart(p))
	p.Generation = 2
	p.Spec.InitContainers[1].Resources.Requests = testpod.List("100m", "150Mi")
	assert.True(t, PendingRestart(p), "the sidecar runs with 100Mi and its spec asks 150Mi, memory restarts it")
}

// Fits-node counts the pod as the kubelet and the scheduler do: a sidecar
// adds to the app containers; an init container counts at its peak.
func TestFitsNodeCountsSidecars(t *testing.T) {
	pod := testpod.New("p").UID("p").InitContainer("setup", "700m", "").Container("app", "500m", "500Mi").Sidecar("proxy", "300m", "100Mi").Running().Obj()
	n := node("2", "4Gi")
	other := testpod.New("o").UID("o").Container("c", "1", "1Gi").Running().Obj()

	assert.Equal(t, "800m", ptrQ(ResizedRequests(pod, nil)[corev1.ResourceCPU]).String(), "app 500m + sidecar 300m, above the init container's 700m")
	fits, why := FitsNode(n, []*corev1.Pod{other, pod}, nil, pod, resources.Resources{"proxy": {Requests: testpod.List("600m", "100Mi")}})
	assert.False(t, fits, "1 + 500m + 600m > 2")
	assert.Contains(t, why, "the pod would request 1100m")
	fits, _ = FitsNode(n, []*corev1.Pod{other, pod}, nil, pod, resources.Resources{"proxy": {Requests: testpod.List("500m", "100Mi")}})
	assert.True(t, fits, "1 + 500m + 500m = 2")

	held := map[types.UID]corev1.ResourceList{"o": testpod.List("1200m", "")}
	fits, _ = FitsNode(n, []*corev1.Pod{other, pod}, held, pod, resources.Resources{"proxy": {Requests: testpod.List("400m", "100Mi")}})
	assert.False(t, fits, "another pod's resize sent counts at what it holds")
}

func ptrQ(q resource.Quantity) *resource.Quantity { return &q }

func TestBuildJobPatchSetsSidecars(t *testing.T) {
	job := testjob.New("j").Container("app", "100m", "100Mi").Suspended().Obj()
	job.ResourceVersion = "7"
	job.Spec.Template.Spec.InitContainers = []corev1.Container{
		{Name: "setup", Resources: corev1.ResourceRequirements{Requests: testpod.List("1", "")}},
		*withSidecar().Obj().Spec.InitContainers[1].DeepCopy(),
	}
	patch, err := BuildJobPatch(job, resources.Resources{
		"proxy": {Requests: testpod.List("50m", "100Mi"), Limits: testpod.List("", "200Mi")},
		"setup": {Requests: testpod.List("2", "")},
	})
	require.NoError(t, err)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"7"},"spec":{"template":{"spec":{"containers":[],
		"initContainers":[{"name":"proxy","resources":{"requests":{"cpu":"50m","memory":"100Mi"},"limits":{"memory":"200Mi"}}}]}}}}`, string(patch),
		"the sidecar is set in the template; an init container that is not a sidecar never is")
}
