//go:build e2e

package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// The local cluster runs metrics-server and upstream's recommender (started by
// hack/cluster/up.sh). The recommender answers only to VPAs that name it in
// spec.recommenders (E2E_RECOMMENDER_NAME), so the tests in this file name it and
// every other test keeps writing its recommendations by hand. Usage comes from
// the hollow kubelets (annotation hollow-node.vpa-inplace.dev/usage).
//
// Environment:
//
//	E2E_RECOMMENDER_NAME      the recommender's --recommender-name (required here)
//	E2E_RECOMMENDER_INTERVAL  its --recommender-interval (default 10s)
//	E2E_STEADY_DURATION       how long the steady scenario counts resizes; unset: not run
//	E2E_STEADY_NAMESPACE      the namespace it runs in, served by an updater of its own
//	                          that no test restarts (hack/e2e.sh); default e2e-steady

const (
	hollowUsage        = "hollow-node.vpa-inplace.dev/usage"
	eventMemoryKept    = "InPlaceResizeMemoryLimitKept"
	updateThreshold    = 0.1 // the updater's --pod-update-threshold in e2e.sh
	memoryLimitMargin  = 0.2 // its --memory-limit-decrease-margin
	steadyReplicas     = 3
	steadyTestName     = "TestRecommenderSteadyNoisyUsage"
	steadyConvergedFor = 60 * time.Second
)

func recommenderName(t *testing.T) string {
	t.Helper()
	n := os.Getenv("E2E_RECOMMENDER_NAME")
	if n == "" {
		t.Skip("E2E_RECOMMENDER_NAME is not set: the cluster runs no recommender (hack/e2e.sh starts one)")
	}
	return n
}

func recommenderInterval() time.Duration {
	d, err := time.ParseDuration(env("E2E_RECOMMENDER_INTERVAL", "10s"))
	if err != nil {
		return 10 * time.Second
	}
	return d
}

// newRecommendedVPA creates an InPlace VPA for Deployment target that the
// cluster's recommender answers to.
func newRecommendedVPA(ctx context.Context, ns, target, recommender string) error {
	mode := vpatypes.UpdateModeInPlace
	_, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Create(ctx, &vpatypes.VerticalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: target},
		Spec: vpatypes.VerticalPodAutoscalerSpec{
			TargetRef:    &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: target},
			UpdatePolicy: &vpatypes.PodUpdatePolicy{UpdateMode: &mode},
			Recommenders: []*vpatypes.VerticalPodAutoscalerRecommenderSelector{{Name: recommender}},
		},
	}, metav1.CreateOptions{})
	return err
}

// setUsage patches the pod's usage annotation (the pod, not its template: no
// rollout).
func setUsage(t *testing.T, ns, pod, usage string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, hollowUsage, usage)
	_, err := kube.CoreV1().Pods(ns).Patch(ctxFor(t), pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err)
}

func target(v *vpatypes.VerticalPodAutoscaler, res corev1.ResourceName) (resource.Quantity, bool) {
	if v.Status.Recommendation == nil {
		return resource.Quantity{}, false
	}
	for _, c := range v.Status.Recommendation.ContainerRecommendations {
		if c.ContainerName == "app" {
			q, ok := c.Target[res]
			return q, ok
		}
	}
	return resource.Quantity{}, false
}

// above: q is more than the updater's threshold above base.
func above(q, base resource.Quantity) bool {
	return float64(q.MilliValue()) > float64(base.MilliValue())*(1+updateThreshold)
}

// (a) Usage raised: the recommender raises its target, and the pod is resized
// in place (same pod, same UID, no restart) within two recommender intervals
// and 5 s of the first recommendation above the updater's threshold.
func TestRecommenderUsageRaisedResizesInPlace(t *testing.T) {
	parallel(t)
	rec := recommenderName(t)
	interval := recommenderInterval()
	ns := newNamespace(t, nil)
	pods := deploy(t, ns, workload{name: "web", requests: rl("100m", "100Mi"),
		annotation: map[string]string{hollowUsage: "app=cpu:100m,memory:100Mi"}})
	pod := pods[0]
	before := snap(pods)
	require.NoError(t, newRecommendedVPA(ctxFor(t), ns, "web", rec))

	// Converged: a recommendation exists and the pod runs within the
	// threshold of its CPU target, with no resize under way.
	var requests resource.Quantity
	waitFor(t, 4*time.Minute, "the pod to follow the first recommendations", func(ctx context.Context) (bool, error) {
		v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		tgt, ok := target(v, corev1.ResourceCPU)
		p := getPod(t, ns, pod.Name)
		if !ok || p.Status.ObservedGeneration < p.Generation || resizeConditions(p) != "" {
			return false, nil
		}
		requests = p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
		return !above(tgt, requests) && !above(requests, tgt), nil
	})
	t.Logf("converged at cpu request %s", requests.String())

	setUsage(t, ns, pod.Name, "app=cpu:800m,memory:300Mi")
	raised := time.Now()
	var firstAbove, resized time.Time
	var tgtAbove resource.Quantity
	waitFor(t, 4*time.Minute, "a target above the threshold and the resize", func(ctx context.Context) (bool, error) {
		v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		now := time.Now()
		if tgt, ok := target(v, corev1.ResourceCPU); ok && firstAbove.IsZero() && above(tgt, requests) {
			firstAbove, tgtAbove = now, tgt
		}
		p := getPod(t, ns, pod.Name)
		if got := p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; resized.IsZero() && above(got, requests) {
			resized = now
		}
		return !firstAbove.IsZero() && !resized.IsZero(), nil
	})
	limit := 2*interval + 5*time.Second
	lag := resized.Sub(firstAbove)
	t.Logf("usage raised -> target %s above the threshold after %.1fs; resize sent %.1fs after that (limit %s)",
		tgtAbove.String(), firstAbove.Sub(raised).Seconds(), lag.Seconds(), limit)
	require.LessOrEqual(t, lag, limit, "resized within two recommender intervals and 5 s of the first recommendation above the threshold")

	// actuated in place: the same pod, not restarted
	waitFor(t, eventually, "the resize actuated", func(context.Context) (bool, error) {
		p := getPod(t, ns, pod.Name)
		st := p.Status.ContainerStatuses
		return p.Status.ObservedGeneration >= p.Generation && resizeConditions(p) == "" && len(st) == 1 && st[0].Resources != nil &&
			above(st[0].Resources.Requests[corev1.ResourceCPU], requests), nil
	})
	requireNotDisrupted(t, ns, "web", before)
}

// (c) A memory-limit decrease checked against the metrics API: the pod's
// container uses 300Mi (metrics-server scraping the hollow kubelet); a
// recommendation (written by hand: the exact value matters) would take its
// limit to 300Mi, below 300Mi x (1 + margin). The updater resizes the rest and
// keeps the limit; when usage drops to 100Mi it lowers the limit. At no point
// is the limit below the usage of the moment x (1 + margin).
func TestMetricsAPIKeepsMemoryLimitAboveUsage(t *testing.T) {
	parallel(t)
	recommenderName(t) // the cluster runs metrics-server with the recommender
	ns := newNamespace(t, nil)
	pods := deploy(t, ns, workload{name: "mem", requests: rl("100m", "400Mi"), limits: rl("", "800Mi"),
		annotation: map[string]string{hollowUsage: "app=cpu:50m,memory:300Mi"}})
	pod := pods[0]
	before := snap(pods)
	waitFor(t, 2*time.Minute, "the metrics API to report the pod's 300Mi", func(ctx context.Context) (bool, error) {
		m, ok := podMemoryMetric(ctx, ns, pod.Name)
		return ok && m.Value() == 300<<20, nil
	})
	waitFor(t, eventually, "the updater to use the metrics API", func(context.Context) (bool, error) {
		return updaterMetric(t, metricMetricsAPI) == 1, nil
	})

	var mu sync.Mutex
	usage := int64(300 << 20)
	var violations []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // every observed limit against the usage of the moment
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			p, err := kube.CoreV1().Pods(ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			lim := p.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
			mu.Lock()
			if min := float64(usage) * (1 + memoryLimitMargin); float64(lim.Value()) <= min {
				violations = append(violations, fmt.Sprintf("limit %s with usage %dMi", lim.String(), usage>>20))
			}
			mu.Unlock()
		}
	}()
	defer func() { close(stop); <-done }()

	newVPA(t, ns, "mem", vpatypes.UpdateModeInPlace, nil)
	// requests 200m/150Mi; the 2:1 limit-to-request ratio would make the limit 300Mi
	recommend(t, ns, "mem", "200m", "150Mi")
	waitLimits(t, ns, pod.Name, "200m", "150Mi", "800Mi")
	waitEvent(t, ns, pod.Name, eventMemoryKept, 1)
	requireStable(t, ns, pod.Name)

	// Usage drops (the check above now allows down to 120Mi): the limit goes down.
	mu.Lock()
	usage = 300 << 20 // until the metrics API says otherwise, the old usage is what counts
	mu.Unlock()
	setUsage(t, ns, pod.Name, "app=cpu:50m,memory:100Mi")
	waitFor(t, 2*time.Minute, "the metrics API to report 100Mi", func(ctx context.Context) (bool, error) {
		m, ok := podMemoryMetric(ctx, ns, pod.Name)
		return ok && m.Value() == 100<<20, nil
	})
	mu.Lock()
	usage = 100 << 20
	mu.Unlock()
	// A new recommendation decides again with the new usage. The kept limit
	// raised the pod's limit-to-request ratio to 800:150, so 60Mi scales to
	// a 320Mi limit, above 100Mi x 1.2.
	recommend(t, ns, "mem", "210m", "60Mi")
	waitLimits(t, ns, pod.Name, "210m", "60Mi", "320Mi")
	mu.Lock()
	assert.Empty(t, violations, "a memory limit lowered to usage x (1 + margin) or below")
	mu.Unlock()
	requireNotDisrupted(t, ns, "mem", before)
}

// podMemoryMetric reads the container's working set from the metrics API.
func podMemoryMetric(ctx context.Context, ns, pod string) (resource.Quantity, bool) {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces", ns, "pods", pod).DoRaw(ctx)
	if err != nil {
		return resource.Quantity{}, false
	}
	// {"containers":[{"name":"app","usage":{"cpu":"...","memory":"307200Ki"}}]}
	m := regexp.MustCompile(`"memory":"([0-9A-Za-z.]+)"`).FindSubmatch(raw)
	if m == nil {
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(string(m[1]))
	return q, err == nil
}

// (b) Steady usage with ±10 % noise: once the pods have followed the first
// recommendations, each is resized at most once over E2E_STEADY_DURATION.
// Runs only when E2E_STEADY_DURATION is set.
//
// The scenario runs while the rest of the suite does: TestMain starts it
// (startSteady) before the tests, and this test, parallel, so run after every
// serial test, waits for its end and checks it. A top-level test marked
// t.Parallel alone would start only once all serial tests are done.
func TestRecommenderSteadyNoisyUsage(t *testing.T) {
	recommenderName(t)
	if os.Getenv("E2E_STEADY_DURATION") == "" {
		// hack/e2e.sh sets it (10m by default); a bare go test does not.
		t.Skip("the steady-usage scenario runs only with E2E_STEADY_DURATION set (hack/e2e.sh sets 10m)")
	}
	t.Parallel()
	require.NotNil(t, steady, "the scenario was not started (TestMain)")
	<-steady.done
	for _, l := range steady.log {
		t.Log(l)
	}
	require.NoError(t, steady.err)
	require.Len(t, steady.resizes, steadyReplicas)
	names := make([]string, 0, len(steady.resizes))
	for n := range steady.resizes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Logf("pod %s: %d resize(s) in %s of steady noisy usage", n, steady.resizes[n], steady.window)
		assert.LessOrEqual(t, steady.resizes[n], int64(1), "pod %s resized more than once", n)
	}
}

type steadyRun struct {
	done    chan struct{}
	err     error
	ns      string
	window  time.Duration
	resizes map[string]int64 // pod -> generation changes in the window
	log     []string
}

var steady *steadyRun

// startSteady starts the steady scenario in the background if the run
// includes TestRecommenderSteadyNoisyUsage and a recommender runs.
func startSteady() {
	rec := os.Getenv("E2E_RECOMMENDER_NAME")
	if rec == "" || os.Getenv("E2E_STEADY_DURATION") == "" {
		return
	}
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" {
		if ok, err := regexp.MatchString(strings.SplitN(f.Value.String(), "/", 2)[0], steadyTestName); err != nil || !ok {
			return
		}
	}
	window, err := time.ParseDuration(env("E2E_STEADY_DURATION", "10m"))
	if err != nil {
		window = 10 * time.Minute
	}
	steady = &steadyRun{done: make(chan struct{}), window: window}
	go func() {
		defer close(steady.done)
		steady.err = steady.run(rec)
		if steady.ns != "" {
			_ = kube.CoreV1().Namespaces().Delete(context.Background(), steady.ns, metav1.DeleteOptions{})
		}
	}()
}

func (s *steadyRun) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf("%s "+format, append([]any{time.Now().Format("15:04:05")}, args...)...))
}

func (s *steadyRun) run(rec string) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.window+15*time.Minute)
	defer cancel()
	ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: env("E2E_STEADY_NAMESPACE", "e2e-steady"), Labels: map[string]string{"vpa-inplace.dev/e2e": "true"}}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	s.ns = ns.Name
	for {
		if _, err := kube.CoreV1().ServiceAccounts(s.ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("default ServiceAccount: %w", ctx.Err())
		}
		time.Sleep(250 * time.Millisecond)
	}
	w := workload{name: "steady", replicas: steadyReplicas, node: env("E2E_NODE", "hollow-1"), requests: rl("50m", "50Mi"),
		annotation: map[string]string{hollowUsage: "*=cpu:100m,memory:100Mi,noise:10%"}}
	if _, err := kube.AppsV1().Deployments(s.ns).Create(ctx, w.deployment(s.ns), metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := newRecommendedVPA(ctx, s.ns, "steady", rec); err != nil {
		return err
	}
	s.logf("namespace %s: %d pods, usage %s", s.ns, steadyReplicas, w.annotation[hollowUsage])

	// Converged: every pod resized at least once (its requests started far
	// below the usage) and no pod's generation has moved for steadyConvergedFor.
	gens := map[string]int64{}
	lastChange := time.Now()
	convergeBy := time.Now().Add(8 * time.Minute)
	for {
		list, err := kube.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=steady"})
		if err != nil {
			return err
		}
		resizedAll := len(list.Items) == steadyReplicas
		for _, p := range list.Items {
			if g, ok := gens[p.Name]; !ok || g != p.Generation {
				gens[p.Name] = p.Generation
				lastChange = time.Now()
			}
			if p.Generation < 2 || p.Status.ObservedGeneration < p.Generation {
				resizedAll = false
			}
		}
		if resizedAll && time.Since(lastChange) >= steadyConvergedFor {
			break
		}
		if time.Now().After(convergeBy) {
			return fmt.Errorf("no convergence within 8 minutes: generations %v", gens)
		}
		time.Sleep(time.Second)
	}
	s.logf("converged: generations %v", gens)

	start := map[string]int64{}
	for k, v := range gens {
		start[k] = v
	}
	uids := map[string]types.UID{}
	end := time.Now().Add(s.window)
	for time.Now().Before(end) {
		list, err := kube.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=steady"})
		if err != nil {
			return err
		}
		for _, p := range list.Items {
			if _, ok := start[p.Name]; !ok {
				return fmt.Errorf("pod %s appeared: a pod was recreated", p.Name)
			}
			if u, ok := uids[p.Name]; ok && u != p.UID {
				return fmt.Errorf("pod %s has a new UID", p.Name)
			}
			uids[p.Name] = p.UID
			if p.Generation != gens[p.Name] {
				s.logf("pod %s resized: generation %d -> %d, requests %v", p.Name, gens[p.Name], p.Generation,
					p.Spec.Containers[0].Resources.Requests)
				gens[p.Name] = p.Generation
			}
		}
		if len(list.Items) != steadyReplicas {
			return fmt.Errorf("%d pods, want %d", len(list.Items), steadyReplicas)
		}
		time.Sleep(time.Second)
	}
	s.resizes = map[string]int64{}
	for n, g := range gens {
		// each resize is one patch of the pod spec, one generation
		s.resizes[n] = g - start[n]
	}
	return nil
}
