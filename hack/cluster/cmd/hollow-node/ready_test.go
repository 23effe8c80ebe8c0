package main

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

func TestParseReadyAfter(t *testing.T) {
	for _, tt := range []struct {
		cmd     []string
		want    time.Duration
		wantErr string
	}{
		{cmd: []string{ReadyAfterCommand, "90s"}, want: 90 * time.Second},
		{cmd: []string{ReadyAfterCommand, "0s"}},
		{cmd: []string{ReadyAfterCommand}, wantErr: "want one duration"},
		{cmd: []string{ReadyAfterCommand, "90s", "x"}, wantErr: "want one duration"},
		{cmd: []string{ReadyAfterCommand, strings.Repeat("1", 17) + "ns"}, wantErr: "characters"},
		{cmd: []string{ReadyAfterCommand, "2h"}, wantErr: "from 0s to 1h0m0s"},
		{cmd: []string{ReadyAfterCommand, "-1s"}, wantErr: "from 0s to"},
		{cmd: []string{ReadyAfterCommand, "soon"}, wantErr: "from 0s to"},
	} {
		got, err := parseReadyAfter(tt.cmd)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want %q", tt.cmd, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: %s, %v; want %s", tt.cmd, got, err, tt.want)
		}
	}
}

func execProbe(cmd ...string) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: cmd}}}
}

func running(name string, since time.Time) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(since)}}}
}

// A container with the command is Ready once its instance has run for the duration, and not
// before; a restart starts the count again; a container without it is Ready as with
// kubemark's stub (an HTTP probe is not run); a bad command is never Ready.
func TestReadyProberUpdate(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	now := start
	p := newReadyProber(func() time.Time { return now })
	m := probeManager{p}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: types.UID("u1")}, Spec: v1.PodSpec{Containers: []v1.Container{
		{Name: "slow", ReadinessProbe: execProbe(ReadyAfterCommand, "90s")},
		{Name: "web", ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/"}}}},
		{Name: "bad", ReadinessProbe: execProbe(ReadyAfterCommand, "2h")},
		{Name: "plain"},
	}}}
	status := func(slowStart time.Time) *v1.PodStatus {
		return &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
			running("slow", slowStart), running("web", start), running("bad", start), running("plain", start)}}
	}
	ready := func(s *v1.PodStatus) map[string]bool {
		out := map[string]bool{}
		for _, cs := range s.ContainerStatuses {
			out[cs.Name] = cs.Ready
		}
		return out
	}
	check := func(when string, s *v1.PodStatus, want map[string]bool) {
		t.Helper()
		m.UpdatePodStatus(context.Background(), pod, s)
		got := ready(s)
		for name, w := range want {
			if got[name] != w {
				t.Errorf("%s: %s Ready=%v, want %v", when, name, got[name], w)
			}
		}
	}
	now = start.Add(89 * time.Second)
	check("after 89s", status(start), map[string]bool{"slow": false, "web": true, "bad": false, "plain": true})
	now = start.Add(90 * time.Second)
	check("after 90s", status(start), map[string]bool{"slow": true, "web": true, "bad": false, "plain": true})
	check("restarted 10s ago", status(now.Add(-10*time.Second)), map[string]bool{"slow": false})
	waiting := status(start)
	waiting.ContainerStatuses[0].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	check("not running", waiting, map[string]bool{"slow": false})

	if !p.warned[pod.UID] {
		t.Error("the bad command was not reported")
	}
	m.CleanupPods(map[types.UID]sets.Empty{})
	if len(p.warned) != 0 {
		t.Errorf("CleanupPods kept %v", p.warned)
	}
}

// A sidecar (restartable init container) is Ready while it runs, as the real kubelet's prober
// marks it, and with the command only once it has run long enough; an init container that is
// not a sidecar keeps what the kubelet set.
func TestReadyProberMarksSidecars(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	now := start.Add(30 * time.Second)
	m := probeManager{newReadyProber(func() time.Time { return now })}
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: types.UID("u2")}, Spec: v1.PodSpec{
		InitContainers: []v1.Container{
			{Name: "setup"},
			{Name: "proxy", RestartPolicy: &always},
			{Name: "agent", RestartPolicy: &always, ReadinessProbe: execProbe(ReadyAfterCommand, "1m")},
			{Name: "stopped", RestartPolicy: &always},
		},
		Containers: []v1.Container{{Name: "app"}},
	}}
	status := &v1.PodStatus{
		InitContainerStatuses: []v1.ContainerStatus{
			{Name: "setup", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}, Ready: true},
			running("proxy", start), running("agent", start),
			{Name: "stopped", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, Ready: true},
		},
		ContainerStatuses: []v1.ContainerStatus{running("app", start)},
	}
	m.UpdatePodStatus(context.Background(), pod, status)
	want := map[string]bool{"setup": true, "proxy": true, "agent": false, "stopped": false}
	for _, cs := range status.InitContainerStatuses {
		if cs.Ready != want[cs.Name] {
			t.Errorf("init container %s Ready=%v, want %v", cs.Name, cs.Ready, want[cs.Name])
		}
	}
	if !status.ContainerStatuses[0].Ready {
		t.Error("app not Ready")
	}
}
