// Container kills of hollow-node: a pod annotation makes the fake runtime end a running
// container as the kernel's OOM killer or a crashing process would, so that the kubelet
// restarts it (lastState.terminated, restartCount, its back-off, Ready lost meanwhile).
//
// Shared, unchanged, by both hollow-node builds (a symlink in kubelet-v1.35/cmd/hollow-node).
//
//	hollow-node.vpa-inplace.dev/kill: "app=memory-limit-below:300Mi;worker=reason:Error,restart:0,after:5s"
//
// Entries are separated by ";", each "CONTAINER=FIELD[,FIELD...]" ("*": every container no
// entry names). A running container is killed when every condition its entry sets holds:
//
//	reason:OOMKilled|Error    what the container's last state says: OOMKilled with exit code
//	                          137 (the default with memory-limit-below), Error with exit code 1
//	                          (the default otherwise)
//	restart:N|*               only the instance whose restart count is N (a kill once: the
//	                          restarted instance has N+1), or every instance ("*", the
//	                          default: a crash loop, slowed by the kubelet's back-off)
//	memory-limit-below:Q      only while the memory limit the kubelet applied to the
//	                          container (at its creation or by a resize) is below Q: a process
//	                          that needs Q, more than its usage shows, so that the kubelet lets
//	                          the limit go down and the container is OOM-killed right after
//	after:DURATION            not before the instance has run this long (default 0s)
//
// The annotation is written by whoever can edit the pod, so it is bounded before it is
// parsed, like the usage annotation: at most maxKillBytes bytes and maxKillEntries entries,
// restart counts up to maxKillRestart, after up to maxKillAfter, quantities as in usage.go.
// An annotation that breaks a rule is ignored as a whole (nothing is killed) and logged once
// per value.
package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

const (
	// KillAnnotation makes the node kill a pod's running containers (see the top of this file).
	KillAnnotation = "hollow-node.vpa-inplace.dev/kill"

	maxKillBytes   = 1024
	maxKillEntries = 16
	maxKillRestart = 1_000_000
	maxKillAfter   = time.Hour

	reasonOOMKilled = "OOMKilled"
	reasonError     = "Error"
)

// killRule is one container's entry.
type killRule struct {
	Reason   string
	ExitCode int32
	// Restart is the restart count of the one instance to kill; -1: every instance.
	Restart int64
	// MemoryLimitBelow: kill only while the applied memory limit is set and below it; 0: any.
	MemoryLimitBelow int64
	After            time.Duration
}

// parseKill parses the value of KillAnnotation into its rules by container name ("*" for
// every other container). Any rule broken is an error and nothing is returned.
func parseKill(s string) (map[string]killRule, error) {
	return parseContainerEntries(s, maxKillBytes, maxKillEntries, killRuleOf)
}

// killRuleOf parses the fields of one container's kill rule.
func killRuleOf(name, fields string) (killRule, error) {
	r := killRule{Restart: -1}
	seen := map[string]bool{}
	for _, f := range strings.Split(fields, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(f), ":")
		if !ok {
			return killRule{}, fmt.Errorf("container %q: field %q: want KEY:VALUE", name, f)
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if seen[key] {
			return killRule{}, fmt.Errorf("container %q: %s: set twice", name, key)
		}
		seen[key] = true
		var err error
		switch key {
		case "reason":
			switch val {
			case reasonOOMKilled, reasonError:
				r.Reason = val
			default:
				err = fmt.Errorf("%q: want %s or %s", val, reasonOOMKilled, reasonError)
			}
		case "restart":
			r.Restart, err = parseRestart(val)
		case "memory-limit-below":
			r.MemoryLimitBelow, err = parseMemory(val)
			if err == nil && r.MemoryLimitBelow == 0 {
				err = errors.New("want more than 0")
			}
		case "after":
			r.After, err = parseAfter(val)
		default:
			err = errors.New("unknown key (want reason, restart, memory-limit-below or after)")
		}
		if err != nil {
			return killRule{}, fmt.Errorf("container %q: %s: %w", name, key, err)
		}
	}
	if r.Reason == "" {
		r.Reason = reasonError
		if r.MemoryLimitBelow > 0 {
			r.Reason = reasonOOMKilled
		}
	}
	r.ExitCode = 1
	if r.Reason == reasonOOMKilled {
		r.ExitCode = 137 // 128 + SIGKILL, as a runtime reports an OOM kill
	}
	return r, nil
}

func parseRestart(s string) (int64, error) {
	if s == "*" {
		return -1, nil
	}
	if s == "" || len(s) > 7 {
		return 0, fmt.Errorf("%q: want * or a restart count from 0 to %d", s, maxKillRestart)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > maxKillRestart {
		return 0, fmt.Errorf("%q: want * or a restart count from 0 to %d", s, maxKillRestart)
	}
	return n, nil
}

func parseAfter(s string) (time.Duration, error) {
	if s == "" || len(s) > maxQuantityChars {
		return 0, fmt.Errorf("%q: want a duration of 1 to %d characters", s, maxQuantityChars)
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxKillAfter {
		return 0, fmt.Errorf("%q: want a duration from 0s to %s", s, maxKillAfter)
	}
	return d, nil
}

// runningContainer is what the killer knows of one running container of the fake runtime.
type runningContainer struct {
	ID        string
	Pod       types.UID
	Name      string
	Restart   int64     // the kubelet's attempt number: the container's restart count
	StartedAt time.Time // zero: not started yet
	// MemoryLimit applied by the kubelet (creation or resize); 0: none.
	MemoryLimit int64
}

// killDecision says whether c is to be killed now, and how.
func killDecision(rules map[string]killRule, c runningContainer, now time.Time) (killRule, bool) {
	r, ok := rules[c.Name]
	if !ok {
		if r, ok = rules["*"]; !ok {
			return killRule{}, false
		}
	}
	if c.StartedAt.IsZero() || now.Sub(c.StartedAt) < r.After {
		return killRule{}, false
	}
	if r.Restart >= 0 && c.Restart != r.Restart {
		return killRule{}, false
	}
	if r.MemoryLimitBelow > 0 && (c.MemoryLimit <= 0 || c.MemoryLimit >= r.MemoryLimitBelow) {
		return killRule{}, false
	}
	return r, true
}

// killTracker keeps each pod's kill rules, from its annotation. Safe for concurrent use.
type killTracker struct {
	mu       sync.Mutex
	pods     map[types.UID]podKill
	rejected map[string]bool // annotation values logged as invalid
}

type podKill struct {
	raw   string
	rules map[string]killRule
}

func newKillTracker() *killTracker {
	return &killTracker{pods: map[types.UID]podKill{}, rejected: map[string]bool{}}
}

// observe records a pod's kill annotation (from the node's pod informer).
func (t *killTracker) observe(pod *v1.Pod) {
	raw := pod.Annotations[KillAnnotation]
	t.mu.Lock()
	defer t.mu.Unlock()
	if raw == "" {
		delete(t.pods, pod.UID)
		return
	}
	if p, ok := t.pods[pod.UID]; ok && p.raw == raw {
		return
	}
	rules, err := parseKill(raw)
	if err != nil {
		if len(t.rejected) > 1000 {
			t.rejected = map[string]bool{}
		}
		if !t.rejected[raw] {
			t.rejected[raw] = true
			klog.InfoS("Ignoring invalid kill annotation", "pod", klog.KObj(pod), "annotation", KillAnnotation, "err", err)
		}
		rules = nil
	}
	t.pods[pod.UID] = podKill{raw: raw, rules: rules}
}

func (t *killTracker) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pods, uid)
}

// empty reports whether no pod asks for kills (the killer then does not look at containers).
func (t *killTracker) empty() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pods) == 0
}

// decide returns the kills due now among cs, by container ID.
func (t *killTracker) decide(cs []runningContainer, now time.Time) map[string]killRule {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out map[string]killRule
	for _, c := range cs {
		p, ok := t.pods[c.Pod]
		if !ok || p.rules == nil {
			continue
		}
		if r, ok := killDecision(p.rules, c, now); ok {
			if out == nil {
				out = map[string]killRule{}
			}
			out[c.ID] = r
		}
	}
	return out
}
