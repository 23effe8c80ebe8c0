package boost

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

// restarted is a pod whose container app (cpu request cpu) restarted
// restarts times, its running instance started at started; the pod Ready
// since ready (zero: not Ready).
func restarted(cpu string, restarts int32, started, ready time.Time) *testpod.Builder {
	b := testpod.New("p").Container("app", cpu, "100Mi").Container("side", "10m", "10Mi").Running()
	pod := b.Obj()
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodReady {
			pod.Status.Conditions[i].LastTransitionTime = metav1.NewTime(ready)
			if ready.IsZero() {
				pod.Status.Conditions[i].Status = corev1.ConditionFalse
			}
		}
	}
	st := &pod.Status.ContainerStatuses[0]
	st.RestartCount = restarts
	st.State.Running.StartedAt = metav1.NewTime(started)
	return b
}

// rec is the processed recommendation of app (and side).
func rec(cpu string) recommendation.Desired {
	return recommendation.Desired{
		"app":  {Requests: testpod.List(cpu, "100Mi")},
		"side": {Requests: testpod.List("10m", "10Mi")},
	}
}

func names(cs []RestartedContainer) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func TestRestarts(t *testing.T) {
	started := t0
	ready := t0.Add(5 * time.Second)
	vpa := podBoost(factor(3, 60)).Obj()
	tests := []struct {
		name    string
		vpa     *vpatypes.VerticalPodAutoscaler
		pod     *corev1.Pod
		desired recommendation.Desired
		max     int32
		now     time.Time
		// the containers in each list of the plan
		boost, lasting, end, backedOff []string
		// wantCPU is the CPU request app is resized to ("": not resized)
		wantCPU  string
		wantNext time.Duration
	}{
		{name: "a restart after the startup boost is boosted again",
			pod: restarted("200m", 1, started, ready).Obj(), desired: rec("200m"), now: ready.Add(time.Second),
			boost: []string{"app"}, wantCPU: "600m", wantNext: 59 * time.Second},
		{name: "while the pod is not Ready the window stays open",
			pod: restarted("200m", 1, started, time.Time{}).Obj(), desired: rec("200m"), now: started.Add(time.Hour),
			boost: []string{"app"}, wantCPU: "600m"},
		{name: "boosted: the boost lasts, nothing is sent",
			pod: restarted("600m", 1, started, ready).Obj(), desired: rec("200m"), now: ready.Add(30 * time.Second),
			lasting: []string{"app"}, wantNext: 30 * time.Second},
		{name: "a recommendation moved up a little leaves the boost as it is",
			pod: restarted("600m", 1, started, ready).Obj(), desired: rec("260m"), now: ready.Add(30 * time.Second),
			lasting: []string{"app"}, wantNext: 30 * time.Second},
		{name: "a recommendation moved down a little is not taken for a boost",
			pod: restarted("200m", 2, started, ready).Obj(), desired: rec("180m"), now: ready.Add(30 * time.Second),
			boost: []string{"app"}, wantCPU: "540m", wantNext: 30 * time.Second},
		{name: "at Ready + duration the boost ends: back to the recommendation",
			pod: restarted("600m", 1, started, ready).Obj(), desired: rec("200m"), now: ready.Add(60 * time.Second),
			end: []string{"app"}, wantCPU: "200m"},
		{name: "ended late, within the grace: still the end of a boost",
			pod: restarted("600m", 1, started, ready).Obj(), desired: rec("200m"), now: ready.Add(119 * time.Second),
			end: []string{"app"}, wantCPU: "200m"},
		{name: "past the grace the pod is resized as any other",
			pod: restarted("600m", 1, started, ready).Obj(), desired: rec("200m"), now: ready.Add(120 * time.Second)},
		{name: "over and not boosted: nothing",
			pod: restarted("200m", 1, started, ready).Obj(), desired: rec("200m"), now: ready.Add(61 * time.Second)},
		{name: "Ready before the restart's start counts from the start",
			pod: restarted("600m", 1, started, started.Add(-time.Hour)).Obj(), desired: rec("200m"), now: started.Add(59 * time.Second),
			lasting: []string{"app"}, wantNext: time.Second},
		{name: "at the bound: boosted",
			pod: restarted("200m", 3, started, ready).Obj(), desired: rec("200m"), now: ready,
			boost: []string{"app"}, wantCPU: "600m", wantNext: 60 * time.Second},
		{name: "past the bound: backed off, not boosted",
			pod: restarted("200m", 4, started, ready).Obj(), desired: rec("200m"), now: ready,
			backedOff: []string{"app"}, wantNext: 60 * time.Second},
		{name: "past the bound and still boosted: backed off and taken back at once",
			pod: restarted("600m", 4, started, ready).Obj(), desired: rec("200m"), now: ready,
			backedOff: []string{"app"}, end: []string{"app"}, wantCPU: "200m", wantNext: 60 * time.Second},
		{name: "past the bound, after the window: nothing to say",
			pod: restarted("200m", 9, started, ready).Obj(), desired: rec("200m"), now: ready.Add(time.Hour)},
		{name: "a bound of 0 turns boosts after a restart off",
			pod: restarted("200m", 1, started, ready).Obj(), desired: rec("200m"), max: -1, now: ready},
		{name: "never restarted",
			pod: restarted("200m", 0, started, ready).Obj(), desired: rec("200m"), now: ready},
		{name: "the startup boost is not over: it owns the container",
			pod: restarted("600m", 1, started, ready).Annotation(AnnotationKey("app"), `{}`).Obj(), desired: rec("200m"), now: ready},
		{name: "no CPU recommendation: nothing to take it back to",
			pod:     restarted("200m", 1, started, ready).Obj(),
			desired: recommendation.Desired{"app": {Requests: testpod.List("", "100Mi")}}, now: ready},
		{name: "waiting to restart: nothing to boost now",
			pod: func() *corev1.Pod {
				p := restarted("200m", 1, started, ready).Obj()
				p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
				return p
			}(), desired: rec("200m"), now: ready},
		{name: "a CPU resize that restarts the container is not boosted",
			pod:     restarted("200m", 1, started, ready).ResizePolicy("app", corev1.ResourceCPU, corev1.RestartContainer).Obj(),
			desired: rec("200m"), now: ready},
		{name: "without a boost policy for the container",
			vpa: containerBoost(podBoost(nil), "side", factor(3, 60)).Obj(),
			pod: restarted("200m", 1, started, ready).Obj(), desired: rec("200m"), now: ready},
		{name: "the container policy's duration",
			vpa: containerBoost(podBoost(factor(2, 10)), "app", factor(3, 120)).Obj(),
			pod: restarted("200m", 1, started, ready).Obj(), desired: rec("200m"), now: ready.Add(100 * time.Second),
			boost: []string{"app"}, wantCPU: "600m", wantNext: 20 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.vpa
			if v == nil {
				v = vpa
			}
			max := tt.max
			if max == 0 {
				max = 3
			} else if max < 0 {
				max = 0
			}
			plan := Restarts(RestartInput{Pod: tt.pod, VPA: v, Desired: tt.desired, MaxRestarts: max, Now: tt.now})
			assert.Equal(t, tt.boost, names(plan.Boost), "boost")
			assert.Equal(t, tt.lasting, names(plan.Lasting), "lasting")
			assert.Equal(t, tt.end, names(plan.End), "end")
			assert.Equal(t, tt.backedOff, names(plan.BackedOff), "backed off")
			assert.Equal(t, tt.wantNext, plan.Next, "next")
			if tt.wantCPU == "" {
				assert.False(t, plan.Resizes())
				assert.Empty(t, plan.Desired)
				return
			}
			require.True(t, plan.Resizes())
			require.Len(t, plan.Desired, 1, "only the container whose boost starts or ends: %v", plan.Desired)
			got := plan.Desired["app"].Requests[corev1.ResourceCPU]
			assert.Equal(t, tt.wantCPU, got.String())
		})
	}
}

func TestRestartsBoostsCPUOnlyAndKeepsLimitsInRatio(t *testing.T) {
	pod := restarted("200m", 1, t0, t0).Obj()
	pod.Spec.Containers[0].Resources.Limits = testpod.List("400m", "200Mi")
	desired := recommendation.Desired{"app": {Requests: testpod.List("300m", "150Mi"), Limits: testpod.List("600m", "300Mi")}}
	plan := Restarts(RestartInput{Pod: pod, VPA: podBoost(factor(2, 60)).Obj(), Desired: desired, MaxRestarts: 3, Now: t0})
	require.Equal(t, []string{"app"}, names(plan.Boost))
	app := plan.Desired["app"]
	assertList(t, testpod.List("600m", ""), app.Requests, "requests: the memory recommendation waits for the boost's end")
	assertList(t, testpod.List("1200m", ""), app.Limits, "limits")

	// The VPA does not control limits: the container keeps its own, and
	// the request stays under it.
	plan = Restarts(RestartInput{Pod: pod, VPA: podBoost(factor(4, 60)).RequestsOnly("app").Obj(),
		Desired: recommendation.Desired{"app": {Requests: testpod.List("300m", "150Mi")}}, MaxRestarts: 3, Now: t0})
	require.Equal(t, []string{"app"}, names(plan.Boost))
	assertList(t, testpod.List("399m", ""), plan.Desired["app"].Requests, "requests")
	assert.Empty(t, plan.Desired["app"].Limits)
}

func TestRestartsHoldsWhileABoostLasts(t *testing.T) {
	pod := restarted("600m", 1, t0, t0).Obj()
	plan := Restarts(RestartInput{Pod: pod, VPA: podBoost(factor(3, 60)).Obj(), Desired: rec("200m"), MaxRestarts: 3, Now: t0.Add(time.Second)})
	assert.True(t, plan.Holds())
	assert.False(t, plan.Resizes())
	assert.False(t, plan.Empty())
	assert.Empty(t, plan.Desired, "side keeps what it has while app's boost lasts")
}
