//go:build e2e

package e2e

// Updater replicas sharing the namespaces' shards (--shards, docs/scaling.md):
// every namespace is worked by exactly one replica; a replica killed (SIGKILL,
// so its Leases are not released) has its shards taken over within the lease
// duration and a few seconds, and their pending recommendations applied with
// one patch each and no record lost; a replica added takes its share without
// a resize sent twice; two replicas never together send fits-node resizes
// that a node cannot take (the node room reserved through the API). Run in a
// phase of their own: the suite's updater does not run meanwhile (two
// updaters would resize the same pods).
//
// Environment, besides framework_test.go's:
//
//	E2E_SHARDS_START          an executable that starts the sharded replica
//	                          named by its argument (its identity prefix),
//	                          writes its pid to $E2E_SHARDS_DIR/<name>.pid and
//	                          its metrics URL to $E2E_SHARDS_DIR/<name>.metrics,
//	                          and returns once its /readyz answers
//	E2E_SHARDS_DIR            that directory
//	E2E_SHARDS                the replicas' --shards (default 12)
//	E2E_SHARD_LEASE_PREFIX    their --shard-lease-prefix (default
//	                          vpa-inplace-updater), in vpa-inplace-system
//	E2E_SHARD_LEASE_DURATION  their --leader-elect-lease-duration (default 12s)
//	E2E_SHARDED_LIST          "on" when the API server serves sharded list and
//	                          watch (the ShardedListAndWatch gate), "off" when
//	                          it does not: the replicas then filter client-side
//
// The tests are skipped when E2E_SHARDS_START or E2E_SHARDS_DIR is missing.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/shard"
	"github.com/vpa-inplace/vpa-inplace/pkg/shard/owner"
)

const (
	metricResizesSent   = "vpa_inplace_updater_resizes_sent_total"
	metricForeignObject = "vpa_inplace_updater_shard_foreign_objects_total"
	metricReservations  = "vpa_inplace_updater_noderoom_reservations_total"
	// shardNamespaces is how many namespaces the tests spread their
	// workloads over.
	shardNamespaces = 12
)

// shardedReplicas starts, stops and reads the sharded replicas.
type shardedReplicas struct {
	start, dir    string
	layout        shard.Layout
	prefix        string
	leaseDuration time.Duration
}

func shardedEnv(t *testing.T) *shardedReplicas {
	t.Helper()
	s := &shardedReplicas{start: os.Getenv("E2E_SHARDS_START"), dir: os.Getenv("E2E_SHARDS_DIR"),
		prefix: env("E2E_SHARD_LEASE_PREFIX", "vpa-inplace-updater")}
	if s.start == "" || s.dir == "" {
		t.Skip("E2E_SHARDS_START and E2E_SHARDS_DIR are needed: the sharded replicas run as processes of hack/e2e.sh")
	}
	n, err := strconv.Atoi(env("E2E_SHARDS", "12"))
	require.NoError(t, err, "E2E_SHARDS")
	s.layout, err = shard.NewLayout(n)
	require.NoError(t, err)
	s.leaseDuration, err = time.ParseDuration(env("E2E_SHARD_LEASE_DURATION", "12s"))
	require.NoError(t, err, "E2E_SHARD_LEASE_DURATION")
	return s
}

// run starts the named replica, stopped (SIGTERM: its Leases released) when
// the test ends.
func (s *shardedReplicas) run(t *testing.T, name string) {
	t.Helper()
	out, err := exec.CommandContext(ctxFor(t), s.start, name).CombinedOutput()
	require.NoError(t, err, "%s %s: %s", s.start, name, out)
	t.Cleanup(func() { s.stop(t, name, syscall.SIGTERM) })
}

// stop signals the named replica and waits until it has exited.
func (s *shardedReplicas) stop(t *testing.T, name string, sig syscall.Signal) {
	t.Helper()
	pidfile := filepath.Join(s.dir, name+".pid")
	if _, err := os.Stat(pidfile); err != nil {
		return
	}
	kill(t, pidfile, sig)
	_ = os.Remove(pidfile)
}

func (s *shardedReplicas) metrics(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, name+".metrics"))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// holders returns, per shard, the name of the replica holding its Lease
// now ("" for none or expired).
func (s *shardedReplicas) holders(ctx context.Context) ([]string, error) {
	out := make([]string, s.layout.Shards())
	for i := range out {
		l, err := kube.CoordinationV1().Leases(leaseNamespace).Get(ctx, owner.ShardLeaseName(s.prefix, i), metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
			continue
		}
		if time.Since(l.Spec.RenewTime.Time) > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
			continue
		}
		name, _, _ := strings.Cut(*l.Spec.HolderIdentity, "_")
		out[i] = name
	}
	return out, nil
}

// waitShared waits until every shard is held by one of names, each holding
// at most its share, and returns the holders.
func (s *shardedReplicas) waitShared(t *testing.T, names ...string) []string {
	t.Helper()
	n := s.layout.Shards()
	most := (n + len(names) - 1) / len(names)
	var got []string
	waitFor(t, 2*eventually, fmt.Sprintf("the %d shards shared by %v", n, names), func(ctx context.Context) (bool, error) {
		h, err := s.holders(ctx)
		if err != nil {
			return false, nil
		}
		got = h
		count := map[string]int{}
		for _, holder := range h {
			count[holder]++
		}
		for _, name := range names {
			if count[name] == 0 || count[name] > most {
				return false, nil
			}
		}
		return count[""] == 0 && len(count) == len(names), nil
	})
	t.Logf("shards held: %v", got)
	return got
}

// shardedWorkloads are one Deployment of one pod, with an InPlace VPA, in
// each of shardNamespaces namespaces.
type shardedWorkloads struct {
	namespaces []string
	pods       map[string]corev1.Pod
	before     map[string]snapshot
}

func newShardedWorkloads(t *testing.T) *shardedWorkloads {
	t.Helper()
	w := &shardedWorkloads{pods: map[string]corev1.Pod{}, before: map[string]snapshot{}}
	for range shardNamespaces {
		ns := newNamespace(t, nil)
		pods := deploy(t, ns, workload{name: "web", requests: rl("100m", "100Mi")})
		newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)
		w.namespaces = append(w.namespaces, ns)
		w.pods[ns] = pods[0]
		w.before[ns] = snap(pods)
	}
	return w
}

// recommend writes a recommendation for every workload.
func (w *shardedWorkloads) recommend(t *testing.T, cpu, mem string) {
	for _, ns := range w.namespaces {
		recommend(t, ns, "web", cpu, mem)
	}
}

// resizedOnce waits until every pod has the values, each with exactly one
// more resize patch than generations holds, and returns the generations.
func (w *shardedWorkloads) resizedOnce(t *testing.T, cpu, mem string, generations map[string]int64) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, ns := range w.namespaces {
		p := w.pods[ns]
		got := waitResized(t, ns, p.Name, cpu, mem)
		if g, ok := generations[ns]; ok {
			assert.Equal(t, g+1, got.Generation, "namespace %s: one patch for the change", ns)
		}
		out[ns] = got.Generation
	}
	return out
}

func (w *shardedWorkloads) notDisrupted(t *testing.T) {
	for _, ns := range w.namespaces {
		requireNotDisrupted(t, ns, "web", w.before[ns])
	}
}

// Three replicas: each namespace's pods are resized by the replica holding
// its shard, once; the replicas' resize counts add up to one per pod, each
// replica's to its shards' namespaces. Where the API server serves sharded
// list and watch, no replica receives a pod of another's shards.
func TestShardsEveryNamespaceIsWorkedByOneReplica(t *testing.T) {
	s := shardedEnv(t)
	names := []string{"shard-a", "shard-b", "shard-c"}
	for _, name := range names {
		s.run(t, name)
	}
	holders := s.waitShared(t, names...)
	sentBefore := map[string]float64{}
	for _, name := range names {
		sentBefore[name] = seriesAt(s.metrics(t, name), metricResizesSent, "")
	}

	w := newShardedWorkloads(t)
	generations := map[string]int64{}
	for ns, p := range w.pods {
		generations[ns] = p.Generation
	}
	w.recommend(t, "150m", "110Mi")
	w.resizedOnce(t, "150m", "110Mi", generations)
	w.requireStable(t)

	after, err := s.holders(ctxFor(t))
	require.NoError(t, err)
	require.Equal(t, holders, after, "the shards stayed where they were")
	want := map[string]float64{}
	for _, ns := range w.namespaces {
		want[holders[s.layout.Of(ns)]]++
	}
	for _, name := range names {
		sent := seriesAt(s.metrics(t, name), metricResizesSent, "") - sentBefore[name]
		assert.Equal(t, want[name], sent, "replica %s resized the pods of its shards' namespaces, once each", name)
		foreign := seriesAt(s.metrics(t, name), metricForeignObject, `resource="pods"`)
		switch env("E2E_SHARDED_LIST", "off") {
		case "on":
			assert.Zero(t, foreign, "replica %s: the API server sent only its shards' pods", name)
		default:
			assert.Positive(t, foreign, "replica %s: the API server sent every pod; the others' were dropped before the cache", name)
		}
	}
	w.notDisrupted(t)
}

// A replica killed right after a change: its shards are taken over within
// the lease duration and 5 seconds, the change applied with one patch per
// pod, and the record it made kept (its resize not tried again).
func TestShardsOfAKilledReplicaAreTakenOverWithoutALostRecord(t *testing.T) {
	s := shardedEnv(t)
	names := []string{"shard-a", "shard-b", "shard-c"}
	for _, name := range names {
		s.run(t, name)
	}
	s.waitShared(t, names...)

	// A record, made by the replica holding its namespace's shard: that
	// replica is the one killed.
	infNS, infPod, infBefore := infeasibleSetup(t)
	waitRecordWritten(t, infNS, "web", "infeasible", infPod.UID)
	infGeneration := getPod(t, infNS, infPod.Name).Generation
	holders, err := s.holders(ctxFor(t))
	require.NoError(t, err)
	victim := holders[s.layout.Of(infNS)]
	require.NotEmpty(t, victim)
	var survivors []string
	for _, name := range names {
		if name != victim {
			survivors = append(survivors, name)
		}
	}

	w := newShardedWorkloads(t)
	generations := w.resizedOnce(t, "100m", "100Mi", nil)
	w.recommend(t, "150m", "110Mi")
	s.stop(t, victim, syscall.SIGKILL)
	killed := time.Now()

	var orphaned []int
	for i, h := range holders {
		if h == victim {
			orphaned = append(orphaned, i)
		}
	}
	waitFor(t, s.leaseDuration+30*time.Second, fmt.Sprintf("shards %v of %s taken over", orphaned, victim), func(ctx context.Context) (bool, error) {
		h, err := s.holders(ctx)
		if err != nil {
			return false, nil
		}
		for _, i := range orphaned {
			if h[i] == "" || h[i] == victim {
				return false, nil
			}
		}
		return true, nil
	})
	took := time.Since(killed)
	t.Logf("shards %v of %s taken over %s after the kill", orphaned, victim, took.Round(100*time.Millisecond))
	assert.Less(t, took, s.leaseDuration+5*time.Second, "taken over within the lease duration and 5 seconds")
	s.waitShared(t, survivors...)

	w.resizedOnce(t, "150m", "110Mi", generations)
	requireStable(t, infNS, infPod.Name)
	assert.Equal(t, infGeneration, getPod(t, infNS, infPod.Name).Generation, "the recorded resize is not tried again")
	assert.Equal(t, int32(1), eventCount(t, infNS, infPod.Name, eventInfeasible), "no repeated Infeasible attempt")
	kept, err := recordWritten(ctxFor(t), infNS, "web", "infeasible", infPod.UID)
	require.NoError(t, err)
	assert.True(t, kept, "the record is kept")
	w.notDisrupted(t)
	requireNotDisrupted(t, infNS, "web", infBefore)
}

// A fourth replica: the others give it its share, and no pod is resized
// again by the move; a change afterwards is applied once.
func TestShardsMoveToANewReplicaWithoutAResizeSentTwice(t *testing.T) {
	s := shardedEnv(t)
	names := []string{"shard-a", "shard-b", "shard-c"}
	for _, name := range names {
		s.run(t, name)
	}
	s.waitShared(t, names...)
	w := newShardedWorkloads(t)
	w.recommend(t, "150m", "110Mi")
	generations := w.resizedOnce(t, "150m", "110Mi", nil)

	s.run(t, "shard-d")
	s.waitShared(t, append(names, "shard-d")...)
	w.requireStable(t)
	for _, ns := range w.namespaces {
		assert.Equal(t, generations[ns], getPod(t, ns, w.pods[ns].Name).Generation, "namespace %s: no resize sent again by the move", ns)
	}

	w.recommend(t, "200m", "120Mi")
	w.resizedOnce(t, "200m", "120Mi", generations)
	w.notDisrupted(t)
}

// Two replicas, a fits-node workload in a namespace of each one's shards,
// both on one node: each resize fits the node alone (300m more, 400m free),
// not both. Whatever the timing of the two replicas' decisions, one resize is
// sent and the other waits, and neither pod ever shows PodResizePending; once
// the filler goes, the other is sent. Both resizes were reserved in the
// node's bucket before they were sent.
func TestShardsNeverTogetherSendMoreThanANodeHolds(t *testing.T) {
	s := shardedEnv(t)
	names := []string{"shard-a", "shard-b"}
	for _, name := range names {
		s.run(t, name)
	}
	holders := s.waitShared(t, names...)
	reservedBefore := 0.0
	for _, name := range names {
		reservedBefore += seriesAt(s.metrics(t, name), metricReservations, "")
	}

	// A namespace of each replica's shards.
	byHolder := map[string]string{}
	for range 4 * shardNamespaces {
		if len(byHolder) == len(names) {
			break
		}
		ns := newNamespace(t, nil)
		if h := holders[s.layout.Of(ns)]; byHolder[h] == "" {
			byHolder[h] = ns
		}
	}
	require.Len(t, byHolder, len(names), "a namespace of each replica's shards: %v", byHolder)
	// The node the suite keeps free for room tests (hack/e2e.sh): nothing
	// else runs there once the suite is done.
	node := env("E2E_DEFERRED_NODE", "hollow-2")
	type broker struct {
		ns   string
		pod  corev1.Pod
		seen func() []string
	}
	var brokers []broker
	w := &shardedWorkloads{pods: map[string]corev1.Pod{}, before: map[string]snapshot{}}
	for _, name := range names {
		ns := byHolder[name]
		pods := deploy(t, ns, workload{name: "web", node: node, requests: rl("200m", "100Mi")})
		newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)
		annotateVPA(t, ns, "web", map[string]string{"vpa-inplace.dev/resize-when": "fits-node"})
		brokers = append(brokers, broker{ns: ns, pod: pods[0], seen: watchResizePending(t, ns)})
		w.namespaces = append(w.namespaces, ns)
		w.pods[ns] = pods[0]
		w.before[ns] = snap(pods)
	}
	filler := fillLeaving(t, brokers[0].ns, node, "400m")

	for _, b := range brokers {
		recommend(t, b.ns, "web", "500m", "100Mi")
	}
	sent := func() []string {
		var out []string
		for _, b := range brokers {
			if getPod(t, b.ns, b.pod.Name).Generation > b.pod.Generation {
				out = append(out, b.ns)
			}
		}
		return out
	}
	waitFor(t, eventually, "one resize sent and the other waiting", func(ctx context.Context) (bool, error) {
		if len(sent()) == 0 {
			return false, nil
		}
		for _, b := range brokers {
			v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(b.ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range v.Status.Conditions {
				if c.Type == conditionBlocked && strings.Contains(c.Message, "1 waiting for node capacity") {
					return true, nil
				}
			}
		}
		return false, nil
	})
	w.requireStable(t)
	assert.Len(t, sent(), 1, "resizes sent while 400m were free: %v", sent())
	for _, b := range brokers {
		assert.Empty(t, b.seen(), "namespace %s: never PodResizePending", b.ns)
	}

	require.NoError(t, kube.CoreV1().Pods(brokers[0].ns).Delete(ctxFor(t), filler, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	for _, b := range brokers {
		got := waitResized(t, b.ns, b.pod.Name, "500m", "100Mi")
		assert.Equal(t, b.pod.Generation+1, got.Generation, "namespace %s: one resize patch", b.ns)
		assert.Empty(t, b.seen(), "namespace %s: never PodResizePending", b.ns)
	}
	w.notDisrupted(t)
	reserved := -reservedBefore
	for _, name := range names {
		reserved += seriesAt(s.metrics(t, name), metricReservations, "")
	}
	assert.GreaterOrEqual(t, reserved, 2.0, "each resize was reserved in the node's bucket before it was sent")
}

// requireStable is framework_test.go's requireStable over every namespace's
// pod at once: one settle window for all of them, not one each.
func (w *shardedWorkloads) requireStable(t *testing.T) {
	t.Helper()
	want := map[string]int64{}
	for _, ns := range w.namespaces {
		want[ns] = getPod(t, ns, w.pods[ns].Name).Generation
	}
	deadline := time.Now().Add(settle)
	for time.Now().Before(deadline) {
		for _, ns := range w.namespaces {
			p, err := kube.CoreV1().Pods(ns).Get(context.Background(), w.pods[ns].Name, metav1.GetOptions{})
			require.NoError(t, err, "namespace %s: the pod must still exist", ns)
			require.Equal(t, want[ns], p.Generation, "namespace %s: no resize may be sent meanwhile", ns)
		}
		time.Sleep(time.Second)
	}
}
