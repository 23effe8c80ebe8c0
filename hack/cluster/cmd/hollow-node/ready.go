// Readiness that comes late, in hollow-node: a container whose readiness probe is the exec
// command
//
//	["hollow-node-ready-after", "90s"]
//
// is not Ready until the container instance has run that long, and Ready from then on, as an
// app that needs that long to start answers its readiness probe (a JVM, a broker). Each restart
// of the container starts the count again. Every other container is Ready while it runs, as
// with kubemark's prober.
//
// Kubemark's hollow kubelet runs no probe at all (its prober is a stub that marks every
// container Ready), and the real prober cannot be used: it would run the HTTP and TCP probes of
// every pod against addresses nobody answers. So readyProber replaces the stub: it judges the
// command from the container's start time in the status the kubelet is computing, without
// running it. The kubelet computes that status at each pod sync (--sync-frequency, 10 s), so a
// container turns Ready at most that much after its duration.
//
// Shared, unchanged, by every hollow-node build (a symlink in the other versions'
// cmd/hollow-node); the probe manager's method set, which differs between kubelet versions, is in
// each compat.go.
//
// The command is written by whoever can create the pod: its duration is bounded before it is
// parsed (at most maxQuantityChars characters, up to maxReadyAfter); a container whose command
// breaks a rule is never Ready, and the node's log says why once per pod.
package main

import (
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
)

const (
	// ReadyAfterCommand is the exec readiness probe command that passes only once its container
	// has run for the duration that follows it.
	ReadyAfterCommand = "hollow-node-ready-after"
	maxReadyAfter     = time.Hour
)

// readyProber sets the Ready field of the container statuses the kubelet computes.
type readyProber struct {
	now func() time.Time

	mu     sync.Mutex
	warned map[types.UID]bool // pods whose bad command was logged
}

func newReadyProber(now func() time.Time) *readyProber {
	return &readyProber{now: now, warned: map[types.UID]bool{}}
}

// update marks each container of status Ready or not: a container with a ReadyAfterCommand
// probe once it has run for its duration, every other one as kubemark's stub does.
func (p *readyProber) update(pod *v1.Pod, status *v1.PodStatus) {
	now := p.now()
	for i := range status.ContainerStatuses {
		cs := &status.ContainerStatuses[i]
		after, probed, err := readyAfterProbe(pod, cs.Name)
		switch {
		case err != nil:
			p.warnOnce(pod, err)
			cs.Ready = false
		case !probed:
			cs.Ready = true
		default:
			var started time.Time
			if cs.State.Running != nil {
				started = cs.State.Running.StartedAt.Time
			}
			cs.Ready = readyAfter(started, after, now)
		}
	}
}

func (p *readyProber) warnOnce(pod *v1.Pod, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.warned[pod.UID] {
		return
	}
	p.warned[pod.UID] = true
	klog.InfoS("Readiness probe never passes", "pod", klog.KObj(pod), "err", err)
}

func (p *readyProber) forget(pod *v1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.warned, pod.UID)
}

func (p *readyProber) keepOnly(desired map[types.UID]sets.Empty) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for uid := range p.warned {
		if _, ok := desired[uid]; !ok {
			delete(p.warned, uid)
		}
	}
}

// readyAfterProbe finds the container's readiness probe: whether it is a ReadyAfterCommand, and
// its duration.
func readyAfterProbe(pod *v1.Pod, container string) (time.Duration, bool, error) {
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if c.Name != container {
			continue
		}
		if c.ReadinessProbe == nil || c.ReadinessProbe.Exec == nil ||
			len(c.ReadinessProbe.Exec.Command) == 0 || c.ReadinessProbe.Exec.Command[0] != ReadyAfterCommand {
			return 0, false, nil
		}
		d, err := parseReadyAfter(c.ReadinessProbe.Exec.Command)
		return d, true, err
	}
	return 0, false, nil
}

// parseReadyAfter reads the duration of a ReadyAfterCommand.
func parseReadyAfter(cmd []string) (time.Duration, error) {
	if len(cmd) != 2 || cmd[1] == "" || len(cmd[1]) > maxQuantityChars {
		return 0, fmt.Errorf("%s: want one duration of 1 to %d characters", ReadyAfterCommand, maxQuantityChars)
	}
	d, err := time.ParseDuration(cmd[1])
	if err != nil || d < 0 || d > maxReadyAfter {
		return 0, fmt.Errorf("%s: %q: want a duration from 0s to %s", ReadyAfterCommand, cmd[1], maxReadyAfter)
	}
	return d, nil
}

// readyAfter tells whether a container started at started (zero: not running) has run for at
// least after at now.
func readyAfter(started time.Time, after time.Duration, now time.Time) bool {
	return !started.IsZero() && now.Sub(started) >= after
}
