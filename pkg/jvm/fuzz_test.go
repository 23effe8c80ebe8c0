package jvm

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// FuzzParseOptions feeds one string everywhere Inspect reads options: a
// variable the JVM reads, the java command line (split on spaces, and as
// one argument), a shell's -c script, Kafka's and Strimzi's variables, a
// value the kubelet expands. Inspect must never panic, and a known heap
// and its floor stay within MaxSize at every limit.
func FuzzParseOptions(f *testing.F) {
	for _, s := range []string{
		"-Xmx1g", "-Xms1g -Xmx1g", "-XX:MaxRAMPercentage=62.5", "-XX:MaxRAMFraction=2 -XX:MaxRAM=4g",
		"-XX:-UseContainerSupport", "@/etc/args", "-XX:Flags=.hotspotrc -Xmx2g", "exec java $JAVA_OPTS -jar app.jar",
		"java -Xmx$HEAP ${X:-y} $(cat f) `x` \"$Y\" 'z' 2>&1 | tee", "50", "5368709120", "1.5G",
		"-Xmx$(HEAP)", "$$(X)", "-Xmx1180591620717411303424", "-Dx=\"a b\" '-Xmx1g", "export JAVA_OPTS=1; . f",
	} {
		f.Add(s)
	}
	limits := []int64{0, 1, 200 * MiB, 2 * GiB, 64 * GiB, MaxSize, MaxSize + 1}
	f.Fuzz(func(t *testing.T, s string) {
		containers := []corev1.Container{
			withEnv(java("Main"), "JAVA_TOOL_OPTIONS", s, "JDK_JAVA_OPTIONS", s, "_JAVA_OPTIONS", s),
			java(append(strings.Split(s, " "), "Main")...),
			java(s, "Main"),
			sh(s, "JAVA_OPTS", s, "HEAP", s),
			sh("exec java $JAVA_OPTS "+s+" Main", "JAVA_OPTS", s),
			kafkaRun("KAFKA_HEAP_OPTS", s, "KAFKA_OPTS", s),
			kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", s, "STRIMZI_DYNAMIC_HEAP_MAX", s),
			withEnv(java("-Xmx$(HEAP)", "Main"), "HEAP", s, "JAVA_TOOL_OPTIONS", "$(HEAP) "+s),
		}
		for i := range containers {
			r := Inspect(&containers[i], nil)
			if r.Reason == "" || r.Message == "" {
				t.Fatalf("container %d: no reason or message: %+v", i, r)
			}
			if len(r.Flag) > 4*MaxValueLength {
				t.Fatalf("container %d: a flag of %d bytes", i, len(r.Flag))
			}
			if !r.Known {
				continue
			}
			for _, l := range limits {
				b, err := r.Heap.Bytes(l)
				if err != nil {
					continue
				}
				if b < 0 || b > MaxSize {
					t.Fatalf("container %d at %d: heap %d", i, l, b)
				}
				fl, err := r.Floor(l, DefaultOverhead)
				if err != nil || fl < b || fl > 3*MaxSize {
					t.Fatalf("container %d at %d: floor %d of heap %d: %v", i, l, fl, b, err)
				}
			}
		}
	})
}

// FuzzParseAnnotation: the annotation's parser never panics, respects its
// bounds, and what it reads writes back the same.
func FuzzParseAnnotation(f *testing.F) {
	for _, s := range []string{
		"kafka", "kafka overhead=768Mi+10%; connect heap=2Gi; *", "zk heap=50% overhead=1e3",
		"a;b;c", "* overhead=0", "kafka heap=1e-99999999", ";;", "x overhead=512Mi+15%+1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ds, err := ParseAnnotation(s)
		if err != nil {
			return
		}
		if len(s) > MaxAnnotationLength || ds.Len() > MaxDeclarations || ds.Len() == 0 {
			t.Fatalf("read %d bytes, %d entries", len(s), ds.Len())
		}
		again, err := ParseAnnotation(ds.String())
		if err != nil {
			t.Fatalf("%q written as %q: %v", s, ds.String(), err)
		}
		if again.String() != ds.String() {
			t.Fatalf("%q written as %q, read back as %q", s, ds.String(), again.String())
		}
		for _, n := range []string{"kafka", "a", "x", "zk"} {
			if d, ok := ds.For(n); ok {
				if err := d.OverheadOrDefault().Validate(); err != nil {
					t.Fatalf("%q: overhead of %s: %v", s, n, err)
				}
			}
		}
	})
}
