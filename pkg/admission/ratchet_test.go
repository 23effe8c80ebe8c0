package admission

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Finding 6 of the hostile-input review: values stored before a rule existed
// must not make every later write of the object fail.
func TestValidateVPAsRatchet(t *testing.T) {
	stored := withPolicy(`[{"containerName":"app","minAllowed":{"memory":"0.1Gi"}}]`)
	withAnnotation := func(vpa string) string {
		return strings.Replace(vpa, `"uid":"vpa-uid"`, `"uid":"vpa-uid","annotations":{"vpa-inplace.dev/infeasible-attempts":"{}"}`, 1)
	}
	tests := []struct {
		name         string
		gate         bool
		object, old  string
		wantMessages []string
		notMessages  []string
	}{
		{name: "a label added to an InPlace VPA whose stored spec is now refused", gate: true, object: withLabel(stored), old: stored},
		{name: "the same with the gate off", gate: false, object: withLabel(stored), old: stored},
		{name: "an annotation added (the updater's records)", gate: true, object: withAnnotation(stored), old: stored},
		{
			name: "the refused value changed to another refused value", gate: true,
			object: withPolicy(`[{"containerName":"app","minAllowed":{"memory":"0.2Gi"}}]`), old: stored,
			wantMessages: []string{`spec.resourcePolicy.containerPolicies[0].minAllowed[memory]: Invalid value: "214748364800m": must be a whole number of bytes`},
		},
		{
			name: "an unchanged refused value does not hide a new error", gate: true,
			object:       withPolicy(`[{"containerName":"app","minAllowed":{"memory":"0.1Gi","cpu":"-1"}}]`),
			old:          stored,
			wantMessages: []string{`minAllowed[cpu]: Invalid value: "-1": must not be negative`},
			notMessages:  []string{`minAllowed[memory]`},
		},
		{
			name: "the gate is not ratcheted", gate: false,
			object:       withPolicy(`[{"containerName":"app","minAllowed":{"memory":"0.1Gi"}}]`),
			old:          withModeAndPolicy("Off", `[{"containerName":"app","minAllowed":{"memory":"0.1Gi"}}]`, ""),
			wantMessages: []string{gateMessage},
			notMessages:  []string{`minAllowed[memory]`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := testHandler{gate: tc.gate}.build(t)
			resp := response(t, post(t, h, ValidateVPAsPath, vpaReview("UPDATE", tc.object, tc.old)))
			if len(tc.wantMessages) == 0 {
				require.True(t, resp.Allowed, "rejected: %v", resp.Result)
				return
			}
			require.False(t, resp.Allowed)
			require.NotNil(t, resp.Result)
			assert.Equal(t, int32(http.StatusUnprocessableEntity), resp.Result.Code)
			for _, m := range tc.wantMessages {
				assert.Contains(t, resp.Result.Message, m)
			}
			for _, m := range tc.notMessages {
				assert.NotContains(t, resp.Result.Message, m)
			}
		})
	}

	t.Run("a create is not ratcheted", func(t *testing.T) {
		h, _ := testHandler{gate: true}.build(t)
		resp := response(t, post(t, h, ValidateVPAsPath, vpaReview("CREATE", stored, "null")))
		require.False(t, resp.Allowed)
		assert.Contains(t, resp.Result.Message, "must be a whole number of bytes")
	})
}
