package resize

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

const refusalMessage = "cannot decrease memory limits: attempting to set pod memory limit (104857600) below current usage (157286400)"

// burstable is a running pod whose container c requests cpu/mem and has
// memory limit lim.
func burstable(cpu, mem, lim string) *testpod.Builder {
	return testpod.New("p").Container("c", cpu, mem).Limits("c", "", lim)
}

// desire asks for requests cpu/mem and memory limit lim (empty: no limit).
func desire(cpu, mem, lim string) recommendation.Desired {
	return recommendation.Desired{"c": {Requests: testpod.List(cpu, mem), Limits: testpod.List("", lim),
		LowerBound: testpod.List(cpu, mem), UpperBound: testpod.List(cpu, mem)}}
}

// desireGuaranteed asks for requests = limits = cpu/mem.
func desireGuaranteed(cpu, mem string) recommendation.Desired {
	return recommendation.Desired{"c": {Requests: testpod.List(cpu, mem), Limits: testpod.List(cpu, mem),
		LowerBound: testpod.List(cpu, mem), UpperBound: testpod.List(cpu, mem)}}
}

// refused is a pod whose spec was resized to requests cpu/mem, memory limit
// lim, which the kubelet refused: it still runs with 100m/100Mi and a 200Mi
// memory limit, and reports PodResizeInProgress reason Error.
func refused(cpu, mem, lim string) *corev1.Pod {
	p := burstable("100m", "100Mi", "200Mi").Generation(2).Running().
		Condition(corev1.PodResizeInProgress, corev1.PodReasonError, refusalMessage).Obj()
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: testpod.List(cpu, mem), Limits: testpod.List("", lim)}
	return p
}

func usage(mem string) map[string]resource.Quantity {
	return map[string]resource.Quantity{"c": resource.MustParse(mem)}
}

func memRecord(kind records.Kind, lim string) *records.Record {
	return &records.Record{Kind: kind, Attempted: resources.Resources{"c": {Limits: testpod.List("", lim)}}, Message: "earlier"}
}

func TestDecideMemoryLimitDecreases(t *testing.T) {
	tests := []struct {
		name      string
		pod       *corev1.Pod
		desired   recommendation.Desired
		usage     map[string]resource.Quantity
		margin    float64
		memRecord *records.Record
		minor     int

		action Action
		reason Reason
		patch  string
		// held names the containers whose memory limit is kept.
		held []string
		// newMemRecord is the memory record asked for (Kind, Attempted).
		newMemRecord *records.Record
		clearMem     bool
		newRecord    bool
		hints        []string
	}{
		{
			name:    "safe decrease passes: new limit above usage plus margin",
			pod:     burstable("100m", "100Mi", "200Mi").Running().Obj(),
			desired: desire("200m", "50Mi", "100Mi"),
			usage:   usage("50Mi"), margin: 0.2,
			action: ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"50Mi"},"limits":{"memory":"100Mi"}}}]}}`,
		},
		{
			name:    "unsafe decrease keeps the limit, the rest is applied",
			pod:     burstable("100m", "100Mi", "200Mi").Running().Obj(),
			desired: desire("200m", "50Mi", "100Mi"),
			usage:   usage("150Mi"), margin: 0.2,
			action: ActionPatch, reason: ReasonMemoryLimitKept, held: []string{"c"},
			patch:        `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"50Mi"},"limits":{"memory":"200Mi"}}}]}}`,
			newMemRecord: memRecord(records.KindMemoryLimitUnsafe, "100Mi"),
			hints:        []string{"container c: memory limit kept at 200Mi instead of 100Mi (usage 150Mi plus the 20% margin is 180Mi)"},
		},
		{
			name:    "the margin makes a decrease above usage unsafe",
			pod:     burstable("100m", "100Mi", "200Mi").Running().Obj(),
			desired: desire("200m", "50Mi", "100Mi"),
			usage:   usage("90Mi"), margin: 0.2, // 108Mi
			action: ActionPatch, reason: ReasonMemoryLimitKept, held: []string{"c"},
			patch:        `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"50Mi"},"limits":{"memory":"200Mi"}}}]}}`,
			newMemRecord: memRecord(records.KindMemoryLimitUnsafe, "100Mi"),
		},
		{
			name:    "a limit equal to usage is unsafe even without margin (the kubelet refuses it too)",
			pod:     burstable("100m", "100Mi", "200Mi").Running().Obj(),
			desired: desire("200m", "50Mi", "100Mi"),
			usage:   usage("100Mi"),
			action:  ActionPatch, reason: ReasonMemoryLimitKept, held: []string{"c"},
			patch:        `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"50Mi"},"limits":{"memory":"200Mi"}}}]}}`,
			newMemRecord: memRecord(records.KindMemoryLimitUnsafe, "100Mi"),
		},
		{
			name:    "unsafe decrease and nothing else: skip with the reason, no patch",
			pod:     testpod.New("p").Guaranteed("c", "100m", "200Mi").Running().Obj(),
			desired: desireGuaranteed("100m", "100Mi"),
			usage:   usage("150Mi"), margin: 0.2,
			action: ActionSkip, reason: ReasonMemoryLimitUnsafe, held: []string{"c"},
			newMemRecord: memRecord(records.KindMemoryLimitUnsafe, "100Mi"),
			hints:        []string{"nothing to resize but memory limits that cannot be lowered safely", "kept at 200Mi instead of 100Mi"},
		},
		{
			name:    "guaranteed pod: memory request kept with the limit, so the QoS class stays; CPU applied",
			pod:     testpod.New("p").Guaranteed("c", "100m", "200Mi").Running().Obj(),
			desired: desireGuaranteed("300m", "100Mi"),
			usage:   usage("150Mi"), margin: 0.2,
			action: ActionPatch, reason: ReasonMemoryLimitKept, held: []string{"c"},
			patch:        `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"300m","memory":"200Mi"},"limits":{"cpu":"300m","memory":"200Mi"}}}]}}`,
			newMemRecord: memRecord(records.KindMemoryLimitUnsafe, "100Mi"),
		},
		{
			name:    "no usage: normal resize, the kubelet's check is the last line",
			pod:     burstable("100m", "100Mi", "200Mi").Running().Obj(),
			desired: desire("200m", "50Mi", "100Mi"),
			margin:  0.2,
			action:  ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"50Mi"},"limits":{"memory":"100Mi"}}}]}}`,
		},
		{
			name:    "usage of other containers only: normal resize",
			pod:     burstable("100m", "100Mi", "200Mi").Running().Obj(),
			desired: desire("200m", "50Mi", "100Mi"),
			usage:   map[string]resource.Quantity{"sidecar": resource.MustParse("1Gi")}, margin: 0.2,
			action: ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"50Mi"},"limits":{"memory":"100Mi"}}}]}}`,
		},
		{
			name:    "limit raised: usage does not matter",
			pod:     burstable("100m", "100Mi", "200Mi").Running().Obj(),
			desired: desire("200m", "200Mi", "400Mi"),
			usage:   usage("1Gi"), margin: 0.2,
			action: ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"200Mi"},"limits":{"memory":"400Mi"}}}]}}`,
		},
		{
			name:    "memory resizePolicy RestartContainer: the container restarts with the new limit, not held",
			pod:     burstable("100m", "100Mi", "200Mi").ResizePolicy("c", corev1.ResourceMemory, corev1.RestartContainer).Running().Obj(),
			desired: desire("200m", "50Mi", "100Mi"),
			usage:   usage("150Mi"), margin: 0.2,
			action: ActionPatch, reason: ReasonResize,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"50Mi"},"limits":{"memory":"100Mi"}}}]}}`,
		},
		{
			name:    "adding a memory limit below usage: none added, the rest applied",
			pod:     testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "1", "").Running().Obj(),
			desired: recommendation.Desired{"c": {Requests: testpod.List("200m", "50Mi"), Limits: testpod.List("2", "100Mi"), LowerBound: testpod.List("200m", "50Mi"), UpperBound: testpod.List("200m", "50Mi")}},
			usage:   usage("150Mi"), margin: 0.2,
			action: ActionPatch, reason: ReasonMemoryLimitKept, held: []string{"c"},
			patch:        `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"50Mi"},"limits":{"cpu":"2"}}}]}}`,
			newMemRecord: memRecord(records.KindMemoryLimitUnsafe, "100Mi"),
			hints:        []string{"no memory limit kept instead of 100Mi"},
		},

		// The kubelet's check (1.34+), without usage.
		{
			name:    "kubelet refused to lower the limit: recorded, sent once more with the limit kept",
			pod:     refused("200m", "50Mi", "100Mi"),
			desired: desire("200m", "50Mi", "100Mi"),
			action:  ActionPatch, reason: ReasonMemoryLimitRefused, held: []string{"c"},
			patch:        `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"50Mi"},"limits":{"memory":"200Mi"}}}]}}`,
			newMemRecord: memRecord(records.KindMemoryLimitRefused, "100Mi"),
			hints:        []string{refusalMessage, "lowering it to 100Mi or less was refused before"},
		},
		{
			name:      "kubelet refusal already answered, the resize sent again not yet seen by the kubelet: wait, never sent twice",
			pod:       refused("200m", "50Mi", "200Mi"),
			desired:   desire("200m", "50Mi", "100Mi"),
			memRecord: memRecord(records.KindMemoryLimitRefused, "100Mi"),
			action:    ActionWait, reason: ReasonResizeError, held: []string{"c"},
		},
		{
			name: "kubelet refusal of an older generation, the resize sent again not yet taken up: wait, never sent twice",
			pod: func() *corev1.Pod {
				p := refused("200m", "50Mi", "200Mi")
				p.Generation = 3
				p.Status.Conditions[len(p.Status.Conditions)-1].ObservedGeneration = 2
				return p
			}(),
			desired:   desire("200m", "50Mi", "100Mi"),
			memRecord: memRecord(records.KindMemoryLimitRefused, "100Mi"),
			action:    ActionWait, reason: ReasonResizeError, held: []string{"c"},
		},
		{
			name:      "kubelet refusal seen again after a restart (recorded, not yet answered): sent once more, not recorded twice",
			pod:       refused("200m", "50Mi", "100Mi"),
			desired:   desire("200m", "50Mi", "100Mi"),
			memRecord: memRecord(records.KindMemoryLimitRefused, "100Mi"),
			action:    ActionPatch, reason: ReasonMemoryLimitRefused, held: []string{"c"},
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"50Mi"},"limits":{"memory":"200Mi"}}}]}}`,
		},
		{
			name:    "kubelet refusal of a new recommendation: the resize sent again follows it",
			pod:     refused("200m", "50Mi", "100Mi"),
			desired: desire("300m", "50Mi", "100Mi"),
			action:  ActionPatch, reason: ReasonMemoryLimitRefused, held: []string{"c"},
			patch:        `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"300m","memory":"50Mi"},"limits":{"memory":"200Mi"}}}]}}`,
			newMemRecord: memRecord(records.KindMemoryLimitRefused, "100Mi"),
		},
		{
			name:      "memory record: the refused decrease is never sent again, nothing else to do",
			pod:       testpod.New("p").Guaranteed("c", "200m", "200Mi").Running().Obj(),
			desired:   desireGuaranteed("200m", "100Mi"),
			memRecord: memRecord(records.KindMemoryLimitRefused, "100Mi"),
			action:    ActionSkip, reason: ReasonMemoryLimitUnsafe, held: []string{"c"},
			hints: []string{"lowering it to 100Mi or less was refused before"},
		},
		{
			name:      "memory record: a lower recommendation is not sent either",
			pod:       testpod.New("p").Guaranteed("c", "200m", "200Mi").Running().Obj(),
			desired:   desireGuaranteed("200m", "80Mi"),
			memRecord: memRecord(records.KindMemoryLimitRefused, "100Mi"),
			action:    ActionSkip, reason: ReasonMemoryLimitUnsafe, held: []string{"c"},
		},
		{
			name:      "memory record: a CPU change is applied, the limit kept",
			pod:       testpod.New("p").Guaranteed("c", "200m", "200Mi").Running().Obj(),
			desired:   desireGuaranteed("300m", "100Mi"),
			memRecord: memRecord(records.KindMemoryLimitRefused, "100Mi"),
			action:    ActionPatch, reason: ReasonMemoryLimitKept, held: []string{"c"},
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"300m","memory":"200Mi"},"limits":{"cpu":"300m","memory":"200Mi"}}}]}}`,
		},
		{
			name:      "memory record: a recommendation that no longer lowers the limit as much is tried, the record forgotten",
			pod:       testpod.New("p").Guaranteed("c", "200m", "200Mi").Running().Obj(),
			desired:   desireGuaranteed("200m", "150Mi"),
			memRecord: memRecord(records.KindMemoryLimitRefused, "100Mi"),
			action:    ActionPatch, reason: ReasonResize, clearMem: true,
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"150Mi"},"limits":{"cpu":"200m","memory":"150Mi"}}}]}}`,
		},
		{
			name:      "memory record and a pod with what it should have: up to date, record kept",
			pod:       burstable("200m", "50Mi", "200Mi").Running().Obj(),
			desired:   desire("200m", "50Mi", "200Mi"),
			memRecord: memRecord(records.KindMemoryLimitRefused, "100Mi"),
			action:    ActionSkip, reason: ReasonUpToDate,
		},
		{
			name:    "kubelet Error for another reason: waited for, as before",
			pod:     burstable("100m", "100Mi", "200Mi").Running().Condition(corev1.PodResizeInProgress, corev1.PodReasonError, "unable to get pod cgroup memory config").Obj(),
			desired: desire("200m", "50Mi", "100Mi"),
			action:  ActionWait, reason: ReasonResizeError,
		},

		// Kubernetes 1.33: unchanged.
		{
			name:    "1.33: a memory-limit decrease is invalid before patching, whatever the usage",
			pod:     burstable("100m", "100Mi", "200Mi").Running().Obj(),
			desired: desire("200m", "50Mi", "100Mi"),
			usage:   usage("150Mi"), margin: 0.2, minor: 33,
			action: ActionSkip, reason: ReasonInvalid, newRecord: true,
			hints: []string{"1.33 forbids decreasing a memory limit"},
		},
		{
			name:    "1.33: an Error about memory limits is waited for, as before",
			pod:     refused("200m", "50Mi", "100Mi"),
			desired: desire("200m", "50Mi", "100Mi"),
			minor:   33,
			action:  ActionWait, reason: ReasonResizeError,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			minor := tc.minor
			if minor == 0 {
				minor = 37
			}
			d := Decide(Input{
				Pod: tc.pod, Desired: tc.desired, Threshold: 0.1, ServerMinor: minor, DisruptionAllowed: true,
				MemoryUsage: tc.usage, MemoryLimitMargin: tc.margin, MemoryRecord: tc.memRecord,
			})
			assert.Equal(t, tc.action, d.Action, d.Message)
			assert.Equal(t, tc.reason, d.Reason, d.Message)
			if tc.patch != "" {
				assert.JSONEq(t, tc.patch, string(d.Patch))
			} else {
				assert.Empty(t, d.Patch)
			}
			var held []string
			for _, h := range d.Held {
				held = append(held, h.Container)
			}
			assert.Equal(t, tc.held, held, "held")
			if tc.newMemRecord == nil {
				assert.Nil(t, d.NewMemoryRecord, "no new memory record")
			} else if assert.NotNil(t, d.NewMemoryRecord, "new memory record") {
				assert.Equal(t, tc.newMemRecord.Kind, d.NewMemoryRecord.Kind)
				assert.True(t, resources.Equal(tc.newMemRecord.Attempted, d.NewMemoryRecord.Attempted), "recorded %s", d.NewMemoryRecord.Attempted)
				assert.NotEmpty(t, d.NewMemoryRecord.Message)
			}
			assert.Equal(t, tc.clearMem, d.ClearMemoryRecord, "ClearMemoryRecord")
			assert.Equal(t, tc.newRecord, d.NewRecord != nil, "NewRecord")
			for _, h := range tc.hints {
				assert.Contains(t, d.Message, h)
			}
		})
	}
}

func TestKubeletRefusalIsReadFromTheCondition(t *testing.T) {
	st := ReadStatus(refused("200m", "50Mi", "100Mi"))
	assert.Equal(t, StateMemoryLimitRefused, st.State)
	assert.Equal(t, refusalMessage, st.Message)
	for _, msg := range []string{
		`cannot decrease memory limits: attempting to set container "c" memory limit (104857600) below current usage (157286400)`,
		"cannot decrease memory limits: missing pod memory usage",
	} {
		assert.True(t, IsMemoryLimitRefusal(msg), msg)
	}
	other := burstable("100m", "100Mi", "200Mi").Running().Condition(corev1.PodResizeInProgress, corev1.PodReasonError, "unable to get pod cgroup memory config").Obj()
	assert.Equal(t, StateError, ReadStatus(other).State)

	current := refused("200m", "50Mi", "100Mi")
	current.Status.Conditions[len(current.Status.Conditions)-1].ObservedGeneration = 2
	assert.Equal(t, StateMemoryLimitRefused, ReadStatus(current).State, "a refusal of the spec there is")
	stale := current.DeepCopy()
	stale.Generation = 3
	assert.Equal(t, StateError, ReadStatus(stale).State, "a refusal of an older spec: a resize sent since is not refused (yet)")
}

func TestNeedsMemoryUsage(t *testing.T) {
	tests := []struct {
		name    string
		pod     *corev1.Pod
		desired recommendation.Desired
		minor   int
		want    bool
	}{
		{"a memory limit is lowered", burstable("100m", "100Mi", "200Mi").Running().Obj(), desire("100m", "50Mi", "100Mi"), 37, true},
		{"a memory limit is added", testpod.New("p").Container("c", "100m", "100Mi").Running().Obj(), desire("100m", "50Mi", "100Mi"), 37, true},
		{"memory limit raised", burstable("100m", "100Mi", "200Mi").Running().Obj(), desire("100m", "150Mi", "300Mi"), 37, false},
		{"no memory limit wanted", testpod.New("p").Container("c", "100m", "100Mi").Running().Obj(), desire("100m", "50Mi", ""), 37, false},
		{"1.33 forbids lowering them anyway", burstable("100m", "100Mi", "200Mi").Running().Obj(), desire("100m", "50Mi", "100Mi"), 33, false},
		{"resize in progress", burstable("100m", "100Mi", "200Mi").Running().Condition(corev1.PodResizeInProgress, "", "").Obj(), desire("100m", "50Mi", "100Mi"), 37, false},
		{"kubelet refusal: answered without usage", refused("100m", "50Mi", "100Mi"), desire("100m", "50Mi", "100Mi"), 37, false},
		{"RestartContainer", burstable("100m", "100Mi", "200Mi").ResizePolicy("c", corev1.ResourceMemory, corev1.RestartContainer).Running().Obj(), desire("100m", "50Mi", "100Mi"), 37, false},
		{"pod not running", burstable("100m", "100Mi", "200Mi").Obj(), desire("100m", "50Mi", "100Mi"), 37, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, NeedsMemoryUsage(tc.pod, tc.desired, tc.minor))
		})
	}
}

func TestMergeMemoryRecordKeepsTheHighestUnsafeLimit(t *testing.T) {
	old := &records.Record{Kind: records.KindMemoryLimitRefused, Attempted: resources.Resources{
		"a": {Limits: testpod.List("", "300Mi")}, "b": {Limits: testpod.List("", "100Mi")},
	}}
	merged := mergeMemoryRecord(old, resources.Resources{
		"a": {Limits: testpod.List("", "200Mi")}, "b": {Limits: testpod.List("", "150Mi")}, "c": {Limits: testpod.List("", "50Mi")},
	}, records.KindMemoryLimitUnsafe, "why")
	require.Equal(t, records.KindMemoryLimitUnsafe, merged.Kind)
	assert.Equal(t, "a: limits memory=300Mi; b: limits memory=150Mi; c: limits memory=50Mi", merged.Attempted.String())
	assert.Equal(t, "a: limits memory=300Mi; b: limits memory=100Mi", old.Attempted.String(), "the old record is not changed")
}

// targetMemoryLimit is what Target gives each container as its memory
// limit, container by container (NeedsMemoryUsage runs on every decision
// and reads it without building the whole Target).
func TestTargetMemoryLimitIsTargets(t *testing.T) {
	pods := map[string]*corev1.Pod{
		"limit in spec": burstable("100m", "100Mi", "200Mi").Running().Obj(),
		"no limit":      testpod.New("p").Container("c", "100m", "100Mi").Running().Obj(),
		"two containers, one limited": testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "", "300Mi").
			Container("d", "100m", "100Mi").Running().Obj(),
	}
	desires := map[string]recommendation.Desired{
		"memory limit recommended": desire("100m", "100Mi", "150Mi"),
		"requests only":            {"c": {Requests: testpod.List("200m", "50Mi")}},
		"the other container only": {"d": {Requests: testpod.List("200m", "50Mi"), Limits: testpod.List("", "80Mi")}},
		"both containers":          {"c": {Requests: testpod.List("200m", "50Mi")}, "d": {Limits: testpod.List("", "80Mi")}},
		"none":                     {},
	}
	for pn, pod := range pods {
		for dn, desired := range desires {
			target := Target(pod, desired)
			for ref := range recommendation.Containers(pod) {
				want, wantOK := target[ref.Container.Name].Limits[corev1.ResourceMemory]
				got, ok := targetMemoryLimit(ref, desired)
				assert.Equal(t, wantOK, ok, "%s, %s, container %s", pn, dn, ref.Container.Name)
				if ok {
					assert.Zero(t, want.Cmp(got), "%s, %s, container %s: %s, Target %s", pn, dn, ref.Container.Name, &got, &want)
				}
			}
		}
	}
}
