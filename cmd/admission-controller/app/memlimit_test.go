package app

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestApplyMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	noEnv := func(string) (string, bool) { return "", false }
	tests := []struct {
		name        string
		limit       string
		lookup      func(string) (string, bool)
		reset       int64
		wantBytes   int64
		wantFromEnv bool
		wantErr     string
	}{
		{name: "the downward API's bytes", limit: "536870912", lookup: noEnv, reset: math.MaxInt64, wantBytes: 483183820},
		{name: "a quantity", limit: "100Mi", lookup: noEnv, reset: math.MaxInt64, wantBytes: 94371840},
		{name: "none: the runtime's default", limit: "", lookup: noEnv, reset: math.MaxInt64, wantBytes: math.MaxInt64},
		{
			name: "GOMEMLIMIT wins", limit: "100Mi", reset: 1 << 30, wantBytes: 1 << 30, wantFromEnv: true,
			lookup: func(k string) (string, bool) { return "1GiB", k == "GOMEMLIMIT" },
		},
		{name: "not a quantity", limit: "lots", lookup: noEnv, reset: math.MaxInt64, wantErr: "--memory-limit"},
		{name: "beyond the quantity bound", limit: "1e-99999999", lookup: noEnv, reset: math.MaxInt64, wantErr: "exponent"},
		{name: "zero", limit: "0", lookup: noEnv, reset: math.MaxInt64, wantErr: "must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(tc.reset)
			got, fromEnv, err := ApplyMemoryLimit(tc.limit, tc.lookup)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantBytes, got)
			assert.Equal(t, tc.wantFromEnv, fromEnv)
			assert.Equal(t, tc.wantBytes, debug.SetMemoryLimit(-1))
		})
	}
}
