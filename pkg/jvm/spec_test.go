package jvm

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func TestSpecNeeded(t *testing.T) {
	envFrom := []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}
	tests := []struct {
		name string
		c    corev1.Container
		want Needed
	}{
		{"no JVM, nothing a declaration reads", corev1.Container{Name: "web", Command: []string{"/bin/web"}, Env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}}}, NeedNothing},
		{"a JVM variable", corev1.Container{Name: "kafka", Env: []corev1.EnvVar{{Name: "KAFKA_HEAP_OPTS", Value: "-Xmx1g"}}}, NeedAll},
		{"java on the command line", corev1.Container{Name: "app", Command: []string{"java", "-jar", "app.jar"}}, NeedAll},
		{"envFrom that may set a JVM variable", corev1.Container{Name: "app", Command: []string{"/entrypoint"}, EnvFrom: envFrom, Env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}}}, NeedEnvFrom},
		{"envFrom with a prefix no JVM variable has", corev1.Container{Name: "app", EnvFrom: []corev1.EnvFromSource{{Prefix: "APP_", ConfigMapRef: envFrom[0].ConfigMapRef}}}, NeedNothing},
		{"a shell script that runs java", corev1.Container{Name: "app", Command: []string{"sh", "-c", "exec java $OPTS -jar app.jar"}, Env: []corev1.EnvVar{{Name: "OPTS", Value: "-Xmx1g"}}}, NeedAll},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, SpecNeeded(&tt.c))
			assert.Equal(t, tt.want, specNeeded(&tt.c), "the same without the cheap look")
		})
	}
}

// What the cheap look tells of a container, Inspect tells too.
func TestShowsNothingAgreesWithInspect(t *testing.T) {
	many := make([]corev1.EnvVar, MaxEnv+1)
	for i := range many {
		many[i] = corev1.EnvVar{Name: "V", Value: "x"}
	}
	for _, c := range []corev1.Container{
		{Name: "web", Command: []string{"/bin/web", "--port=8080"}, Env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}}},
		{Name: "sh", Command: []string{"sh", "-c", "export JAVA_TOOL_OPTIONS=-Xmx1g; exec /entrypoint"}},
		{Name: "sh", Command: []string{"bash", "-c", "export _JAVA_OPTIONS=-Xmx1g; . /etc/profile; exec /run"}},
		{Name: "big", Args: []string{strings.Repeat("x", MaxValueLength+1)}},
		{Name: "from", Env: []corev1.EnvVar{{Name: "MODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
		{Name: "many", Env: many},
		{Name: "ref", Command: []string{"$(CMD)"}, Env: []corev1.EnvVar{{Name: "CMD", Value: "java"}}},
	} {
		if showsNothing(&c) {
			assert.Equal(t, NeedNothing, specNeeded(&c), "container %s", c.Name)
		} else {
			assert.NotEqual(t, "web", c.Name, "the plain container is told of cheaply")
		}
	}
}
