//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// With resize-when: fits-node (the default for Strimzi's pods), a resize the
// node has no room for is not sent at all: no resize write, the pod never
// shows PodResizePending (which Strimzi answers by restarting the broker).
// Once the filler pod goes, the resize is sent within seconds.
func TestFitsNodeSendsNothingUntilTheNodeHasRoom(t *testing.T) {
	ns := newNamespace(t, nil)
	node := env("E2E_DEFERRED_NODE", "hollow-2")
	pods := deploy(t, ns, workload{name: "web", node: node, requests: rl("200m", "100Mi")})
	before := snap(pods)
	filler := fill(t, ns, node, "3")
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)
	annotateVPA(t, ns, "web", map[string]string{"vpa-inplace.dev/resize-when": "fits-node"})
	g0 := pods[0].Generation

	recommend(t, ns, "web", "1", "100Mi")
	waitConditionMessage(t, ns, "web", "1 waiting for node capacity")
	requireStable(t, ns, pods[0].Name)
	p := getPod(t, ns, pods[0].Name)
	assert.Equal(t, g0, p.Generation, "no resize sent")
	assert.Empty(t, resizeConditions(p), "never PodResizePending")
	assert.Positive(t, eventCount(t, ns, pods[0].Name, "InPlaceResizeWaitingForNodeCapacity"))

	require.NoError(t, kube.CoreV1().Pods(ns).Delete(ctxFor(t), filler, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	start := time.Now()
	waitFor(t, eventually, "the resize sent once the node has room", func(context.Context) (bool, error) {
		return getPod(t, ns, pods[0].Name).Generation > g0, nil
	})
	t.Logf("resize sent %s after the filler's deletion", time.Since(start).Round(10*time.Millisecond))
	assert.Less(t, time.Since(start), 15*time.Second, "event-driven: the pod's node lost a pod")
	got := waitResized(t, ns, pods[0].Name, "1", "100Mi")
	assert.Equal(t, g0+1, got.Generation, "one patch")
	requireNotDisrupted(t, ns, "web", before)
}

// Three brokers whose resizes each fit the node alone, and not together:
// the node check and the room it allows are one step, so one broker is sent
// its resize and the other two wait; none ever shows PodResizePending (which
// Strimzi answers by rolling the broker). Once the filler goes, the other
// two follow.
func TestFitsNodeNeverSendsMoreThanTheNodeHolds(t *testing.T) {
	installStrimziCRDs(t)
	ns := newNamespace(t, nil)
	node := env("E2E_DEFERRED_NODE", "hollow-2")
	kafka := newKafkaCluster(t, ns, node)
	// Each broker grows from 200m to 500m: 300m more; 400m are free.
	filler := fillLeaving(t, ns, node, "400m")
	seen := watchResizePending(t, ns)

	newPoolVPA(t, ns, nil)
	recommendKafka(t, ns, "500m", "100Mi")
	waitConditionMessage(t, ns, "brokers", "2 waiting for node capacity")
	requireStable(t, ns, kafka.brokers[0].Name)
	var sent []string
	for _, p := range kafka.brokers {
		if getPod(t, ns, p.Name).Generation > p.Generation {
			sent = append(sent, p.Name)
		}
	}
	assert.Len(t, sent, 1, "brokers sent their resize while 400m were free: %v", sent)
	assert.Empty(t, seen(), "no broker ever showed PodResizePending")

	require.NoError(t, kube.CoreV1().Pods(ns).Delete(ctxFor(t), filler, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	for _, p := range kafka.brokers {
		got := waitResized(t, ns, p.Name, "500m", "100Mi")
		assert.Equal(t, p.Generation+1, got.Generation, "one resize patch for %s", p.Name)
	}
	assert.Empty(t, seen(), "no broker ever showed PodResizePending")
	requireNotDisrupted(t, ns, "my-cluster-brokers", kafka.before)
}

// An updater serving one namespace (--vpa-object-namespace) still counts
// the pods of every namespace bound to the node: a filler in another
// namespace leaves too little room, and nothing is sent until it goes.
// The suite's own updater ignores that namespace (hack/e2e.sh); this test
// runs the one serving it.
func TestFitsNodeServingOneNamespaceCountsTheOthers(t *testing.T) {
	binary, kubeconfig := os.Getenv("E2E_UPDATER_BINARY"), os.Getenv("E2E_UPDATER_KUBECONFIG")
	if binary == "" || kubeconfig == "" {
		t.Skip("E2E_UPDATER_BINARY and E2E_UPDATER_KUBECONFIG are not set (hack/e2e.sh sets them): the namespaced updater runs as a process here")
	}
	ns := fixedNamespace(t, env("E2E_SCOPED_NAMESPACE", "e2e-scoped"))
	startScopedUpdater(t, binary, kubeconfig, ns)
	other := newNamespace(t, nil)
	node := env("E2E_DEFERRED_NODE", "hollow-2")
	pods := deploy(t, ns, workload{name: "web", node: node, requests: rl("200m", "100Mi")})
	before := snap(pods)
	filler := fillLeaving(t, other, node, "100m")
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(ctxFor(t), "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		v.Annotations = map[string]string{"vpa-inplace.dev/resize-when": "fits-node"}
		_, err = vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Update(ctxFor(t), v, metav1.UpdateOptions{})
		return err
	}))
	g0 := pods[0].Generation

	recommend(t, ns, "web", "500m", "100Mi")
	waitConditionMessage(t, ns, "web", "1 waiting for node capacity")
	requireStable(t, ns, pods[0].Name)
	p := getPod(t, ns, pods[0].Name)
	assert.Equal(t, g0, p.Generation, "no resize sent: the filler of namespace %s holds the node", other)
	assert.Empty(t, resizeConditions(p), "never PodResizePending")

	require.NoError(t, kube.CoreV1().Pods(other).Delete(ctxFor(t), filler, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	start := time.Now()
	got := waitResized(t, ns, pods[0].Name, "500m", "100Mi")
	t.Logf("resize sent and applied %s after the other namespace's filler was deleted", time.Since(start).Round(10*time.Millisecond))
	assert.Equal(t, g0+1, got.Generation, "one patch")
	requireNotDisrupted(t, ns, "web", before)
}

// fixedNamespace creates the namespace name (once an earlier one of that
// name is gone) and deletes it after the test.
func fixedNamespace(t *testing.T, name string) string {
	t.Helper()
	waitFor(t, eventually, "namespace "+name+" created", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{"vpa-inplace.dev/e2e": "true"}}}, metav1.CreateOptions{})
		return err == nil, nil
	})
	t.Cleanup(func() {
		if t.Failed() {
			dumpNamespace(t, name)
		}
		_ = kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	waitFor(t, eventually, "default ServiceAccount in "+name, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	return name
}

// startScopedUpdater runs an updater serving ns only, with the suite's
// updater identity, until the test ends.
func startScopedUpdater(t *testing.T, binary, kubeconfig, ns string) {
	t.Helper()
	health := freePort(t)
	logFile, err := os.Create(filepath.Join(env("E2E_LOG_DIR", t.TempDir()), "updater-scoped.log"))
	require.NoError(t, err)
	cmd := exec.Command(binary, "--kubeconfig="+kubeconfig, "--feature-gates=InPlace=true",
		"--vpa-object-namespace="+ns, "--leader-elect=false", "--updater-interval=5s", "--config-map=",
		"--records-namespace=vpa-inplace-system", fmt.Sprintf("--address=127.0.0.1:%d", health), "-v=2")
	cmd.Env = append(os.Environ(), "POD_NAMESPACE=vpa-inplace-system")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	t.Logf("updater serving %s: pid %d, log %s", ns, cmd.Process.Pid, logFile.Name())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = logFile.Close()
	})
	waitFor(t, eventually, "the updater serving "+ns+" ready", func(context.Context) (bool, error) {
		return readyz(health), nil
	})
}
