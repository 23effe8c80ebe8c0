package canary

// What the VPA's condition and the waiting pods' events say of the gate.

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
)

// waitWhy says why a pod's decrease waits: "canary: 1 of 4 lowered, 3
// wait until 2026-11-26T12:40:00Z".
func (g *Gate) waitWhy(v *vpaState, r *round, until time.Time) string {
	sent := 0
	var names []string
	for _, cp := range r.canaries {
		if cp.sent {
			sent++
		}
		if cp.name != "" {
			names = append(names, cp.name)
		}
	}
	sort.Strings(names)
	others := max(v.pods-len(r.canaries), 0)
	s := fmt.Sprintf("canary: %d of %d lowered, %d wait", sent, v.pods, others)
	switch {
	case !until.IsZero():
		s += " until " + stamp(until)
	case sent < len(r.canaries):
		s += " until the canary's resize is sent, completes and is watched for " + v.window.String()
	default:
		s += " until the canary's resize completes and is watched for " + v.window.String()
	}
	if len(names) > 0 {
		s += " (" + strings.Join(names, ", ") + ")"
	}
	return s
}

// Status is what the VPA's condition says of the gate.
type Status struct {
	// Canary says how a round stands: "canary: 1 of 4 lowered, 3 wait
	// until ..."; "" when none runs.
	Canary string
	// Hold is the hold, nil without one.
	Hold *records.Record
	// HoldEnds is when it expires.
	HoldEnds time.Time
}

// StatusOf tells what the VPA's condition says of the gate.
func (g *Gate) StatusOf(owner records.Owner) Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.vpas[owner.UID]
	if !ok {
		return Status{}
	}
	var s Status
	if h := g.holdNow(v); h != nil {
		s.Hold, s.HoldEnds = h, g.HoldEnds(h)
	}
	if r := v.round; r != nil && !r.passed && len(r.canaries) > 0 {
		s.Canary = g.waitWhy(v, r, r.until(v.window))
	}
	return s
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
