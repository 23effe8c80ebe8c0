package main

import (
	"context"
	"strings"
	"testing"
	"time"

	kubeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"
	fakeremote "k8s.io/cri-client/pkg/fake"
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

// The probe fails until the container instance has run for the duration,
// and passes from then on; other commands are the fake runtime's.
func TestReadyRuntimeExecSync(t *testing.T) {
	rt := fakeremote.NewFakeRemoteRuntime()
	start := time.Unix(1_800_000_000, 0)
	rt.RuntimeService.Containers["c1"] = &apitest.FakeContainer{ContainerStatus: kubeapi.ContainerStatus{
		Id: "c1", State: kubeapi.ContainerState_CONTAINER_RUNNING, StartedAt: start.UnixNano()}}
	now := start
	r := &readyRuntime{RuntimeServiceServer: rt, fs: rt, now: func() time.Time { return now }}
	probe := func(id string, cmd ...string) int32 {
		t.Helper()
		resp, err := r.ExecSync(context.Background(), &kubeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd})
		if err != nil {
			t.Fatal(err)
		}
		return resp.ExitCode
	}
	now = start.Add(89 * time.Second)
	if got := probe("c1", ReadyAfterCommand, "90s"); got != 1 {
		t.Errorf("after 89s: exit code %d, want 1", got)
	}
	now = start.Add(90 * time.Second)
	if got := probe("c1", ReadyAfterCommand, "90s"); got != 0 {
		t.Errorf("after 90s: exit code %d, want 0", got)
	}
	if got := probe("gone", ReadyAfterCommand, "0s"); got != 1 {
		t.Errorf("a container not running: exit code %d, want 1", got)
	}
	if got := probe("c1", ReadyAfterCommand, "2h"); got != 2 {
		t.Errorf("a bad duration: exit code %d, want 2", got)
	}
	if got := probe("c1", "true"); got != 0 {
		t.Errorf("another command: exit code %d, want the fake's 0", got)
	}
}
