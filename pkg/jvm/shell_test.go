package jvm

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// sh runs script with sh -c.
func sh(script string, env ...string) corev1.Container {
	return withEnv(corev1.Container{Name: "app", Command: []string{"/bin/sh", "-c", script}}, env...)
}

// A shell's -c script that runs java: its java command's options, with
// the container's variables expanded as the shell expands them.
func TestInspectShellScript(t *testing.T) {
	bashArgs := corev1.Container{Command: []string{"/bin/bash", "-ec"}, Args: []string{"java -Xmx2g -jar /app.jar"}}
	runFile := withEnv(corev1.Container{Command: []string{"bash", "/start.sh"}}, "JAVA_OPTS", "-Xmx1g")
	runHeapCases(t, map[string]heapCase{
		"a variable":                  {c: sh("exec java $JAVA_OPTS -jar app.jar", "JAVA_OPTS", "-Xms1g -Xmx1g"), reason: ReasonExplicit, heap: GiB, source: "JAVA_OPTS in the shell script"},
		"a variable in braces":        {c: sh("exec java ${JAVA_OPTS} -jar app.jar", "JAVA_OPTS", "-Xmx1g"), reason: ReasonExplicit, heap: GiB},
		"options in the script":       {c: bashArgs, reason: ReasonExplicit, heap: 2 * GiB, source: "the shell script"},
		"script in args":              {c: corev1.Container{Command: []string{"sh", "-c"}, Args: []string{"java -Xmx2g Main"}}, reason: ReasonExplicit, heap: 2 * GiB},
		"part of a word":              {c: sh("java -Xmx$HEAP Main", "HEAP", "512m"), reason: ReasonExplicit, heap: 512 * MiB},
		"quoted":                      {c: sh(`java '-Xmx1g' "-Xms$HEAP" Main`, "HEAP", "1g"), reason: ReasonExplicit, heap: GiB},
		"a quoted variable is one":    {c: sh(`java "$JAVA_OPTS" Main`, "JAVA_OPTS", "-Xmx1g -Xms1g"), reason: ReasonInvalid},
		"escapes in double quotes":    {c: sh(`java "-Dmsg=\"hi\" \\" -Xmx1g Main`), reason: ReasonExplicit, heap: GiB},
		"an escaped dollar":           {c: sh(`java "-Xmx\$HEAP" Main`, "HEAP", "1g"), reason: ReasonInvalid},
		"an unset variable":           {c: sh("java $UNSET -Xmx1g Main"), reason: ReasonExplicit, heap: GiB},
		"the last java command":       {c: sh("java -version && exec java -Xmx3g -jar app.jar"), reason: ReasonExplicit, heap: 3 * GiB},
		"java under JAVA_HOME":        {c: sh("exec $JAVA_HOME/bin/java -Xmx1g -jar app.jar", "JAVA_HOME", "/opt/java"), reason: ReasonExplicit, heap: GiB},
		"lines continued":             {c: sh("exec java \\\n  -Xmx1g \\\n  -jar app.jar"), reason: ReasonExplicit, heap: GiB},
		"a pipe and a redirection":    {c: sh("exec java -Xmx1g -jar app.jar 2>&1 | tee /log"), reason: ReasonExplicit, heap: GiB},
		"a redirection in between":    {c: sh("java -Xmx1g 2> /tmp/err -Xmx2g Main"), reason: ReasonExplicit, heap: 2 * GiB},
		"inside if":                   {c: sh("if [ -f /x ]; then exec java -Xmx1g Main; fi"), reason: ReasonExplicit, heap: GiB},
		"after an assignment":         {c: sh("FOO=bar java -Xmx1g Main"), reason: ReasonExplicit, heap: GiB},
		"the script's tool options":   {c: sh("java -Xmx1g Main", "JAVA_TOOL_OPTIONS", "-Xmx4g"), reason: ReasonExplicit, heap: GiB},
		"default-value expansion":     {c: sh("java ${HEAP_ARGS:--Xmx1g} -jar x"), reason: ReasonShell},
		"command substitution":        {c: sh("java $(cat /etc/opts) -jar x"), reason: ReasonShell},
		"backquotes":                  {c: sh("java `cat /etc/opts` Main"), reason: ReasonShell},
		"a positional parameter":      {c: sh("java $1 Main"), reason: ReasonShell},
		"the script sets the options": {c: sh(`export JAVA_OPTS="$JAVA_OPTS -Xmx4g"; exec java $JAVA_OPTS -jar app.jar`, "JAVA_OPTS", "-Xmx1g"), reason: ReasonShell},
		"the script unsets them":      {c: sh("unset JAVA_OPTS; exec java $JAVA_OPTS Main", "JAVA_OPTS", "-Xmx1g"), reason: ReasonShell},
		"the script sets tool options": {c: sh("export JAVA_TOOL_OPTIONS=-Xmx4g; exec java Main"), reason: ReasonShell,
			source: "JAVA_TOOL_OPTIONS"},
		"tool options set, then -Xmx": {c: sh("export JAVA_TOOL_OPTIONS=-Xmx4g; exec java -Xmx1g Main"), reason: ReasonExplicit, heap: GiB},
		"for java only":               {c: sh("JAVA_TOOL_OPTIONS=-Xmx4g java Main"), reason: ReasonShell},
		"the script sources a file":   {c: sh(". /etc/env.sh; exec java -Xmx1g -jar app.jar"), reason: ReasonShell},
		"unmatched quote":             {c: sh("exec java '-Xmx1g Main"), reason: ReasonShell},
		"a variable from a ConfigMap": {c: fromConfigMap(sh("exec java $JAVA_OPTS Main"), "JAVA_OPTS"), reason: ReasonValueFrom},
		"a kubelet reference":         {c: fromConfigMap(sh("exec java $(JAVA_OPTS) Main"), "JAVA_OPTS"), reason: ReasonValueFrom},
		"no java: the image's script": {c: sh("exec /opt/kafka/kafka_run.sh", "KAFKA_HEAP_OPTS", "-Xmx1g"), reason: ReasonExplicit, heap: GiB, source: "KAFKA_HEAP_OPTS"},
		"a script file":               {c: runFile, reason: ReasonExplicit, heap: GiB, source: "JAVA_OPTS"},
		"java in a comment":           {c: sh("# java -Xmx9g\nexec /start.sh"), reason: ReasonNotJVM},
		"java as an argument":         {c: sh("echo java -Xmx9g"), reason: ReasonNotJVM},
	})
}
