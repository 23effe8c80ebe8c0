// Command demo shows the InPlace mode on a running cluster: a Deployment and
// an InPlace VPA are created, a recommendation is written into the VPA
// status, and the pod is resized in place (same UID, no restart); then a
// recommendation the node cannot fit is written and the outcome shown.
// hack/demo.sh runs it after starting the cluster and both binaries.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"
)

const ns = "demo"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) { fmt.Printf("  "+format+"\n", args...) }

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	config, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return err
	}
	kube := kubernetes.NewForConfigOrDie(config)
	vpas := vpaclientset.NewForConfigOrDie(config)

	fmt.Println("== 1. A Deployment \"web\" (1 replica, 100m CPU, 100Mi) and a VPA in InPlace mode")
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	labels := map[string]string{"app": "web"}
	_, err = kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.invalid/app:1",
					Resources: corev1.ResourceRequirements{Requests: list("100m", "100Mi"), Limits: list("200m", "200Mi")},
				}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	mode := vpatypes.UpdateModeInPlace
	_, err = vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Create(ctx, &vpatypes.VerticalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: vpatypes.VerticalPodAutoscalerSpec{
			TargetRef:    &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			UpdatePolicy: &vpatypes.PodUpdatePolicy{UpdateMode: &mode},
		},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	pod, err := waitPod(ctx, kube, func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if err != nil {
		return err
	}
	show(pod)

	fmt.Println("== 2. The recommender says 400m CPU, 300Mi (written into the VPA status)")
	if err := recommend(ctx, vpas, "400m", "300Mi"); err != nil {
		return err
	}
	start := time.Now()
	resized, err := waitPod(ctx, kube, func(p *corev1.Pod) bool {
		st := p.Status.ContainerStatuses
		return len(st) > 0 && st[0].Resources != nil && st[0].Resources.Requests.Cpu().String() == "400m" &&
			p.Status.ObservedGeneration >= p.Generation
	})
	if err != nil {
		return err
	}
	say("resized in place %.1fs after the recommendation changed", time.Since(start).Seconds())
	show(resized)
	if resized.UID != pod.UID {
		return fmt.Errorf("the pod was recreated (UID %s -> %s)", pod.UID, resized.UID)
	}
	say("same pod UID, %d restarts: resized without eviction or restart", restarts(resized))

	fmt.Println("== 3. The recommender asks for 8 CPUs, more than any node can allocate")
	if err := recommend(ctx, vpas, "8", "300Mi"); err != nil {
		return err
	}
	var reported string
	err = wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		evs, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name})
		if err != nil {
			return false, nil
		}
		for _, e := range evs.Items {
			if strings.HasPrefix(e.Reason, "InPlaceResizeInfeasible") {
				reported = e.Type + " " + e.Reason + ": " + e.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the infeasible report: %w", err)
	}
	say("event on the pod: %s", reported)
	after, err := kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	show(after)
	say("the pod keeps running as it was; the same resize is not retried until the recommendation asks for less")
	return nil
}

func list(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

func recommend(ctx context.Context, vpas vpaclientset.Interface, cpu, mem string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		t := list(cpu, mem)
		v.Status.Recommendation = &vpatypes.RecommendedPodResources{ContainerRecommendations: []vpatypes.RecommendedContainerResources{{
			ContainerName: "app", Target: t, LowerBound: t, UpperBound: t, UncappedTarget: t,
		}}}
		_, err = vpas.AutoscalingV1().VerticalPodAutoscalers(ns).UpdateStatus(ctx, v, metav1.UpdateOptions{})
		return err
	})
}

func waitPod(ctx context.Context, kube kubernetes.Interface, ok func(*corev1.Pod) bool) (*corev1.Pod, error) {
	var found *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, nil
		}
		for i := range pods.Items {
			if pods.Items[i].DeletionTimestamp == nil && ok(&pods.Items[i]) {
				found = &pods.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	return found, err
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

func show(p *corev1.Pod) {
	spec := p.Spec.Containers[0].Resources
	actual := "-"
	if st := p.Status.ContainerStatuses; len(st) > 0 && st[0].Resources != nil {
		actual = fmt.Sprintf("cpu=%s memory=%s", st[0].Resources.Requests.Cpu(), st[0].Resources.Requests.Memory())
	}
	say("pod %s uid=%s generation=%d restarts=%d", p.Name, p.UID, p.Generation, restarts(p))
	say("  spec requests cpu=%s memory=%s, limits cpu=%s memory=%s; running with %s",
		spec.Requests.Cpu(), spec.Requests.Memory(), spec.Limits.Cpu(), spec.Limits.Memory(), actual)
}
