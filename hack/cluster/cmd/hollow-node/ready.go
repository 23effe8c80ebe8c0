// Readiness that comes late, in hollow-node: an exec probe whose command is
//
//	["hollow-node-ready-after", "90s"]
//
// fails (exit code 1) until the container instance has run that long, and passes (exit code 0)
// from then on, as an app that needs that long to start answers its readiness probe (a JVM, a
// broker). Each restart of the container starts the count again. Any other command is the fake
// runtime's (which answers exit code 0 to everything).
//
// Shared, unchanged, by both hollow-node builds (a symlink in kubelet-v1.35/cmd/hollow-node and
// control-plane-v1.34/cmd/hollow-node).
//
// The command is written by whoever can create the pod: its duration is bounded before it is
// parsed (at most maxQuantityChars characters, up to maxReadyAfter); a command that breaks a rule
// fails with exit code 2, and says why on stderr (the kubelet logs and reports it as the probe's
// output).
package main

import (
	"context"
	"fmt"
	"time"

	kubeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeremote "k8s.io/cri-client/pkg/fake"
)

const (
	// ReadyAfterCommand is the exec probe command that passes only once its container has run for
	// the duration that follows it.
	ReadyAfterCommand = "hollow-node-ready-after"
	maxReadyAfter     = time.Hour
)

// readyRuntime answers the ReadyAfterCommand probes; every other call is the wrapped runtime's.
type readyRuntime struct {
	kubeapi.RuntimeServiceServer
	fs  *fakeremote.RemoteRuntime
	now func() time.Time
}

func (r *readyRuntime) ExecSync(ctx context.Context, req *kubeapi.ExecSyncRequest) (*kubeapi.ExecSyncResponse, error) {
	if len(req.Cmd) == 0 || req.Cmd[0] != ReadyAfterCommand {
		return r.RuntimeServiceServer.ExecSync(ctx, req)
	}
	after, err := parseReadyAfter(req.Cmd)
	if err != nil {
		return &kubeapi.ExecSyncResponse{ExitCode: 2, Stderr: []byte(err.Error())}, nil
	}
	fs := r.fs.RuntimeService
	fs.Lock()
	var started int64
	if c, ok := fs.Containers[req.ContainerId]; ok && c.State == kubeapi.ContainerState_CONTAINER_RUNNING {
		started = c.StartedAt
	}
	fs.Unlock()
	if ran, ready := readyAfter(started, after, r.now()); !ready {
		return &kubeapi.ExecSyncResponse{ExitCode: 1, Stdout: []byte(fmt.Sprintf("not ready: running for %s of %s", ran, after))}, nil
	}
	return &kubeapi.ExecSyncResponse{}, nil
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

// readyAfter tells how long a container started at started (Unix nanoseconds; 0: not running)
// has run at now, and whether that is at least after.
func readyAfter(started int64, after time.Duration, now time.Time) (time.Duration, bool) {
	if started <= 0 {
		return 0, false
	}
	ran := now.Sub(time.Unix(0, started))
	return ran.Round(time.Second), ran >= after
}
