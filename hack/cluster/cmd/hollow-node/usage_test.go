package main

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func i64p(v int64) *int64 { return &v }

func TestParseUsage(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]usageField
		wantErr string
	}{
		{name: "one container", in: "app=cpu:300m,memory:200Mi",
			want: map[string]usageField{"app": {cpu: i64p(300), memory: i64p(200 << 20)}}},
		{name: "two containers, noise, spaces", in: " app = cpu:1.5, noise:10% ; side=memory:1Gi ;",
			want: map[string]usageField{"app": {cpu: i64p(1500), noise: i64p(10)}, "side": {memory: i64p(1 << 30)}}},
		{name: "every container", in: "*=cpu:2",
			want: map[string]usageField{"*": {cpu: i64p(2000)}}},
		{name: "empty", in: "", want: map[string]usageField{}},
		{name: "decimal suffix", in: "a=memory:1.5G", want: map[string]usageField{"a": {memory: i64p(1500000000)}}},
		{name: "too long", in: "a=cpu:1m;" + strings.Repeat(" ", maxUsageBytes), wantErr: "longer than"},
		{name: "too many entries", in: strings.Repeat("a=cpu:1m;", maxUsageEntries), wantErr: "more than 16 entries"},
		{name: "free exponent", in: "a=cpu:1e9", wantErr: "unknown suffix"},
		{name: "huge exponent", in: "a=memory:9E999999999", wantErr: "unknown suffix"},
		{name: "negative", in: "a=cpu:-1", wantErr: "plain decimal"},
		{name: "long quantity", in: "a=cpu:12345678901234567", wantErr: "characters"},
		{name: "two dots", in: "a=cpu:1.2.3", wantErr: "plain decimal"},
		{name: "cpu above bound", in: "a=cpu:2000", wantErr: "above 1024 cores"},
		{name: "memory above bound", in: "a=memory:2Ti", wantErr: "above 1Ti"},
		{name: "noise above bound", in: "a=noise:101%", wantErr: "N from 0 to 100"},
		{name: "noise without percent", in: "a=noise:10", wantErr: "want N%"},
		{name: "unknown key", in: "a=disk:1Gi", wantErr: "unknown key"},
		{name: "key twice", in: "a=cpu:1,cpu:2", wantErr: "set twice"},
		{name: "container twice", in: "a=cpu:1;a=memory:1Mi", wantErr: "named twice"},
		{name: "bad container name", in: "A_b=cpu:1", wantErr: "not a container name"},
		{name: "no equals", in: "cpu:1", wantErr: "CONTAINER=FIELD"},
		{name: "no colon", in: "a=cpu", wantErr: "KEY:VALUE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseUsage(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseUsage(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseUsage(%q): %v", tc.in, err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("parseUsage(%q) = %d entries, want %d", tc.in, len(got), len(tc.want))
			}
			for n, w := range tc.want {
				g, ok := got[n]
				if !ok {
					t.Fatalf("parseUsage(%q): no entry %q", tc.in, n)
				}
				for _, f := range []struct {
					field     string
					got, want *int64
				}{{"cpu", g.cpu, w.cpu}, {"memory", g.memory, w.memory}, {"noise", g.noise, w.noise}} {
					if (f.got == nil) != (f.want == nil) || f.got != nil && *f.got != *f.want {
						t.Errorf("entry %q %s = %v, want %v", n, f.field, deref(f.got), deref(f.want))
					}
				}
			}
		})
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func testPod(annotations map[string]string, containers ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1", Annotations: annotations}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c})
	}
	return p
}

func TestTrackerResolvesAndFollowsChanges(t *testing.T) {
	def := containerUsage{CPUMilli: 1, MemoryBytes: 1 << 20}
	tr := newUsageTracker(1, def, 5<<20)
	pod := testPod(nil, "app", "side")
	tr.observe(pod)
	if got := tr.podMemory(pod.UID); got != 5<<20 {
		t.Fatalf("pod memory without annotations = %d, want the default %d", got, 5<<20)
	}

	pod.Annotations = map[string]string{UsageAnnotation: "app=cpu:300m,memory:200Mi;*=memory:10Mi"}
	tr.observe(pod)
	if got, want := tr.podMemory(pod.UID), uint64(210<<20); got != want {
		t.Fatalf("pod memory = %d, want the containers' sum %d", got, want)
	}
	now := time.Unix(1000, 0)
	if s := tr.sample("c-app", pod.UID, "app", now); s.MemoryBytes != 200<<20 || s.CPUNanos != 0 {
		t.Fatalf("first sample of app = %+v, want 200Mi and a counter at 0", s)
	}
	s := tr.sample("c-app", pod.UID, "app", now.Add(10*time.Second))
	if want := uint64(3e9); s.CPUNanos != want {
		t.Fatalf("cpu counter after 10s at 300m = %d, want %d", s.CPUNanos, want)
	}
	if s := tr.sample("c-side", pod.UID, "side", now); s.MemoryBytes != 10<<20 {
		t.Fatalf("side memory = %d, want 10Mi from *", s.MemoryBytes)
	}

	// raised: the counter keeps its value and grows at the new rate
	pod.Annotations[UsageAnnotation] = "app=cpu:1"
	tr.observe(pod)
	tr.sample("c-app", pod.UID, "app", now.Add(20*time.Second)) // 10 s more at 300m: 6e9
	s = tr.sample("c-app", pod.UID, "app", now.Add(30*time.Second))
	if want := uint64(6e9 + 10e9); s.CPUNanos != want {
		t.Fatalf("cpu counter after the change = %d, want %d", s.CPUNanos, want)
	}
	if s.MemoryBytes != 1<<20 {
		t.Fatalf("memory left out of the new value = %d, want the default", s.MemoryBytes)
	}

	// the memory-usage annotation sets the pod cgroup only
	pod.Annotations[MemoryUsageAnnotation] = "150Mi"
	tr.observe(pod)
	if got := tr.podMemory(pod.UID); got != 150<<20 {
		t.Fatalf("pod memory with %s = %d, want 150Mi", MemoryUsageAnnotation, got)
	}
	if s := tr.sample("c-app", pod.UID, "app", now.Add(31*time.Second)); s.MemoryBytes != 1<<20 {
		t.Fatalf("container memory with %s = %d, want it unchanged", MemoryUsageAnnotation, s.MemoryBytes)
	}

	// invalid: ignored as a whole
	pod.Annotations = map[string]string{UsageAnnotation: "app=cpu:1e9"}
	tr.observe(pod)
	if got := tr.podMemory(pod.UID); got != 5<<20 {
		t.Fatalf("pod memory with an invalid annotation = %d, want the default", got)
	}
}

func TestNoiseIsBoundedAndSeeded(t *testing.T) {
	run := func(seed uint64) []uint64 {
		tr := newUsageTracker(seed, containerUsage{}, 0)
		pod := testPod(map[string]string{UsageAnnotation: "app=memory:100Mi,noise:10%"}, "app")
		tr.observe(pod)
		var out []uint64
		for i := 0; i < 200; i++ {
			out = append(out, tr.sample("c", pod.UID, "app", time.Unix(int64(i)*int64(noiseResample/time.Second), 0)).MemoryBytes)
		}
		return out
	}
	a, b, c := run(1), run(1), run(2)
	lo, hi := uint64(90<<20), uint64(110<<20)
	distinct := map[uint64]bool{}
	for i := range a {
		if a[i] < lo || a[i] > hi {
			t.Fatalf("sample %d = %d, outside ±10%% of 100Mi", i, a[i])
		}
		if a[i] != b[i] {
			t.Fatalf("sample %d differs between two runs of seed 1: %d, %d", i, a[i], b[i])
		}
		distinct[a[i]] = true
	}
	if len(distinct) < 100 {
		t.Fatalf("%d distinct samples in 200: noise is not applied", len(distinct))
	}
	same := 0
	for i := range a {
		if a[i] == c[i] {
			same++
		}
	}
	if same > 10 {
		t.Fatalf("seeds 1 and 2 agree on %d samples of 200", same)
	}
}

func FuzzParseUsage(f *testing.F) {
	f.Add("app=cpu:300m,memory:200Mi,noise:10%;*=memory:1Gi")
	f.Fuzz(func(t *testing.T, s string) {
		e, err := parseUsage(s)
		if err != nil {
			return
		}
		for _, u := range e {
			if u.cpu != nil && (*u.cpu < 0 || *u.cpu > maxCPUMilli) || u.memory != nil && (*u.memory < 0 || *u.memory > maxMemoryBytes) ||
				u.noise != nil && (*u.noise < 0 || *u.noise > maxNoisePercent) {
				t.Fatalf("parseUsage(%q) = out-of-bounds %+v", s, u)
			}
		}
	})
}
