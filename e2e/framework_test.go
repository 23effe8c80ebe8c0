//go:build e2e

// Package e2e proves the updater and the admission controller against a real
// cluster named by KUBECONFIG, on which both binaries run with the InPlace
// gate on. Recommendations are written into VPA status directly, except in
// recommender_test.go, where the cluster's upstream recommender writes them
// from the usage metrics-server reads off the hollow kubelets. Every test uses its own namespace and checks that
// no pod was evicted or recreated.
//
// Environment:
//
//	KUBECONFIG            cluster admin kubeconfig (required)
//	E2E_PROFILE           v1.37 (default), v1.38, v1.35-kubelet or v1.34: the
//	                      cluster profile; the tests read the versions the
//	                      cluster reports, and the profile only where two
//	                      profiles of one version differ: v1.35-kubelet's
//	                      API server refuses no over-capacity resize at
//	                      admission (versions_test.go)
//	E2E_UPDATER_METRICS   the updater's /metrics URL (for record counts)
//	E2E_NODE              node for ordinary pods (default hollow-1)
//	E2E_DEFERRED_NODE     node kept free for the Deferred test (hollow-2)
//	E2E_STATIC_NODE       node with the static CPU manager (hollow-static)
//	E2E_PARALLEL_NODES    nodes the parallel tests take one each
//	                      (parallel_test.go; default E2E_NODE alone)
//	E2E_GATE_OFF_LABEL    namespace label (key=value) that routes VPA
//	                      validation to an admission controller started with
//	                      the gate off (default vpa-inplace.dev/e2e-gate=off)
package e2e

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"
)

const (
	profileV137        = "v1.37"
	profileV135Kubelet = "v1.35-kubelet"
	// settle is how long a test watches for something that must NOT happen
	// (a re-patch, an eviction): longer than two updater resyncs in the e2e
	// setup (--updater-interval=5s).
	settle = 12 * time.Second
	// eventually bounds waits for something that must happen.
	eventually = 60 * time.Second
)

var (
	kube kubernetes.Interface
	vpas vpaclientset.Interface
	// dyn reaches custom resources and their definitions.
	dyn     dynamic.Interface
	profile string
)

func TestMain(m *testing.M) {
	if port := os.Getenv(postRenderEnv); port != "" {
		// Started by helm as its post-renderer (install_test.go).
		os.Exit(postRender(port))
	}
	flag.Parse()
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		// go test -list (hack/e2e.sh sorts the tests into its phases): no cluster.
		os.Exit(m.Run())
	}
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		fmt.Fprintln(os.Stderr, "e2e: KUBECONFIG must name the cluster to test")
		os.Exit(2)
	}
	config, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(2)
	}
	config.QPS, config.Burst = 50, 100
	kube = kubernetes.NewForConfigOrDie(config)
	vpas = vpaclientset.NewForConfigOrDie(config)
	dyn = dynamic.NewForConfigOrDie(config)
	profile = env("E2E_PROFILE", profileV137)
	startSteady() // runs beside the suite (recommender_test.go)
	os.Exit(m.Run())
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T, extraLabels map[string]string) string {
	t.Helper()
	ctx := ctxFor(t)
	l := map[string]string{"vpa-inplace.dev/e2e": "true"}
	for k, v := range extraLabels {
		l[k] = v
	}
	ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "e2e-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))[:min(30, len(t.Name()))] + "-",
		Labels:       l,
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			dumpNamespace(t, ns.Name)
		}
		_ = kube.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	waitFor(t, eventually, "default ServiceAccount in "+ns.Name, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	return ns.Name
}

func dumpNamespace(t *testing.T, ns string) {
	ctx := context.Background()
	pods, _ := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	for _, p := range pods.Items {
		t.Logf("pod %s uid=%s gen=%d obs=%d phase=%s node=%s requests=%v conditions=%s", p.Name, p.UID, p.Generation,
			p.Status.ObservedGeneration, p.Status.Phase, p.Spec.NodeName, p.Spec.Containers[0].Resources.Requests, resizeConditions(&p))
	}
	events, _ := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	for _, e := range events.Items {
		t.Logf("event %s %s %s: %s", e.InvolvedObject.Name, e.Type, e.Reason, e.Message)
	}
}

func resizeConditions(p *corev1.Pod) string {
	var parts []string
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress {
			parts = append(parts, fmt.Sprintf("%s/%s(%s)", c.Type, c.Reason, c.Message))
		}
	}
	return strings.Join(parts, ",")
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx := ctxFor(t)
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, cond)
	require.NoError(t, err, "waiting for %s", what)
}

func rl(cpu, mem string) corev1.ResourceList {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		l[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return l
}

// workload describes a Deployment under test.
type workload struct {
	name       string
	replicas   int32
	node       string
	requests   corev1.ResourceList
	limits     corev1.ResourceList
	policy     []corev1.ContainerResizePolicy
	tolerate   bool
	annotation map[string]string
	// priorityClass names the pods' PriorityClass (none: priority 0).
	priorityClass string
	// readiness is the container's readiness probe (none: Ready once
	// running).
	readiness *corev1.Probe
}

func (w workload) deployment(ns string) *appsv1.Deployment {
	l := map[string]string{"app": w.name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(w.replicas),
			Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l, Annotations: w.annotation},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"kubernetes.io/hostname": w.node},
					Tolerations: func() []corev1.Toleration {
						if !w.tolerate {
							return nil
						}
						return []corev1.Toleration{{Key: "vpa-inplace.dev/cpu-manager", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
					}(),
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					PriorityClassName:             w.priorityClass,
					Containers: []corev1.Container{{
						Name:           "app",
						Image:          "registry.invalid/app:1",
						Resources:      corev1.ResourceRequirements{Requests: w.requests, Limits: w.limits},
						ResizePolicy:   w.policy,
						ReadinessProbe: w.readiness,
					}},
				},
			},
		},
	}
}

// deploy creates the Deployment and waits for its pods to run.
func deploy(t *testing.T, ns string, w workload) []corev1.Pod {
	t.Helper()
	if w.node == "" {
		w.node = nodeFor(t)
	}
	if w.replicas == 0 {
		w.replicas = 1
	}
	_, err := kube.AppsV1().Deployments(ns).Create(ctxFor(t), w.deployment(ns), metav1.CreateOptions{})
	require.NoError(t, err)
	return waitRunning(t, ns, w)
}

// deployOnceAdmitted creates w's Deployment without replicas, waits until a
// pod of its ReplicaSet created with dryRun comes back from the admission
// controller with cpu, then scales it to w.replicas and waits for its pods
// to run. The admission controller reads VPAs from an informer cache, which
// a pod created right after a recommendation is written may precede (that
// pod is then resized in place by the updater).
func deployOnceAdmitted(t *testing.T, ns string, w workload, cpu string) []corev1.Pod {
	t.Helper()
	if w.node == "" {
		w.node = nodeFor(t)
	}
	d := w.deployment(ns)
	d.Spec.Replicas = ptr.To[int32](0)
	_, err := kube.AppsV1().Deployments(ns).Create(ctxFor(t), d, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, eventually, "the admission controller gives a new pod of "+w.name+" cpu "+cpu, func(ctx context.Context) (bool, error) {
		rss, err := kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(labels.Set{"app": w.name}).String(),
		})
		if err != nil || len(rss.Items) == 0 {
			return false, nil
		}
		rs := rss.Items[0]
		probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
			GenerateName: w.name + "-", Labels: d.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}},
		}, Spec: *d.Spec.Template.Spec.DeepCopy()}
		got, err := kube.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, nil
		}
		return got.Spec.Containers[0].Resources.Requests.Cpu().String() == cpu, nil
	})
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := kube.AppsV1().Deployments(ns).Get(ctxFor(t), w.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got.Spec.Replicas = ptr.To(max(w.replicas, 1))
		_, err = kube.AppsV1().Deployments(ns).Update(ctxFor(t), got, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
	return waitRunning(t, ns, w)
}

// waitRunning waits until w.replicas pods of w run and are Ready.
func waitRunning(t *testing.T, ns string, w workload) []corev1.Pod {
	t.Helper()
	if w.replicas == 0 {
		w.replicas = 1
	}
	var pods []corev1.Pod
	waitFor(t, eventually, fmt.Sprintf("%d running pods of %s", w.replicas, w.name), func(ctx context.Context) (bool, error) {
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

func podsOf(t *testing.T, ns, app string) []corev1.Pod {
	t.Helper()
	list, err := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{"app": app}).String(),
	})
	require.NoError(t, err)
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return p
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// newVPA creates a VPA in the given mode targeting Deployment target.
func newVPA(t *testing.T, ns, target string, mode vpatypes.UpdateMode, policy *vpatypes.PodResourcePolicy) *vpatypes.VerticalPodAutoscaler {
	t.Helper()
	v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Create(ctxFor(t), &vpatypes.VerticalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: target},
		Spec: vpatypes.VerticalPodAutoscalerSpec{
			TargetRef:      &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: target},
			UpdatePolicy:   &vpatypes.PodUpdatePolicy{UpdateMode: &mode},
			ResourcePolicy: policy,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return v
}

// annotateVPA sets annotations on a VPA and returns it as updated.
func annotateVPA(t *testing.T, ns, name string, annotations map[string]string) *vpatypes.VerticalPodAutoscaler {
	t.Helper()
	var updated *vpatypes.VerticalPodAutoscaler
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if v.Annotations == nil {
			v.Annotations = map[string]string{}
		}
		for k, val := range annotations {
			v.Annotations[k] = val
		}
		updated, err = vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Update(context.Background(), v, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
	return updated
}

// recommend writes a recommendation for container "app" into the VPA status,
// as a recommender would. Bounds are the target.
func recommend(t *testing.T, ns, name, cpu, mem string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		target := rl(cpu, mem)
		v.Status.Recommendation = &vpatypes.RecommendedPodResources{ContainerRecommendations: []vpatypes.RecommendedContainerResources{{
			ContainerName: "app", Target: target, LowerBound: target, UpperBound: target, UncappedTarget: target,
		}}}
		_, err = vpas.AutoscalingV1().VerticalPodAutoscalers(ns).UpdateStatus(context.Background(), v, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
}

// snapshot remembers pods' identities and restart counts.
type snapshot map[string]podIdentity

type podIdentity struct {
	uid      types.UID
	restarts int32
}

func snap(pods []corev1.Pod) snapshot {
	s := snapshot{}
	for _, p := range pods {
		var restarts int32
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		s[p.Name] = podIdentity{uid: p.UID, restarts: restarts}
	}
	return s
}

// requireNotDisrupted checks that the workload still has exactly the same
// pods (no eviction, no recreation) with the same restart counts.
func requireNotDisrupted(t *testing.T, ns, app string, before snapshot) {
	t.Helper()
	now := snap(podsOf(t, ns, app))
	require.Equal(t, before, now, "pods must be neither evicted, recreated nor restarted")
}

// waitResized waits until the pod's spec requests are cpu/mem and the
// kubelet has actuated them: observedGeneration caught up, no resize
// condition, status resources equal to the spec.
func waitResized(t *testing.T, ns, pod, cpu, mem string) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	want := rl(cpu, mem)
	waitFor(t, eventually, fmt.Sprintf("pod %s resized to %v", pod, want), func(ctx context.Context) (bool, error) {
		p = getPod(t, ns, pod)
		c := p.Spec.Containers[0]
		for name, q := range want {
			if got := c.Resources.Requests[name]; got.Cmp(q) != 0 {
				return false, nil
			}
		}
		if p.Status.ObservedGeneration < p.Generation || resizeConditions(p) != "" {
			return false, nil
		}
		st := p.Status.ContainerStatuses
		if len(st) == 0 || st[0].Resources == nil {
			return false, nil
		}
		for name, q := range want {
			if got := st[0].Resources.Requests[name]; got.Cmp(q) != 0 {
				return false, nil
			}
		}
		return true, nil
	})
	return p
}

// events returns the events of a pod with the given reason.
func events(t *testing.T, ns, pod, reason string) []corev1.Event {
	t.Helper()
	list, err := kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + pod + ",reason=" + reason,
	})
	require.NoError(t, err)
	return list.Items
}

// eventCount sums the counts of a pod's events with the given reason.
func eventCount(t *testing.T, ns, pod, reason string) int32 {
	var n int32
	for _, e := range events(t, ns, pod, reason) {
		n += max(e.Count, 1)
	}
	return n
}

func waitEvent(t *testing.T, ns, pod, reason string, atLeast int32) {
	t.Helper()
	waitFor(t, eventually, fmt.Sprintf("%d event(s) %s on %s", atLeast, reason, pod), func(context.Context) (bool, error) {
		return eventCount(t, ns, pod, reason) >= atLeast, nil
	})
}

// requireStable watches the pod for settle and fails if its generation
// changes (a re-patch) or it goes away.
func requireStable(t *testing.T, ns, pod string) {
	t.Helper()
	g := getPod(t, ns, pod).Generation
	deadline := time.Now().Add(settle)
	for time.Now().Before(deadline) {
		p, err := kube.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
		require.NoError(t, err, "pod must still exist")
		require.Equal(t, g, p.Generation, "no resize may be sent meanwhile")
		time.Sleep(500 * time.Millisecond)
	}
}

// updaterMetric reads a metric (sum over its series) from the updater.
func updaterMetric(t *testing.T, name string) float64 {
	t.Helper()
	url := os.Getenv("E2E_UPDATER_METRICS")
	if url == "" {
		t.Fatalf("E2E_UPDATER_METRICS is not set")
	}
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || !(strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{")) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		require.NoError(t, err)
		sum += v
	}
	return sum
}

func isForbiddenOrInvalid(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}
