//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A VPA of any mode whose quantities take minutes to parse is refused at
// admission, naming the field, before any VPA controller decodes it. The
// objects are sent as raw JSON: the typed client would parse the quantity
// itself.
func TestHostileQuantityRefusedAtAdmission(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	vpaWith := func(name, mode, minCPU string) []byte {
		return []byte(`{"apiVersion":"autoscaling.k8s.io/v1","kind":"VerticalPodAutoscaler","metadata":{"name":"` + name + `"},` +
			`"spec":{"targetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"},"updatePolicy":{"updateMode":"` + mode + `"},` +
			`"resourcePolicy":{"containerPolicies":[{"containerName":"app","minAllowed":{"cpu":"` + minCPU + `"}}]}}}`)
	}
	create := func(t *testing.T, body []byte) error {
		ctx, cancel := context.WithTimeout(ctxFor(t), 30*time.Second)
		defer cancel()
		return vpas.AutoscalingV1().RESTClient().Post().Namespace(ns).Resource("verticalpodautoscalers").
			SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Error()
	}
	for _, mode := range []string{"InPlace", "Off", "Recreate"} {
		t.Run(mode, func(t *testing.T) {
			start := time.Now()
			err := create(t, vpaWith("hostile-"+map[string]string{"InPlace": "a", "Off": "b", "Recreate": "c"}[mode], mode, "1e-99999999"))
			require.Error(t, err)
			assert.Contains(t, err.Error(), `spec.resourcePolicy.containerPolicies[0].minAllowed[cpu]: Invalid value: "1e-99999999"`)
			t.Logf("refused in %s", time.Since(start).Round(time.Millisecond))
		})
	}
	t.Run("usual quantities are accepted in any mode", func(t *testing.T) {
		require.NoError(t, create(t, vpaWith("usual-a", "InPlace", "100m")))
		require.NoError(t, create(t, vpaWith("usual-b", "Off", "100m")))
	})
}
