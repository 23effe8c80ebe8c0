package jvm

import (
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
		})
	}
}
