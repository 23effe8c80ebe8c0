// Package admissionburst measures a pod admission controller on a cluster:
// a burst of pod creations (Deployments under InPlace VPAs, created at
// once) with one admission controller registered at a time, reporting the
// API server's own webhook latency histogram and the controller's memory
// and CPU. hack/bench-admission-burst.sh runs it; see bench/README.md.
package admissionburst

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"

	"github.com/vpa-inplace/vpa-inplace/bench/internal/metricstext"
	"github.com/vpa-inplace/vpa-inplace/bench/internal/proc"
)

// Side is one admission controller under test.
type Side struct {
	Name    string
	Version string
	Binary  string
	Args    []string
	// Webhook is the name of its pod webhook: the histogram's label.
	Webhook string
	// Register makes the API server call this side's webhooks only.
	Register func(ctx context.Context) error
}

// Options of a run.
type Options struct {
	Kube        kubernetes.Interface
	VPAs        vpaclientset.Interface
	Deployments int
	Replicas    int
	WorkDir     string
	Log         func(format string, args ...any)
}

// Result is one side's figures.
type Result struct {
	Side          *Side
	Pods, Patched int
	Wall          time.Duration
	Calls         uint64
	P50, P99      float64 // seconds, interpolated in the histogram's buckets
	Buckets       string
	PeakRSS       int64
	RSSBefore     int64
	CPU           time.Duration
}

// The requests of the pods' template and the VPAs' recommendation, which a
// patched pod carries.
var (
	templateRequests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	recommended      = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
)

const histogram = "apiserver_admission_webhook_admission_duration_seconds"

// Run runs the burst against side: starts it, registers it, warms it up
// with one Deployment, then creates every Deployment at once and waits for
// all their pods.
func Run(ctx context.Context, o Options, side *Side) (*Result, error) {
	ns := "burst-" + side.Name
	log := func(format string, args ...any) { o.Log(side.Name+": "+format, args...) }
	logFile, err := os.Create(fmt.Sprintf("%s/%s.log", o.WorkDir, side.Name))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, side.Binary, side.Args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", side.Binary, err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	if err := side.Register(ctx); err != nil {
		return nil, fmt.Errorf("registering: %w", err)
	}
	if _, err := o.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	// Gone before the next side runs: its pods' deletion is not part of
	// the next burst.
	defer func() {
		ctx := context.WithoutCancel(ctx)
		if err := o.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			log("deleting namespace %s: %v", ns, err)
			return
		}
		if err := waitFor(ctx, 5*time.Minute, func() (bool, error) {
			_, err := o.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		}); err != nil {
			log("namespace %s not gone: %v", ns, err)
		}
	}()

	// VPAs first, each with its recommendation. Then a warm-up: a pod of
	// one more Deployment's ReplicaSet is created with dryRun (admitted as
	// a pod creation is, stored nowhere) until it comes back patched: then
	// the controller is serving, with its caches synced.
	for i := 0; i <= o.Deployments; i++ {
		if err := createVPA(ctx, o.VPAs, ns, appName(i)); err != nil {
			return nil, err
		}
	}
	log("warming up")
	if err := warmUp(ctx, o.Kube, ns, appName(o.Deployments)); err != nil {
		return nil, err
	}

	before, err := scrape(ctx, o.Kube, side.Webhook)
	if err != nil {
		return nil, err
	}
	stats, err := proc.Read(cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	want := o.Deployments * o.Replicas
	log("creating %d Deployments of %d pods", o.Deployments, o.Replicas)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, o.Deployments)
	for i := range o.Deployments {
		wg.Go(func() {
			if err := createDeployment(ctx, o.Kube, ns, appName(i), o.Replicas, true); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	var pods, patched int
	if err := waitFor(ctx, 10*time.Minute, func() (bool, error) {
		var err error
		pods, patched, err = countPods(ctx, o.Kube, ns, burstSelector)
		return pods >= want, err
	}); err != nil {
		return nil, fmt.Errorf("%d of %d pods created: %w", pods, want, err)
	}
	wall := time.Since(start)
	after, err := scrape(ctx, o.Kube, side.Webhook)
	if err != nil {
		return nil, err
	}
	end, err := proc.Read(cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	r := &Result{Side: side, Pods: pods, Patched: patched, Wall: wall, PeakRSS: end.PeakRSS, RSSBefore: stats.RSS, CPU: end.CPU - stats.CPU}
	r.Calls, r.P50, r.P99, r.Buckets = metricstext.Delta(before, after)
	log("%d pods in %v, %d patched, %d webhook calls, p50 %.1f ms, p99 %.1f ms", r.Pods, wall.Round(time.Millisecond), r.Patched,
		r.Calls, r.P50*1000, r.P99*1000)
	return r, nil
}

func appName(i int) string { return fmt.Sprintf("app-%03d", i) }

func createVPA(ctx context.Context, vpas vpaclientset.Interface, ns, name string) error {
	mode := vpatypes.UpdateModeInPlace
	vpa, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Create(ctx, &vpatypes.VerticalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: vpatypes.VerticalPodAutoscalerSpec{
			TargetRef:    &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			UpdatePolicy: &vpatypes.PodUpdatePolicy{UpdateMode: &mode},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating VPA %s: %w", name, err)
	}
	vpa.Status.Recommendation = &vpatypes.RecommendedPodResources{ContainerRecommendations: []vpatypes.RecommendedContainerResources{{
		ContainerName: "app", Target: recommended, LowerBound: templateRequests, UpperBound: recommended, UncappedTarget: recommended,
	}}}
	if _, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).UpdateStatus(ctx, vpa, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the recommendation of VPA %s: %w", name, err)
	}
	return nil
}

// burstSelector selects the pods of the burst, not the warm-up's.
const burstSelector = "vpa-inplace.dev/burst=true"

// warmUp creates Deployment name (one pod) and then, with dryRun, pods of
// its ReplicaSet until one comes back patched.
func warmUp(ctx context.Context, kube kubernetes.Interface, ns, name string) error {
	if err := createDeployment(ctx, kube, ns, name, 1, false); err != nil {
		return err
	}
	var owner *appsv1.ReplicaSet
	if err := waitFor(ctx, 2*time.Minute, func() (bool, error) {
		list, err := kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil || len(list.Items) == 0 {
			return false, err
		}
		owner = &list.Items[0]
		return true, nil
	}); err != nil {
		return fmt.Errorf("the ReplicaSet of %s: %w", name, err)
	}
	return waitFor(ctx, 3*time.Minute, func() (bool, error) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: owner.Name + "-", Labels: owner.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: owner.Name, UID: owner.UID,
					Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Spec: owner.Spec.Template.Spec,
		}
		got, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		return patchedPod(got), nil
	})
}

func createDeployment(ctx context.Context, kube kubernetes.Interface, ns, name string, replicas int, burst bool) error {
	labels := map[string]string{"app": name}
	if burst {
		labels["vpa-inplace.dev/burst"] = "true"
	}
	_, err := kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1",
						Resources: corev1.ResourceRequirements{Requests: templateRequests}}},
					AutomountServiceAccountToken: ptr.To(false),
				},
			},
		},
	}, metav1.CreateOptions{})
	return err
}

// countPods returns the pods of ns that selector selects, and how many
// carry the recommendation.
func countPods(ctx context.Context, kube kubernetes.Interface, ns, selector string) (pods, patched int, err error) {
	list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: "0"})
	if err != nil {
		return 0, 0, err
	}
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		pods++
		if patchedPod(&p) {
			patched++
		}
	}
	return pods, patched, nil
}

// patchedPod tells whether p carries the recommendation.
func patchedPod(p *corev1.Pod) bool {
	c := p.Spec.Containers[0].Resources.Requests
	return c.Cpu().Cmp(recommended[corev1.ResourceCPU]) == 0 && c.Memory().Cmp(recommended[corev1.ResourceMemory]) == 0
}

func waitFor(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// scrape reads the API server's webhook latency histogram of the admission
// of pod creations by webhook.
func scrape(ctx context.Context, kube kubernetes.Interface, webhook string) (metricstext.Hist, error) {
	families, err := metricstext.ScrapeAPIServer(ctx, kube)
	if err != nil {
		return nil, err
	}
	return families.Hist(histogram, metricstext.Labels{"name": webhook, "operation": "CREATE", "type": "admit"}), nil
}
