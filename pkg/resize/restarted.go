package resize

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// RestartedBy names the containers (sidecars among them) a resize from
// from to to restarts: a value that differs between the two, of a resource
// whose resizePolicy is RestartContainer, its own or, for a container
// without a limit of its own, the pod-level limit. The restart a resize
// causes is no harm (the watch after it allows for it); nil when it
// restarts none.
func RestartedBy(pod *corev1.Pod, from, to resources.Resources) []string {
	var out []string
	podLevel, hasPodLevel := to[resources.PodLevel]
	for _, c := range sidecarsAndContainers(pod) {
		restarts := false
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if policyFor(c, name) != corev1.RestartContainer {
				continue
			}
			if t, ok := to[c.Name]; ok {
				f := from[c.Name]
				if !sameValue(f.Requests, t.Requests, name) || !sameValue(f.Limits, t.Limits, name) {
					restarts = true
					break
				}
			}
			if !hasPodLevel || sameValue(from[resources.PodLevel].Limits, podLevel.Limits, name) {
				continue
			}
			limits := c.Resources.Limits
			if t, ok := to[c.Name]; ok && t.Limits != nil {
				limits = t.Limits
			}
			if own, ok := limits[name]; !ok || own.IsZero() {
				restarts = true
				break
			}
		}
		if restarts {
			out = append(out, c.Name)
		}
	}
	return out
}

// RestartCounts are the restart counts of a pod's containers, by name, as
// a Baseline holds them: what a record keeps of it.
type RestartCounts map[string]int32

// Counts returns the baseline's restart counts; nil when it knows none.
func (b Baseline) Counts() RestartCounts {
	if b.restarts == nil {
		return nil
	}
	out := make(RestartCounts, len(b.restarts))
	for _, r := range b.restarts {
		out[r.name] = r.count
	}
	return out
}

// BaselineOfCounts returns the baseline holding counts (read back from a
// record); nil counts give the zero Baseline, which knows nothing.
func BaselineOfCounts(counts RestartCounts) Baseline {
	if counts == nil {
		return Baseline{}
	}
	b := Baseline{restarts: make([]containerRestarts, 0, len(counts))}
	for name, n := range counts {
		b.restarts = append(b.restarts, containerRestarts{name: name, count: n})
	}
	return b
}

// Allowing returns the baseline allowing one restart more of each
// container named, than before shows: the restart a resize sent when the
// pod showed before causes. A container already restarted past that keeps
// its count.
func (b Baseline) Allowing(before Baseline, names []string) Baseline {
	if len(names) == 0 || !before.Known() {
		return b
	}
	out := Baseline{restarts: make([]containerRestarts, len(b.restarts), len(b.restarts)+len(names))}
	copy(out.restarts, b.restarts)
	for _, name := range names {
		was, ok := before.restartsOf(name)
		if !ok {
			continue
		}
		found := false
		for i := range out.restarts {
			if out.restarts[i].name == name {
				out.restarts[i].count = max(out.restarts[i].count, was+1)
				found = true
			}
		}
		if !found {
			out.restarts = append(out.restarts, containerRestarts{name: name, count: was + 1})
		}
	}
	return out
}

// RestartedSince tells whether every container named has restarted since
// before: the restart a resize causes has happened. A container before
// does not know counts as restarted.
func RestartedSince(pod *corev1.Pod, before Baseline, names []string) bool {
	for _, name := range names {
		was, ok := before.restartsOf(name)
		if !ok {
			continue
		}
		restarted := false
		for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
			for _, s := range list {
				if s.Name == name && s.RestartCount > was {
					restarted = true
				}
			}
		}
		if !restarted {
			return false
		}
	}
	return true
}

// TerminatedAfter tells the harm a pod shows after t when its restart
// counts before are not known (a watch taken up again from a record that
// kept none): a container whose last termination, or whose state when it
// does not restart, ended after t. Harm.At says when.
func TerminatedAfter(pod *corev1.Pod, t time.Time) (Harm, bool) {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range list {
			for _, term := range []*corev1.ContainerStateTerminated{s.State.Terminated, s.LastTerminationState.Terminated} {
				if term == nil || !term.FinishedAt.After(t) {
					continue
				}
				if term.Reason == oomKilledReason {
					h := oomHarm(s.Name, term)
					h.At = term.FinishedAt.Time
					return h, true
				}
				return Harm{Kind: HarmRestarted, Container: s.Name, At: term.FinishedAt.Time,
					Message: fmt.Sprintf("container %s terminated (%s, exit code %d) at %s", s.Name, bounded(term.Reason), term.ExitCode,
						term.FinishedAt.UTC().Format(time.RFC3339))}, true
			}
		}
	}
	return Harm{}, false
}
