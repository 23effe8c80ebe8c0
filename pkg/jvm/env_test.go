package jvm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

// kafkaRun is a Strimzi broker's container: its image's script starts
// Kafka, the operator sets the variables.
func kafkaRun(env ...string) corev1.Container {
	return withEnv(corev1.Container{Name: "kafka", Command: []string{"/opt/kafka/kafka_run.sh"}}, env...)
}

// Strimzi's dynamic heap: 50% of the limit at start for a broker, at most
// 5Gi; 75% for Connect. The image reads the JVM's printed estimate back.
func TestInspectStrimziDynamicHeap(t *testing.T) {
	broker := kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50", "STRIMZI_DYNAMIC_HEAP_MAX", "5368709120")
	connect := kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "75")
	runHeapCases(t, map[string]heapCase{
		"broker at 1Gi":        {c: broker, limit: GiB, reason: ReasonStrimziDynamic, heap: 512 * MiB, source: "STRIMZI_DYNAMIC_HEAP_PERCENTAGE"},
		"broker at 2Gi":        {c: broker, limit: 2 * GiB, reason: ReasonStrimziDynamic, heap: GiB},
		"broker at 2.5Gi":      {c: broker, limit: 2560 * MiB, reason: ReasonStrimziDynamic, heap: 1280 * MiB},
		"broker at 3000Mi":     {c: broker, limit: 3000 * MiB, reason: ReasonStrimziDynamic, heap: 1496 * MiB}, // 1500Mi printed as 1.46G
		"broker at 300Mi":      {c: broker, limit: 300 * MiB, reason: ReasonStrimziDynamic, heap: 150 * MiB},
		"broker at 200Mi":      {c: broker, limit: 200 * MiB, reason: ReasonStrimziDynamic, heap: 100 * MiB},
		"broker at 10Gi":       {c: broker, limit: 10 * GiB, reason: ReasonStrimziDynamic, heap: 5 * GiB},
		"broker at 16Gi: cap":  {c: broker, limit: 16 * GiB, reason: ReasonStrimziDynamic, heap: 5 * GiB},
		"connect at 4Gi":       {c: connect, limit: 4 * GiB, reason: ReasonStrimziDynamic, heap: 3 * GiB},
		"connect at 16Gi":      {c: connect, limit: 16 * GiB, reason: ReasonStrimziDynamic, heap: 12 * GiB},
		"max in g":             {c: kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50", "STRIMZI_DYNAMIC_HEAP_MAX", "2g"), limit: 8 * GiB, reason: ReasonStrimziDynamic, heap: 2 * GiB},
		"empty max":            {c: kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50", "STRIMZI_DYNAMIC_HEAP_MAX", ""), limit: 16 * GiB, reason: ReasonStrimziDynamic, heap: 8 * GiB},
		"decimal percentage":   {c: kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "37.5"), limit: 4 * GiB, reason: ReasonStrimziDynamic, heap: 1536 * MiB},
		"tool options' -Xmx":   {c: kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50", "JAVA_TOOL_OPTIONS", "-Xmx1500m"), reason: ReasonStrimziDynamic, heap: 1496 * MiB},
		"tool options' MaxRAM": {c: kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50", "JAVA_TOOL_OPTIONS", "-XX:MaxRAM=4g"), limit: 16 * GiB, reason: ReasonStrimziDynamic, heap: 2 * GiB},
		"tool options' pct is overridden": {c: kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50", "JAVA_TOOL_OPTIONS", "-XX:MaxRAMPercentage=90"),
			reason: ReasonStrimziDynamic, heap: GiB},
		"launcher -Xmx hides the estimate": {c: kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50", "JDK_JAVA_OPTIONS", "-Xmx1g"), reason: ReasonLaunchScriptDefault},
		"_JAVA_OPTIONS -Xmx wins":          {c: kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50", "_JAVA_OPTIONS", "-Xmx768m"), reason: ReasonExplicit, heap: 768 * MiB},
		"KAFKA_OPTS -Xmx wins":             {c: kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50", "KAFKA_OPTS", "-Xmx768m"), reason: ReasonExplicit, heap: 768 * MiB},
		"invalid percentage":               {c: kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "half"), reason: ReasonInvalid},
		"percentage over 100":              {c: kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "101"), reason: ReasonInvalid},
		"invalid max":                      {c: kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50", "STRIMZI_DYNAMIC_HEAP_MAX", "5Gi"), reason: ReasonInvalid},
		"percentage from a ConfigMap":      {c: fromConfigMap(kafkaRun(), "STRIMZI_DYNAMIC_HEAP_PERCENTAGE"), reason: ReasonValueFrom},
		"max from a ConfigMap":             {c: fromConfigMap(kafkaRun("STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50"), "STRIMZI_DYNAMIC_HEAP_MAX"), reason: ReasonValueFrom},
	})
}

// Kafka's launch scripts: KAFKA_HEAP_OPTS, then KAFKA_JVM_PERFORMANCE_OPTS,
// then KAFKA_OPTS; Strimzi's dynamic heap only when KAFKA_HEAP_OPTS is
// empty; and JAVA_OPTS for other images' entry points.
func TestInspectLaunchScriptVariables(t *testing.T) {
	runHeapCases(t, map[string]heapCase{
		"KAFKA_HEAP_OPTS":                    {c: kafkaRun("KAFKA_HEAP_OPTS", "-Xms1g -Xmx1g"), reason: ReasonExplicit, heap: GiB, source: "KAFKA_HEAP_OPTS"},
		"KAFKA_HEAP_OPTS over dynamic heap":  {c: kafkaRun("KAFKA_HEAP_OPTS", "-Xms1g -Xmx1g", "STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50"), reason: ReasonExplicit, heap: GiB, source: "KAFKA_HEAP_OPTS"},
		"only -Xms: the JVM's default":       {c: kafkaRun("KAFKA_HEAP_OPTS", "-Xms128M", "STRIMZI_DYNAMIC_HEAP_PERCENTAGE", "50"), reason: ReasonJVMDefault, heap: 512 * MiB},
		"MaxRAMPercentage in heap opts":      {c: kafkaRun("KAFKA_HEAP_OPTS", "-XX:MaxRAMPercentage=60"), reason: ReasonPercentage, heap: 1230 * MiB},
		"percentage in performance opts":     {c: kafkaRun("KAFKA_HEAP_OPTS", "-Xms1g", "KAFKA_JVM_PERFORMANCE_OPTS", "-server -XX:MaxRAMPercentage=70"), reason: ReasonPercentage, heap: 1434 * MiB, source: "KAFKA_JVM_PERFORMANCE_OPTS"},
		"KAFKA_OPTS after KAFKA_HEAP_OPTS":   {c: kafkaRun("KAFKA_HEAP_OPTS", "-Xmx1g", "KAFKA_OPTS", "-Xmx2g"), reason: ReasonExplicit, heap: 2 * GiB, source: "KAFKA_OPTS"},
		"KAFKA_HEAP_OPTS over JAVA_OPTS":     {c: kafkaRun("JAVA_OPTS", "-Xmx3g", "KAFKA_HEAP_OPTS", "-Xmx1g"), reason: ReasonExplicit, heap: GiB},
		"scripts' own default":               {c: kafkaRun("KAFKA_OPTS", "-Dlog4j.configuration=x"), reason: ReasonLaunchScriptDefault},
		"empty KAFKA_HEAP_OPTS":              {c: kafkaRun("KAFKA_HEAP_OPTS", ""), reason: ReasonLaunchScriptDefault},
		"blank KAFKA_HEAP_OPTS is not empty": {c: kafkaRun("KAFKA_HEAP_OPTS", " "), reason: ReasonJVMDefault, heap: 512 * MiB},
		"KAFKA_HEAP_OPTS from a ConfigMap":   {c: fromConfigMap(kafkaRun(), "KAFKA_HEAP_OPTS"), reason: ReasonValueFrom, source: "KAFKA_HEAP_OPTS"},
		"JAVA_OPTS":                          {c: image("JAVA_OPTS", "-Xmx768m"), reason: ReasonExplicit, heap: 768 * MiB, source: "JAVA_OPTS"},
		"@argfile in JAVA_OPTS":              {c: image("JAVA_OPTS", "@/opt/app/jvm.args"), reason: ReasonOptionsFile},
		"JAVA_TOOL_OPTIONS under JAVA_OPTS":  {c: image("JAVA_TOOL_OPTIONS", "-Xmx3g", "JAVA_OPTS", "-Xmx768m"), reason: ReasonExplicit, heap: 768 * MiB},
	})
}

// Values the kubelet sets from elsewhere are not read; where they come
// before the deciding option, they do not matter.
func TestInspectValueFromAndEnvFrom(t *testing.T) {
	secret := java("-Xmx1g", "Main")
	secret.Env = append(secret.Env, corev1.EnvVar{Name: "_JAVA_OPTIONS", ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}})
	envFrom := java("-Xmx1g", "Main")
	envFrom.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}
	prefixed := java("-Xmx1g", "Main")
	prefixed.EnvFrom = []corev1.EnvFromSource{{Prefix: "APP_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}}
	overridden := withEnv(envFrom, "_JAVA_OPTIONS", "")
	expandsEnvFrom := withEnv(prefixed, "JAVA_TOOL_OPTIONS", "$(APP_HEAP)")
	expandsEnvFrom.Command = []string{"java", "Main"}

	runHeapCases(t, map[string]heapCase{
		"tool options, under the command line": {c: fromConfigMap(java("-Xmx1g", "Main"), "JAVA_TOOL_OPTIONS"), reason: ReasonExplicit, heap: GiB},
		"tool options, nothing after":          {c: fromConfigMap(java("Main"), "JAVA_TOOL_OPTIONS"), reason: ReasonValueFrom, source: "JAVA_TOOL_OPTIONS"},
		"JDK options, under the command line":  {c: fromConfigMap(java("-Xmx1g", "Main"), "JDK_JAVA_OPTIONS"), reason: ReasonExplicit, heap: GiB},
		"_JAVA_OPTIONS, over everything":       {c: fromConfigMap(java("-Xmx1g", "Main"), "_JAVA_OPTIONS"), reason: ReasonValueFrom, source: "_JAVA_OPTIONS"},
		"a Secret":                             {c: secret, reason: ReasonValueFrom},
		"JAVA_OPTS of an image":                {c: fromConfigMap(image(), "JAVA_OPTS"), reason: ReasonValueFrom},
		"envFrom may set _JAVA_OPTIONS":        {c: envFrom, reason: ReasonEnvFrom, source: "_JAVA_OPTIONS"},
		"envFrom with a prefix":                {c: prefixed, reason: ReasonExplicit, heap: GiB},
		"env overrides envFrom":                {c: overridden, reason: ReasonExplicit, heap: GiB},
		"a reference to an envFrom variable":   {c: expandsEnvFrom, reason: ReasonEnvFrom},
		"a reference in an argument":           {c: fromConfigMap(java("-Xmx$(HEAP)", "Main"), "HEAP"), reason: ReasonValueFrom},
	})
	r := Inspect(&secret, nil)
	assert.Contains(t, r.Message, "a Secret")
}

// The kubelet's $(VAR) expansion, in arguments and in values.
func TestInspectExpansion(t *testing.T) {
	runHeapCases(t, map[string]heapCase{
		"in an argument":             {c: withEnv(java("-Xmx$(HEAP)", "Main"), "HEAP", "1g"), reason: ReasonExplicit, heap: GiB},
		"$$ escapes":                 {c: withEnv(java("-Xmx$$(HEAP)", "Main"), "HEAP", "1g"), reason: ReasonInvalid},
		"undefined stays as written": {c: java("-Xmx$(HEAP)", "Main"), reason: ReasonInvalid},
		"unclosed":                   {c: withEnv(java("-Xmx$(HEAP", "Main"), "HEAP", "1g"), reason: ReasonInvalid},
		"in a value, defined before": {c: withEnv(java("Main"), "HEAP_OPTS", "-Xmx1g", "JAVA_TOOL_OPTIONS", "$(HEAP_OPTS) -XX:+UseG1GC"), reason: ReasonExplicit, heap: GiB},
		"in a value, defined after":  {c: withEnv(java("Main"), "JAVA_TOOL_OPTIONS", "$(HEAP_OPTS) -XX:+UseG1GC", "HEAP_OPTS", "-Xmx1g"), reason: ReasonJVMDefault, heap: 512 * MiB},
		"the later entry wins":       {c: withEnv(java("Main"), "JAVA_TOOL_OPTIONS", "-Xmx1g", "JAVA_TOOL_OPTIONS", "-Xmx2g"), reason: ReasonExplicit, heap: 2 * GiB},
		"java from a variable":       {c: withEnv(corev1.Container{Command: []string{"$(JAVA)", "-Xmx1g", "Main"}}, "JAVA", "/usr/bin/java"), reason: ReasonExplicit, heap: GiB},
	})
}
