package app

import (
	"fmt"
	"runtime/debug"

	"github.com/vpa-inplace/vpa-inplace/pkg/quantity"
)

// memoryLimitShare is the share of --memory-limit given to the Go runtime as
// its soft memory limit: the rest is room for what the runtime does not
// count (thread stacks outside the heap, the binary's own pages) before the
// kernel's limit kills the process.
const memoryLimitShare = 0.9

// ApplyMemoryLimit sets the Go runtime's soft memory limit to
// memoryLimitShare of limit (a quantity such as "512Mi" or a number of
// bytes, as the downward API renders limits.memory) unless GOMEMLIMIT is set
// (lookup is os.LookupEnv) or limit is empty. It returns the limit in effect
// in bytes (math.MaxInt64 when none) and whether it came from the
// environment. The collector then works harder as the heap nears the
// container's limit instead of letting a burst of large requests get the
// process killed.
func ApplyMemoryLimit(limit string, lookup func(string) (string, bool)) (bytes int64, fromEnv bool, err error) {
	if _, set := lookup("GOMEMLIMIT"); set {
		return debug.SetMemoryLimit(-1), true, nil
	}
	if limit == "" {
		return debug.SetMemoryLimit(-1), false, nil
	}
	q, err := quantity.Parse(limit)
	if err != nil {
		return 0, false, fmt.Errorf("--memory-limit: %w", err)
	}
	if q.Sign() <= 0 {
		return 0, false, fmt.Errorf("--memory-limit must be positive, got %s", limit)
	}
	soft := int64(float64(q.Value()) * memoryLimitShare)
	debug.SetMemoryLimit(soft)
	return soft, false, nil
}
