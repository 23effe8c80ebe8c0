//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// Annotations are written by anyone who may edit a VPA. A tenant's VPA
// (mode Off) carrying a record for another tenant's pod, and one carrying
// quantities that take minutes to parse, hold nothing back after the updater
// restarts: the other tenant's pod is resized as soon as it is recommended.
// webhookTimeout is the timeoutSeconds of the chart's webhooks (values.yaml,
// deploy/base/admission-controller/webhooks.yaml).
const webhookTimeout = 5 * time.Second

func TestHostileAnnotationsHoldNothingBack(t *testing.T) {
	script := os.Getenv("E2E_UPDATER_RESTART")
	if script == "" {
		t.Skip("E2E_UPDATER_RESTART is not set: no way to restart the updater")
	}
	victim := newNamespace(t, nil)
	pods := deploy(t, victim, workload{name: "web", requests: rl("100m", "100Mi")})
	newVPA(t, victim, "web", vpatypes.UpdateModeInPlace, nil)

	attacker := newNamespace(t, nil)
	recordedAt := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	crossTenant := fmt.Sprintf(`{"version":1,"attempts":[{"kind":"Infeasible","resources":{"app":{"requests":{"cpu":"1m"}}}}],`+
		`"pods":{%q:{"attempt":0,"recordedAt":%q}}}`, pods[0].UID, recordedAt)
	var slow strings.Builder
	slow.WriteString(`{"version":1,"attempts":[`)
	for i := range 12 {
		if i > 0 {
			slow.WriteString(",")
		}
		slow.WriteString(`{"kind":"Infeasible","resources":{"app":{"requests":{"cpu":"1e-99999999"}}}}`)
	}
	slow.WriteString(fmt.Sprintf(`],"pods":{%q:{"attempt":0,"recordedAt":%q}}}`, pods[0].UID, recordedAt))
	require.Less(t, slow.Len(), 1200, "about 1 KiB")
	off := vpatypes.UpdateModeOff
	for name, value := range map[string]string{"cross-tenant": crossTenant, "slow": slow.String()} {
		_, err := vpas.AutoscalingV1().VerticalPodAutoscalers(attacker).Create(ctxFor(t), &vpatypes.VerticalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annotationRecords: value}},
			Spec: vpatypes.VerticalPodAutoscalerSpec{
				TargetRef:    &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				UpdatePolicy: &vpatypes.PodUpdatePolicy{UpdateMode: &off},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err, "a VPA annotation is metadata, not validated")
	}

	out, err := exec.CommandContext(ctxFor(t), script).CombinedOutput()
	require.NoError(t, err, "restarting the updater: %s", out)
	waitFor(t, eventually, "the new updater leading, with the records loaded", func(context.Context) (bool, error) {
		return updaterSeries(metricDecisions, "") >= 1 || updaterSeries("vpa_inplace_updater_records_dropped_total", "") >= 1, nil
	})

	start := time.Now()
	recommend(t, victim, "web", "200m", "100Mi")
	var resizedAt time.Time
	waitFor(t, 30*time.Second, "the victim's pod resized", func(context.Context) (bool, error) {
		p := getPod(t, victim, pods[0].Name)
		if p.Spec.Containers[0].Resources.Requests.Cpu().String() == "200m" {
			resizedAt = time.Now()
			return true, nil
		}
		return false, nil
	})
	took := resizedAt.Sub(start)
	t.Logf("resize sent %s after the recommendation", took.Round(10*time.Millisecond))
	assert.Less(t, took, 10*time.Second, "nothing another tenant wrote delays the resize")
	assert.Zero(t, eventCount(t, victim, pods[0].Name, eventInfeasible), "no record of another VPA's making is reported")
	assert.GreaterOrEqual(t, updaterSeries("vpa_inplace_updater_records_dropped_total", ""), 2.0,
		"the records of both annotations are dropped and counted")
	// Records now live in ConfigMaps of the updater's namespace: the
	// annotations were read once, to move what they held, and removed.
	for _, name := range []string{"cross-tenant", "slow"} {
		waitFor(t, eventually, "the records annotation of "+name+" removed", func(ctx context.Context) (bool, error) {
			v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(attacker).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			_, has := v.Annotations[annotationRecords]
			return !has, nil
		})
	}
}

// Issue #32, item 1: a hostile tenant creates pods that each name 32
// StrimziPodSets that do not exist (ownerReferences with controller: false),
// in a namespace whose one VPA targets a KafkaNodePool whose selector
// matches them and which no pod reaches: each such pod costs owner reads in
// the admission controller and in the updater. Meanwhile another tenant's
// VPA writes are admitted (their webhook fails closed), its new pods get
// their recommendation, and its running pod is resized as soon as it is
// recommended. On 12d10ae each hostile pod cost 32 sequential reads that
// ignored the webhook's deadline and queued behind the client's rate
// limiter: the webhook's 16 slots filled, and VPA writes were refused.
func TestHostileOwnerReferencesHoldNoOneBack(t *testing.T) {
	parallel(t)
	installStrimziCRDs(t)
	attacker := newNamespace(t, nil)
	pool, err := dyn.Resource(nodePoolGVR).Namespace(attacker).Create(ctxFor(t), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kafka.strimzi.io/v1",
		"kind":       "KafkaNodePool",
		"metadata":   map[string]any{"name": "brokers"},
		"spec":       map[string]any{"replicas": int64(3), "roles": []any{"broker"}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedMap(pool.Object, map[string]any{"replicas": int64(3), "labelSelector": brokerSelector}, "status"))
	_, err = dyn.Resource(nodePoolGVR).Namespace(attacker).UpdateStatus(ctxFor(t), pool, metav1.UpdateOptions{})
	require.NoError(t, err)
	newPoolVPA(t, attacker, nil)

	victim := newNamespace(t, nil)
	pods := deploy(t, victim, workload{name: "web", requests: rl("100m", "100Mi")})
	newVPA(t, victim, "web", vpatypes.UpdateModeInPlace, nil)

	// The hostile load: 8 clients creating such pods, about 20 a second in
	// all, until the victim's checks are done. They never schedule (a
	// node that does not exist); the garbage collector deletes them, their
	// owners being missing.
	const creators, perCreatorEvery = 8, 400 * time.Millisecond
	hostilePod := func(i int64) *corev1.Pod {
		l := map[string]string{"app": "hostile"}
		for _, kv := range strings.Split(brokerSelector, ",") {
			k, v, _ := strings.Cut(kv, "=")
			l[k] = v
		}
		refs := make([]metav1.OwnerReference, 32)
		for j := range refs {
			refs[j] = metav1.OwnerReference{APIVersion: "core.strimzi.io/v1", Kind: "StrimziPodSet",
				Name: fmt.Sprintf("ghost-%d-%d", i, j), UID: types.UID(fmt.Sprintf("00000000-0000-0000-%04d-%012d", j, i)), Controller: ptr.To(false)}
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("hostile-%d", i), Labels: l, OwnerReferences: refs},
			Spec: corev1.PodSpec{
				NodeSelector:                  map[string]string{"kubernetes.io/hostname": "nowhere"},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "kafka", Image: "registry.invalid/kafka:1",
					Resources: corev1.ResourceRequirements{Requests: rl("10m", "10Mi")}}},
			},
		}
	}
	ctx, stop := context.WithCancel(ctxFor(t))
	defer stop()
	var created, failed atomic.Int64
	var seq atomic.Int64
	var load sync.WaitGroup
	for range creators {
		load.Go(func() {
			tick := time.NewTicker(perCreatorEvery)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				_, err := kube.CoreV1().Pods(attacker).Create(ctx, hostilePod(seq.Add(1)), metav1.CreateOptions{})
				switch {
				case err == nil:
					created.Add(1)
				case ctx.Err() == nil:
					failed.Add(1)
				}
			}
		})
	}
	defer func() {
		stop()
		load.Wait()
	}()
	loadStart := time.Now()
	waitFor(t, eventually, "hostile pods being created", func(context.Context) (bool, error) { return created.Load() >= 40, nil })

	// The victim's VPA writes: each is admitted, promptly.
	var vpaTimes []time.Duration
	mode := vpatypes.UpdateModeInPlace
	for i := range 10 {
		start := time.Now()
		_, err := vpas.AutoscalingV1().VerticalPodAutoscalers(victim).Create(ctxFor(t), &vpatypes.VerticalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("other-%d", i)},
			Spec: vpatypes.VerticalPodAutoscalerSpec{
				TargetRef:    &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: fmt.Sprintf("other-%d", i)},
				UpdatePolicy: &vpatypes.PodUpdatePolicy{UpdateMode: &mode},
			},
		}, metav1.CreateOptions{})
		vpaTimes = append(vpaTimes, time.Since(start))
		require.NoError(t, err, "the victim's VPA CREATE %d while the hostile tenant creates pods", i)
		time.Sleep(time.Second)
	}

	// The victim's running pod is resized as soon as it is recommended.
	start := time.Now()
	recommend(t, victim, "web", "200m", "100Mi")
	waitResized(t, victim, pods[0].Name, "200m", "100Mi")
	resized := time.Since(start)

	// And its new pods get the recommendation at creation.
	got, err := kube.CoreV1().Pods(victim).Create(ctxFor(t), func() *corev1.Pod {
		p := dryRunPod(pods[0])
		p.Namespace = victim
		return p
	}(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err)
	assert.Equal(t, "200m", got.Spec.Containers[0].Resources.Requests.Cpu().String(), "a new pod of the victim gets its recommendation")

	stop()
	load.Wait()
	loadFor := time.Since(loadStart)
	slices.Sort(vpaTimes)
	t.Logf("hostile pods: %d created in %s (%.1f/s), %d creations failed; victim VPA CREATE: median %s, max %s; resize %s after the recommendation",
		created.Load(), loadFor.Round(time.Second), float64(created.Load())/loadFor.Seconds(), failed.Load(),
		vpaTimes[len(vpaTimes)/2].Round(time.Millisecond), vpaTimes[len(vpaTimes)-1].Round(time.Millisecond), resized.Round(10*time.Millisecond))
	// The bounds are what waiting on the hostile tenant would cost, not how
	// fast a busy machine answers: a VPA write queued behind the hostile
	// pods' owner reads reaches the webhook's timeout (5 s, then refused);
	// the updater reading their owners at its client's QPS before the
	// victim's pod would resize it minutes late (the hostile pods name 32
	// owners each). The figures are logged above.
	assert.Less(t, vpaTimes[len(vpaTimes)-1], webhookTimeout, "no VPA write of the victim waits on the hostile tenant")
	assert.Less(t, resized, 45*time.Second, "nothing the hostile tenant does delays the victim's resize")
	assert.Zero(t, failed.Load(), "the hostile pods themselves are admitted (the pod webhook fails open, and answers)")
}
