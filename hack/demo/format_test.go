package main

import (
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestFormatMemory(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"126805489", "120.9Mi"}, // the recommender's target, in bytes
		{"100Mi", "100Mi"},
		{"104857600", "100Mi"},
		{"123832Ki", "120.9Mi"}, // the metrics API's unit
		{"150Mi", "150Mi"},
		{"1Gi", "1Gi"},
		{"1536Mi", "1.5Gi"},
		{"2G", "1.9Gi"},
		{"1048575", "1024Ki"},
		{"1500", "1.5Ki"},
		{"512", "512"},
		{"0", "0"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			assert.Equal(t, tc.want, formatMemory(resource.MustParse(tc.in)))
		})
	}
}

func TestFormatResources(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   corev1.ResourceList
		want string
	}{
		{"none set", nil, "none"},
		{"empty", corev1.ResourceList{}, "none"},
		{"both", list("250m", "126805489"), "cpu=250m memory=120.9Mi"},
		{"cpu only", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, "cpu=1"},
		{"memory only", corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}, "memory=2Gi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, formatResources(tc.in))
		})
	}
}

// TestShowPodWithoutLimits: what `make demo` prints for its pod, which has
// requests and no limits, running with what the recommender gave in bytes.
func TestShowPodWithoutLimits(t *testing.T) {
	p := &corev1.Pod{
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Resources: corev1.ResourceRequirements{Requests: list("117m", "126805489")},
		}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", Resources: &corev1.ResourceRequirements{Requests: list("117m", "126805489")},
		}}},
	}
	p.Name, p.UID, p.Generation = "web-1", "uid-1", 2
	out := captureStdout(t, func() { show(p) })
	assert.Equal(t, "  pod web-1 uid=uid-1 generation=2 restarts=0\n"+
		"    spec requests cpu=117m memory=120.9Mi, limits none; running with cpu=117m memory=120.9Mi\n", out)
}

func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stdout := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = stdout }()
	f()
	require.NoError(t, w.Close())
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	return string(out)
}
