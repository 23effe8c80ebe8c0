//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// Annotations are written by anyone who may edit a VPA. A tenant's VPA
// (mode Off) carrying a record for another tenant's pod, and one carrying
// quantities that take minutes to parse, hold nothing back after the updater
// restarts: the other tenant's pod is resized as soon as it is recommended.
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
