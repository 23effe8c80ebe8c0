package condition

import (
	"fmt"
	"sort"
	"time"

	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// Preemption is a pod the scheduler preempted on the node of a pod's
// Deferred resize, which it may have done to make room for it (KEP-5836).
type Preemption struct {
	// Pod is the name of the VPA's pod with the Deferred resize.
	Pod string
	// Victim is the preempted pod's namespace/name.
	Victim   string
	Priority int32
	Node     string
	// Marked is when the scheduler marked the victim; Gone when it was
	// deleted (zero while it terminates).
	Marked, Gone time.Time
}

// maxPreemptions bounds the preemptions the condition names.
const maxPreemptions = 2

// preemptions is the sentence about the victims preempted for the resizes
// still Deferred: "Resize preemption: the scheduler preempted batch/filler
// (priority 0) on node-1 at ... for the Deferred resize of web-1; ..." The
// ones of resizes no longer Deferred are left out: the events and the
// counter keep them.
func preemptions(all []Preemption, deferred []state.Pod) string {
	waiting := map[string]bool{}
	for _, p := range deferred {
		waiting[p.Name] = true
	}
	var shown []Preemption
	for _, p := range all {
		if waiting[p.Pod] {
			shown = append(shown, p)
		}
	}
	if len(shown) == 0 {
		return ""
	}
	sort.Slice(shown, func(i, j int) bool {
		if !shown[i].Marked.Equal(shown[j].Marked) {
			return shown[i].Marked.Before(shown[j].Marked)
		}
		return shown[i].Victim < shown[j].Victim
	})
	msg := "Resize preemption (the scheduler's, not a disruption by the updater):"
	for i, p := range shown {
		if i == maxPreemptions {
			msg += fmt.Sprintf(" and %d more;", len(shown)-maxPreemptions)
			break
		}
		if p.Gone.IsZero() {
			msg += fmt.Sprintf(" %s (priority %d) on %s is being preempted since %s, which may make room for the Deferred resize of %s;",
				p.Victim, p.Priority, p.Node, p.Marked.UTC().Format(time.RFC3339), p.Pod)
		} else {
			msg += fmt.Sprintf(" %s (priority %d) on %s was preempted at %s, which may have made room for the Deferred resize of %s, still Deferred;",
				p.Victim, p.Priority, p.Node, p.Marked.UTC().Format(time.RFC3339), p.Pod)
		}
	}
	return msg[:len(msg)-1] + "."
}
