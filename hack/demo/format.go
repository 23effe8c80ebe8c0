package main

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The binary units memory is shown in.
const (
	kibi = 1 << 10
	mebi = 1 << 20
	gibi = 1 << 30
)

// formatMemory shows a memory quantity as a reader of `kubectl` expects:
// in Gi from 1Gi, in Mi from 1Mi, in Ki below, with at most one decimal
// ("120.9Mi" for 126805489 bytes, "100Mi", "1.5Gi"), whatever unit the API
// server or the metrics API wrote it in.
func formatMemory(q resource.Quantity) string {
	bytes := q.Value()
	switch {
	case bytes >= gibi:
		return scaled(bytes, gibi) + "Gi"
	case bytes >= mebi:
		return scaled(bytes, mebi) + "Mi"
	case bytes >= kibi:
		return scaled(bytes, kibi) + "Ki"
	default:
		return strconv.FormatInt(bytes, 10)
	}
}

// scaled is bytes/unit rounded to one decimal, without a trailing ".0".
func scaled(bytes, unit int64) string {
	s := strconv.FormatFloat(float64(bytes)/float64(unit), 'f', 1, 64)
	return strings.TrimSuffix(s, ".0")
}

// formatResources shows the CPU and memory of a resource list ("cpu=250m
// memory=120.9Mi"), only those it sets, or "none" when it sets neither (a
// container without limits).
func formatResources(list corev1.ResourceList) string {
	var parts []string
	if q, ok := list[corev1.ResourceCPU]; ok {
		parts = append(parts, "cpu="+q.String())
	}
	if q, ok := list[corev1.ResourceMemory]; ok {
		parts = append(parts, "memory="+formatMemory(q))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// podLine is the line show prints under a pod: what its first container's
// spec asks for and what it runs with.
func podLine(p *corev1.Pod) string {
	spec := p.Spec.Containers[0].Resources
	actual := "-"
	if st := p.Status.ContainerStatuses; len(st) > 0 && st[0].Resources != nil {
		actual = formatResources(st[0].Resources.Requests)
	}
	return fmt.Sprintf("spec requests %s, limits %s; running with %s",
		formatResources(spec.Requests), formatResources(spec.Limits), actual)
}
