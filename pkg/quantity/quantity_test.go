package quantity

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		in      string
		wantErr string
	}{
		{in: "100m"},
		{in: "1.5Gi"},
		{in: "1Ei"},
		{in: "1152921504606846976"},
		{in: "1e3"},
		{in: "1E-9"},
		{in: "-2e+30"},
		{in: "0.1Gi"},
		{in: ""},
		{in: "1e"},
		{in: "abc"},
		{in: "1e-31", wantErr: "exponent beyond ±30"},
		{in: "1e31", wantErr: "exponent beyond ±30"},
		{in: "1e-99999999", wantErr: "exponent beyond ±30"},
		{in: "1e99999999999999999999", wantErr: "exponent beyond ±30"},
		{in: strings.Repeat("9", 31), wantErr: "31 digits"},
		{in: "1." + strings.Repeat("0", 29) + "1", wantErr: "31 digits"},
		{in: strings.Repeat("1", 65), wantErr: "65 bytes long"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			err := Check(tt.in)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestParse(t *testing.T) {
	q, err := Parse("250m")
	require.NoError(t, err)
	assert.Equal(t, int64(250), q.MilliValue())

	_, err = Parse("1e-99999999")
	require.ErrorContains(t, err, "exponent")

	_, err = Parse("not-a-quantity")
	require.Error(t, err, "a string within bounds is still checked by ParseQuantity")
}
