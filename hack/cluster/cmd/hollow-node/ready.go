// Readiness that comes late, in hollow-node: a container whose readiness probe is the exec
// command
//
//	["hollow-node-ready-after", "90s"]
//
// is not Ready until the container instance has run that long, and Ready from then on, as an
// app that needs that long to start answers its readiness probe (a JVM, a broker). Each restart
// of the container starts the count again. Every other container is Ready while it runs, as
// with kubemark's prober. So is a sidecar (an init container with restartPolicy Always), as the
// real kubelet's prober marks a running sidecar without a failing readiness probe: kubemark's
// stub left sidecars never Ready, and with them their pods.
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
		after, probed, err := readyAfterProbe(pod.Spec.Containers, cs.Name)
		switch {
		case err != nil:
			p.warnOnce(pod, err)
			cs.Ready = false
		case !probed:
			cs.Ready = true
		default:
			cs.Ready = readyAfter(runningSince(cs), after, now)
		}
	}
	// Sidecars: Ready while running (and, with the command, once run long enough). Other init
	// containers are left as the kubelet set them (Ready once completed).
	for i := range status.InitContainerStatuses {
		cs := &status.InitContainerStatuses[i]
		if !isSidecar(pod, cs.Name) {
			continue
		}
		after, _, err := readyAfterProbe(pod.Spec.InitContainers, cs.Name)
		if err != nil {
			p.warnOnce(pod, err)
			cs.Ready = false
			continue
		}
		cs.Ready = readyAfter(runningSince(cs), after, now)
	}
}

// runningSince is when the container's running instance started (zero: not running).
func runningSince(cs *v1.ContainerStatus) time.Time {
	if cs.State.Running == nil {
		return time.Time{}
	}
	return cs.State.Running.StartedAt.Time
}

// isSidecar tells whether the pod's init container name is restartable (a sidecar).
func isSidecar(pod *v1.Pod, name string) bool {
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.Name == name {
			return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
		}
	}
	return false
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

// readyAfterProbe finds the named container's readiness probe among containers: whether it is a
// ReadyAfterCommand, and its duration.
func readyAfterProbe(containers []v1.Container, container string) (time.Duration, bool, error) {
	for i := range containers {
		c := &containers[i]
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
