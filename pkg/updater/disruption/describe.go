package disruption

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
)

// What the budget says of the places it holds: the states Counts reports
// for the gauge, and the names and states a refusal's message gives.

// The states of a held reservation, as Counts reports them.
const (
	// HeldUnconfirmed: the answer to the resize was lost (a timeout, a reset
	// connection, a 5xx): it may have been applied, and the pod does not
	// show yet whether it was.
	HeldUnconfirmed = "Unconfirmed"
	// HeldRestarting: the resize was sent (or found under way at start) and
	// the pod is not back yet: not Ready, or its resize not seen completed.
	HeldRestarting = "Restarting"
	// HeldPending: the pod is Ready and the kubelet has not applied the
	// resize (Deferred, failing, not taken up): bounded by Config.Timeout,
	// unless the pod still shows a pending resize that restarts containers.
	HeldPending = "Pending"
	// HeldBack: the pod is back, and Ready for less than its minReady.
	HeldBack = "Back"
)

// HeldStates lists the states Counts reports.
var HeldStates = []string{HeldUnconfirmed, HeldRestarting, HeldPending, HeldBack}

// maxDescribed bounds the reservations a verdict's message names.
const maxDescribed = 3

// describe names the reservations holding places, for a verdict's message:
// " (kafka-0: resize Deferred by the kubelet, its place held until ... at
// the latest)". Callers hold b.mu.
func (b *Budget) describe(held []*reservation, now time.Time) string {
	if len(held) == 0 {
		return ""
	}
	sort.Slice(held, func(i, j int) bool { return held[i].name < held[j].name })
	parts := make([]string, 0, maxDescribed+1)
	for i, r := range held {
		if i == maxDescribed {
			parts = append(parts, fmt.Sprintf("and %d more", len(held)-maxDescribed))
			break
		}
		parts = append(parts, b.describeOne(r, now))
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

func (b *Budget) describeOne(r *reservation, now time.Time) string {
	switch {
	case !r.ready:
		return r.name + ": restarting, not Ready"
	case !r.readySince.IsZero():
		return fmt.Sprintf("%s: back, counted until %s", r.name, stamp(r.readySince.Add(r.minReady)))
	case r.overdue:
		return fmt.Sprintf("%s: %s for more than %s, its place held while the pod shows it pending", r.name, r.what(), b.cfg.Timeout)
	case b.cfg.Timeout > 0:
		return fmt.Sprintf("%s: %s, its place held until %s at the latest", r.name, r.what(), stamp(r.taken.Add(b.cfg.Timeout)))
	}
	return r.name + ": " + r.what()
}

// what says where a held pod's resize stands, as last observed.
func (r *reservation) what() string {
	switch {
	case r.unconfirmed:
		return "the answer to its resize was lost, and the pod does not show yet whether it was applied"
	case !r.shown:
		return "resize sent, not seen on the pod yet"
	}
	switch r.state {
	case resize.StateDeferred:
		return "resize Deferred by the kubelet"
	case resize.StateError, resize.StateMemoryLimitRefused:
		return "resize failing on the node"
	case resize.StateInProgress:
		return "resize in progress"
	case resize.StateUnknown:
		return "resize not taken up by the kubelet yet"
	case "":
		return "resize sent"
	}
	return "restarting"
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Counts counts the reservations held, by state (HeldStates), as last
// observed.
func (b *Budget) Counts() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for _, r := range b.reserved {
		switch {
		case r.unconfirmed:
			out[HeldUnconfirmed]++
		case !r.readySince.IsZero():
			out[HeldBack]++
		case r.shown && r.ready && r.state != resize.StateNone && r.state != "":
			out[HeldPending]++
		default:
			out[HeldRestarting]++
		}
	}
	return out
}
