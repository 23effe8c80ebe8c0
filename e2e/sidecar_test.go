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
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// deployWithSidecar creates a Deployment of app container "app" and a
// sidecar "proxy" (restartPolicy Always) requesting 50m/64Mi with a 128Mi
// memory limit, and waits for its pods to run.
func deployWithSidecar(t *testing.T, ns string, w workload) []corev1.Pod {
	t.Helper()
	if w.node == "" {
		w.node = nodeFor(t)
	}
	if w.replicas == 0 {
		w.replicas = 1
	}
	d := w.deployment(ns)
	d.Spec.Template.Spec.InitContainers = []corev1.Container{
		{Name: "proxy", Image: "registry.invalid/proxy:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Resources: corev1.ResourceRequirements{Requests: rl("50m", "64Mi"), Limits: rl("", "128Mi")}},
	}
	_, err := kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{})
	require.NoError(t, err)
	var pods []corev1.Pod
	waitFor(t, eventually, fmt.Sprintf("%d running pods of %s", *d.Spec.Replicas, w.name), func(ctx context.Context) (bool, error) {
		pods = podsOf(t, ns, w.name)
		if len(pods) != int(*d.Spec.Replicas) {
			return false, nil
		}
		for _, p := range pods {
			if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
				return false, nil
			}
			if _, st := initContainer(&p, "proxy"); st == nil || st.State.Running == nil {
				return false, nil
			}
		}
		return true, nil
	})
	// Running is enough: a resize that restarts nothing does not wait for
	// readiness.
	for _, p := range pods {
		t.Logf("pod %s running, ready %v, conditions %v, sidecar %+v", p.Name, ready(&p), p.Status.Conditions, p.Status.InitContainerStatuses)
	}
	return pods
}

// recommendContainers writes a recommendation naming each container of
// targets (name to cpu and memory), as a recommender would.
func recommendContainers(t *testing.T, ns, name string, targets map[string]corev1.ResourceList) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		rec := &vpatypes.RecommendedPodResources{}
		for c, target := range targets {
			rec.ContainerRecommendations = append(rec.ContainerRecommendations, vpatypes.RecommendedContainerResources{
				ContainerName: c, Target: target, LowerBound: target, UpperBound: target, UncappedTarget: target,
			})
		}
		v.Status.Recommendation = rec
		_, err = vpas.AutoscalingV1().VerticalPodAutoscalers(ns).UpdateStatus(context.Background(), v, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
}

// initContainer returns the init container named name of p, and its
// status.
func initContainer(p *corev1.Pod, name string) (*corev1.Container, *corev1.ContainerStatus) {
	var c *corev1.Container
	for i := range p.Spec.InitContainers {
		if p.Spec.InitContainers[i].Name == name {
			c = &p.Spec.InitContainers[i]
		}
	}
	for i := range p.Status.InitContainerStatuses {
		if p.Status.InitContainerStatuses[i].Name == name {
			return c, &p.Status.InitContainerStatuses[i]
		}
	}
	return c, nil
}

// A recommendation naming a sidecar, written by hand (upstream's
// recommender does not write one yet), resizes the sidecar in place with
// its memory limit in proportion, restarts nothing, and is given to a new
// pod at its creation. (The hollow kubelet's runtime never ends a
// container, so an init container that is not a sidecar would hold the pod
// Pending: the recommendation naming one is covered by unit tests.)
func TestSidecarResizedInPlace(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	pods := deployWithSidecar(t, ns, workload{name: "mesh", requests: rl("100m", "100Mi")})
	pod := pods[0]
	_, st := initContainer(&pod, "proxy")
	require.NotNil(t, st, "the sidecar's status")
	newVPA(t, ns, "mesh", vpatypes.UpdateModeInPlace, nil)

	recommendContainers(t, ns, "mesh", map[string]corev1.ResourceList{
		"app":   rl("100m", "100Mi"),
		"proxy": rl("150m", "96Mi"),
	})
	var got *corev1.Pod
	waitFor(t, eventually, "sidecar proxy resized to 150m/96Mi", func(ctx context.Context) (bool, error) {
		got = getPod(t, ns, pod.Name)
		c, s := initContainer(got, "proxy")
		if c == nil || s == nil || s.Resources == nil || got.Status.ObservedGeneration < got.Generation || resizeConditions(got) != "" {
			return false, nil
		}
		for _, have := range []corev1.ResourceList{c.Resources.Requests, s.Resources.Requests} {
			for name, q := range rl("150m", "96Mi") {
				if v := have[name]; v.Cmp(q) != 0 {
					return false, nil
				}
			}
		}
		return true, nil
	})
	c, s := initContainer(got, "proxy")
	assert.Equal(t, "192Mi", quantity(c.Resources.Limits, corev1.ResourceMemory), "the memory limit keeps its ratio to the request")
	assert.Zero(t, s.Resources.Limits.Memory().Cmp(resource.MustParse("192Mi")), "and runs: %v", s.Resources.Limits)
	assert.Equal(t, pod.Generation+1, got.Generation, "exactly one resize patch")
	assert.Equal(t, pod.UID, got.UID)
	assert.Zero(t, s.RestartCount, "the sidecar is not restarted")
	waitEvent(t, ns, pod.Name, eventSent, 1)

	t.Run("a new pod gets the sidecar's recommendation at creation", func(t *testing.T) {
		require.NoError(t, kube.CoreV1().Pods(ns).Delete(ctxFor(t), pod.Name, metav1.DeleteOptions{}))
		var fresh corev1.Pod
		waitFor(t, eventually, "a new pod of mesh", func(context.Context) (bool, error) {
			for _, p := range podsOf(t, ns, "mesh") {
				if p.UID != pod.UID {
					fresh = p
					return true, nil
				}
			}
			return false, nil
		})
		c, _ := initContainer(&fresh, "proxy")
		require.NotNil(t, c)
		assert.Equal(t, "150m", quantity(c.Resources.Requests, corev1.ResourceCPU))
		assert.Equal(t, "96Mi", quantity(c.Resources.Requests, corev1.ResourceMemory))
		assert.Equal(t, "192Mi", quantity(c.Resources.Limits, corev1.ResourceMemory))
	})
}

// quantity renders l's value of name ("" when it has none).
func quantity(l corev1.ResourceList, name corev1.ResourceName) string {
	q, ok := l[name]
	if !ok {
		return ""
	}
	return q.String()
}
