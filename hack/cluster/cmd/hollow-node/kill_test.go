package main

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestParseKill(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]killRule
		wantErr string
	}{
		{name: "crash once", in: "app=restart:0",
			want: map[string]killRule{"app": {Reason: "Error", ExitCode: 1, Restart: 0}}},
		{name: "oom below a limit", in: "app=memory-limit-below:300Mi",
			want: map[string]killRule{"app": {Reason: "OOMKilled", ExitCode: 137, Restart: -1, MemoryLimitBelow: 300 << 20}}},
		{name: "every field, two containers, spaces", in: " app = reason:OOMKilled, restart:3 ,after:1.5s ; side=reason:Error,restart:* ;",
			want: map[string]killRule{
				"app":  {Reason: "OOMKilled", ExitCode: 137, Restart: 3, After: 1500 * time.Millisecond},
				"side": {Reason: "Error", ExitCode: 1, Restart: -1},
			}},
		{name: "error below a limit", in: "*=reason:Error,memory-limit-below:1Gi",
			want: map[string]killRule{"*": {Reason: "Error", ExitCode: 1, Restart: -1, MemoryLimitBelow: 1 << 30}}},
		{name: "empty", in: "", want: map[string]killRule{}},
		{name: "too long", in: "a=restart:0;" + strings.Repeat(" ", maxKillBytes), wantErr: "longer than"},
		{name: "too many entries", in: strings.Repeat("a=restart:0;", maxKillEntries), wantErr: "more than 16 entries"},
		{name: "unknown reason", in: "a=reason:Completed", wantErr: "want OOMKilled or Error"},
		{name: "negative restart", in: "a=restart:-1", wantErr: "restart count from 0"},
		{name: "huge restart", in: "a=restart:99999999999999999999", wantErr: "restart count from 0"},
		{name: "restart above bound", in: "a=restart:1000001", wantErr: "restart count from 0"},
		{name: "after above bound", in: "a=after:2h", wantErr: "from 0s to 1h0m0s"},
		{name: "negative after", in: "a=after:-1s", wantErr: "from 0s to"},
		{name: "long after", in: "a=after:" + strings.Repeat("1", 17) + "ns", wantErr: "characters"},
		{name: "zero memory", in: "a=memory-limit-below:0", wantErr: "more than 0"},
		{name: "free exponent", in: "a=memory-limit-below:1e9", wantErr: "unknown suffix"},
		{name: "memory above bound", in: "a=memory-limit-below:2Ti", wantErr: "above 1Ti"},
		{name: "unknown key", in: "a=signal:9", wantErr: "unknown key"},
		{name: "key twice", in: "a=restart:1,restart:2", wantErr: "set twice"},
		{name: "container twice", in: "a=restart:1;a=after:1s", wantErr: "named twice"},
		{name: "bad container name", in: "A_b=restart:1", wantErr: "not a container name"},
		{name: "no equals", in: "restart:1", wantErr: "CONTAINER=FIELD"},
		{name: "no colon", in: "a=restart", wantErr: "KEY:VALUE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseKill(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseKill(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseKill(%q): %v", tc.in, err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("parseKill(%q) = %v, want %v", tc.in, got, tc.want)
			}
			for k, w := range tc.want {
				if got[k] != w {
					t.Errorf("parseKill(%q)[%q] = %+v, want %+v", tc.in, k, got[k], w)
				}
			}
		})
	}
}

func TestKillDecision(t *testing.T) {
	now := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	started := now.Add(-10 * time.Second)
	rules := func(s string) map[string]killRule {
		r, err := parseKill(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	tests := []struct {
		name   string
		rules  string
		c      runningContainer
		want   bool
		reason string
	}{
		{name: "once: the named instance", rules: "app=restart:0",
			c: runningContainer{Name: "app", Restart: 0, StartedAt: started}, want: true, reason: "Error"},
		{name: "once: the restarted instance lives", rules: "app=restart:0",
			c: runningContainer{Name: "app", Restart: 1, StartedAt: started}},
		{name: "another container lives", rules: "app=restart:0",
			c: runningContainer{Name: "side", Restart: 0, StartedAt: started}},
		{name: "star names the others", rules: "app=restart:5;*=reason:OOMKilled",
			c: runningContainer{Name: "side", Restart: 7, StartedAt: started}, want: true, reason: "OOMKilled"},
		{name: "the container's own entry wins over star", rules: "side=restart:5;*=reason:OOMKilled",
			c: runningContainer{Name: "side", Restart: 7, StartedAt: started}},
		{name: "not started", rules: "app=restart:*",
			c: runningContainer{Name: "app"}},
		{name: "before after", rules: "app=after:11s",
			c: runningContainer{Name: "app", StartedAt: started}},
		{name: "at after", rules: "app=after:10s",
			c: runningContainer{Name: "app", StartedAt: started}, want: true, reason: "Error"},
		{name: "limit below the need", rules: "app=memory-limit-below:300Mi",
			c: runningContainer{Name: "app", StartedAt: started, MemoryLimit: 200 << 20}, want: true, reason: "OOMKilled"},
		{name: "limit at the need", rules: "app=memory-limit-below:300Mi",
			c: runningContainer{Name: "app", StartedAt: started, MemoryLimit: 300 << 20}},
		{name: "no limit", rules: "app=memory-limit-below:300Mi",
			c: runningContainer{Name: "app", StartedAt: started}},
		{name: "limit below, but another instance", rules: "app=memory-limit-below:300Mi,restart:2",
			c: runningContainer{Name: "app", Restart: 1, StartedAt: started, MemoryLimit: 200 << 20}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, got := killDecision(rules(tc.rules), tc.c, now)
			if got != tc.want {
				t.Fatalf("killDecision(%q, %+v) = %v, want %v", tc.rules, tc.c, got, tc.want)
			}
			if got && r.Reason != tc.reason {
				t.Errorf("reason %q, want %q", r.Reason, tc.reason)
			}
		})
	}
}

func TestKillTracker(t *testing.T) {
	now := time.Now()
	pod := func(uid, kill string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID("uid-" + uid)}}
		if kill != "" {
			p.Annotations = map[string]string{KillAnnotation: kill}
		}
		return p
	}
	k := newKillTracker()
	if !k.empty() {
		t.Fatal("a new tracker is not empty")
	}
	k.observe(pod("a", "app=restart:0"))
	k.observe(pod("b", "app=bogus:1"))
	k.observe(pod("c", ""))
	cs := []runningContainer{
		{ID: "a1", Pod: "uid-a", Name: "app", StartedAt: now},
		{ID: "b1", Pod: "uid-b", Name: "app", StartedAt: now},
		{ID: "c1", Pod: "uid-c", Name: "app", StartedAt: now},
	}
	due := k.decide(cs, now)
	if len(due) != 1 || due["a1"].Reason != "Error" {
		t.Fatalf("decide = %v, want a1 only (b's annotation is invalid, c has none)", due)
	}
	k.observe(pod("a", ""))
	if due := k.decide(cs, now); len(due) != 0 {
		t.Fatalf("decide after the annotation was removed = %v, want nothing", due)
	}
	k.forget("uid-b")
	if !k.empty() {
		t.Fatal("tracker not empty after every pod dropped its annotation or went")
	}
}
