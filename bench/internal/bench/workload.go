package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"
)

const (
	labelApp      = "app"
	labelBench    = "vpa-inplace.dev/resize-bench"
	containerName = "app"
	deferredApp   = "deferred"
	fillerName    = "filler"
	// writers bounds the driver's concurrent writes.
	writers = 16
)

// The recommendations written into the VPAs' status: the pods start at
// baseline; isolated changes move them to isolated, the burst to burst;
// the deferred VPA asks for more CPU than its node has left.
var (
	baseline = resources("10m", "32Mi")
	isolated = resources("20m", "48Mi")
	burst    = resources("30m", "64Mi")
	deferred = resources("600m", "32Mi")
)

func resources(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

func appName(i int) string { return fmt.Sprintf("app-%04d", i) }

// workload creates and resets the benchmark's objects.
type workload struct {
	o    *Options
	kube kubernetes.Interface
	vpas vpaclientset.Interface
	t    *Tracker
	log  func(format string, args ...any)
	// namespaces are o's; namespace maps each app, the deferred one
	// included, to its namespace.
	namespaces []string
	namespace  map[string]string
}

func newWorkload(o *Options, kube kubernetes.Interface, vpas vpaclientset.Interface, t *Tracker, log func(string, ...any)) *workload {
	w := &workload{o: o, kube: kube, vpas: vpas, t: t, log: log, namespaces: o.NamespaceNames(), namespace: map[string]string{}}
	for i, app := range w.apps() {
		w.namespace[app] = w.namespaces[i%len(w.namespaces)]
	}
	w.namespace[deferredApp] = w.namespaces[0]
	return w
}

// apps returns the names of the Deployments (and VPAs) under test,
// the deferred one excluded.
func (w *workload) apps() []string {
	out := make([]string, w.o.Deployments)
	for i := range out {
		out[i] = appName(i)
	}
	return out
}

// firstApps returns, of each namespace of keep, its first app.
func (w *workload) firstApps(keep func(namespace string) bool) []string {
	seen := map[string]bool{}
	var out []string
	for _, app := range w.apps() {
		ns := w.namespace[app]
		if !seen[ns] && keep(ns) {
			seen[ns] = true
			out = append(out, app)
		}
	}
	return out
}

func isBenchApp(app string) bool { return strings.HasPrefix(app, "app-") }

// setup creates what is missing: namespace, Deployments, VPAs with the
// baseline recommendation, the deferred Deployment and VPA, the filler pod;
// and waits for every pod to run.
func (w *workload) setup(ctx context.Context) error {
	if err := forEach(ctx, w.namespaces, func(ctx context.Context, _ int, name string) error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labelBench: "true"}}}
		if _, err := w.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", name, err)
		}
		return waitForServiceAccount(ctx, w.kube, name)
	}); err != nil {
		return err
	}
	start := time.Now()
	per, extra := w.o.Pods/w.o.Deployments, w.o.Pods%w.o.Deployments
	err := forEach(ctx, w.apps(), func(ctx context.Context, i int, app string) error {
		replicas := per
		if i < extra {
			replicas++
		}
		return w.createApp(ctx, app, int32(replicas), false)
	})
	if err != nil {
		return err
	}
	if err := w.createApp(ctx, deferredApp, int32(w.o.DeferredPods), true); err != nil {
		return err
	}
	want := w.o.Pods + w.o.DeferredPods
	w.log("created %d Deployments and VPAs; waiting for %d pods to run", w.o.Deployments+1, want)
	timeout := 5*time.Minute + time.Duration(want)*200*time.Millisecond
	ok := waitUntil(ctx, timeout, func() bool {
		n := 0
		for _, p := range w.t.Pods(func(app string) bool { return isBenchApp(app) || app == deferredApp }) {
			if ready(p) {
				n++
			}
		}
		return n == want
	})
	if !ok {
		return fmt.Errorf("the %d pods were not all running after %s", want, timeout)
	}
	w.log("%d pods running (%.0fs)", want, time.Since(start).Seconds())
	return w.ensureFiller(ctx)
}

func (w *workload) createApp(ctx context.Context, app string, replicas int32, onDeferredNode bool) error {
	ns := w.namespace[app]
	labels := map[string]string{labelApp: app, labelBench: "true"}
	spec := corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		Containers: []corev1.Container{{
			Name:      containerName,
			Image:     "registry.invalid/app:1",
			Resources: corev1.ResourceRequirements{Requests: baseline.DeepCopy()},
		}},
	}
	if !w.o.TokenVolume {
		spec.AutomountServiceAccountToken = ptr.To(false)
	}
	if onDeferredNode {
		w.pinToDeferredNode(&spec)
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{labelApp: app}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if _, err := w.kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Deployment %s: %w", app, err)
	}
	mode := vpatypes.UpdateModeInPlace
	v := &vpatypes.VerticalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns, Labels: labels},
		Spec: vpatypes.VerticalPodAutoscalerSpec{
			TargetRef:    &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: app},
			UpdatePolicy: &vpatypes.PodUpdatePolicy{UpdateMode: &mode},
		},
	}
	if _, err := w.vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Create(ctx, v, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating VPA %s: %w", app, err)
	}
	return w.recommend(ctx, app, baseline)
}

func (w *workload) pinToDeferredNode(spec *corev1.PodSpec) {
	key, value, _ := strings.Cut(w.o.DeferredTaint, "=")
	spec.NodeSelector = map[string]string{corev1.LabelHostname: w.o.DeferredNode}
	spec.Tolerations = []corev1.Toleration{{Key: key, Operator: corev1.TolerationOpEqual, Value: value, Effect: corev1.TaintEffectNoSchedule}}
}

// ensureFiller creates the filler pod: it takes the deferred node's CPU
// but for 30m, so that the deferred pods fit at baseline and no CPU
// increase of theirs does.
func (w *workload) ensureFiller(ctx context.Context) error {
	pods := w.kube.CoreV1().Pods(w.namespaces[0])
	if p, err := pods.Get(ctx, fillerName, metav1.GetOptions{}); err == nil {
		if p.DeletionTimestamp == nil {
			return nil
		}
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading filler pod: %w", err)
	}
	node, err := w.kube.CoreV1().Nodes().Get(ctx, w.o.DeferredNode, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s: %w", w.o.DeferredNode, err)
	}
	free := node.Status.Allocatable.Cpu().MilliValue()
	// Every namespace's: the node is the bench's alone (tainted), but
	// whatever else runs there takes its room too.
	all, err := w.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + w.o.DeferredNode})
	if err != nil {
		return fmt.Errorf("listing pods of %s: %w", w.o.DeferredNode, err)
	}
	for _, p := range all.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		req := specRequests(&p)
		free -= req.Cpu().MilliValue()
	}
	cpu := free - 30
	if cpu <= 0 {
		return fmt.Errorf("node %s has no CPU left for the filler pod", w.o.DeferredNode)
	}
	spec := corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		Containers: []corev1.Container{{
			Name:      containerName,
			Image:     "registry.invalid/filler:1",
			Resources: corev1.ResourceRequirements{Requests: resources(fmt.Sprintf("%dm", cpu), "16Mi")},
		}},
	}
	w.pinToDeferredNode(&spec)
	filler := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fillerName, Namespace: w.namespaces[0], Labels: map[string]string{labelApp: fillerName}}, Spec: spec}
	if _, err := pods.Create(ctx, filler, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating filler pod: %w", err)
	}
	ok := waitUntil(ctx, 2*time.Minute, func() bool {
		ps := w.t.Pods(func(app string) bool { return app == fillerName })
		return len(ps) == 1 && ready(ps[0])
	})
	if !ok {
		return fmt.Errorf("filler pod (cpu %dm) not running on %s after 2m", cpu, w.o.DeferredNode)
	}
	w.log("filler pod running on %s with cpu %dm", w.o.DeferredNode, cpu)
	return nil
}

// resetStall is how long the reset waits for one more pod to settle.
const resetStall = 5 * time.Minute

// reset brings every VPA back to the baseline recommendation and every pod
// back to baseline requests (resizing it as the admin), with no updater
// running, and waits until all resizes have completed.
func (w *workload) reset(ctx context.Context) error {
	start := time.Now()
	all := append(w.apps(), deferredApp)
	if err := forEach(ctx, all, func(ctx context.Context, _ int, app string) error {
		return w.recommend(ctx, app, baseline)
	}); err != nil {
		return err
	}
	benchPod := func(app string) bool { return isBenchApp(app) || app == deferredApp }
	var stale []*corev1.Pod
	for _, p := range w.t.Pods(benchPod) {
		if !sameResources(specRequests(p), baseline) {
			stale = append(stale, p)
		}
	}
	resizeStart := time.Now()
	if err := forEach(ctx, stale, func(ctx context.Context, _ int, p *corev1.Pod) error {
		return w.resize(ctx, p.Namespace, p.Name, baseline)
	}); err != nil {
		return err
	}
	// The driver's own resizes, with writers concurrent writes and no
	// client limit to speak of: how many resize patches per second this
	// API server takes, whatever the updater.
	resizeTook := time.Since(resizeStart)
	// The kubelets take their time over 10,000 resizes (a sync a minute
	// each, at low priority): wait while they make progress, not by the
	// clock.
	want := w.o.Pods + w.o.DeferredPods
	n, ok := waitProgress(ctx, resetStall, func() int {
		n := 0
		for _, p := range w.t.Pods(benchPod) {
			if settled(p, baseline) {
				n++
			}
		}
		return n
	}, want)
	if !ok {
		return fmt.Errorf("pods did not all settle at baseline after reset: %d of %d, none more for %s", n, want, resetStall)
	}
	if err := w.ensureFiller(ctx); err != nil {
		return err
	}
	rate := ""
	if len(stale) > 0 {
		rate = fmt.Sprintf(" (%d concurrent writers: %.1f s, %.0f patches/s)", writers, resizeTook.Seconds(), float64(len(stale))/resizeTook.Seconds())
	}
	w.log("reset: %d pods resized back to baseline%s; all %d settled (%.0fs)", len(stale), rate, want, time.Since(start).Seconds())
	return nil
}

// recommend writes target as the recommendation of container "app" into
// the VPA's status (merge patch of the status subresource; bounds equal the
// target), as a recommender would.
func (w *workload) recommend(ctx context.Context, app string, target corev1.ResourceList) error {
	rec := vpatypes.RecommendedContainerResources{
		ContainerName: containerName, Target: target, LowerBound: target, UpperBound: target, UncappedTarget: target,
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"recommendation": vpatypes.RecommendedPodResources{
		ContainerRecommendations: []vpatypes.RecommendedContainerResources{rec},
	}}})
	if err != nil {
		return err
	}
	_, err = w.vpas.AutoscalingV1().VerticalPodAutoscalers(w.namespace[app]).Patch(ctx, app, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("writing recommendation of VPA %s: %w", app, err)
	}
	return nil
}

func (w *workload) resize(ctx context.Context, namespace, pod string, target corev1.ResourceList) error {
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
		"name": containerName, "resources": map[string]any{"requests": target},
	}}}})
	if err != nil {
		return err
	}
	_, err = w.kube.CoreV1().Pods(namespace).Patch(ctx, pod, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "resize")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("resizing pod %s: %w", pod, err)
	}
	return nil
}

// teardown deletes the namespaces.
func (w *workload) teardown(ctx context.Context) error {
	return forEach(ctx, w.namespaces, func(ctx context.Context, _ int, ns string) error {
		err := w.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}

func waitForServiceAccount(ctx context.Context, kube kubernetes.Interface, ns string) error {
	ok := waitUntil(ctx, 2*time.Minute, func() bool {
		_, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	if !ok {
		return fmt.Errorf("no default ServiceAccount in %s after 2m", ns)
	}
	return nil
}

// forEach runs fn on every item with at most `writers` at once and returns
// the first error.
func forEach[T any](ctx context.Context, items []T, fn func(ctx context.Context, i int, item T) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, writers)
	for i, item := range items {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(ctx, i, item); err != nil {
				mu.Lock()
				if first == nil {
					first = err
					cancel()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
