package updater

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/window"
)

// annotated is inPlaceVPA(cpu, mem) with annotations.
func annotated(cpu, mem string, annotations map[string]string) *vpatypes.VerticalPodAutoscaler {
	v := inPlaceVPA(cpu, mem)
	v.Annotations = annotations
	return v
}

// setAnnotations replaces the VPA's annotations and waits for the cache.
func (f *fixture) setAnnotations(vpa string, annotations map[string]string) {
	f.t.Helper()
	v := f.getVPA(vpa)
	v.Annotations = annotations
	_, err := f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").Update(context.Background(), v, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.waitCached(vpa, func(v *vpatypes.VerticalPodAutoscaler) bool {
		for k, want := range annotations {
			if got, ok := v.Annotations[k]; !ok || got != want {
				return false
			}
		}
		return len(v.Annotations) == len(annotations)
	})
}

// t0 is Friday 2027-01-15 08:00 UTC: the window opens an hour later.
const nineToTen = "* 09:00-10:00 UTC"

// Outside its window a decrease waits, is decided again when the window
// opens (a timer on the injected clock, no polling) and goes then.
func TestADecreaseWaitsForItsResizeWindow(t *testing.T) {
	vpa := annotated("50m", "50Mi", map[string]string{window.WindowAnnotation: nineToTen})
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.resizePatches(), "no decrease outside the window")
	assert.Equal(t, "Held", f.podState("p"))
	after, queued := f.podQueue.of("default/p")
	require.True(t, queued, "decided again when the window opens")
	assert.Equal(t, time.Hour, after)
	events := f.events()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], report.EventResizeHeld)
	assert.Contains(t, events[0], "opens at 2027-01-15T09:00:00Z")

	f.clock.Step(time.Hour)
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1, "sent when the window opens")
}

func TestAnIncreaseGoesOutsideItsResizeWindow(t *testing.T) {
	vpa := annotated("200m", "200Mi", map[string]string{window.WindowAnnotation: nineToTen})
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1)
}

func TestScopeAllHoldsAnIncreaseToo(t *testing.T) {
	vpa := annotated("200m", "200Mi", map[string]string{window.WindowAnnotation: nineToTen, window.ScopeAnnotation: "all"})
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.resizePatches())
}

// A freeze stops everything, increases included, shows as a pause, and
// ends on its own at the time it names.
func TestAFreezeStopsEveryResizeUntilItEnds(t *testing.T) {
	until := t0.Add(30 * time.Minute).Format(time.RFC3339)
	vpa := annotated("200m", "200Mi", map[string]string{window.FreezeAnnotation: until})
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.resizePatches(), "frozen")
	assert.Equal(t, "Withheld", f.podState("p"))
	after, queued := f.podQueue.of("default/p")
	require.True(t, queued, "decided again when the freeze ends")
	assert.Equal(t, 30*time.Minute, after)
	after, queued = f.statusQueue.of("default/web")
	require.True(t, queued, "the condition is looked at again when the freeze ends")
	assert.Equal(t, 30*time.Minute, after)
	require.NoError(t, f.syncStatus("web"))
	cond := f.condition("web")
	require.NotNil(t, cond)
	assert.Equal(t, condition.ReasonPaused, cond.Reason)
	assert.Contains(t, cond.Message, "frozen until 2027-01-15T08:30:00Z by vpa-inplace.dev/freeze-until on the VPA")

	f.clock.Step(30 * time.Minute)
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1, "sent when the freeze ends")
}

// An annotation that cannot be read freezes the VPA, never lifts a
// restriction: a warning event on the VPA, once, and the condition says
// what to correct. Correcting it queues the pods again.
func TestAnInvalidWindowFreezesTheVPA(t *testing.T) {
	vpa := annotated("200m", "200Mi", map[string]string{window.WindowAnnotation: "Mon-Fri 1-5 Europe/Berlin"})
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.resizePatches(), "frozen, not unrestricted")
	events := f.vpaEvents()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], report.EventResizeWindowInvalid)
	assert.Contains(t, events[0], "frozen until corrected")
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.vpaEvents(), "said once")
	require.NoError(t, f.syncStatus("web"))
	assert.Contains(t, f.condition("web").Message, `time "1": want HH:MM`)

	f.setAnnotations("web", map[string]string{window.WindowAnnotation: "* 00:00-24:00 UTC"})
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1, "corrected: sent")
}

func TestAFreezeTooFarAheadIsInvalid(t *testing.T) {
	until := t0.Add(365 * 24 * time.Hour).Format(time.RFC3339)
	vpa := annotated("200m", "200Mi", map[string]string{window.FreezeAnnotation: until})
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.resizePatches())
	events := f.vpaEvents()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "the most a freeze may last")
}

// The namespace's window holds the VPAs of the namespace; correcting the
// namespace queues them again.
func TestTheNamespacesWindowHoldsItsVPAs(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Annotations: map[string]string{window.WindowAnnotation: nineToTen}}}
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("50m", "50Mi")},
		fixtureOpts{namespaces: []*corev1.Namespace{ns}})
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.resizePatches(), "no decrease outside the namespace's window")
	events := f.events()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "on namespace default")

	for f.ctrl.vpaQueue.Len() > 0 { // what the VPA's creation queued
		key, _ := f.ctrl.vpaQueue.Get()
		f.ctrl.vpaQueue.Done(key)
	}
	ns.Annotations = map[string]string{window.WindowAnnotation: "* 00:00-24:00 UTC"}
	_, err := f.kube.CoreV1().Namespaces().Update(context.Background(), ns, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return f.ctrl.vpaQueue.Len() == 1 }, waitFor, 10*time.Millisecond,
		"the namespace's VPAs are queued again")
	require.False(t, f.ctrl.windows.For(f.getVPA("web"), f.clock.Now()).Windows.Decreases.Held)
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1, "sent once the namespace's window is open")
}
