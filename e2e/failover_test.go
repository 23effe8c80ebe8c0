//go:build e2e

package e2e

// Failover between two updater replicas: the leader is killed (SIGKILL, so
// the lease is not released) right after a recommendation change is written;
// the standby takes the lease over once it expires and finishes the work.
// The leader may have sent none, some or all of the change's patches when it
// dies: in each case every pod gets exactly one patch per change, and
// records made by the dead leader are kept (the standby does not attempt
// them again).
//
// Environment, besides framework_test.go's and signals_test.go's:
//
//	E2E_UPDATER_PIDFILE   the file holding the pid of the updater replica
//	                      that runs for the whole suite (identity updater-a)
//	E2E_STANDBY_RESTART   an executable that (re)starts a second replica
//	                      (identity updater-b) and returns once its /readyz
//	                      answers
//	E2E_STANDBY_PIDFILE   the file holding that replica's pid
//	E2E_STANDBY_METRICS   that replica's metrics URL
//
// The test is skipped when any of them is missing.

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

const (
	leaseNamespace = "vpa-inplace-system"
	leaseName      = "vpa-inplace-updater"
	identityA      = "updater-a_"
	identityB      = "updater-b_"
)

func TestFailoverKeepsRecordsAndPatchesOnce(t *testing.T) {
	restartA, pidA := os.Getenv("E2E_UPDATER_RESTART"), os.Getenv("E2E_UPDATER_PIDFILE")
	restartB, pidB, metricsB := os.Getenv("E2E_STANDBY_RESTART"), os.Getenv("E2E_STANDBY_PIDFILE"), os.Getenv("E2E_STANDBY_METRICS")
	if restartA == "" || pidA == "" || restartB == "" || pidB == "" || metricsB == "" {
		t.Skip("E2E_UPDATER_RESTART, E2E_UPDATER_PIDFILE, E2E_STANDBY_RESTART, E2E_STANDBY_PIDFILE and E2E_STANDBY_METRICS are needed")
	}
	waitLeader(t, identityA)

	// A record made by the first leader.
	infNS, infPod, infBefore := infeasibleSetup(t)
	waitRecordWritten(t, infNS, "web", "infeasible", infPod.UID)
	infGeneration := getPod(t, infNS, infPod.Name).Generation

	// A workload resized once by the first leader.
	ns := newNamespace(t, nil)
	pods := deploy(t, ns, workload{name: "web", replicas: 4, requests: rl("100m", "100Mi")})
	before := snap(pods)
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)
	recommend(t, ns, "web", "150m", "110Mi")
	generations := map[string]int64{}
	for _, p := range pods {
		generations[p.Name] = waitResized(t, ns, p.Name, "150m", "110Mi").Generation
	}

	// The standby starts, then the leader dies right after a change.
	run(t, restartB)
	t.Cleanup(func() { restoreLeader(t, restartA, pidB) })
	require.Equal(t, 0.0, seriesAt(metricsB, metricRecords, ""), "a standby holds no records")
	recommend(t, ns, "web", "200m", "120Mi")
	kill(t, pidA, syscall.SIGKILL)
	waitLeader(t, identityB)

	for _, p := range pods {
		got := waitResized(t, ns, p.Name, "200m", "120Mi")
		assert.Equal(t, generations[p.Name]+1, got.Generation, "pod %s: exactly one patch for the change across the failover", p.Name)
	}
	// A change made under the new leader is applied once as well.
	recommend(t, ns, "web", "250m", "130Mi")
	for _, p := range pods {
		got := waitResized(t, ns, p.Name, "250m", "130Mi")
		assert.Equal(t, generations[p.Name]+2, got.Generation, "pod %s: one patch per change under the new leader", p.Name)
	}

	// The record was loaded by the new leader and not attempted again.
	waitFor(t, eventually, "the new leader holding the records", func(context.Context) (bool, error) {
		return seriesAt(metricsB, metricRecords, "") >= 1, nil
	})
	requireStable(t, infNS, infPod.Name)
	assert.Equal(t, infGeneration, getPod(t, infNS, infPod.Name).Generation, "no new attempt of the recorded resize")
	assert.Equal(t, int32(1), eventCount(t, infNS, infPod.Name, eventInfeasible), "no repeated Infeasible attempt")
	kept, err := recordWritten(ctxFor(t), infNS, "web", "infeasible", infPod.UID)
	require.NoError(t, err)
	assert.True(t, kept, "the record is kept")

	requireStable(t, ns, pods[0].Name)
	requireNotDisrupted(t, ns, "web", before)
	requireNotDisrupted(t, infNS, "web", infBefore)
}

// restoreLeader gives the lease back to replica a so that the tests after
// this one find the suite's updater leading: a starts again (as a standby),
// then b stops with SIGTERM, which releases the lease.
func restoreLeader(t *testing.T, restartA, pidB string) {
	run(t, restartA)
	kill(t, pidB, syscall.SIGTERM)
	_ = os.Remove(pidB)
	waitLeader(t, identityA)
}

// waitLeader waits until the updater Lease is held by an identity starting
// with prefix.
func waitLeader(t *testing.T, prefix string) {
	t.Helper()
	holder := ""
	waitFor(t, eventually, "the updater lease held by "+prefix+"*", func(ctx context.Context) (bool, error) {
		l, err := kube.CoordinationV1().Leases(leaseNamespace).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, nil
		}
		holder = *l.Spec.HolderIdentity
		return strings.HasPrefix(holder, prefix), nil
	})
	t.Logf("lease %s/%s held by %s", leaseNamespace, leaseName, holder)
}

func run(t *testing.T, script string) {
	t.Helper()
	out, err := exec.CommandContext(ctxFor(t), script).CombinedOutput()
	require.NoError(t, err, "%s: %s", script, out)
}

// kill sends sig to the process whose pid is in pidfile and waits until it
// has exited.
func kill(t *testing.T, pidfile string, sig syscall.Signal) {
	t.Helper()
	b, err := os.ReadFile(pidfile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err, "pid file %s", pidfile)
	if err := syscall.Kill(pid, sig); err != nil {
		t.Logf("signal %s to %d: %v", sig, pid, err)
		return
	}
	waitFor(t, eventually, "process "+strconv.Itoa(pid)+" gone", func(context.Context) (bool, error) {
		return exited(pid), nil
	})
}

// exited tells whether a process that is not this test's child has ended:
// it is gone, or a zombie not reaped yet.
func exited(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// seriesAt sums the series of a metric whose line contains match at a
// metrics URL; 0 when it does not answer.
func seriesAt(url, name, match string) float64 {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	return sumSeries(resp, name, match)
}
