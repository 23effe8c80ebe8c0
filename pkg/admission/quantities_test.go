package admission

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hostile is 11 bytes that resource.ParseQuantity takes about 45 s to parse.
const hostile = "1e-99999999"

// withModeAndPolicy is a VPA of Deployment web in mode with the given
// container policies (a JSON array) and extra spec fields.
func withModeAndPolicy(mode, policies, extra string) string {
	return vpaJSON(`{` + targetRef + `,"updatePolicy":{"updateMode":"` + mode + `"},"resourcePolicy":{"containerPolicies":` + policies + `}` + extra + `}`)
}

// withLabel adds a label to a VPA of vpaJSON.
func withLabel(vpa string) string {
	return strings.Replace(vpa, `"uid":"vpa-uid"`, `"uid":"vpa-uid","labels":{"team":"web"}`, 1)
}

// postWithin posts like post, and fails the test if the answer takes longer
// than a bound far above what a bounded check needs (milliseconds), and far
// below what parsing one hostile quantity costs (tens of seconds).
func postWithin(t *testing.T, h http.Handler, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() { done <- post(t, h, path, body) }()
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer within 10s: the quantity is being parsed")
		return nil
	}
}

func TestVPAQuantityBound(t *testing.T) {
	tests := []struct {
		name      string
		path      string
		operation string
		object    string
		old       string
		// wantMessages are all in the rejection's message; none means
		// allowed.
		wantMessages []string
		wantWarnings []string
	}{
		{
			name: "InPlace VPA: minAllowed cpu refused, naming the field", path: ValidateVPAsPath, operation: "CREATE",
			object:       withPolicy(`[{"containerName":"app","minAllowed":{"cpu":"` + hostile + `"}}]`),
			wantMessages: []string{`spec.resourcePolicy.containerPolicies[0].minAllowed[cpu]: Invalid value: "1e-99999999": quantity "1e-99999999" has an exponent beyond ±30`},
		},
		{
			name: "mode Off: maxAllowed memory refused", path: ValidateVPAQuantitiesPath, operation: "CREATE",
			object:       withModeAndPolicy("Off", `[{"containerName":"*","maxAllowed":{"memory":"`+hostile+`"}}]`, ""),
			wantMessages: []string{`spec.resourcePolicy.containerPolicies[0].maxAllowed[memory]: Invalid value: "1e-99999999"`},
		},
		{
			name: "mode Recreate: startupBoost quantity refused", path: ValidateVPAQuantitiesPath, operation: "CREATE",
			object:       withModeAndPolicy("Recreate", `[]`, `,"startupBoost":{"cpu":{"type":"Quantity","quantity":"`+hostile+`"}}`),
			wantMessages: []string{`spec.startupBoost.cpu.quantity: Invalid value: "1e-99999999"`},
		},
		{
			name: "container startupBoost, oomMinBumpUp and oomBumpUpRatio refused together", path: ValidateVPAQuantitiesPath, operation: "CREATE",
			object: withModeAndPolicy("Initial", `[{"containerName":"a","oomMinBumpUp":"`+hostile+`","oomBumpUpRatio":"1`+strings.Repeat("0", 40)+`",`+
				`"startupBoost":{"cpu":{"type":"Quantity","quantity":"1E+99999999999"}}}]`, ""),
			wantMessages: []string{
				`spec.resourcePolicy.containerPolicies[0].oomMinBumpUp: Invalid value`,
				`spec.resourcePolicy.containerPolicies[0].oomBumpUpRatio: Invalid value: "1000000000000000000000000000000000000000...": quantity "10000`,
				`spec.resourcePolicy.containerPolicies[0].startupBoost.cpu.quantity: Invalid value: "1E+99999999999"`,
			},
		},
		{
			name: "an unquoted number is refused", path: ValidateVPAsPath, operation: "CREATE",
			object:       withPolicy(`[{"containerName":"app","maxAllowed":{"cpu":` + hostile + `}}]`),
			wantMessages: []string{`spec.resourcePolicy.containerPolicies[0].maxAllowed[cpu]: Invalid value: "1e-99999999"`},
		},
		{
			name: "a duplicate key does not hide the first value", path: ValidateVPAsPath, operation: "CREATE",
			object:       withPolicy(`[{"containerName":"app","minAllowed":{"cpu":"` + hostile + `","cpu":"1"}}]`),
			wantMessages: []string{`minAllowed[cpu]: Invalid value: "1e-99999999"`},
		},
		{
			name: "keys in another case are checked too", path: ValidateVPAsPath, operation: "CREATE",
			object:       withPolicy(`[{"containerName":"app","MinAllowed":{"cpu":"` + hostile + `"}}]`),
			wantMessages: []string{`spec.resourcePolicy.containerPolicies[0].MinAllowed[cpu]: Invalid value`},
		},
		{
			name: "a new recommendation in the status is refused", path: ValidateVPAQuantitiesPath, operation: "UPDATE",
			object: strings.TrimSuffix(withMode("Off"), "}") + `,"status":{"recommendation":{"containerRecommendations":[` +
				`{"containerName":"app","target":{"cpu":"1m"},"upperBound":{"memory":"` + hostile + `"}}]}}}`,
			old:          withMode("Off"),
			wantMessages: []string{`status.recommendation.containerRecommendations[0].upperBound[memory]: Invalid value`},
		},
		{
			name: "usual quantities are accepted", path: ValidateVPAsPath, operation: "CREATE",
			object: withPolicy(`[{"containerName":"app","minAllowed":{"cpu":"100m","memory":"1e3"},"maxAllowed":{"cpu":2,"memory":"1Ei"},` +
				`"oomBumpUpRatio":"1.5","oomMinBumpUp":"100Mi"}]`),
		},
		{
			name: "a value the stored object holds at the same place is accepted with a warning", path: ValidateVPAsPath, operation: "UPDATE",
			object:       withLabel(withPolicy(`[{"containerName":"app","minAllowed":{"cpu":"` + hostile + `"}}]`)),
			old:          withPolicy(`[{"containerName":"app","minAllowed":{"cpu":"` + hostile + `"}}]`),
			wantWarnings: []string{`spec.resourcePolicy.containerPolicies[0].minAllowed[cpu]: Invalid value: "1e-99999999"`, "accepted only because it is unchanged"},
		},
		{
			name: "the same for another mode", path: ValidateVPAQuantitiesPath, operation: "UPDATE",
			object:       withLabel(withModeAndPolicy("Off", `[{"containerName":"app","minAllowed":{"cpu":"`+hostile+`"}}]`, "")),
			old:          withModeAndPolicy("Off", `[{"containerName":"app","minAllowed":{"cpu":"`+hostile+`"}}]`, ""),
			wantWarnings: []string{"accepted only because it is unchanged"},
		},
		{
			name: "the same value moved elsewhere is refused", path: ValidateVPAsPath, operation: "UPDATE",
			object:       withPolicy(`[{"containerName":"app","maxAllowed":{"cpu":"` + hostile + `"}}]`),
			old:          withPolicy(`[{"containerName":"app","minAllowed":{"cpu":"` + hostile + `"}}]`),
			wantMessages: []string{`spec.resourcePolicy.containerPolicies[0].maxAllowed[cpu]: Invalid value`},
		},
		{
			name: "a stored value replaced by a usual one is accepted", path: ValidateVPAsPath, operation: "UPDATE",
			object: withPolicy(`[{"containerName":"app","minAllowed":{"cpu":"100m"}}]`),
			old:    withPolicy(`[{"containerName":"app","minAllowed":{"cpu":"` + hostile + `"}}]`),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, metrics := testHandler{gate: true}.build(t)
			old := tc.old
			if old == "" {
				old = "null"
			}
			resp := response(t, postWithin(t, h, tc.path, vpaReview(tc.operation, tc.object, old)))
			assert.Empty(t, resp.Patch)
			for _, w := range tc.wantWarnings {
				assert.True(t, containsAny(resp.Warnings, w), "warnings %q should contain %q", resp.Warnings, w)
			}
			if len(tc.wantMessages) == 0 {
				require.True(t, resp.Allowed, "rejected: %v", resp.Result)
				return
			}
			require.False(t, resp.Allowed)
			require.NotNil(t, resp.Result)
			assert.Equal(t, int32(http.StatusUnprocessableEntity), resp.Result.Code)
			assert.Equal(t, metav1.StatusReasonInvalid, resp.Result.Reason)
			for _, m := range tc.wantMessages {
				assert.Contains(t, resp.Result.Message, m)
			}
			assert.Equal(t, 1.0, testutil.ToFloat64(metrics.rejections.WithLabelValues(RejectionQuantity)))
		})
	}
}

// The bound is that of pkg/quantity: everything it accepts parses.
func TestVPAQuantityBoundMatchesPackageQuantity(t *testing.T) {
	for _, q := range []string{"0", "1", "100m", "1.5Gi", "1e30", "1e-30", "999999999999999999999999999999", "+1", "1Ei"} {
		_, err := resource.ParseQuantity(q)
		require.NoError(t, err, q)
		found, err := scanVPAQuantities([]byte(withPolicy(`[{"containerName":"app","minAllowed":{"cpu":"` + q + `"}}]`)))
		require.NoError(t, err)
		assert.Empty(t, found, q)
	}
}
