package resize

import (
	"fmt"
	"time"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// LastResize is a resize sent to a pod: when, and the requests of the
// containers it changed before and after. Every pod resized keeps its last:
// From is compact, To is the target, which the pods sent an equal one share.
type LastResize struct {
	At   time.Time
	From resources.Values
	To   resources.Resources
}

// reversalHeld tells whether the change to the pod's requests is held as
// the reversal of its last resize, and for how much longer: within
// in.ReversalHold of it, when the pod still has the requests it gave, every
// request is inside the recommended range, and what is left of the change
// once the requests moving back the way the last resize came are left out
// is not above the threshold. A request outside the recommended range is
// never held: the pod needs it.
func reversalHeld(in Input, current resources.Resources) (time.Duration, string) {
	last := in.LastResize
	if last == nil || in.ReversalHold <= 0 {
		return 0, ""
	}
	left := last.At.Add(in.ReversalHold).Sub(in.Now)
	if left <= 0 || !sameRequests(current, last.To) {
		return 0, ""
	}
	reversed := func(container string, name corev1.ResourceName, want resource.Quantity) bool {
		from, okFrom := last.From.Request(container, name)
		to, okTo := last.To[container].Requests[name]
		if !okFrom || !okTo {
			return false
		}
		came, goes := to.Cmp(from), want.Cmp(to)
		return came != 0 && goes == -came
	}
	outOfRange, diff, moved := requestChange(in.Pod, in.Desired, reversed)
	if outOfRange || moved == 0 || diff > in.Threshold {
		return 0, ""
	}
	return left, fmt.Sprintf("requests are inside the recommended range and the change would move %d of them back the way the resize of %s ago came; held for %s more (reversal hold %s)",
		moved, in.Now.Sub(last.At).Round(time.Second), left.Round(time.Second), in.ReversalHold)
}

// sameRequests tells whether a and b hold the same requests (limits are
// not compared).
func sameRequests(a, b resources.Resources) bool {
	if len(a) != len(b) {
		return false
	}
	for c, ra := range a {
		rb, ok := b[c]
		if !ok || len(ra.Requests) != len(rb.Requests) {
			return false
		}
		for name, qa := range ra.Requests {
			if qb, ok := rb.Requests[name]; !ok || qa.Cmp(qb) != 0 {
				return false
			}
		}
	}
	return true
}
