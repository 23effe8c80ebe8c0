//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/annotations"
)

const (
	eventBoostEnded  = "InPlaceStartupBoostEnded"
	eventBoostCapped = "InPlaceStartupBoostCapped"
	// boostKey is the boost annotation of container "app" (upstream's key).
	boostKey = annotations.StartupCPUBoostAnnotationPrefix + "app"
	// boostSeconds is the e2e boost's durationSeconds.
	boostSeconds = 20
)

// boostVPA creates an InPlace VPA on Deployment target with a Factor 2
// startup boost of boostSeconds, recommending 150m / 100Mi.
func boostVPA(t *testing.T, ns, target string) {
	t.Helper()
	boostVPAFor(t, ns, target, boostSeconds)
}

// boostVPAFor is boostVPA with a durationSeconds of seconds.
func boostVPAFor(t *testing.T, ns, target string, seconds int32) {
	t.Helper()
	mode := vpatypes.UpdateModeInPlace
	_, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Create(ctxFor(t), &vpatypes.VerticalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: target},
		Spec: vpatypes.VerticalPodAutoscalerSpec{
			TargetRef:    &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: target},
			UpdatePolicy: &vpatypes.PodUpdatePolicy{UpdateMode: &mode},
			StartupBoost: &vpatypes.StartupBoost{CPU: &vpatypes.GenericStartupBoost{
				Type: vpatypes.FactorStartupBoostType, Factor: ptr.To[int32](2), DurationSeconds: ptr.To(seconds)}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	recommend(t, ns, target, "150m", "100Mi")
}

// readySince is the lastTransitionTime of the pod's Ready condition.
func readySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

func cpuRequest(p *corev1.Pod) string {
	q := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
	return q.String()
}

// Issue #22: a new pod of an InPlace VPA with a startup boost starts with
// twice the recommended CPU and is resized in place to the recommendation
// when it has been Ready for durationSeconds, without a restart; a pod that
// never becomes Ready keeps its boost.
func TestStartupBoostEndsInPlace(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	boostVPA(t, ns, "jvm")
	boostVPA(t, ns, "never-ready")

	// A readiness gate no one sets keeps the second pod from ever being
	// Ready.
	never := workload{name: "never-ready", replicas: 1, node: nodeFor(t), requests: rl("100m", "100Mi")}.deployment(ns)
	never.Spec.Template.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "vpa-inplace.dev/e2e-never"}}
	_, err := kube.AppsV1().Deployments(ns).Create(ctxFor(t), never, metav1.CreateOptions{})
	require.NoError(t, err)

	pods := deploy(t, ns, workload{name: "jvm", requests: rl("100m", "100Mi")})
	before := snap(pods)
	pod := pods[0]
	assert.Equal(t, "300m", cpuRequest(&pod), "created with twice the recommended 150m")
	original, err := annotations.GetOriginalResourcesAnnotationValue(&corev1.Container{Resources: corev1.ResourceRequirements{Requests: rl("100m", "100Mi")}})
	require.NoError(t, err)
	assert.JSONEq(t, original, pod.Annotations[boostKey], "upstream's annotation, with the resources as created")
	since := readySince(&pod)
	require.False(t, since.IsZero(), "Ready")

	// Polled every 250 ms; the condition's time has whole seconds, which the
	// updater reads as well.
	var endedAt time.Time
	waitFor(t, eventually, "the boost's end", func(context.Context) (bool, error) {
		p := getPod(t, ns, pod.Name)
		if cpuRequest(p) == "300m" {
			return false, nil
		}
		endedAt = time.Now()
		return true, nil
	})
	late := endedAt.Sub(since) - boostSeconds*time.Second
	t.Logf("boost ended %v after Ready + %ds", late.Round(10*time.Millisecond), boostSeconds)
	assert.True(t, late > -time.Second && late <= 2*time.Second, "ended %v after Ready + durationSeconds, want within 2s", late)

	got := waitResized(t, ns, pod.Name, "150m", "100Mi")
	waitFor(t, eventually, "the boost annotation removed", func(context.Context) (bool, error) {
		_, ok := getPod(t, ns, pod.Name).Annotations[boostKey]
		return !ok, nil
	})
	waitEvent(t, ns, pod.Name, eventBoostEnded, 1)
	assert.Equal(t, pod.Generation+1, got.Generation, "one resize")
	requireNotDisrupted(t, ns, "jvm", before)

	// By now the never-Ready pod, created first, is well past its boost's
	// duration: it keeps it.
	neverPods := podsOf(t, ns, "never-ready")
	require.Len(t, neverPods, 1)
	p := neverPods[0]
	assert.False(t, ready(&p))
	assert.Equal(t, "300m", cpuRequest(&p), "not Ready: still boosted")
	assert.Contains(t, p.Annotations, boostKey)
	assert.Empty(t, events(t, ns, p.Name, eventBoostEnded))
	waitConditionMessage(t, ns, "never-ready", "1 boosted at startup")
}

// Issue #22: a pod boosted by upstream's admission controller (its
// annotation, written here by the test) is unboosted by our updater.
func TestStartupBoostOfUpstreamsFormatIsEnded(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	original, err := annotations.GetOriginalResourcesAnnotationValue(&corev1.Container{Resources: corev1.ResourceRequirements{Requests: rl("100m", "100Mi")}})
	require.NoError(t, err)
	// Created before its VPA exists, so that no admission controller
	// changes it: as upstream's would have left it, boosted to 400m.
	pods := deploy(t, ns, workload{name: "up", requests: rl("400m", "100Mi"), annotation: map[string]string{boostKey: original}})
	before := snap(pods)
	require.Equal(t, "400m", cpuRequest(&pods[0]))

	boostVPA(t, ns, "up")
	// Ready for longer than durationSeconds by the time it is looked at, or
	// soon after: ended at Ready + 20 s.
	waitResized(t, ns, pods[0].Name, "150m", "100Mi")
	waitFor(t, eventually, "the boost annotation removed", func(context.Context) (bool, error) {
		_, ok := getPod(t, ns, pods[0].Name).Annotations[boostKey]
		return !ok, nil
	})
	waitEvent(t, ns, pods[0].Name, eventBoostEnded, 1)
	requireNotDisrupted(t, ns, "up", before)
	t.Logf("pod %s unboosted from upstream's annotation", pods[0].Name)
}

// Issue #32, item 12: a boost never makes a pod that LimitRanger refuses.
// With a LimitRange max of 400m per container, a pod of 100m/200m
// recommended 150m (limit 300m) and boosted by 2 would get 300m/600m: it is
// boosted to 200m/400m instead, its Deployment creates it, and the VPA says
// the boost was capped. (Before, the API server refused the pod and the
// Deployment made none.) The boost's end is admitted too.
func TestStartupBoostStaysWithinLimitRange(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	_, err := kube.CoreV1().LimitRanges(ns).Create(ctxFor(t), &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "limits"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("400m")},
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	boostVPA(t, ns, "capped")

	pods := deploy(t, ns, workload{name: "capped", requests: rl("100m", "100Mi"), limits: rl("200m", "")})
	pod := pods[0]
	assert.Equal(t, "200m", cpuRequest(&pod), "boosted up to the LimitRange, not to 300m")
	assert.Equal(t, "400m", ptr.To(pod.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]).String())
	waitEvent(t, ns, "capped", eventBoostCapped, 1)
	waitResized(t, ns, pod.Name, "150m", "100Mi")
	waitEvent(t, ns, pod.Name, eventBoostEnded, 1)
}
