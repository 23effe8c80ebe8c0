//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// deployPodLevel creates the Deployment of w with pod-level resources and
// waits for its pods to run.
func deployPodLevel(t *testing.T, ns string, w workload, podLevel corev1.ResourceRequirements) []corev1.Pod {
	t.Helper()
	if w.node == "" {
		w.node = nodeFor(t)
	}
	w.replicas = max(w.replicas, 1)
	d := w.deployment(ns)
	d.Spec.Template.Spec.Resources = &podLevel
	_, err := kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{})
	require.NoError(t, err)
	var pods []corev1.Pod
	waitFor(t, eventually, fmt.Sprintf("%d running pods of %s", w.replicas, w.name), func(context.Context) (bool, error) {
		pods = podsOf(t, ns, w.name)
		if len(pods) != int(w.replicas) {
			return false, nil
		}
		for _, p := range pods {
			if p.Status.Phase != corev1.PodRunning || !ready(&p) {
				return false, nil
			}
		}
		return true, nil
	})
	return pods
}

// waitPodLevel waits until the pod's pod-level requests are cpu/mem, in its
// spec and as the kubelet reports them (status.resources), and returns it.
func waitPodLevel(t *testing.T, ns, pod, cpu, mem string) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	want := rl(cpu, mem)
	waitFor(t, eventually, fmt.Sprintf("pod %s at pod level %v", pod, want), func(context.Context) (bool, error) {
		p = getPod(t, ns, pod)
		if p.Spec.Resources == nil || p.Status.Resources == nil || resizeConditions(p) != "" {
			return false, nil
		}
		for name, q := range want {
			if got := p.Spec.Resources.Requests[name]; got.Cmp(q) != 0 {
				return false, nil
			}
			if got := p.Status.Resources.Requests[name]; got.Cmp(q) != 0 {
				return false, nil
			}
		}
		return true, nil
	})
	return p
}

// KEP-5419 on Kubernetes 1.37 and 1.38 (pod-level resize beta, on; the hollow
// kubelets declare the feature InPlacePodLevelResourcesVerticalScaling): a
// pod with pod-level resources whose container's recommendation goes beyond
// them is resized in place with its pod level moved along (the resize would
// not fit otherwise), then down again. On the v1.35-kubelet profile the
// kubelets (alpha gate off) declare no such feature: the pod level is never
// sent (the API server would refuse it, the kubelet mark it Infeasible), the
// container gets what the pod level holds and the VPA says the rest cannot
// be had in place. On both, no restart, no eviction, and a new pod of the
// workload gets consistent values at admission.
func TestPodLevelResourcesResizedInPlace(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	// Pod level: requests 300m, 256Mi; limits 1, 1Gi. Container app: 200m, 128Mi.
	pods := deployPodLevel(t, ns, workload{name: "web", requests: rl("200m", "128Mi")},
		corev1.ResourceRequirements{Requests: rl("300m", "256Mi"), Limits: rl("1", "1Gi")})
	before := snap(pods)
	name := pods[0].Name
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)

	// Up: 400m is more than the pod-level request of 300m.
	recommend(t, ns, "web", "400m", "256Mi")
	if podLevelResizes(t) {
		// The pod-level requests move by as much as the container's
		// (+200m, +128Mi), the limits in proportion, in the same patch.
		got := waitResized(t, ns, name, "400m", "256Mi")
		assert.Equal(t, pods[0].Generation+1, got.Generation, "one resize patch, containers and pod level together")
		got = waitPodLevel(t, ns, name, "500m", "384Mi")
		lim := got.Spec.Resources.Limits[corev1.ResourceCPU]
		assert.Equal(t, 1, lim.Cmp(resource.MustParse("1")), "the pod-level cpu limit moved up with the request: %s", lim.String())
	} else {
		// The container gets the room the pod level has: 300m.
		got := waitResized(t, ns, name, "300m", "256Mi")
		assert.Equal(t, pods[0].Generation+1, got.Generation, "one resize patch, the container's only")
		assert.Equal(t, "300m", got.Spec.Resources.Requests.Cpu().String(), "the pod level is not sent")
		c := waitCondition(t, ns, "web", "Invalid")
		assert.Contains(t, c.Message, "does not declare the feature InPlacePodLevelResourcesVerticalScaling")
		requireStable(t, ns, name)
	}
	waitEvent(t, ns, name, eventSent, 1)

	// Down again: where the pod level moved up, it comes down by as much.
	recommend(t, ns, "web", "150m", "128Mi")
	got := waitResized(t, ns, name, "150m", "128Mi")
	if podLevelResizes(t) {
		waitPodLevel(t, ns, name, "250m", "256Mi")
	} else {
		assert.Equal(t, "300m", got.Spec.Resources.Requests.Cpu().String(), "the pod level is not sent")
	}
	requireNotDisrupted(t, ns, "web", before)

	// A new pod is admitted with the recommendation and the pod level that
	// follows it (at creation it may always be set).
	require.NoError(t, kube.CoreV1().Pods(ns).Delete(ctxFor(t), name, metav1.DeleteOptions{}))
	waitFor(t, eventually, "a new pod of web", func(context.Context) (bool, error) {
		for _, p := range podsOf(t, ns, "web") {
			if p.Name != name && p.Spec.Resources != nil {
				c := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
				lvl := p.Spec.Resources.Requests[corev1.ResourceCPU]
				return c.Cmp(resource.MustParse("150m")) == 0 && lvl.Cmp(resource.MustParse("250m")) == 0, nil
			}
		}
		return false, nil
	})
}
