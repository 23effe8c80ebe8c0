package condition

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

func TestBlockedConditionNamesResizePreemptions(t *testing.T) {
	deferred := withDetail(pod("web-1", state.PodDeferred), "", "Node didn't have enough resource: cpu", "")
	marked := Preemption{Pod: "web-1", Victim: "batch/filler", Priority: 0, Node: "hollow-2", Marked: t0}
	gone := marked
	gone.Gone = t0.Add(2 * time.Second)
	tests := []struct {
		name        string
		in          Summary
		contains    []string
		notContains []string
	}{
		{"a victim terminating: being preempted, since when",
			Summary{Pods: []state.Pod{deferred}, Preemptions: []Preemption{marked}},
			[]string{"Deferred: oldest pending web-1", "Resize preemption (the scheduler's, not a disruption by the updater): batch/filler (priority 0) on hollow-2 is being preempted since 2027-01-15T08:00:00Z, which may make room for the Deferred resize of web-1."}, nil},
		{"a victim gone, the resize still Deferred",
			Summary{Pods: []state.Pod{deferred}, Preemptions: []Preemption{gone}},
			[]string{"batch/filler (priority 0) on hollow-2 was preempted at 2027-01-15T08:00:00Z, which may have made room for the Deferred resize of web-1, still Deferred."}, nil},
		{"the resize no longer Deferred: the condition no longer names it",
			Summary{Pods: []state.Pod{pod("web-1", state.PodResized)}, Preemptions: []Preemption{gone}},
			nil, []string{"preempt"}},
		{"many victims: two named, the rest counted",
			Summary{Pods: []state.Pod{deferred}, Preemptions: func() []Preemption {
				var out []Preemption
				for i := 0; i < 5; i++ {
					p := marked
					p.Victim, p.Marked = fmt.Sprintf("batch/filler-%d", i), t0.Add(time.Duration(i)*time.Second)
					out = append(out, p)
				}
				return out
			}()},
			[]string{"batch/filler-0", "batch/filler-1", "and 3 more."}, []string{"batch/filler-2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Blocked(tc.in)
			for _, s := range tc.contains {
				assert.Contains(t, c.Message, s)
			}
			for _, s := range tc.notContains {
				assert.NotContains(t, c.Message, s)
			}
			if len(tc.contains) > 0 {
				assert.Equal(t, corev1.ConditionTrue, c.Status)
				assert.Equal(t, ReasonDeferred, c.Reason)
			}
		})
	}
}
