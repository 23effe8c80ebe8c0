package jvm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// java runs java with args, in exec form.
func java(args ...string) corev1.Container {
	return corev1.Container{Name: "app", Command: append([]string{"java"}, args...)}
}

// image runs the image's entry point (not shown), with env.
func image(env ...string) corev1.Container {
	return withEnv(corev1.Container{Name: "app"}, env...)
}

// withEnv adds variables to c, as name, value pairs.
func withEnv(c corev1.Container, kv ...string) corev1.Container {
	for i := 0; i+1 < len(kv); i += 2 {
		c.Env = append(c.Env, corev1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
	return c
}

func fromConfigMap(c corev1.Container, name string) corev1.Container {
	c.Env = append(c.Env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k"}}})
	return c
}

// heapCase is a container and what Inspect must say of it: the reason, and
// the heap in bytes at the limit (2Gi when zero) for a known heap.
type heapCase struct {
	c      corev1.Container
	reason Reason
	heap   int64
	limit  int64
	source string
}

func runHeapCases(t *testing.T, tests map[string]heapCase) {
	t.Helper()
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			r := Inspect(&tt.c, nil)
			assert.Equal(t, tt.reason, r.Reason, r.Message)
			assert.NotEmpty(t, r.Message)
			if tt.source != "" {
				assert.Equal(t, tt.source, r.Source, r.Message)
			}
			known := tt.reason == ReasonExplicit || tt.reason == ReasonPercentage ||
				tt.reason == ReasonStrimziDynamic || tt.reason == ReasonJVMDefault || tt.reason == ReasonDeclared
			require.Equal(t, known, r.Known, r.Message)
			assert.Equal(t, tt.reason != ReasonNotJVM, r.JVM)
			if !known {
				return
			}
			limit := tt.limit
			if limit == 0 {
				limit = 2 * GiB
			}
			got, err := r.Heap.Bytes(limit)
			require.NoError(t, err)
			assert.Equal(t, formatBytes(tt.heap), formatBytes(got), r.Message)
		})
	}
}

// Every form of the heap options, on the command line: units, case, "="
// forms, decimals, and the last option winning as in the JVM.
func TestInspectFlagForms(t *testing.T) {
	runHeapCases(t, map[string]heapCase{
		"-Xmx1g":                          {c: java("-Xmx1g", "-jar", "app.jar"), reason: ReasonExplicit, heap: GiB, source: "the command line"},
		"-Xmx1G":                          {c: java("-Xmx1G", "Main"), reason: ReasonExplicit, heap: GiB},
		"-Xmx1024m":                       {c: java("-Xmx1024m", "Main"), reason: ReasonExplicit, heap: GiB},
		"-Xmx1024M":                       {c: java("-Xmx1024M", "Main"), reason: ReasonExplicit, heap: GiB},
		"-Xmx1048576k":                    {c: java("-Xmx1048576k", "Main"), reason: ReasonExplicit, heap: GiB},
		"-Xmx1048576K":                    {c: java("-Xmx1048576K", "Main"), reason: ReasonExplicit, heap: GiB},
		"-Xmx in bytes":                   {c: java("-Xmx1073741824", "Main"), reason: ReasonExplicit, heap: GiB},
		"-Xmx in hex":                     {c: java("-Xmx0x40000000", "Main"), reason: ReasonExplicit, heap: GiB},
		"-Xmx1t":                          {c: java("-Xmx1t", "Main"), reason: ReasonExplicit, heap: TiB},
		"-Xmx rounded up to alignment":    {c: java("-Xmx1001m", "Main"), reason: ReasonExplicit, heap: 1002 * MiB},
		"-XX:MaxHeapSize=":                {c: java("-XX:MaxHeapSize=3g", "Main"), reason: ReasonExplicit, heap: 3 * GiB},
		"last -Xmx wins":                  {c: java("-Xmx1g", "-Xmx2g", "Main"), reason: ReasonExplicit, heap: 2 * GiB},
		"MaxHeapSize after -Xmx wins":     {c: java("-Xmx1g", "-XX:MaxHeapSize=3g", "Main"), reason: ReasonExplicit, heap: 3 * GiB},
		"-Xmx after MaxHeapSize wins":     {c: java("-XX:MaxHeapSize=3g", "-Xmx1g", "Main"), reason: ReasonExplicit, heap: GiB},
		"-Xmx makes percentage moot":      {c: java("-Xmx1g", "-XX:MaxRAMPercentage=90", "Main"), reason: ReasonExplicit, heap: GiB},
		"MaxRAMPercentage=50":             {c: java("-XX:MaxRAMPercentage=50", "Main"), reason: ReasonPercentage, heap: GiB},
		"MaxRAMPercentage=62.5":           {c: java("-XX:MaxRAMPercentage=62.5", "Main"), reason: ReasonPercentage, heap: 1280 * MiB},
		"MaxRAMPercentage=75.0":           {c: java("-XX:MaxRAMPercentage=75.0", "Main"), reason: ReasonPercentage, heap: 3 * GiB, limit: 4 * GiB},
		"last MaxRAMPercentage wins":      {c: java("-XX:MaxRAMPercentage=75", "-XX:MaxRAMPercentage=50", "Main"), reason: ReasonPercentage, heap: GiB},
		"MaxRAMFraction=2":                {c: java("-XX:MaxRAMFraction=2", "Main"), reason: ReasonPercentage, heap: GiB},
		"percentage over fraction":        {c: java("-XX:MaxRAMPercentage=25", "-XX:MaxRAMFraction=1", "Main"), reason: ReasonPercentage, heap: 512 * MiB},
		"MaxRAM replaces the limit":       {c: java("-XX:MaxRAM=8g", "Main"), reason: ReasonPercentage, heap: 2 * GiB},
		"small limit: MinRAMPercentage":   {c: java("-XX:MinRAMPercentage=40", "Main"), reason: ReasonJVMDefault, heap: 80 * MiB, limit: 200 * MiB},
		"small limit: MinRAMFraction":     {c: java("-XX:MinRAMFraction=4", "Main"), reason: ReasonJVMDefault, heap: 50 * MiB, limit: 200 * MiB},
		"-Xms raises the default":         {c: java("-Xms1536m", "Main"), reason: ReasonJVMDefault, heap: 1536 * MiB},
		"-XX:InitialHeapSize raises":      {c: java("-XX:InitialHeapSize=1g", "Main"), reason: ReasonJVMDefault, heap: GiB},
		"-Xms under -Xmx is moot":         {c: java("-Xms4g", "-Xmx1g", "Main"), reason: ReasonExplicit, heap: GiB},
		"InitialRAMPercentage is moot":    {c: java("-XX:InitialRAMPercentage=90", "Main"), reason: ReasonJVMDefault, heap: 512 * MiB},
		"no option: 25% default":          {c: java("-jar", "app.jar"), reason: ReasonJVMDefault, heap: 512 * MiB},
		"-XMX is not -Xmx":                {c: java("-XMX4g", "Main"), reason: ReasonJVMDefault, heap: 512 * MiB},
		"-xmx is not -Xmx":                {c: java("-xmx4g", "Main"), reason: ReasonJVMDefault, heap: 512 * MiB},
		"-XX:maxheapsize is not":          {c: java("-XX:maxheapsize=4g", "Main"), reason: ReasonJVMDefault, heap: 512 * MiB},
		"after -jar: the app's":           {c: java("-jar", "app.jar", "-Xmx4g"), reason: ReasonJVMDefault, heap: 512 * MiB},
		"after the main class: the app's": {c: java("-cp", "lib/*", "com.example.Main", "-Xmx4g"), reason: ReasonJVMDefault, heap: 512 * MiB},
		"-cp takes its value":             {c: java("-cp", "-Xmx4g", "Main"), reason: ReasonJVMDefault, heap: 512 * MiB},
		"after -m: the app's":             {c: java("-Xmx1g", "-m", "mod/Main", "-Xmx4g"), reason: ReasonExplicit, heap: GiB},
		"after a wrapper":                 {c: corev1.Container{Command: []string{"/tini", "--"}, Args: []string{"java", "-Xmx1g", "-jar", "a.jar"}}, reason: ReasonExplicit, heap: GiB},
		"full path to java":               {c: corev1.Container{Command: []string{"/opt/java/openjdk/bin/java", "-Xmx1g", "Main"}}, reason: ReasonExplicit, heap: GiB},
		"java in args":                    {c: corev1.Container{Args: []string{"java", "-Xmx768m", "Main"}}, reason: ReasonExplicit, heap: 768 * MiB},
		"container support off":           {c: java("-XX:-UseContainerSupport", "Main"), reason: ReasonNoContainerSupport},
		"container support off, -Xmx":     {c: java("-XX:-UseContainerSupport", "-Xmx1g", "Main"), reason: ReasonExplicit, heap: GiB},
		"container support off, MaxRAM":   {c: java("-XX:-UseContainerSupport", "-XX:MaxRAM=2g", "Main"), reason: ReasonPercentage, heap: 512 * MiB},
		"container support back on":       {c: java("-XX:-UseContainerSupport", "-XX:+UseContainerSupport", "Main"), reason: ReasonJVMDefault, heap: 512 * MiB},
		"not a JVM":                       {c: corev1.Container{Command: []string{"nginx", "-g", "daemon off;"}}, reason: ReasonNotJVM},
		"no command, no variable":         {c: corev1.Container{}, reason: ReasonNotJVM},
	})
}

// Options the JVM refuses: it does not start, the heap is unknown.
func TestInspectInvalid(t *testing.T) {
	runHeapCases(t, map[string]heapCase{
		"-Xmx1gb":                      {c: java("-Xmx1gb", "Main"), reason: ReasonInvalid},
		"-Xmx1.5g":                     {c: java("-Xmx1.5g", "Main"), reason: ReasonInvalid},
		"-Xmx":                         {c: java("-Xmx", "Main"), reason: ReasonInvalid},
		"-Xmx0":                        {c: java("-Xmx0", "Main"), reason: ReasonInvalid},
		"-Xmx-1g":                      {c: java("-Xmx-1g", "Main"), reason: ReasonInvalid},
		"-Xmx 2^70":                    {c: java("-Xmx1180591620717411303424", "Main"), reason: ReasonInvalid},
		"-Xmx 2^70 in k":               {c: java("-Xmx1152921504606846976k", "Main"), reason: ReasonInvalid},
		"-Xmx beyond 1Pi":              {c: java("-Xmx2048t", "Main"), reason: ReasonInvalid},
		"an invalid -Xmx, then a good": {c: java("-Xmx1gb", "-Xmx1g", "Main"), reason: ReasonInvalid},
		"MaxRAMPercentage=150":         {c: java("-XX:MaxRAMPercentage=150", "Main"), reason: ReasonInvalid},
		"MaxRAMPercentage=abc":         {c: java("-XX:MaxRAMPercentage=abc", "Main"), reason: ReasonInvalid},
		"MaxRAMPercentage without =":   {c: java("-XX:MaxRAMPercentage", "Main"), reason: ReasonInvalid},
		"MaxRAMPercentage=50%":         {c: java("-XX:MaxRAMPercentage=50%", "Main"), reason: ReasonInvalid},
		"MaxRAMFraction=0":             {c: java("-XX:MaxRAMFraction=0", "Main"), reason: ReasonInvalid},
		"MaxRAM=0":                     {c: java("-XX:MaxRAM=0", "Main"), reason: ReasonInvalid},
		"MaxHeapSize=":                 {c: java("-XX:MaxHeapSize=", "Main"), reason: ReasonInvalid},
		"-Xms1x":                       {c: java("-Xms1x", "Main"), reason: ReasonInvalid},
		"one argument of many options": {c: java("-Xmx1g -Xms1g", "Main"), reason: ReasonInvalid},
	})
}

// Files of options: the launcher expands an @argfile in place, the JVM
// reads -XX:VMOptionsFile in place and -XX:Flags before everything.
func TestInspectOptionFiles(t *testing.T) {
	runHeapCases(t, map[string]heapCase{
		"@argfile":                   {c: java("@/etc/jvm.args", "Main"), reason: ReasonOptionsFile, source: "the command line"},
		"@argfile, then -Xmx":        {c: java("@/etc/jvm.args", "-Xmx1g", "Main"), reason: ReasonExplicit, heap: GiB},
		"-Xmx, then @argfile":        {c: java("-Xmx1g", "@/etc/jvm.args", "Main"), reason: ReasonOptionsFile},
		"@files disabled":            {c: java("--disable-@files", "-Xmx1g", "@x", "y"), reason: ReasonExplicit, heap: GiB},
		"VMOptionsFile":              {c: java("-XX:VMOptionsFile=/etc/jvm.opts", "Main"), reason: ReasonOptionsFile},
		"VMOptionsFile, then -Xmx":   {c: java("-XX:VMOptionsFile=/etc/jvm.opts", "-Xmx2g", "Main"), reason: ReasonExplicit, heap: 2 * GiB},
		"Flags file":                 {c: java("-XX:Flags=/etc/.hotspotrc", "Main"), reason: ReasonOptionsFile},
		"Flags file, then -Xmx":      {c: java("-XX:Flags=/etc/.hotspotrc", "-Xmx2g", "Main"), reason: ReasonExplicit, heap: 2 * GiB},
		"-Xmx, then Flags file":      {c: java("-Xmx2g", "-XX:Flags=/etc/.hotspotrc", "Main"), reason: ReasonExplicit, heap: 2 * GiB},
		"Flags file and percentages": {c: java("-XX:Flags=/f", "-XX:MaxRAMPercentage=50", "Main"), reason: ReasonOptionsFile},
		"@argfile after main class":  {c: java("Main", "@args"), reason: ReasonJVMDefault, heap: 512 * MiB},
	})
}

// The JVM's order: JAVA_TOOL_OPTIONS, then JDK_JAVA_OPTIONS, then the
// command line, then _JAVA_OPTIONS; the last -Xmx wins.
func TestInspectPrecedence(t *testing.T) {
	runHeapCases(t, map[string]heapCase{
		"JAVA_TOOL_OPTIONS alone":              {c: withEnv(java("Main"), "JAVA_TOOL_OPTIONS", "-Xmx3g"), reason: ReasonExplicit, heap: 3 * GiB, source: "JAVA_TOOL_OPTIONS"},
		"command line over JAVA_TOOL_OPTIONS":  {c: withEnv(java("-Xmx1g", "Main"), "JAVA_TOOL_OPTIONS", "-Xmx3g"), reason: ReasonExplicit, heap: GiB, source: "the command line"},
		"JAVA_TOOL_OPTIONS -Xmx, cmd pct":      {c: withEnv(java("-XX:MaxRAMPercentage=75", "Main"), "JAVA_TOOL_OPTIONS", "-Xmx1g"), reason: ReasonExplicit, heap: GiB},
		"JAVA_TOOL_OPTIONS pct, cmd pct":       {c: withEnv(java("-XX:MaxRAMPercentage=75", "Main"), "JAVA_TOOL_OPTIONS", "-XX:MaxRAMPercentage=50"), reason: ReasonPercentage, heap: 1536 * MiB, source: "the command line"},
		"JDK_JAVA_OPTIONS over tool options":   {c: withEnv(java("Main"), "JAVA_TOOL_OPTIONS", "-Xmx4g", "JDK_JAVA_OPTIONS", "-Xmx2g"), reason: ReasonExplicit, heap: 2 * GiB, source: "JDK_JAVA_OPTIONS"},
		"command line over JDK_JAVA_OPTIONS":   {c: withEnv(java("-Xmx1g", "Main"), "JDK_JAVA_OPTIONS", "-Xmx2g"), reason: ReasonExplicit, heap: GiB},
		"_JAVA_OPTIONS over all":               {c: withEnv(java("-Xmx1g", "Main"), "JAVA_TOOL_OPTIONS", "-Xmx2g", "_JAVA_OPTIONS", "-Xmx3g"), reason: ReasonExplicit, heap: 3 * GiB, source: "_JAVA_OPTIONS"},
		"_JAVA_OPTIONS pct, cmd -Xmx":          {c: withEnv(java("-Xmx1g", "Main"), "_JAVA_OPTIONS", "-XX:MaxRAMPercentage=80"), reason: ReasonExplicit, heap: GiB},
		"quoted options in JAVA_TOOL_OPTIONS":  {c: withEnv(java("Main"), "JAVA_TOOL_OPTIONS", `-Dname="a b" '-Xmx1g' -Dx=y`), reason: ReasonExplicit, heap: GiB},
		"unmatched quote in JAVA_TOOL_OPTIONS": {c: withEnv(java("Main"), "JAVA_TOOL_OPTIONS", `-Dname="a b -Xmx1g`), reason: ReasonInvalid},
		"@argfile in JDK_JAVA_OPTIONS":         {c: withEnv(java("Main"), "JDK_JAVA_OPTIONS", "@/etc/args"), reason: ReasonOptionsFile},
		"JAVA_OPTS not read by java itself":    {c: withEnv(java("Main"), "JAVA_OPTS", "-Xmx4g"), reason: ReasonJVMDefault, heap: 512 * MiB},
		"KAFKA_HEAP_OPTS not read by java":     {c: withEnv(java("Main"), "KAFKA_HEAP_OPTS", "-Xmx4g"), reason: ReasonJVMDefault, heap: 512 * MiB},
		"a variable marks a JVM":               {c: image("JAVA_TOOL_OPTIONS", "-XX:+UseG1GC"), reason: ReasonJVMDefault, heap: 512 * MiB},
		"an empty variable marks a JVM":        {c: image("JAVA_TOOL_OPTIONS", ""), reason: ReasonJVMDefault, heap: 512 * MiB},
	})
}

func TestInspectDeclared(t *testing.T) {
	heap := FixedHeap(GiB)
	nginx := corev1.Container{Command: []string{"/docker-entrypoint.sh"}}

	r := Inspect(&nginx, &Declaration{})
	assert.True(t, r.JVM, "declared")
	assert.Equal(t, ReasonJVMDefault, r.Reason)

	r = Inspect(&nginx, &Declaration{Heap: &heap})
	assert.Equal(t, ReasonDeclared, r.Reason)
	assert.Equal(t, heap, r.Heap)
	assert.Contains(t, r.Message, Annotation)

	c := java("-Xmx3g", "Main")
	r = Inspect(&c, &Declaration{Heap: &heap})
	assert.Equal(t, ReasonExplicit, r.Reason, "the spec's option, not the declaration")
	assert.Equal(t, FixedHeap(3*GiB), r.Heap)

	c = image("KAFKA_OPTS", "-Dx=y")
	r = Inspect(&c, &Declaration{Heap: &heap})
	assert.Equal(t, ReasonDeclared, r.Reason, "the declaration replaces Kafka's script default")

	c = fromConfigMap(java("Main"), "_JAVA_OPTIONS")
	r = Inspect(&c, &Declaration{Heap: &heap})
	assert.Equal(t, ReasonValueFrom, r.Reason, "never over what the spec hides")
	assert.False(t, r.Known)
}
