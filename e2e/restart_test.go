//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// restartMinReady is the updater's --restart-min-ready in the suite
// (hack/e2e.sh).
const restartMinReady = 10 * time.Second

// restartWindow is one pod's restarting resize as seen from outside: from
// the resize (its generation moved) until it has been Ready again for
// --restart-min-ready.
type restartWindow struct {
	pod        string
	sent, back time.Time
}

// watchRestarts polls the pods of app until each has been resized and is
// back, and returns their windows.
func watchRestarts(t *testing.T, ns, app string, pods []corev1.Pod, minReady, within time.Duration) []restartWindow {
	t.Helper()
	generation := map[string]int64{}
	sent := map[string]time.Time{}
	back := map[string]time.Time{}
	for _, p := range pods {
		generation[p.Name] = p.Generation
	}
	deadline := time.Now().Add(within)
	for len(back) < len(pods) {
		require.True(t, time.Now().Before(deadline), "restarting resizes not all back within %s: sent %v, back %v", within, sent, back)
		now := time.Now()
		for _, p := range podsOf(t, ns, app) {
			if _, ok := generation[p.Name]; !ok {
				t.Fatalf("pod %s is new: a pod was replaced", p.Name)
			}
			if _, ok := sent[p.Name]; !ok && p.Generation > generation[p.Name] {
				sent[p.Name] = now
			}
			if _, ok := sent[p.Name]; !ok || !ready(&p) || resizeConditions(&p) != "" || p.Status.ObservedGeneration < p.Generation {
				continue
			}
			if _, ok := back[p.Name]; ok {
				continue
			}
			// Back since it was seen so, or since it turned Ready when that
			// is later (a quick restart may never show the pod not Ready).
			since := now
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.LastTransitionTime.After(since) {
					since = c.LastTransitionTime.Time
				}
			}
			back[p.Name] = since.Add(minReady)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var out []restartWindow
	for name, at := range sent {
		out = append(out, restartWindow{pod: name, sent: at, back: back[name]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].sent.Before(out[j].sent) })
	return out
}

// mostAtOnce is the largest number of windows open at one time. A window is
// seen from outside up to one poll late, so windows that overlap by less
// than a second are not counted together.
func mostAtOnce(ws []restartWindow) int {
	most := 0
	for _, w := range ws {
		n := 0
		for _, o := range ws {
			if !o.sent.After(w.sent) && o.back.After(w.sent.Add(time.Second)) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// restartingWorkload is 4 pods whose memory resizePolicy is
// RestartContainer: doubling memory restarts them.
func restartingWorkload(name string) workload {
	return workload{name: name, replicas: 4, requests: rl("100m", "100Mi"), policy: []corev1.ContainerResizePolicy{
		{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
		{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer},
	}}
}

func uidsOf(pods []corev1.Pod) map[string]types.UID {
	out := map[string]types.UID{}
	for _, p := range pods {
		out[p.Name] = p.UID
	}
	return out
}

// With --eviction-tolerance 0.5, at most 2 of the 4 pods are restarting or
// not yet back at once; the other two wait until the first are Ready for
// --restart-min-ready.
func TestRestartingResizesRespectTheTolerance(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	pods := deploy(t, ns, restartingWorkload("kafka"))
	newVPA(t, ns, "kafka", vpatypes.UpdateModeInPlace, nil)
	recommend(t, ns, "kafka", "100m", "200Mi")

	windows := watchRestarts(t, ns, "kafka", pods, restartMinReady, 3*time.Minute)
	assert.LessOrEqual(t, mostAtOnce(windows), 2, "restarts at once: %v", windows)
	assert.GreaterOrEqual(t, windows[len(windows)-1].sent.Sub(windows[0].sent), restartMinReady-time.Second,
		"the last two wait for the first two to be back: %v", windows)
	assertSamePods(t, ns, "kafka", pods)
}

// A PodDisruptionBudget with maxUnavailable 1 restarts one pod at a time,
// whatever the tolerance allows.
func TestRestartingResizesRespectAPodDisruptionBudget(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	pods := deploy(t, ns, restartingWorkload("kafka"))
	_, err := kube.PolicyV1().PodDisruptionBudgets(ns).Create(ctxFor(t), &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "kafka-pdb"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &intstr.IntOrString{Type: intstr.Int, IntVal: 1},
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "kafka"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, eventually, "the disruption controller to count kafka-pdb", func(ctx context.Context) (bool, error) {
		p, err := kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "kafka-pdb", metav1.GetOptions{})
		return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.DisruptionsAllowed == 1, nil
	})
	newVPA(t, ns, "kafka", vpatypes.UpdateModeInPlace, nil)
	recommend(t, ns, "kafka", "100m", "200Mi")

	windows := watchRestarts(t, ns, "kafka", pods, restartMinReady, 4*time.Minute)
	assert.Equal(t, 1, mostAtOnce(windows), "one restart at a time: %v", windows)
	// Seen from outside up to a poll late: a second of slack.
	assert.GreaterOrEqual(t, windows[len(windows)-1].sent.Sub(windows[0].sent), 3*restartMinReady-time.Second,
		"four restarts one after another: %v", windows)
	assert.Positive(t, eventCount(t, ns, windows[len(windows)-1].pod, "InPlaceResizeWaitingForDisruptionBudget"),
		"the last pod was told it waits")
	assertSamePods(t, ns, "kafka", pods)
}

// assertSamePods checks that the pods are the ones created: resized in
// place, never evicted or recreated.
func assertSamePods(t *testing.T, ns, app string, before []corev1.Pod) {
	t.Helper()
	want := uidsOf(before)
	now := podsOf(t, ns, app)
	assert.Equal(t, want, uidsOf(now), "same pods, same UIDs")
}

// A StatefulSet's minReadySeconds (15 s) replaces --restart-min-ready: each
// broker restarts only once the previous one has been Ready for 15 s.
func TestRestartingResizesWaitForStatefulSetMinReadySeconds(t *testing.T) {
	parallel(t)
	const minReady = 15 * time.Second
	ns := newNamespace(t, nil)
	pods := brokerStatefulSet(t, ns, minReady)
	newStatefulSetVPA(t, ns)
	recommend(t, ns, "broker", "100m", "200Mi")

	windows := watchRestarts(t, ns, "broker", pods, minReady, 3*time.Minute)
	require.Len(t, windows, 2)
	assert.Equal(t, 1, mostAtOnce(windows), "one broker at a time: %v", windows)
	assert.False(t, windows[1].sent.Before(windows[0].back.Add(-time.Second)),
		"the second broker waits until the first has been Ready for 15 s: %v", windows)
	assertSamePods(t, ns, "broker", pods)
}

// Pods of custom resources, with and without /scale, are paced by the same
// rule: counted from the pods the resource controls, held until back for
// --restart-min-ready.
func TestRestartingResizesOfCustomControllerPods(t *testing.T) {
	parallel(t)
	restart := []corev1.ContainerResizePolicy{
		{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
		{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer},
	}
	for _, scalable := range []bool{false, true} {
		t.Run(fmt.Sprintf("scale=%v", scalable), func(t *testing.T) {
			kind, plural := "RestartSet", "restartsets"
			if scalable {
				kind, plural = "ScalableRestartSet", "scalablerestartsets"
			}
			gvr := installCRD(t, plural, kind, scalable)
			ns := newNamespace(t, nil)
			var spec map[string]any
			if scalable {
				spec = map[string]any{"replicas": int64(4)}
			}
			owner := createCustomResource(t, gvr, ns, kind, "kafka", spec)
			if scalable {
				setScaleStatus(t, gvr, ns, "kafka", 4, "app=kafka")
			}
			pods := createOwnedPods(t, ns, owner, ownedPod{count: 4, policy: restart})
			newCustomVPA(t, ns, "kafka", kind, "kafka")
			recommend(t, ns, "kafka", "100m", "150Mi")

			windows := watchRestarts(t, ns, "kafka", pods, restartMinReady, 3*time.Minute)
			assert.LessOrEqual(t, mostAtOnce(windows), 2, "restarts at once: %v", windows)
			assert.GreaterOrEqual(t, windows[len(windows)-1].sent.Sub(windows[0].sent), restartMinReady-time.Second,
				"the last two wait for the first two to be back: %v", windows)
			assertSamePods(t, ns, "kafka", pods)
		})
	}
}

// A restarting resize the kubelet marks Infeasible restarts nothing: its
// place goes back at once, and the next pod of the workload is sent its
// resize (which the kubelet refuses too). Held, the place would keep the
// rest of the workload waiting for as long as the pod lives. On v1.37 a
// Guaranteed pod under the static CPU manager has its CPU resize refused;
// on v1.35-kubelet and v1.34 the kubelet refuses a resize beyond the node's
// capacity.
func TestInfeasibleRestartingResizeGivesItsPlaceBack(t *testing.T) {
	ns := newNamespace(t, nil)
	policy := restartingWorkload("db").policy
	w := workload{name: "db", replicas: 2, node: env("E2E_STATIC_NODE", "hollow-static"), tolerate: true,
		requests: rl("1", "100Mi"), limits: rl("1", "100Mi"), policy: policy}
	cpu := "2"
	if kubeletRefusesOverCapacity(t) {
		w = workload{name: "db", replicas: 2, requests: rl("100m", "100Mi"), policy: policy}
		cpu = "8"
	}
	pods := deploy(t, ns, w)
	before := snap(pods)
	newVPA(t, ns, "db", vpatypes.UpdateModeInPlace, nil)

	// Memory restarts the container: one pod of two at a time.
	recommend(t, ns, "db", cpu, "200Mi")
	start := time.Now()
	for _, p := range pods {
		waitFor(t, eventually, "the kubelet marking "+p.Name+"'s resize Infeasible", func(context.Context) (bool, error) {
			return strings.Contains(resizeConditions(getPod(t, ns, p.Name)), "Infeasible"), nil
		})
	}
	t.Logf("both pods sent their resize and refused within %s", time.Since(start).Round(10*time.Millisecond))
	for _, p := range pods {
		assert.Equal(t, p.Generation+1, getPod(t, ns, p.Name).Generation, "one patch to %s", p.Name)
	}
	requireNotDisrupted(t, ns, "db", before)
}

// A new leader counts the restart the one before it sent and that is not
// over: the second broker waits until the first has been Ready for the
// StatefulSet's minReadySeconds, across the change of leader.
func TestNewLeaderCountsTheRestartUnderWay(t *testing.T) {
	restartA, pidA := os.Getenv("E2E_UPDATER_RESTART"), os.Getenv("E2E_UPDATER_PIDFILE")
	restartB, pidB := os.Getenv("E2E_STANDBY_RESTART"), os.Getenv("E2E_STANDBY_PIDFILE")
	if restartA == "" || pidA == "" || restartB == "" || pidB == "" {
		t.Skip("E2E_UPDATER_RESTART, E2E_UPDATER_PIDFILE, E2E_STANDBY_RESTART and E2E_STANDBY_PIDFILE are needed")
	}
	const minReady = 45 * time.Second
	waitLeader(t, identityA)
	ns := newNamespace(t, nil)
	pods := brokerStatefulSet(t, ns, minReady)
	run(t, restartB)
	t.Cleanup(func() { restoreLeader(t, restartA, pidB) })
	newStatefulSetVPA(t, ns)
	recommend(t, ns, "broker", "100m", "200Mi")

	var first string
	var firstSent time.Time
	waitFor(t, eventually, "one broker sent its restarting resize", func(context.Context) (bool, error) {
		for _, p := range pods {
			if getPod(t, ns, p.Name).Generation > p.Generation {
				first, firstSent = p.Name, time.Now()
				return true, nil
			}
		}
		return false, nil
	})
	kill(t, pidA, syscall.SIGKILL)
	waitLeader(t, identityB)
	t.Logf("%s sent its resize; leader changed %s later", first, time.Since(firstSent).Round(10*time.Millisecond))

	var second string
	waitFor(t, 3*time.Minute, "the other broker sent its resize", func(context.Context) (bool, error) {
		for _, p := range pods {
			if p.Name != first && getPod(t, ns, p.Name).Generation > p.Generation {
				second = p.Name
				return true, nil
			}
		}
		return false, nil
	})
	gap := time.Since(firstSent)
	t.Logf("%s sent its resize %s after %s", second, gap.Round(10*time.Millisecond), first)
	assert.GreaterOrEqual(t, gap, minReady-5*time.Second,
		"the new leader waited for %s to be back for minReadySeconds (%s) before restarting %s", first, minReady, second)
	assertSamePods(t, ns, "broker", pods)
}

// brokerStatefulSet runs StatefulSet "broker": 2 pods whose memory
// resizePolicy is RestartContainer, with spec.minReadySeconds minReady.
func brokerStatefulSet(t *testing.T, ns string, minReady time.Duration) []corev1.Pod {
	t.Helper()
	w := restartingWorkload("broker")
	w.replicas = 2
	d := w.deployment(ns)
	d.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": nodeFor(t)}
	_, err := kube.AppsV1().StatefulSets(ns).Create(ctxFor(t), &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "broker"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: d.Spec.Template,
			PodManagementPolicy: appsv1.ParallelPodManagement, MinReadySeconds: int32(minReady / time.Second),
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var pods []corev1.Pod
	waitFor(t, eventually, "2 running brokers", func(ctx context.Context) (bool, error) {
		pods = podsOf(t, ns, "broker")
		if len(pods) != 2 {
			return false, nil
		}
		for _, p := range pods {
			if !ready(&p) {
				return false, nil
			}
		}
		return true, nil
	})
	return pods
}

// newStatefulSetVPA creates the InPlace VPA "broker" on StatefulSet broker.
func newStatefulSetVPA(t *testing.T, ns string) {
	t.Helper()
	mode := vpatypes.UpdateModeInPlace
	_, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Create(ctxFor(t), &vpatypes.VerticalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "broker"},
		Spec: vpatypes.VerticalPodAutoscalerSpec{
			TargetRef:    &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "broker"},
			UpdatePolicy: &vpatypes.PodUpdatePolicy{UpdateMode: &mode},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}
