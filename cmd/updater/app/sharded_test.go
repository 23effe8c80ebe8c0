package app

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpafake "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/fake"

	"github.com/vpa-inplace/vpa-inplace/pkg/shard"
)

// namespaceIn returns a namespace of shard i of l.
func namespaceIn(l shard.Layout, i int) string {
	for j := 0; ; j++ {
		if ns := fmt.Sprintf("team-%d", j); l.Of(ns) == i {
			return ns
		}
	}
}

// Every kind a span's controller, target resolver and recommendations read
// of namespaced objects is cached for the span's namespaces only, through
// the factories' own accessors; what the factories start is those
// informers and no other.
func TestASpanCachesOnlyItsNamespaces(t *testing.T) {
	layout, err := shard.NewLayout(4)
	require.NoError(t, err)
	in, out := namespaceIn(layout, 2), namespaceIn(layout, 0)
	meta := func(ns string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: "x"} }
	var kubeObjs, vpaObjs []runtime.Object
	for _, ns := range []string{in, out} {
		kubeObjs = append(kubeObjs, &corev1.Pod{ObjectMeta: meta(ns)}, &policyv1.PodDisruptionBudget{ObjectMeta: meta(ns)},
			&batchv1.Job{ObjectMeta: meta(ns)}, &batchv1.CronJob{ObjectMeta: meta(ns)}, &corev1.LimitRange{ObjectMeta: meta(ns)},
			&corev1.ReplicationController{ObjectMeta: meta(ns)}, &appsv1.Deployment{ObjectMeta: meta(ns)},
			&appsv1.ReplicaSet{ObjectMeta: meta(ns)}, &appsv1.StatefulSet{ObjectMeta: meta(ns)}, &appsv1.DaemonSet{ObjectMeta: meta(ns)})
		vpaObjs = append(vpaObjs, &vpatypes.VerticalPodAutoscaler{ObjectMeta: meta(ns)}, &vpatypes.VerticalPodAutoscalerCheckpoint{ObjectMeta: meta(ns)})
	}
	kube := kubefake.NewClientset(kubeObjs...)
	vpaClient := vpafake.NewSimpleClientset(vpaObjs...)
	sel, err := shard.NewSelection(layout, []shard.Span{{From: 2, To: 3}}, nil)
	require.NoError(t, err)
	f := newSpanInformers(kube, vpaClient, sel)

	informers := map[string]cache.SharedIndexInformer{
		"pods":                   f.kube.Core().V1().Pods().Informer(),
		"poddisruptionbudgets":   f.kube.Policy().V1().PodDisruptionBudgets().Informer(),
		"jobs":                   f.kube.Batch().V1().Jobs().Informer(),
		"cronjobs":               f.kube.Batch().V1().CronJobs().Informer(),
		"limitranges":            f.kube.Core().V1().LimitRanges().Informer(),
		"replicationcontrollers": f.kube.Core().V1().ReplicationControllers().Informer(),
		"deployments":            f.kube.Apps().V1().Deployments().Informer(),
		"replicasets":            f.kube.Apps().V1().ReplicaSets().Informer(),
		"statefulsets":           f.kube.Apps().V1().StatefulSets().Informer(),
		"daemonsets":             f.kube.Apps().V1().DaemonSets().Informer(),
		"verticalpodautoscalers": f.vpa.Autoscaling().V1().VerticalPodAutoscalers().Informer(),
		"checkpoints":            f.vpa.Autoscaling().V1().VerticalPodAutoscalerCheckpoints().Informer(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.kube.Shutdown(); f.vpa.Shutdown() }()
	f.kube.Start(ctx.Done())
	f.vpa.Start(ctx.Done())
	started := len(f.kube.WaitForCacheSync(ctx.Done())) + len(f.vpa.WaitForCacheSync(ctx.Done()))
	assert.Equal(t, len(informers), started, "the factories started other informers than the span's")
	for name, inf := range informers {
		assert.Equal(t, []string{in + "/x"}, inf.GetStore().ListKeys(), name)
	}
}

// A change of the shards held restarts only the spans that changed, and
// returns once the spans no longer held have stopped.
func TestAChangeOfShardsRestartsOnlyTheSpansThatChanged(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	layout, err := shard.NewLayout(8)
	require.NoError(t, err)
	var mu sync.Mutex
	var events []string
	running := map[shard.Span]bool{}
	log := func(e string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	}
	u := &units{layout: layout, ctx: ctx, running: map[shard.Span]*unit{},
		runSpan: func(ctx context.Context, _ *units, span shard.Span) error {
			mu.Lock()
			running[span] = true
			mu.Unlock()
			log("start " + span.String())
			<-ctx.Done()
			// Stopping takes a while: change must wait for it.
			time.Sleep(10 * time.Millisecond)
			mu.Lock()
			delete(running, span)
			mu.Unlock()
			log("stop " + span.String())
			return nil
		}}
	spansRunning := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for s := range running {
			out = append(out, s.String())
		}
		slices.Sort(out)
		return out
	}
	waitRunning := func(want ...string) {
		t.Helper()
		require.Eventually(t, func() bool { return slices.Equal(want, spansRunning()) }, 30*time.Second, time.Millisecond, "running %v", want)
	}

	u.change(ctx, []int{0, 1, 2})
	waitRunning("0-2")
	mu.Lock()
	events = nil
	mu.Unlock()
	u.change(ctx, []int{0, 1, 2, 5})
	waitRunning("0-2", "5")
	mu.Lock()
	assert.Equal(t, []string{"start 5"}, events, "a span that stays is not restarted")
	mu.Unlock()

	mu.Lock()
	events = nil
	mu.Unlock()
	u.change(ctx, []int{0, 1})
	mu.Lock()
	stopped := slices.Clone(events)
	mu.Unlock()
	assert.ElementsMatch(t, []string{"stop 0-2", "stop 5"}, stopped[:2], "stopped before change returned")
	waitRunning("0-1")

	u.change(ctx, nil)
	waitRunning()
	cancel()
	u.wait()
}
