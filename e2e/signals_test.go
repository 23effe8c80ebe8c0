//go:build e2e

package e2e

// Durable records and the signals users act on (docs/observability.md):
// records survive an updater restart; each InPlace VPA carries the
// InPlaceResizeBlocked condition; Infeasible, Invalid and long Deferred
// waits are events on the VPA too; the pause annotation stops resizes.
//
// Environment, besides framework_test.go's:
//
//	E2E_UPDATER_RESTART          an executable that stops the updater with
//	                             SIGTERM, starts it again with the same flags
//	                             (same metrics address) and returns once its
//	                             /readyz answers; the restart test is skipped
//	                             without it
//	E2E_DEFERRED_WARNING_AFTER   the updater's --deferred-warning-after when
//	                             short enough to wait for (e.g. 5s); the long
//	                             Deferred warning is checked only when set

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

const (
	eventInvalid         = "InPlaceResizeInvalid"
	eventDeferredTooLong = "InPlaceResizeDeferredTooLong"
	eventWithheld        = "InPlaceResizeWithheld"
	conditionBlocked     = "InPlaceResizeBlocked"
	// annotationRecords is where records were kept before they moved to
	// ConfigMaps; the updater still reads it once, to move what it holds.
	annotationRecords = "vpa-inplace.dev/infeasible-attempts"
	// recordsNamespace holds the records' ConfigMaps, one per VPA and store.
	recordsNamespace = "vpa-inplace-system"
	annotationPaused = "vpa-inplace.dev/paused"
	metricDecisions  = "vpa_inplace_updater_decisions_total"
)

// A record made before a restart is loaded before any decision: the same
// infeasible resize is not attempted again. On v1.37 an attempt would be
// refused again (a second Infeasible event); on v1.35-kubelet it would be a
// second patch (a new generation).
func TestInfeasibleRecordSurvivesRestart(t *testing.T) {
	script := os.Getenv("E2E_UPDATER_RESTART")
	if script == "" {
		t.Skip("E2E_UPDATER_RESTART is not set: no way to restart the updater")
	}
	ns, pod, before := infeasibleSetup(t)
	waitRecordWritten(t, ns, "web", "infeasible", pod.UID)
	g := getPod(t, ns, pod.Name).Generation

	out, err := exec.CommandContext(ctxFor(t), script).CombinedOutput()
	require.NoError(t, err, "restarting the updater: %s", out)
	waitFor(t, eventually, "the new updater leading, with the records loaded", func(context.Context) (bool, error) {
		return updaterSeries(metricRecords, "") >= 1, nil
	})
	waitFor(t, eventually, "the pod decided against the loaded record", func(context.Context) (bool, error) {
		return updaterSeries(metricDecisions, `reason="RecordedAttemptSame"`)+updaterSeries(metricDecisions, `reason="Infeasible"`) >= 1, nil
	})
	requireStable(t, ns, pod.Name)
	assert.Equal(t, g, getPod(t, ns, pod.Name).Generation, "no second patch")
	assert.Equal(t, int32(1), eventCount(t, ns, pod.Name, eventInfeasible), "no repeated attempt after the restart")
	requireNotDisrupted(t, ns, "web", before)
}

func TestVPAConditionInfeasible(t *testing.T) {
	parallel(t)
	ns, pod, before := infeasibleSetup(t)
	c := waitCondition(t, ns, "web", "Infeasible")
	assert.Equal(t, corev1.ConditionTrue, c.Status)
	assert.Contains(t, c.Message, pod.Name)
	assert.Contains(t, c.Message, "cpu=8")
	assert.Contains(t, c.Message, "not retried until the recommendation asks for less")
	waitVPAEvent(t, ns, "web", eventInfeasible)
	requireNotDisrupted(t, ns, "web", before)
}

func TestVPAConditionDeferred(t *testing.T) {
	ns, pods, before := deferredSetup(t)
	g0 := pods[0].Generation

	recommend(t, ns, "web", "1", "100Mi")
	c := waitCondition(t, ns, "web", "Deferred")
	assert.Equal(t, corev1.ConditionTrue, c.Status)
	assert.Contains(t, c.Message, "oldest pending "+pods[0].Name+" since ")
	assert.Contains(t, c.Message, "not evicted")

	if after := os.Getenv("E2E_DEFERRED_WARNING_AFTER"); after != "" {
		d, err := time.ParseDuration(after)
		require.NoError(t, err, "E2E_DEFERRED_WARNING_AFTER")
		waitFor(t, d+eventually, "the long Deferred warning on the pod", func(context.Context) (bool, error) {
			return eventCount(t, ns, pods[0].Name, eventDeferredTooLong) >= 1, nil
		})
		waitVPAEvent(t, ns, "web", eventDeferredTooLong)
		e := events(t, ns, pods[0].Name, eventDeferredTooLong)
		require.NotEmpty(t, e)
		assert.Contains(t, e[0].Message, "still waiting, the pod is not evicted")
	}
	requireStable(t, ns, pods[0].Name)
	assert.Equal(t, g0+1, getPod(t, ns, pods[0].Name).Generation, "one patch, then waiting")
	requireNotDisrupted(t, ns, "web", before)
}

// A BestEffort pod cannot get requests in place (its QoS class would
// change): the change is recorded as invalid, reported, and not sent.
func TestVPAConditionInvalid(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	pods := deploy(t, ns, workload{name: "web"})
	before := snap(pods)
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)

	recommend(t, ns, "web", "300m", "100Mi")
	waitEvent(t, ns, pods[0].Name, eventInvalid, 1)
	c := waitCondition(t, ns, "web", "Invalid")
	assert.Equal(t, corev1.ConditionTrue, c.Status)
	assert.Contains(t, c.Message, pods[0].Name)
	assert.Contains(t, c.Message, "QoS class")
	waitVPAEvent(t, ns, "web", eventInvalid)
	requireStable(t, ns, pods[0].Name)
	assert.Equal(t, pods[0].Generation, getPod(t, ns, pods[0].Name).Generation, "nothing sent")
	requireNotDisrupted(t, ns, "web", before)
}

// The kill switch of one VPA: nothing is sent while it is paused, the
// condition says so, and removing the annotation resumes at once.
func TestPausedVPA(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	pods := deploy(t, ns, workload{name: "web", requests: rl("100m", "100Mi")})
	before := snap(pods)
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)
	setVPAAnnotation(t, ns, "web", annotationPaused, ptrString("true"))

	recommend(t, ns, "web", "250m", "200Mi")
	waitEvent(t, ns, pods[0].Name, eventWithheld, 1)
	c := waitCondition(t, ns, "web", "Paused")
	assert.Equal(t, corev1.ConditionTrue, c.Status)
	assert.Contains(t, c.Message, annotationPaused)
	requireStable(t, ns, pods[0].Name)
	assert.Equal(t, pods[0].Generation, getPod(t, ns, pods[0].Name).Generation, "nothing sent while paused")

	setVPAAnnotation(t, ns, "web", annotationPaused, nil)
	waitResized(t, ns, pods[0].Name, "250m", "200Mi")
	waitCondition(t, ns, "web", "NotBlocked")
	requireNotDisrupted(t, ns, "web", before)
}

func ptrString(s string) *string { return &s }

// setVPAAnnotation sets (or, with nil, removes) an annotation of a VPA.
func setVPAAnnotation(t *testing.T, ns, name, key string, value *string) {
	t.Helper()
	var v any
	if value != nil {
		v = *value
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: v}}})
	require.NoError(t, err)
	_, err = vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Patch(ctxFor(t), name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

// waitCondition waits until the VPA's InPlaceResizeBlocked condition has
// the reason, and returns it.
func waitCondition(t *testing.T, ns, name, reason string) vpatypes.VerticalPodAutoscalerCondition {
	t.Helper()
	var got vpatypes.VerticalPodAutoscalerCondition
	var last string
	waitFor(t, eventually, "condition "+conditionBlocked+" with reason "+reason+" on VPA "+name, func(ctx context.Context) (bool, error) {
		v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range v.Status.Conditions {
			if c.Type == conditionBlocked {
				got, last = c, string(c.Status)+"/"+c.Reason+": "+c.Message
				return c.Reason == reason, nil
			}
		}
		return false, nil
	})
	t.Logf("%s: %s", conditionBlocked, last)
	return got
}

// waitVPAEvent waits for an event with the reason on the VPA itself.
func waitVPAEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	waitFor(t, eventually, "event "+reason+" on VPA "+name, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=VerticalPodAutoscaler,involvedObject.name=" + name + ",reason=" + reason,
		})
		return err == nil && len(list.Items) > 0, nil
	})
}

// updaterSeries sums the series of a metric whose line contains match; 0
// while the updater does not answer (it is restarting).
func updaterSeries(name, match string) float64 {
	return seriesAt(os.Getenv("E2E_UPDATER_METRICS"), name, match)
}

func sumSeries(resp *http.Response, name, match string) float64 {
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || !(strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{")) || !strings.Contains(line, match) {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// recordWritten tells whether the records ConfigMap of store ("infeasible"
// or "memory") of the VPA ns/name holds a record of uid.
func recordWritten(ctx context.Context, ns, name, store string, uid types.UID) (bool, error) {
	v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	cm, err := kube.CoreV1().ConfigMaps(recordsNamespace).Get(ctx, "vpa-inplace-records-"+store+"-"+string(v.UID), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return strings.Contains(cm.Data["records"], string(uid)+":"), nil
}

// waitRecordWritten waits until the records of the VPA ns/name hold a record
// of uid in their ConfigMap.
func waitRecordWritten(t *testing.T, ns, name, store string, uid types.UID) {
	t.Helper()
	waitFor(t, eventually, "the "+store+" record written into the VPA's records ConfigMap", func(ctx context.Context) (bool, error) {
		return recordWritten(ctx, ns, name, store, uid)
	})
}
