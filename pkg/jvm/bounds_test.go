package jvm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func repeatOptions(opt string, n int) string {
	return strings.TrimSpace(strings.Repeat(opt+" ", n))
}

// Every input is tenant input: past a bound the heap is unknown, never read
// from a part, and reading stops there.
func TestInspectBounds(t *testing.T) {
	manyEnv := java("-Xmx1g", "Main")
	for i := range MaxEnv + 1 {
		manyEnv.Env = append(manyEnv.Env, corev1.EnvVar{Name: fmt.Sprintf("V%d", i), Value: "x"})
	}
	manyArgs := java(append(strings.Fields(repeatOptions("-Dx=y", MaxTokens+5)), "-Xmx1g", "Main")...)
	hugeArg := java(strings.Repeat("-Dx", MaxValueLength), "-Xmx1g", "Main")
	bomb := withEnv(java("Main"), "A", strings.Repeat("x", MaxValueLength), "JAVA_TOOL_OPTIONS", "$(A)$(A)")
	bombArg := withEnv(java("-D$(A)$(A)", "Main"), "A", strings.Repeat("x", MaxValueLength))
	manyFlags := kafkaRun()
	for _, name := range []string{"JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "JAVA_OPTS", "KAFKA_HEAP_OPTS",
		"KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_OPTS", "_JAVA_OPTIONS"} {
		manyFlags = withEnv(manyFlags, name, repeatOptions("-Dx=y", 1000))
	}
	runHeapCases(t, map[string]heapCase{
		"too many variables":            {c: manyEnv, reason: ReasonTooLarge},
		"a value too long":              {c: withEnv(java("Main"), "JAVA_TOOL_OPTIONS", strings.Repeat("x", MaxValueLength+1)), reason: ReasonTooLarge},
		"a long value under -Xmx":       {c: withEnv(java("-Xmx1g", "Main"), "JAVA_TOOL_OPTIONS", strings.Repeat("x", MaxValueLength+1)), reason: ReasonExplicit, heap: GiB},
		"too many options in a value":   {c: withEnv(java("Main"), "JAVA_TOOL_OPTIONS", repeatOptions("-Dx=y", MaxTokens+1)), reason: ReasonTooLarge},
		"as many as allowed":            {c: withEnv(java("Main"), "JAVA_TOOL_OPTIONS", repeatOptions("-Dx=y", MaxTokens-1)+" -Xmx1g"), reason: ReasonExplicit, heap: GiB},
		"too many launcher options":     {c: manyArgs, reason: ReasonTooLarge},
		"an argument too long":          {c: hugeArg, reason: ReasonTooLarge},
		"an expansion too long":         {c: bomb, reason: ReasonTooLarge},
		"an argument's expansion":       {c: bombArg, reason: ReasonTooLarge},
		"too many options in all":       {c: manyFlags, reason: ReasonTooLarge},
		"a script too long":             {c: sh("exec java -Xmx1g Main #" + strings.Repeat("x", MaxValueLength)), reason: ReasonTooLarge},
		"a script of too many words":    {c: sh(repeatOptions("x", MaxTokens+1) + "; exec java -Xmx1g Main"), reason: ReasonTooLarge},
		"a variable of too many fields": {c: sh("exec java $JAVA_OPTS Main", "JAVA_OPTS", repeatOptions("-Dx", MaxTokens+1)), reason: ReasonTooLarge},
	})
}

// Hostile values never panic and never wrap: each is a known heap within
// MaxSize, or an unknown one.
func TestInspectHostile(t *testing.T) {
	values := []string{
		"-Xmx18446744073709551616", "-Xmx9223372036854775807", "-Xmx0x7fffffffffffffff", "-Xmx99999999999999999999t",
		"-XX:MaxRAMPercentage=1e308", "-XX:MaxRAMPercentage=-0", "-XX:MaxRAMFraction=18446744073709551616",
		"-XX:MaxRAM=1024t", "-XX:MaxRAM=1025t", "-Xms1024t", "'", `"`, "\x00", "@", "-XX:", "-XX:=", "-XX:+",
		"$(", "$($(", "$$$$", "-Xmx$(X)", strings.Repeat("$(X)", 100),
	}
	limits := []int64{0, 1, 200 * MiB, 2 * GiB, MaxSize, MaxSize + 1, -1}
	for _, v := range values {
		for _, c := range []corev1.Container{
			withEnv(java("Main"), "JAVA_TOOL_OPTIONS", v, "X", v),
			java(v, "Main"),
			sh("exec java " + v + " Main"),
			kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", v, "STRIMZI_DYNAMIC_HEAP_MAX", v),
			kafkaRun("KAFKA_HEAP_OPTS", v),
		} {
			r := Inspect(&c, nil)
			assert.NotEmpty(t, r.Reason, v)
			if !r.Known {
				continue
			}
			for _, l := range limits {
				b, err := r.Heap.Bytes(l)
				if err == nil {
					assert.True(t, b >= 0 && b <= MaxSize, "%q at %d: %d", v, l, b)
				}
				if f, err := r.Floor(l, DefaultOverhead); err == nil {
					assert.True(t, f >= b && f <= 3*MaxSize, "%q at %d: floor %d", v, l, f)
				}
			}
		}
	}
}
