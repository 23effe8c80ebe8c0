package resources

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

func res(cpu, mem, limCPU, limMem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: testpod.List(cpu, mem), Limits: testpod.List(limCPU, limMem)}
}

func TestEqualAndString(t *testing.T) {
	a := Resources{"c": res("1", "1Gi", "", "")}
	assert.True(t, Equal(a, Resources{"c": res("1000m", "1024Mi", "", "")}))
	assert.False(t, Equal(a, Resources{"c": res("1", "", "", "")}))
	assert.Equal(t, "c: requests cpu=1 memory=1Gi; d: requests cpu=1 limits memory=2Gi",
		Resources{"d": res("1", "", "", "2Gi"), "c": res("1", "1Gi", "", "")}.String())
}
