package main

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const mi = 1 << 20

func TestParseJVMAnnotation(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]string
		wantErr string
	}{
		{name: "two containers", in: "kafka=-Xms1g -Xmx1g; connect=-XX:MaxRAMPercentage=75",
			want: map[string]string{"kafka": "-Xms1g -Xmx1g", "connect": "-XX:MaxRAMPercentage=75"}},
		{name: "every container", in: "*=-Xmx512m", want: map[string]string{"*": "-Xmx512m"}},
		{name: "too long", in: "a=-Xmx1g;" + strings.Repeat(" ", maxJVMBytes), wantErr: "longer than"},
		{name: "too many entries", in: strings.Repeat("a=-Xmx1g;", maxJVMEntries), wantErr: "more than 16 entries"},
		{name: "a size the JVM refuses", in: "a=-Xmx1gb", wantErr: "want digits"},
		{name: "a decimal size", in: "a=-Xmx1.5g", wantErr: "want digits"},
		{name: "a huge size", in: "a=-Xmx99999999999999999999", wantErr: "want digits"},
		{name: "a size above the bound", in: "a=-Xmx2t", wantErr: "from 1 byte"},
		{name: "a percentage above 100", in: "a=-XX:MaxRAMPercentage=101", wantErr: "at most 100"},
		{name: "a percentage that is none", in: "a=-XX:MaxRAMPercentage=lots", wantErr: "percentage"},
		{name: "bad container name", in: "A_b=-Xmx1g", wantErr: "not a container name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseJVMAnnotation(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseJVMAnnotation(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseJVMAnnotation(%q): %v", tc.in, err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("parseJVMAnnotation(%q) = %v, want %v", tc.in, got, tc.want)
			}
			for k, w := range tc.want {
				if got[k] != w {
					t.Errorf("parseJVMAnnotation(%q)[%q] = %q, want %q", tc.in, k, got[k], w)
				}
			}
		})
	}
}

func env(kv ...string) []v1.EnvVar {
	var out []v1.EnvVar
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, v1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

// The heap each JVM sizes at a start with a limit of 2Gi.
func TestContainerJVMHeap(t *testing.T) {
	tests := []struct {
		name      string
		env       []v1.EnvVar
		image     string
		named     bool
		wantHeap  int64
		wantNoJVM bool
	}{
		{name: "Strimzi's explicit heap", env: env("KAFKA_HEAP_OPTS", "-Xms1g -Xmx1g"), wantHeap: 1 << 30},
		{name: "Strimzi's dynamic heap: half the limit", env: env("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50"), wantHeap: 1 << 30},
		{name: "Strimzi's dynamic heap, capped", env: env("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50", "STRIMZI_DYNAMIC_HEAP_MAX", "512m"), wantHeap: 512 * mi},
		{name: "an explicit heap wins over Strimzi's dynamic one", env: env("KAFKA_HEAP_OPTS", "-Xmx768m", "STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50"), wantHeap: 768 * mi},
		{name: "a percentage, with decimals", env: env("JAVA_TOOL_OPTIONS", "-XX:MaxRAMPercentage=62.5"), wantHeap: 1280 * mi},
		{name: "the JVM's default: a quarter", env: env("JAVA_OPTS", "-Dfoo=bar"), wantHeap: 512 * mi},
		{name: "the last -Xmx wins", env: env("JAVA_TOOL_OPTIONS", "-Xmx2g", "KAFKA_OPTS", "-XX:MaxHeapSize=256m"), wantHeap: 256 * mi},
		{name: "_JAVA_OPTIONS overrides everything", env: env("_JAVA_OPTIONS", "-Xmx300m", "KAFKA_HEAP_OPTS", "-Xmx1g"), wantHeap: 300 * mi},
		{name: "the image's options, which the spec does not show", image: "-Xms1g -Xmx1g", named: true, wantHeap: 1 << 30},
		{name: "the spec's options override the image's", image: "-Xmx1g", named: true, env: env("JAVA_TOOL_OPTIONS", "-Xmx600m"), wantHeap: 600 * mi},
		{name: "a value the JVM refuses is left out", env: env("KAFKA_HEAP_OPTS", "-Xmx1gb"), wantHeap: 512 * mi},
		{name: "no JVM", env: env("MODE", "prod"), wantNoJVM: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := containerJVM(&v1.Container{Name: "c", Env: tc.env}, tc.image, tc.named)
			if ok == tc.wantNoJVM {
				t.Fatalf("containerJVM: JVM %v, want %v", ok, !tc.wantNoJVM)
			}
			if !ok {
				return
			}
			h, ok := s.heap(2 << 30)
			if !ok || h != tc.wantHeap {
				t.Errorf("heap at a 2Gi limit = %d (%v), want %d", h, ok, tc.wantHeap)
			}
		})
	}
}

func jvmPod(annotations map[string]string, e []v1.EnvVar) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kafka-0", Namespace: "kafka", UID: types.UID("uid-kafka-0"), Annotations: annotations},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "kafka", Env: e}, {Name: "exporter"}}},
	}
}

// A JVM sizes its heap at its start, from the limit then; it is OOM-killed when its limit
// falls below heap + overhead, and not while the limit stays at or above it.
func TestJVMIsOOMKilledUnderItsNeed(t *testing.T) {
	started := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	tr := newJVMTracker()
	tr.observe(jvmPod(nil, env("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50")))
	if tr.empty() {
		t.Fatal("a pod running a JVM is tracked")
	}
	run := func(id string, restart, limit int64) runningContainer {
		return runningContainer{ID: id, Pod: "uid-kafka-0", Name: "kafka", Restart: restart, StartedAt: started, MemoryLimit: limit}
	}
	// Started at 2Gi: 1Gi of heap, 1689.6Mi needed.
	if due := tr.decide([]runningContainer{run("c1", 0, 2<<30)}, nil); len(due) != 0 {
		t.Fatalf("killed at its start: %v", due)
	}
	if m, ok := tr.memory("c1", "uid-kafka-0", "kafka"); !ok || m != uint64(jvmNeed(1<<30)) {
		t.Errorf("memory = %d (%v), want heap + overhead %d", m, ok, jvmNeed(1<<30))
	}
	// Lowered in place to the floor the updater computes (1690Mi): it lives.
	if due := tr.decide([]runningContainer{run("c1", 0, 1690*mi)}, nil); len(due) != 0 {
		t.Fatalf("killed at its floor: %v", due)
	}
	// Lowered to 800Mi: the heap stays 1Gi, the load reaches the limit.
	due := tr.decide([]runningContainer{run("c1", 0, 800*mi)}, nil)
	if r, ok := due["c1"]; !ok || r.Reason != reasonOOMKilled || r.ExitCode != 137 {
		t.Fatalf("not OOM-killed under its need: %v", due)
	}
	// Restarted with 800Mi: the heap is sized again, 400Mi, and 972Mi are needed: killed
	// again, a crash loop until the limit rises.
	due = tr.decide([]runningContainer{run("c2", 1, 800*mi)}, nil)
	if _, ok := due["c2"]; !ok {
		t.Fatalf("a restart at 800Mi needs 972Mi: %v", due)
	}
	// Restarted with 1207Mi: 603.5Mi of heap, 1206Mi needed: it lives, and the first
	// container's state is forgotten.
	if due := tr.decide([]runningContainer{run("c3", 2, 1207*mi)}, nil); len(due) != 0 {
		t.Fatalf("killed at its new floor: %v", due)
	}
	if _, ok := tr.memory("c1", "uid-kafka-0", "kafka"); ok {
		t.Error("a container gone is forgotten")
	}
	tr.forget("uid-kafka-0")
	if !tr.empty() {
		t.Error("a pod deleted is forgotten")
	}
}

// The usage annotation's memory is a JVM at rest: it reports that, and is still killed
// under its need.
func TestJVMAtRestReportsItsUsage(t *testing.T) {
	started := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	tr := newJVMTracker()
	tr.observe(jvmPod(map[string]string{UsageAnnotation: "kafka=memory:400Mi", JVMAnnotation: "kafka=-Xms1g -Xmx1g"}, nil))
	c := runningContainer{ID: "c1", Pod: "uid-kafka-0", Name: "kafka", StartedAt: started, MemoryLimit: 2 << 30}
	tr.decide([]runningContainer{c}, nil)
	if _, ok := tr.memory("c1", "uid-kafka-0", "kafka"); ok {
		t.Error("a JVM at rest reports the usage annotation's memory, not its need")
	}
	c.MemoryLimit = 800 * mi
	if due := tr.decide([]runningContainer{c}, map[string]killRule{"other": {Reason: reasonError}}); len(due) != 2 {
		t.Errorf("the kill of a JVM shown only by the annotation, beside the others: %v", due)
	}
}

// Without a memory limit at its start, a JVM sizes its heap from the node: not modelled.
func TestJVMWithoutLimitIsNotModelled(t *testing.T) {
	tr := newJVMTracker()
	tr.observe(jvmPod(nil, env("JAVA_TOOL_OPTIONS", "-XX:MaxRAMPercentage=50")))
	c := runningContainer{ID: "c1", Pod: "uid-kafka-0", Name: "kafka", StartedAt: time.Now()}
	if due := tr.decide([]runningContainer{c}, nil); len(due) != 0 {
		t.Errorf("killed: %v", due)
	}
	if _, ok := tr.memory("c1", "uid-kafka-0", "kafka"); ok {
		t.Error("no need without a heap")
	}
	tr.observe(jvmPod(map[string]string{JVMAnnotation: "kafka=-Xmx1gb"}, nil))
	if !tr.empty() {
		t.Error("an annotation that cannot be read names no JVM")
	}
}
