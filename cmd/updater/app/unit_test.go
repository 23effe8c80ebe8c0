package app

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpafake "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/fake"

	"github.com/vpa-inplace/vpa-inplace/pkg/features"
	"github.com/vpa-inplace/vpa-inplace/pkg/shard"
	"github.com/vpa-inplace/vpa-inplace/pkg/shard/owner"
)

// workSeries returns, by shard, the value of each series of the metric
// name of queue gathered from reg: a histogram's count, a gauge's value.
func workSeries(t *testing.T, reg *prometheus.Registry, name, queue string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["queue"] != queue {
				continue
			}
			if h := m.GetHistogram(); h != nil {
				out[labels["shard"]] = float64(h.GetSampleCount())
			} else {
				out[labels["shard"]] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// A span's controller reports how long its work waits under each shard of
// the span, and no other; once it stops, no worker shows at work under
// them.
func TestASpanReportsItsWorkLagUnderItsShards(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	layout, err := shard.NewLayout(4)
	require.NoError(t, err)
	span := shard.Span{From: 2, To: 4}
	ns := namespaceIn(layout, 3)
	inPlace := vpatypes.UpdateModeInPlace
	vpa := &vpatypes.VerticalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: vpatypes.VerticalPodAutoscalerSpec{
			TargetRef:    &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			UpdatePolicy: &vpatypes.PodUpdatePolicy{UpdateMode: &inPlace},
		},
	}

	gate := features.NewFeatureGate()
	require.NoError(t, gate.Set("InPlace=true"))
	o := NewOptions(gate)
	o.DryRun = true
	reg := prometheus.NewRegistry()
	shardMetrics, err := owner.NewMetrics(reg, layout.Shards())
	require.NoError(t, err)
	lists, err := newSelectionMetrics(reg)
	require.NoError(t, err)
	kube := kubefake.NewClientset()
	whole := informers.NewSharedInformerFactory(kube, 0)
	u := &units{
		base: &base{o: o, kube: kube, vpaClient: vpafake.NewSimpleClientset(vpa), killSwitch: &killSwitch{},
			recorder: &record.FakeRecorder{}, minor: 37,
			// The target resolver's own client: nothing answers there, and
			// nothing here needs it to.
			config: &rest.Config{Host: "http://127.0.0.1:1"}},
		layout: layout, ctx: ctx, metrics: shardMetrics, lists: lists,
		whole: wholeInformers{namespaces: whole.Core().V1().Namespaces()},
	}
	u.whole.namespaces.Informer() // registered before the factory starts, as runSharded does
	whole.Start(ctx.Done())
	defer func() { cancel(); whole.Shutdown() }()

	spanCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- runUnit(spanCtx, u, span) }()
	// The VPA, queued when its informer lists it, taken by the VPA worker.
	lag := func() map[string]float64 { return workSeries(t, reg, owner.MetricShardWorkLag, "vpa") }
	require.Eventually(t, func() bool {
		c := lag()
		return c["2"] > 0 && c["3"] > 0
	}, 30*time.Second, 10*time.Millisecond, "the lag of the span's VPA queue, under shards 2 and 3")
	counts := lag()
	assert.Equal(t, counts["2"], counts["3"], "each item counts under every shard of its span")
	assert.NotContains(t, counts, "0")
	assert.NotContains(t, counts, "1")

	stop()
	require.NoError(t, <-done)
	for _, queue := range []string{"pod", "vpa", "condition", "job"} {
		assert.Equal(t, map[string]float64{"2": 0, "3": 0}, workSeries(t, reg, owner.MetricShardWorkLongestRunning, queue),
			"queue %s: measured under the span's shards, no worker at work once stopped", queue)
	}
}
