package admission

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const targetRef = `"targetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"web"}`

func vpaJSON(spec string) string {
	return `{"apiVersion":"autoscaling.k8s.io/v1","kind":"VerticalPodAutoscaler",` +
		`"metadata":{"name":"web","namespace":"default","uid":"vpa-uid"},"spec":` + spec + `}`
}

// withMode is a VPA of Deployment web in the given updateMode.
func withMode(mode string) string {
	return vpaJSON(`{` + targetRef + `,"updatePolicy":{"updateMode":"` + mode + `"}}`)
}

// withPolicy is an InPlace VPA with the given container policies (a JSON
// array).
func withPolicy(policies string) string {
	return vpaJSON(`{` + targetRef + `,"updatePolicy":{"updateMode":"InPlace"},"resourcePolicy":{"containerPolicies":` + policies + `}}`)
}

const gateMessage = `spec.updatePolicy.updateMode: Forbidden: updateMode "InPlace" requires the InPlace feature gate: ` +
	`start the vpa-inplace admission controller with --feature-gates=InPlace=true`

func TestValidateVPAs(t *testing.T) {
	tests := []struct {
		name      string
		gate      bool
		operation string
		object    string
		old       string
		// wantMessages are all contained in the rejection's message; none
		// means the VPA is allowed.
		wantMessages []string
		wantWarnings []string
		wantReason   string
	}{
		// The InPlace feature gate (AEP-8818, "Feature Enablement and Rollback").
		{
			name: "gate off: creating an InPlace VPA is rejected, naming the gate and the component",
			gate: false, operation: "CREATE", object: withMode("InPlace"),
			wantMessages: []string{`VerticalPodAutoscaler.autoscaling.k8s.io "web" is invalid`, gateMessage},
			wantReason:   RejectionFeatureGate,
		},
		{
			name: "gate on: creating an InPlace VPA is accepted",
			gate: true, operation: "CREATE", object: withMode("InPlace"),
		},
		{
			name: "gate off: changing a VPA to InPlace is rejected",
			gate: false, operation: "UPDATE", object: withMode("InPlace"), old: withMode("Recreate"),
			wantMessages: []string{gateMessage}, wantReason: RejectionFeatureGate,
		},
		{
			name: "gate off: changing a VPA without updatePolicy to InPlace is rejected",
			gate: false, operation: "UPDATE", object: withMode("InPlace"), old: vpaJSON(`{` + targetRef + `}`),
			wantMessages: []string{gateMessage}, wantReason: RejectionFeatureGate,
		},
		{
			name: "gate on: changing a VPA to InPlace is accepted",
			gate: true, operation: "UPDATE", object: withMode("InPlace"), old: withMode("Recreate"),
		},
		{
			name: "gate off: updating a VPA that already was InPlace is allowed (ratchet)",
			gate: false, operation: "UPDATE",
			object: vpaJSON(`{` + targetRef + `,"updatePolicy":{"updateMode":"InPlace","minReplicas":2}}`),
			old:    withMode("InPlace"),
		},
		{
			name: "gate off: changing a VPA from InPlace to another mode is allowed",
			gate: false, operation: "UPDATE", object: withMode("Recreate"), old: withMode("InPlace"),
		},
		{
			name: "gate off: ratchet still validates the rest of the spec",
			gate: false, operation: "UPDATE",
			object: withPolicy(`[{"containerName":"app","mode":"Sometimes"}]`), old: withMode("InPlace"),
			wantMessages: []string{`spec.resourcePolicy.containerPolicies[0].mode: Unsupported value: "Sometimes"`},
			wantReason:   RejectionInvalid,
		},
		{name: "gate off: mode Off is accepted", operation: "CREATE", object: withMode("Off")},
		{name: "gate off: mode Initial is accepted", operation: "CREATE", object: withMode("Initial")},
		{name: "gate off: mode Recreate is accepted", operation: "CREATE", object: withMode("Recreate")},
		{name: "gate off: mode InPlaceOrRecreate is accepted", operation: "CREATE", object: withMode("InPlaceOrRecreate")},
		{name: "gate off: no updatePolicy is accepted", operation: "CREATE", object: vpaJSON(`{` + targetRef + `}`)},

		// updatePolicy.
		{
			name: "unknown updateMode lists the valid modes", gate: true, operation: "CREATE", object: withMode("Sometimes"),
			wantMessages: []string{`spec.updatePolicy.updateMode: Unsupported value: "Sometimes": supported values: "InPlace", "InPlaceOrRecreate", "Initial", "Off", "Recreate"`},
			wantReason:   RejectionInvalid,
		},
		{
			name: "deprecated updateMode Auto is accepted with a warning", operation: "CREATE", object: withMode("Auto"),
			wantWarnings: []string{`spec.updatePolicy.updateMode: "Auto" is deprecated`},
		},
		{
			name: "updatePolicy without updateMode", gate: true, operation: "CREATE",
			object:       vpaJSON(`{` + targetRef + `,"updatePolicy":{"minReplicas":2}}`),
			wantMessages: []string{"spec.updatePolicy.updateMode: Required value: updateMode is required when updatePolicy is set"},
			wantReason:   RejectionInvalid,
		},
		{
			name: "minReplicas must be positive", gate: true, operation: "CREATE",
			object:       vpaJSON(`{` + targetRef + `,"updatePolicy":{"updateMode":"InPlace","minReplicas":0}}`),
			wantMessages: []string{"spec.updatePolicy.minReplicas: Invalid value: 0: must be greater than 0"},
			wantReason:   RejectionInvalid,
		},
		{
			name: "eviction settings of an InPlace VPA are accepted with a warning", gate: true, operation: "CREATE",
			object:       vpaJSON(`{` + targetRef + `,"updatePolicy":{"updateMode":"InPlace","evictAfterOOMSeconds":30}}`),
			wantWarnings: []string{"spec.updatePolicy.evictAfterOOMSeconds: has no effect"},
		},

		// targetRef.
		{
			name: "targetRef is required on create", gate: true, operation: "CREATE",
			object:       vpaJSON(`{"updatePolicy":{"updateMode":"InPlace"}}`),
			wantMessages: []string{"spec.targetRef: Required value"}, wantReason: RejectionInvalid,
		},
		{
			name: "targetRef needs kind and name", gate: true, operation: "CREATE",
			object:       vpaJSON(`{"targetRef":{"apiVersion":"apps/v1"},"updatePolicy":{"updateMode":"InPlace"}}`),
			wantMessages: []string{"spec.targetRef.kind: Required value", "spec.targetRef.name: Required value"},
			wantReason:   RejectionInvalid,
		},

		// resourcePolicy.
		{
			name: "minAllowed above maxAllowed", gate: true, operation: "CREATE",
			object:       withPolicy(`[{"containerName":"app","minAllowed":{"cpu":"2","memory":"1Gi"},"maxAllowed":{"cpu":"1","memory":"2Gi"}}]`),
			wantMessages: []string{`spec.resourcePolicy.containerPolicies[0].maxAllowed[cpu]: Invalid value: "1": must not be less than minAllowed cpu (2)`},
			wantReason:   RejectionInvalid,
		},
		{
			name: "negative minAllowed", gate: true, operation: "CREATE",
			object:       withPolicy(`[{"containerName":"app","minAllowed":{"memory":"-1Mi"}}]`),
			wantMessages: []string{`spec.resourcePolicy.containerPolicies[0].minAllowed[memory]: Invalid value: "-1Mi": must not be negative`},
			wantReason:   RejectionInvalid,
		},
		{
			name: "cpu below a millicore", gate: true, operation: "CREATE",
			object:       withPolicy(`[{"containerName":"app","maxAllowed":{"cpu":"0.0005"}}]`),
			wantMessages: []string{`spec.resourcePolicy.containerPolicies[0].maxAllowed[cpu]: Invalid value: "500u": must be a whole number of millicores`},
			wantReason:   RejectionInvalid,
		},
		{
			name: "memory in fractions of a byte", gate: true, operation: "CREATE",
			object:       withPolicy(`[{"containerName":"app","minAllowed":{"memory":"100m"}}]`),
			wantMessages: []string{`spec.resourcePolicy.containerPolicies[0].minAllowed[memory]: Invalid value: "100m": must be a whole number of bytes`},
			wantReason:   RejectionInvalid,
		},
		{
			name: "bounds of other resources are accepted with a warning", gate: true, operation: "CREATE",
			object:       withPolicy(`[{"containerName":"app","maxAllowed":{"nvidia.com/gpu":"1"}}]`),
			wantWarnings: []string{`spec.resourcePolicy.containerPolicies[0].maxAllowed[nvidia.com/gpu]: is ignored`},
		},
		{
			name: "unknown controlledResources", gate: true, operation: "CREATE",
			object:       withPolicy(`[{"containerName":"app","controlledResources":["cpu","ephemeral-storage"]}]`),
			wantMessages: []string{`spec.resourcePolicy.containerPolicies[0].controlledResources[1]: Unsupported value: "ephemeral-storage": supported values: "cpu", "memory"`},
			wantReason:   RejectionInvalid,
		},
		{
			name: "controlledResources already in the old object are kept with a warning", gate: true, operation: "UPDATE",
			object:       withPolicy(`[{"containerName":"app","controlledResources":["cpu","ephemeral-storage"]}]`),
			old:          withPolicy(`[{"containerName":"app","controlledResources":["ephemeral-storage"]}]`),
			wantWarnings: []string{`"ephemeral-storage" is not supported`},
		},
		{
			name: "duplicate controlledResources", gate: true, operation: "CREATE",
			object:       withPolicy(`[{"containerName":"app","controlledResources":["cpu","cpu"]}]`),
			wantMessages: []string{`spec.resourcePolicy.containerPolicies[0].controlledResources[1]: Duplicate value: "cpu"`},
			wantReason:   RejectionInvalid,
		},
		{
			name: "unknown controlledValues", gate: true, operation: "CREATE",
			object:       withPolicy(`[{"containerName":"app","controlledValues":"LimitsOnly"}]`),
			wantMessages: []string{`spec.resourcePolicy.containerPolicies[0].controlledValues: Unsupported value: "LimitsOnly": supported values: "RequestsAndLimits", "RequestsOnly"`},
			wantReason:   RejectionInvalid,
		},
		{
			name: "unknown container mode", gate: true, operation: "CREATE",
			object:       withPolicy(`[{"containerName":"app","mode":"Manual"}]`),
			wantMessages: []string{`spec.resourcePolicy.containerPolicies[0].mode: Unsupported value: "Manual": supported values: "Auto", "Off"`},
			wantReason:   RejectionInvalid,
		},
		{
			name: "controlledValues RequestsAndLimits with mode Off", gate: true, operation: "CREATE",
			object:       withPolicy(`[{"containerName":"app","mode":"Off","controlledValues":"RequestsAndLimits"}]`),
			wantMessages: []string{"spec.resourcePolicy.containerPolicies[0].controlledValues: Forbidden: must not be set when the container's mode is Off"},
			wantReason:   RejectionInvalid,
		},
		{
			name: "duplicate container names", gate: true, operation: "CREATE",
			object:       withPolicy(`[{"containerName":"app","mode":"Auto"},{"containerName":"app","mode":"Off"}]`),
			wantMessages: []string{`spec.resourcePolicy.containerPolicies[1].containerName: Duplicate value: "app"`},
			wantReason:   RejectionInvalid,
		},
		{
			name: "missing container name", gate: true, operation: "CREATE",
			object:       withPolicy(`[{"mode":"Auto"}]`),
			wantMessages: []string{"spec.resourcePolicy.containerPolicies[0].containerName: Required value"},
			wantReason:   RejectionInvalid,
		},
		{
			name: "a policy for all containers is accepted", gate: true, operation: "CREATE",
			object: withPolicy(`[{"containerName":"*","minAllowed":{"cpu":"50m","memory":"64Mi"},"maxAllowed":{"cpu":"2","memory":"4Gi"},"controlledResources":["cpu","memory"],"controlledValues":"RequestsOnly"}]`),
		},
		{
			name: "oomBumpUpRatio below 1", gate: true, operation: "CREATE",
			object:       withPolicy(`[{"containerName":"app","oomBumpUpRatio":"0.5"}]`),
			wantMessages: []string{`spec.resourcePolicy.containerPolicies[0].oomBumpUpRatio: Invalid value: "500m": must be at least 1`},
			wantReason:   RejectionInvalid,
		},
		{
			name: "startupBoost factor below 1", gate: true, operation: "CREATE",
			object:       vpaJSON(`{` + targetRef + `,"updatePolicy":{"updateMode":"InPlace"},"startupBoost":{"cpu":{"type":"Factor","factor":0}}}`),
			wantMessages: []string{"spec.startupBoost.cpu.factor: Invalid value: 0: must be at least 1"},
			wantReason:   RejectionInvalid,
		},
		{
			name: "more than one recommender", gate: true, operation: "CREATE",
			object:       vpaJSON(`{` + targetRef + `,"recommenders":[{"name":"a"},{"name":"b"}]}`),
			wantMessages: []string{"spec.recommenders: Too many: 2: must have at most 1 item"},
			wantReason:   RejectionInvalid,
		},
		{
			name: "all errors are reported together", gate: false, operation: "CREATE",
			object: withPolicy(`[{"containerName":"app","minAllowed":{"cpu":"2"},"maxAllowed":{"cpu":"1"},"controlledResources":["gpu"]},{"containerName":"app"}]`),
			wantMessages: []string{
				gateMessage,
				"spec.resourcePolicy.containerPolicies[0].maxAllowed[cpu]: Invalid value",
				`spec.resourcePolicy.containerPolicies[0].controlledResources[0]: Unsupported value: "gpu"`,
				`spec.resourcePolicy.containerPolicies[1].containerName: Duplicate value: "app"`,
			},
			wantReason: RejectionFeatureGate,
		},

		// Operations that are not validated.
		{name: "delete is allowed", operation: "DELETE", object: "null", old: withMode("InPlace")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, metrics := testHandler{gate: tc.gate}.build(t)
			old := tc.old
			if old == "" {
				old = "null"
			}
			resp := response(t, post(t, h, ValidateVPAsPath, vpaReview(tc.operation, tc.object, old)))
			assert.Empty(t, resp.Patch, "VPAs are never patched")
			for _, w := range tc.wantWarnings {
				assert.True(t, containsAny(resp.Warnings, w), "warnings %q should contain %q", resp.Warnings, w)
			}
			if len(tc.wantMessages) == 0 {
				require.True(t, resp.Allowed, "rejected: %v", resp.Result)
				assert.Equal(t, 1.0, testutil.ToFloat64(metrics.requests.WithLabelValues(EndpointValidateVPAs, OutcomeAllowed)))
				return
			}
			require.False(t, resp.Allowed)
			require.NotNil(t, resp.Result)
			assert.Equal(t, int32(http.StatusUnprocessableEntity), resp.Result.Code)
			assert.Equal(t, metav1.StatusReasonInvalid, resp.Result.Reason)
			for _, m := range tc.wantMessages {
				assert.Contains(t, resp.Result.Message, m)
			}
			assert.Equal(t, 1.0, testutil.ToFloat64(metrics.requests.WithLabelValues(EndpointValidateVPAs, OutcomeRejected)))
			assert.Equal(t, 1.0, testutil.ToFloat64(metrics.rejections.WithLabelValues(tc.wantReason)))
		})
	}
}

func TestValidateVPAsSkipsNamespacesNotHandled(t *testing.T) {
	for name, c := range map[string]testHandler{
		"ignored namespace":             {ignored: []string{"default"}},
		"outside the watched namespace": {namespace: "team-a"},
	} {
		t.Run(name, func(t *testing.T) {
			h, _ := c.build(t)
			resp := response(t, post(t, h, ValidateVPAsPath, vpaReview("CREATE", withMode("InPlace"), "null")))
			assert.True(t, resp.Allowed)
		})
	}
	t.Run("the watched namespace is validated", func(t *testing.T) {
		h, _ := testHandler{namespace: "default"}.build(t)
		resp := response(t, post(t, h, ValidateVPAsPath, vpaReview("CREATE", withMode("InPlace"), "null")))
		assert.False(t, resp.Allowed)
	})
}

func TestValidateVPAsStatusSubresourceIsAllowed(t *testing.T) {
	h, _ := testHandler{}.build(t)
	body := strings.Replace(vpaReview("UPDATE", withMode("InPlace"), withMode("Off")),
		`"namespace":"default"`, `"subResource":"status","namespace":"default"`, 1)
	resp := response(t, post(t, h, ValidateVPAsPath, body))
	assert.True(t, resp.Allowed)
}

func containsAny(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
