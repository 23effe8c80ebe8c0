// Package testvpa builds VerticalPodAutoscaler objects for tests:
//
//	testvpa.New("v").Target("apps/v1", "Deployment", "web").InPlace().Recommend("c", "200m", "200Mi").Obj()
package testvpa

import (
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

// Builder builds a VPA.
type Builder struct {
	vpa *vpatypes.VerticalPodAutoscaler
}

// New starts a VPA in namespace "default" targeting Deployment "web".
func New(name string) *Builder {
	return &Builder{vpa: &vpatypes.VerticalPodAutoscaler{
		TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling.k8s.io/v1", Kind: "VerticalPodAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.Unix(1_700_000_000, 0),
		},
		Spec: vpatypes.VerticalPodAutoscalerSpec{
			TargetRef: &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		},
	}}
}

// Namespace sets the namespace.
func (b *Builder) Namespace(ns string) *Builder { b.vpa.Namespace = ns; return b }

// Target sets the targetRef.
func (b *Builder) Target(apiVersion, kind, name string) *Builder {
	b.vpa.Spec.TargetRef = &autoscalingv1.CrossVersionObjectReference{APIVersion: apiVersion, Kind: kind, Name: name}
	return b
}

// Mode sets updatePolicy.updateMode.
func (b *Builder) Mode(m vpatypes.UpdateMode) *Builder {
	if b.vpa.Spec.UpdatePolicy == nil {
		b.vpa.Spec.UpdatePolicy = &vpatypes.PodUpdatePolicy{}
	}
	b.vpa.Spec.UpdatePolicy.UpdateMode = &m
	return b
}

// InPlace sets updateMode InPlace.
func (b *Builder) InPlace() *Builder { return b.Mode(vpatypes.UpdateModeInPlace) }

// Recommend adds a container recommendation whose target, lower and upper
// bound are all cpu/memory.
func (b *Builder) Recommend(container, cpu, memory string) *Builder {
	return b.RecommendRange(container, cpu, memory, cpu, memory, cpu, memory)
}

// RecommendRange adds a container recommendation with explicit bounds.
func (b *Builder) RecommendRange(container, cpu, memory, lowCPU, lowMem, upCPU, upMem string) *Builder {
	if b.vpa.Status.Recommendation == nil {
		b.vpa.Status.Recommendation = &vpatypes.RecommendedPodResources{}
	}
	b.vpa.Status.Recommendation.ContainerRecommendations = append(b.vpa.Status.Recommendation.ContainerRecommendations,
		vpatypes.RecommendedContainerResources{
			ContainerName:  container,
			Target:         testpod.List(cpu, memory),
			LowerBound:     testpod.List(lowCPU, lowMem),
			UpperBound:     testpod.List(upCPU, upMem),
			UncappedTarget: testpod.List(cpu, memory),
		})
	return b
}

// ContainerPolicy adds a container resource policy.
func (b *Builder) ContainerPolicy(p vpatypes.ContainerResourcePolicy) *Builder {
	if b.vpa.Spec.ResourcePolicy == nil {
		b.vpa.Spec.ResourcePolicy = &vpatypes.PodResourcePolicy{}
	}
	b.vpa.Spec.ResourcePolicy.ContainerPolicies = append(b.vpa.Spec.ResourcePolicy.ContainerPolicies, p)
	return b
}

// MaxAllowed adds a container policy capping the container at cpu/memory.
func (b *Builder) MaxAllowed(container, cpu, memory string) *Builder {
	return b.ContainerPolicy(vpatypes.ContainerResourcePolicy{ContainerName: container, MaxAllowed: testpod.List(cpu, memory)})
}

// RequestsOnly adds a container policy with controlledValues RequestsOnly.
func (b *Builder) RequestsOnly(container string) *Builder {
	v := vpatypes.ContainerControlledValuesRequestsOnly
	return b.ContainerPolicy(vpatypes.ContainerResourcePolicy{ContainerName: container, ControlledValues: &v})
}

// Obj returns the VPA.
func (b *Builder) Obj() *vpatypes.VerticalPodAutoscaler { return b.vpa }

// keep corev1 referenced for callers building policies.
var _ corev1.ResourceList
