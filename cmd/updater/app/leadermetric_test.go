package app

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	kube := leaseClientset()
	gaugeA, regA := newTestLeaderGauge(t)
	gaugeB, _ := newTestLeaderGauge(t)
	value := func(g *leaderGauge) float64 { return testutil.ToFloat64(g.gauge) }

	assert.Equal(t, 0.0, value(gaugeA), "0 before the election")
	n, err := testutil.GatherAndCount(regA, MetricLeader)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "exported before the election")

	// Each replica's work reports its name and both gauges as it starts.
	type started struct {
		name   string
		gauges [2]float64
	}
	working := make(chan started, 2)
	work := func(name string) func(context.Context) error {
		return func(c context.Context) error {
			working <- started{name, [2]float64{value(gaugeA), value(gaugeB)}}
			<-c.Done()
			return nil
		}
	}
	ctxA, stopA := context.WithCancel(ctx)
	ctxB, stopB := context.WithCancel(ctx)
	defer stopB()
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	t.Setenv("POD_NAME", "a")
	go func() { doneA <- runAsLeader(ctxA, kube, testLease(), gaugeA, work("a")) }()
	assert.Equal(t, started{"a", [2]float64{1, 0}}, waitFor(t, working, "a leads"), "a leads")

	t.Setenv("POD_NAME", "b")
	kubeB, bWaited := standby(kube, "a")
	go func() { doneB <- runAsLeader(ctxB, kubeB, testLease(), gaugeB, work("b")) }()
	waitFor(t, bWaited, "b finds the Lease held by a")
	assert.Equal(t, 0.0, value(gaugeB), "b waits")
	assert.Equal(t, 1.0, value(gaugeA), "a still leads")

	stopA() // releases the lease
	require.NoError(t, waitFor(t, doneA, "a returns"))
	assert.Equal(t, 0.0, value(gaugeA), "a released the lease")
	assert.Equal(t, started{"b", [2]float64{0, 1}}, waitFor(t, working, "b takes over"), "b took over")

	stopB()
	require.NoError(t, waitFor(t, doneB, "b returns"))
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
