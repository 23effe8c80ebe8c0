//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

const (
	eventSent       = "InPlaceResizeSent"
	eventInfeasible = "InPlaceResizeInfeasible"
)

// AEP-8818 test plan, InPlace mode: Basic In-Place Update.
func TestBasicInPlaceUpdate(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	pods := deploy(t, ns, workload{name: "web", replicas: 2, requests: rl("100m", "100Mi")})
	before := snap(pods)
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)

	recommend(t, ns, "web", "250m", "200Mi")
	for _, p := range pods {
		got := waitResized(t, ns, p.Name, "250m", "200Mi")
		assert.Equal(t, p.Generation+1, got.Generation, "exactly one resize patch for pod %s", p.Name)
		waitEvent(t, ns, p.Name, eventSent, 1)
	}
	// And down again.
	recommend(t, ns, "web", "150m", "120Mi")
	for _, p := range pods {
		waitResized(t, ns, p.Name, "150m", "120Mi")
	}
	requireNotDisrupted(t, ns, "web", before)
}

// AEP-8818 test plan, InPlace mode: No Eviction on Failure. A resize beyond
// the node's allocatable resources fails; the pod stays, untouched.
func TestNoEvictionOnFailure(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	pods := deploy(t, ns, workload{name: "web", requests: rl("100m", "100Mi")})
	before := snap(pods)
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)

	recommend(t, ns, "web", "8", "100Mi") // nodes have 3500m allocatable
	waitEvent(t, ns, pods[0].Name, eventInfeasible, 1)
	requireStable(t, ns, pods[0].Name)
	p := getPod(t, ns, pods[0].Name)
	actual := p.Status.ContainerStatuses[0].Resources.Requests[corev1.ResourceCPU]
	assert.Equal(t, "100m", actual.String(), "the pod keeps running with its resources")
	requireNotDisrupted(t, ns, "web", before)
}

// AEP-8818 test plan, InPlace mode: Feature Gate Disabled. An admission
// controller with the gate off rejects InPlace VPAs, naming the gate.
func TestFeatureGateDisabledRejectsInPlaceVPA(t *testing.T) {
	parallel(t)
	key, value, ok := strings.Cut(env("E2E_GATE_OFF_LABEL", "vpa-inplace.dev/e2e-gate=off"), "=")
	require.True(t, ok, "E2E_GATE_OFF_LABEL must be key=value")
	ns := newNamespace(t, map[string]string{key: value})
	mode := vpatypes.UpdateModeInPlace
	vpa := &vpatypes.VerticalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: vpatypes.VerticalPodAutoscalerSpec{
			TargetRef:    deploymentRef("web"),
			UpdatePolicy: &vpatypes.PodUpdatePolicy{UpdateMode: &mode},
		},
	}
	_, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Create(ctxFor(t), vpa, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "InPlace")
	assert.Contains(t, err.Error(), "--feature-gates=InPlace=true")

	t.Run("other modes are accepted", func(t *testing.T) {
		initial := vpatypes.UpdateModeInitial
		vpa.Spec.UpdatePolicy.UpdateMode = &initial
		created, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Create(ctxFor(t), vpa, metav1.CreateOptions{})
		require.NoError(t, err)

		t.Run("changing an existing VPA to InPlace is rejected", func(t *testing.T) {
			created.Spec.UpdatePolicy.UpdateMode = &mode
			_, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Update(ctxFor(t), created, metav1.UpdateOptions{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "--feature-gates=InPlace=true")
		})
	})
}

// AEP-8818 test plan, InPlace mode: Indefinite Wait for In-Progress Updates.
// A resize held Deferred by the kubelet is waited for: no timeout, no
// eviction, no second patch.
func TestIndefiniteWaitForDeferredUpdate(t *testing.T) {
	ns, pods, before := deferredSetup(t)
	g0 := pods[0].Generation

	recommend(t, ns, "web", "1", "100Mi")
	waitFor(t, eventually, "resize Deferred", func(context.Context) (bool, error) {
		return strings.Contains(resizeConditions(getPod(t, ns, pods[0].Name)), "Deferred"), nil
	})
	requireStable(t, ns, pods[0].Name)
	assert.Equal(t, g0+1, getPod(t, ns, pods[0].Name).Generation, "one patch, then waiting")
	requireNotDisrupted(t, ns, "web", before)
}

// Deferred until capacity frees: the filler pod is deleted and the kubelet
// completes the resize by itself; the updater never patched in between (the
// pod's generation proves it).
func TestDeferredResizeCompletesWhenCapacityFrees(t *testing.T) {
	ns := newNamespace(t, nil)
	node := env("E2E_DEFERRED_NODE", "hollow-2")
	pods := deploy(t, ns, workload{name: "web", node: node, requests: rl("200m", "100Mi")})
	before := snap(pods)
	filler := fill(t, ns, node, "3")
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)
	g0 := pods[0].Generation

	recommend(t, ns, "web", "1", "100Mi")
	waitFor(t, eventually, "resize Deferred", func(context.Context) (bool, error) {
		return strings.Contains(resizeConditions(getPod(t, ns, pods[0].Name)), "Deferred"), nil
	})
	requireStable(t, ns, pods[0].Name)

	require.NoError(t, kube.CoreV1().Pods(ns).Delete(ctxFor(t), filler, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	got := waitResized(t, ns, pods[0].Name, "1", "100Mi")
	assert.Equal(t, g0+1, got.Generation, "completed without any re-patch")
	requireNotDisrupted(t, ns, "web", before)
}

// AEP-8818 test plan, InPlace mode: Failed Update - Retry Success. The
// first recommendation cannot fit; when the recommendation comes down to
// what fits, the resize is retried and succeeds.
func TestFailedUpdateRetrySuccess(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	pods := deploy(t, ns, workload{name: "web", requests: rl("100m", "100Mi")})
	before := snap(pods)
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)

	recommend(t, ns, "web", "8", "100Mi")
	waitEvent(t, ns, pods[0].Name, eventInfeasible, 1)
	recommend(t, ns, "web", "500m", "150Mi")
	waitResized(t, ns, pods[0].Name, "500m", "150Mi")
	requireNotDisrupted(t, ns, "web", before)
}

// AEP-8818 test plan, InPlace mode: Infeasible Resize Handling. The kubelet
// marks the resize Infeasible: the pod waits, is not evicted, and is not
// patched again. On v1.35-kubelet and v1.34 the kubelet itself refuses a
// resize beyond the node's capacity; on v1.37 (where the API server refuses
// those first) a CPU resize of a Guaranteed pod under the static CPU manager
// is used.
func TestInfeasibleResizeHandling(t *testing.T) {
	ns := newNamespace(t, nil)
	w := workload{name: "db", node: env("E2E_STATIC_NODE", "hollow-static"), tolerate: true,
		requests: rl("1", "100Mi"), limits: rl("1", "100Mi")}
	cpu := "2"
	if kubeletRefusesOverCapacity(t) {
		w = workload{name: "db", requests: rl("100m", "100Mi")}
		cpu = "8"
	}
	pods := deploy(t, ns, w)
	before := snap(pods)
	newVPA(t, ns, "db", vpatypes.UpdateModeInPlace, nil)

	recommend(t, ns, "db", cpu, "100Mi")
	waitFor(t, eventually, "kubelet Infeasible", func(context.Context) (bool, error) {
		return strings.Contains(resizeConditions(getPod(t, ns, pods[0].Name)), "Infeasible"), nil
	})
	waitEvent(t, ns, pods[0].Name, eventInfeasible, 1)
	requireStable(t, ns, pods[0].Name)
	assert.Equal(t, pods[0].Generation+1, getPod(t, ns, pods[0].Name).Generation, "patched once, then left alone")
	requireNotDisrupted(t, ns, "db", before)
}

// fill runs a pod requesting cpu on node, leaving too little room for
// resizes there. It returns the pod's name.
// deferredSetup runs one pod of Deployment "web" (200m CPU) on the node
// used for Deferred resizes, fills the rest of that node, and creates an
// InPlace VPA without a recommendation: asking for 1 CPU is then Deferred.
func deferredSetup(t *testing.T) (ns string, pods []corev1.Pod, before snapshot) {
	t.Helper()
	ns = newNamespace(t, nil)
	node := env("E2E_DEFERRED_NODE", "hollow-2")
	pods = deploy(t, ns, workload{name: "web", node: node, requests: rl("200m", "100Mi")})
	before = snap(pods)
	fill(t, ns, node, "3")
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)
	return ns, pods, before
}

func fill(t *testing.T, ns, node, cpu string) string {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "filler"},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "fill", Image: "registry.invalid/fill:1",
				Resources: corev1.ResourceRequirements{Requests: rl(cpu, "")}}},
		},
	}
	_, err := kube.CoreV1().Pods(ns).Create(ctxFor(t), p, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, eventually, "filler running", func(ctx context.Context) (bool, error) {
		got, err := kube.CoreV1().Pods(ns).Get(ctx, "filler", metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.PodRunning, nil
	})
	t.Cleanup(func() {
		_ = kube.CoreV1().Pods(ns).Delete(context.Background(), "filler", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	return p.Name
}
