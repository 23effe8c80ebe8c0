package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// updaterLoadsItsClient is what our updater says when it stops at loading
// its client configuration (cmd/updater/app), after parsing and
// validating every flag.
const updaterLoadsItsClient = "loading client configuration"

// replicaRun is one replica the driver would start: its name, the flags
// after ours and its environment.
type replicaRun struct {
	name  string
	extra []string
	env   []string
}

// replicaRuns are the replicas of ours the options would start: ours
// alone, or in the sharded mode every replica of every configuration,
// the standby of the failover under leader election included.
func (o *Options) replicaRuns() []replicaRun {
	if o.Sharded.Replicas == 0 {
		return []replicaRun{{name: o.Ours.Name}}
	}
	var out []replicaRun
	for _, c := range o.configurations() {
		n := c.Replicas
		if c.Shards == 1 {
			n++
		}
		for i := range n {
			name := c.replicaName(i)
			out = append(out, replicaRun{name: name, extra: o.configArgs(c), env: identity(name)})
		}
	}
	return out
}

// CheckUpdaterArgs starts nothing on a cluster: it runs our updater with
// the command line of each replica the options would start, a kubeconfig
// that does not exist and port 0, and checks that each gets as far as
// loading its client configuration, every flag parsed and validated.
func CheckUpdaterArgs(ctx context.Context, o *Options, log func(string, ...any)) error {
	dir, err := os.MkdirTemp("", "resize-bench-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	missing := filepath.Join(dir, "missing.kubeconfig")
	log("check: %s", o.describe())
	var errs []error
	for _, run := range o.replicaRuns() {
		args := updaterArgs(o, o.Ours, missing, "127.0.0.1:0", run.extra)
		if err := checkRun(ctx, o.Ours.Binary, args, run.env); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", run.name, err))
			continue
		}
		log("%s: %s %s: flags accepted", run.name, o.Ours.Binary, strings.Join(args, " "))
	}
	return errors.Join(errs...)
}

// checkRun runs binary and expects it to fail at loading its client
// configuration.
func checkRun(ctx context.Context, binary string, args, env []string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	tail := string(out)
	if len(tail) > 2000 {
		tail = "..." + tail[len(tail)-2000:]
	}
	switch {
	case err == nil:
		return fmt.Errorf("exited 0 with a kubeconfig that does not exist: %s", tail)
	case ctx.Err() != nil:
		return fmt.Errorf("still running after a minute with a kubeconfig that does not exist")
	case !strings.Contains(string(out), updaterLoadsItsClient):
		return fmt.Errorf("stopped before loading its client configuration (%v): %s", err, tail)
	}
	return nil
}

// describe says what a run of the options would measure.
func (o *Options) describe() string {
	s := fmt.Sprintf("profile %s: %d pods in %d Deployments over %d namespaces", o.Profile, o.Pods, o.Deployments, o.Namespaces)
	if o.Sharded.Replicas == 0 {
		names := make([]string, 0, 2)
		for _, u := range o.Updaters() {
			names = append(names, u.Name)
		}
		return s + "; updaters: " + strings.Join(names, ", ")
	}
	cs := make([]string, 0, 2)
	for _, c := range o.configurations() {
		cs = append(cs, fmt.Sprintf("%s (%s)", c.Name, c))
	}
	return s + "; ours as " + strings.Join(cs, ", then ") + fmt.Sprintf("; lease duration %s", o.Sharded.LeaseDuration)
}
