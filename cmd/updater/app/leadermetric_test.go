package app

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
)

func newTestLeaderGauge(t *testing.T) (*leaderGauge, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	g, err := newLeaderGauge(reg)
	require.NoError(t, err)
	return g, reg
}

func TestLeaderGaugeFollowsTheLease(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	kube := kubefake.NewClientset()
	gaugeA, regA := newTestLeaderGauge(t)
	gaugeB, _ := newTestLeaderGauge(t)
	value := func(g *leaderGauge) float64 { return testutil.ToFloat64(g.gauge) }

	assert.Equal(t, 0.0, value(gaugeA), "0 before the election")
	n, err := testutil.GatherAndCount(regA, MetricLeader)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "exported before the election")

	working := make(chan string, 2)
	work := func(name string) func(context.Context) error {
		return func(c context.Context) error {
			working <- name
			<-c.Done()
			return nil
		}
	}
	ctxA, stopA := context.WithCancel(ctx)
	ctxB, stopB := context.WithCancel(ctx)
	defer stopB()
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	t.Setenv("POD_NAME", "a")
	go func() { doneA <- runAsLeader(ctxA, kube, fastLease(), gaugeA, work("a")) }()
	require.Equal(t, "a", <-working)
	assert.Equal(t, 1.0, value(gaugeA), "a leads")

	t.Setenv("POD_NAME", "b")
	go func() { doneB <- runAsLeader(ctxB, kube, fastLease(), gaugeB, work("b")) }()
	// b keeps trying for longer than a lease: it stays a standby.
	time.Sleep(1500 * time.Millisecond)
	assert.Equal(t, 0.0, value(gaugeB), "b waits")
	assert.Equal(t, 1.0, value(gaugeA), "a still leads")

	stopA() // releases the lease
	require.NoError(t, <-doneA)
	assert.Equal(t, 0.0, value(gaugeA), "a released the lease")
	require.Equal(t, "b", <-working)
	assert.Equal(t, 1.0, value(gaugeB), "b took over")

	stopB()
	require.NoError(t, <-doneB)
	assert.Equal(t, 0.0, value(gaugeB), "b released the lease")
}

func TestNilLeaderGaugeIsANoOp(t *testing.T) {
	var g *leaderGauge
	assert.NotPanics(t, func() { g.set(true) })
	reg := prometheus.NewRegistry()
	_, err := newLeaderGauge(reg)
	require.NoError(t, err)
	_, err = newLeaderGauge(reg)
	assert.Error(t, err, "registered twice")
}
