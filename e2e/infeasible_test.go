//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

const metricRecords = "vpa_inplace_updater_infeasible_records"

func deploymentRef(name string) *autoscalingv1.CrossVersionObjectReference {
	return &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
}

// infeasibleSetup deploys one pod and drives it into a recorded infeasible
// attempt the way this cluster's version does it: on v1.37 the API server
// refuses the over-capacity patch (403 NodeCapacity); on v1.35-kubelet the
// patch is accepted and the kubelet marks it Infeasible.
func infeasibleSetup(t *testing.T) (ns string, pod corev1.Pod, before snapshot) {
	t.Helper()
	ns = newNamespace(t, nil)
	pods := deploy(t, ns, workload{name: "web", requests: rl("100m", "100Mi")})
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)
	recommend(t, ns, "web", "8", "100Mi")
	waitEvent(t, ns, pods[0].Name, eventInfeasible, 1)
	return ns, pods[0], snap(pods)
}

// AEP-8818 infeasible tracking: Infeasible Status Storage (pre-1.36). The
// kubelet's Infeasible is stored (spec.resources) and the pod is skipped
// until the recommendation changes.
func TestInfeasibleStatusStorage(t *testing.T) {
	ns := newNamespace(t, nil)
	var pod corev1.Pod
	switch {
	case kubeletRefusesOverCapacity(t):
		// Kubelets up to 1.35 themselves refuse a resize beyond node
		// capacity, when the API server lets it through.
		pods := deploy(t, ns, workload{name: "web", requests: rl("100m", "100Mi")})
		pod = pods[0]
		newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)
		recommend(t, ns, "web", "8", "100Mi")
	default:
		// 1.36+ refuses over-capacity resizes at admission; the kubelet still
		// says Infeasible for a CPU resize of a Guaranteed pod under the
		// static CPU manager.
		pods := deploy(t, ns, workload{name: "web", node: env("E2E_STATIC_NODE", "hollow-static"), tolerate: true,
			requests: rl("1", "100Mi"), limits: rl("1", "100Mi")})
		pod = pods[0]
		newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)
		recommend(t, ns, "web", "2", "100Mi")
	}
	before := snap([]corev1.Pod{pod})
	waitFor(t, eventually, "kubelet Infeasible", func(context.Context) (bool, error) {
		return strings.Contains(resizeConditions(getPod(t, ns, pod.Name)), "Infeasible"), nil
	})
	if kubeletRefusesOverCapacity(t) {
		// The kubelet's own capacity check (1.33 to 1.35; gone in 1.36).
		assert.Contains(t, resizeConditions(getPod(t, ns, pod.Name)), "PodResizePending/Infeasible(Node didn't have enough capacity: cpu, requested: 8000")
	}
	waitEvent(t, ns, pod.Name, eventInfeasible, 1)
	assert.Equal(t, pod.Generation+1, getPod(t, ns, pod.Name).Generation, "the attempt was patched once")
	requireStable(t, ns, pod.Name)
	assert.Equal(t, int32(1), eventCount(t, ns, pod.Name, eventInfeasible), "recorded once, not retried")
	requireNotDisrupted(t, ns, "web", before)
}

// AEP-8818 infeasible tracking: Infeasible Patch Rejection with NodeCapacity
// Cause (1.36+). The attempted recommendation is stored and the pod skipped.
func TestInfeasiblePatchRejectionWithNodeCapacityCause(t *testing.T) {
	parallel(t)
	if !admissionRefusesOverCapacity(t) {
		requireServerMinor(t, 36, "the PodResizeValidator admission plugin refuses over-capacity resizes from 1.36 (TestInfeasibleStatusStorage covers the kubelet's Infeasible before it)")
		t.Skipf("profile %s disables the PodResizeValidator admission plugin: its kubelets mark over-capacity resizes Infeasible (TestInfeasibleStatusStorage)", profile)
	}
	ns, pod, before := infeasibleSetup(t)
	got := getPod(t, ns, pod.Name)
	assert.Equal(t, pod.Generation, got.Generation, "the refused patch did not change the pod")
	e := events(t, ns, pod.Name, eventInfeasible)
	require.NotEmpty(t, e)
	assert.Contains(t, e[0].Message, "NodeCapacity")
	assert.Contains(t, e[0].Message, "allocatable")
	requireNotDisrupted(t, ns, "web", before)
}

// AEP-8818 infeasible tracking: No Retry for Unchanged Recommendation, nor
// for one asking for more of everything.
func TestNoRetryForUnchangedRecommendation(t *testing.T) {
	parallel(t)
	ns, pod, before := infeasibleSetup(t)
	g := getPod(t, ns, pod.Name).Generation

	recommend(t, ns, "web", "8", "100Mi") // rewritten, same values
	requireStable(t, ns, pod.Name)
	recommend(t, ns, "web", "9", "120Mi") // all greater
	requireStable(t, ns, pod.Name)
	assert.Equal(t, g, getPod(t, ns, pod.Name).Generation)
	assert.Equal(t, int32(1), eventCount(t, ns, pod.Name, eventInfeasible), "no second attempt")
	requireNotDisrupted(t, ns, "web", before)
}

// AEP-8818 infeasible tracking: Retry After Recommendation Change. A
// recommendation lower in one resource is tried (and, still too big, fails
// again); one that fits succeeds.
func TestRetryAfterRecommendationChange(t *testing.T) {
	parallel(t)
	ns, pod, before := infeasibleSetup(t)
	recommend(t, ns, "web", "7", "100Mi")
	waitEvent(t, ns, pod.Name, eventInfeasible, 2)
	recommend(t, ns, "web", "300m", "100Mi")
	waitResized(t, ns, pod.Name, "300m", "100Mi")
	requireNotDisrupted(t, ns, "web", before)
}

// AEP-8818 infeasible tracking: Successful Update Clears Stored Attempt.
// After a success, the same infeasible values are attempted again: had the
// record been kept, they would be skipped.
func TestSuccessfulUpdateClearsStoredAttempt(t *testing.T) {
	parallel(t)
	ns, pod, before := infeasibleSetup(t)
	recommend(t, ns, "web", "300m", "100Mi")
	waitResized(t, ns, pod.Name, "300m", "100Mi")
	recommend(t, ns, "web", "8", "100Mi")
	waitEvent(t, ns, pod.Name, eventInfeasible, 2)
	requireNotDisrupted(t, ns, "web", before)
}

// AEP-8818 infeasible tracking: Stale Entry Cleanup. The record of a
// deleted pod is forgotten.
func TestStaleEntryCleanup(t *testing.T) {
	ns, pod, _ := infeasibleSetup(t)
	held := updaterMetric(t, metricRecords)
	require.GreaterOrEqual(t, held, 1.0)

	// Scale to zero so the pod is not replaced, then delete it.
	d, err := kube.AppsV1().Deployments(ns).Get(ctxFor(t), "web", metav1.GetOptions{})
	require.NoError(t, err)
	d.Spec.Replicas = ptr.To[int32](0)
	_, err = kube.AppsV1().Deployments(ns).Update(ctxFor(t), d, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitFor(t, eventually, "pod gone", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err != nil, nil
	})
	waitFor(t, 20*time.Second, "record forgotten", func(context.Context) (bool, error) {
		return updaterMetric(t, metricRecords) <= held-1, nil
	})
}

// Recommendations are applied at pod creation by the admission controller.
func TestRecommendationAppliedAtPodCreation(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)
	recommend(t, ns, "web", "300m", "200Mi")
	pods := deployOnceAdmitted(t, ns, workload{name: "web", replicas: 2, requests: rl("100m", "100Mi"), limits: rl("200m", "")}, "300m")
	for _, p := range pods {
		c := p.Spec.Containers[0]
		assert.Equal(t, "300m", ptr.To(c.Resources.Requests[corev1.ResourceCPU]).String())
		assert.Equal(t, "200Mi", ptr.To(c.Resources.Requests[corev1.ResourceMemory]).String())
		assert.Equal(t, "600m", ptr.To(c.Resources.Limits[corev1.ResourceCPU]).String(), "limits keep their ratio to requests")
	}

	t.Run("pods of VPAs in other modes are left to upstream VPA", func(t *testing.T) {
		newVPA(t, ns, "other", vpatypes.UpdateModeInitial, nil)
		recommend(t, ns, "other", "300m", "200Mi")
		pods := deploy(t, ns, workload{name: "other", requests: rl("100m", "100Mi")})
		assert.Equal(t, "100m", ptr.To(pods[0].Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]).String())
	})
}

// A single-replica Deployment is resized: no min-replicas rule applies to
// resizes that restart nothing.
func TestSingleReplicaDeploymentResized(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	pods := deploy(t, ns, workload{name: "solo", replicas: 1, requests: rl("100m", "100Mi")})
	before := snap(pods)
	newVPA(t, ns, "solo", vpatypes.UpdateModeInPlace, nil)
	recommend(t, ns, "solo", "400m", "300Mi")
	waitResized(t, ns, pods[0].Name, "400m", "300Mi")
	requireNotDisrupted(t, ns, "solo", before)
}
