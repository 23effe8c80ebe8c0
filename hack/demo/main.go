// Command demo shows the whole pipeline on a running local cluster: a
// Deployment whose pod reports its usage through a hollow kubelet, metrics-server
// reading it, upstream's recommender turning it into a recommendation, and our
// updater resizing the pod in place (same UID, no restart) when the usage rises
// and again when it falls. Nothing writes a recommendation but the recommender.
// hack/demo.sh runs it after starting the cluster and both binaries.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"
)

const (
	ns = "demo"
	// usageAnnotation sets the usage a hollow kubelet reports for the pod's
	// containers (hack/cluster/cmd/hollow-node).
	usageAnnotation = "hollow-node.vpa-inplace.dev/usage"
	threshold       = 0.1 // the updater's --pod-update-threshold
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) { fmt.Printf("  "+format+"\n", args...) }

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	config, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		return err
	}
	kube := kubernetes.NewForConfigOrDie(config)
	vpas := vpaclientset.NewForConfigOrDie(config)
	d := demo{kube: kube, vpas: vpas}

	fmt.Println("== 1. A Deployment \"web\" (requests 100m CPU, 100Mi) using 100m and 100Mi, and a VPA in InPlace mode")
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
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{usageAnnotation: "app=cpu:100m,memory:100Mi"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.invalid/app:1",
					Resources: corev1.ResourceRequirements{Requests: list("100m", "100Mi")},
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
	d.uid = pod.UID
	if err := d.waitUsage(ctx, pod.Name, "100Mi"); err != nil {
		return err
	}

	// The recommender's very first answer, before it has a sample, is its
	// floor (10m): the updater does not act on it (docs/resize-timing.md).
	// Wait for one made from the usage: the pod goes straight to it.
	fmt.Println("== 2. The recommender's recommendation from that usage; the updater applies it (never its floor, which rests on no sample)")
	if _, err := d.follow(ctx, pod.Name, func(tgt, _ resource.Quantity) bool { return tgt.MilliValue() >= 90 }); err != nil {
		return err
	}

	fmt.Println("== 3. The usage rises to 600m and 300Mi (the pod's usage annotation)")
	if err := d.setUsage(ctx, pod.Name, "app=cpu:600m,memory:300Mi"); err != nil {
		return err
	}
	if _, err := d.follow(ctx, pod.Name, func(tgt, _ resource.Quantity) bool { return tgt.MilliValue() >= 500 }); err != nil {
		return err
	}

	fmt.Println("== 4. The usage falls back to 100m and 100Mi (a decrease: sent once the recommendation rests on --decrease-min-history of usage)")
	if err := d.setUsage(ctx, pod.Name, "app=cpu:100m,memory:100Mi"); err != nil {
		return err
	}
	if _, err := d.follow(ctx, pod.Name, func(tgt, _ resource.Quantity) bool { return tgt.MilliValue() <= 200 }); err != nil {
		return err
	}
	say("the same pod all along: resized up and down in place, never evicted or restarted")
	return nil
}

type demo struct {
	kube kubernetes.Interface
	vpas vpaclientset.Interface
	uid  types.UID
}

// over: a is more than the updater's threshold above b.
func over(a, b resource.Quantity) bool {
	return float64(a.MilliValue()) > float64(b.MilliValue())*(1+threshold)
}

func (d demo) setUsage(ctx context.Context, pod, usage string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, usageAnnotation, usage)
	_, err := d.kube.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// waitUsage waits until the metrics API reports the pod's memory as mem.
func (d demo) waitUsage(ctx context.Context, pod, mem string) error {
	want := resource.MustParse(mem)
	start := time.Now()
	var cpu, got resource.Quantity
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var ok bool
		cpu, got, ok = podMetrics(ctx, d.kube, pod)
		return ok && got.Cmp(want) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the metrics API to report %s for pod %s: %w", mem, pod, err)
	}
	say("metrics API (metrics-server): cpu=%s memory=%s, %.0fs after the change", cpu.String(), formatMemory(got), time.Since(start).Seconds())
	return nil
}

// follow waits for a recommendation whose CPU target satisfies want, then for
// the pod to run with requests within the threshold of that target.
func (d demo) follow(ctx context.Context, pod string, want func(tgt, req resource.Quantity) bool) (*corev1.Pod, error) {
	start := time.Now()
	var tgt corev1.ResourceList
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 6*time.Minute, true, func(ctx context.Context) (bool, error) {
		v, err := d.vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil || v.Status.Recommendation == nil || len(v.Status.Recommendation.ContainerRecommendations) == 0 {
			return false, nil
		}
		tgt = v.Status.Recommendation.ContainerRecommendations[0].Target
		return want(tgt[corev1.ResourceCPU], resource.Quantity{}), nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the recommendation: %w", err)
	}
	recommended := time.Now()
	say("recommendation (recommender): target %s, %.0fs after the change", formatResources(tgt), recommended.Sub(start).Seconds())
	var last corev1.ResourceList
	p, err := waitPod(ctx, d.kube, func(p *corev1.Pod) bool {
		st := p.Status.ContainerStatuses
		if len(st) == 0 || st[0].Resources == nil || p.Status.ObservedGeneration < p.Generation {
			return false
		}
		req := st[0].Resources.Requests[corev1.ResourceCPU]
		t := tgt[corev1.ResourceCPU]
		last = st[0].Resources.Requests
		return !over(req, t) && !over(t, req)
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the pod to follow the recommendation (running with %s): %w", formatResources(last), err)
	}
	say("resized in place %.1fs after the recommendation", time.Since(recommended).Seconds())
	show(p)
	if p.UID != d.uid {
		return nil, fmt.Errorf("the pod was recreated (UID %s -> %s)", d.uid, p.UID)
	}
	return p, nil
}

// podMetrics reads the pod's usage from the metrics API.
func podMetrics(ctx context.Context, kube kubernetes.Interface, pod string) (cpu, mem resource.Quantity, ok bool) {
	var m struct {
		Containers []struct {
			Usage map[string]resource.Quantity `json:"usage"`
		} `json:"containers"`
	}
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces", ns, "pods", pod).DoRaw(ctx)
	if err != nil || json.Unmarshal(raw, &m) != nil || len(m.Containers) == 0 {
		return cpu, mem, false
	}
	return m.Containers[0].Usage["cpu"], m.Containers[0].Usage["memory"], true
}

func list(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
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
	say("pod %s uid=%s generation=%d restarts=%d", p.Name, p.UID, p.Generation, restarts(p))
	say("  %s", podLine(p))
}
