// Package testjob builds batch/v1 Job objects for tests:
//
//	testjob.New("j").Container("app", "100m", "100Mi").Suspended().Obj()
package testjob

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

// Builder builds a Job.
type Builder struct{ job *batchv1.Job }

// New starts a running (not suspended) Job in namespace "default" with
// generation 1, UID "uid-<name>", resourceVersion "1" and a pod template
// labelled app=<name>.
func New(name string) *Builder {
	return &Builder{job: &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       "default",
			UID:             types.UID("uid-" + name),
			Generation:      1,
			ResourceVersion: "1",
		},
		Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever},
			},
		},
	}}
}

// Namespace sets the namespace.
func (b *Builder) Namespace(ns string) *Builder { b.job.Namespace = ns; return b }

// Generation sets metadata.generation.
func (b *Builder) Generation(g int64) *Builder { b.job.Generation = g; return b }

// TemplateLabels replaces the pod template's labels.
func (b *Builder) TemplateLabels(l map[string]string) *Builder {
	b.job.Spec.Template.Labels = l
	return b
}

// Container adds a template container whose requests are cpu and memory
// (either may be empty).
func (b *Builder) Container(name, cpu, memory string) *Builder {
	b.job.Spec.Template.Spec.Containers = append(b.job.Spec.Template.Spec.Containers, corev1.Container{
		Name:      name,
		Resources: corev1.ResourceRequirements{Requests: testpod.List(cpu, memory)},
	})
	return b
}

// Limits sets the limits of the named template container.
func (b *Builder) Limits(container, cpu, memory string) *Builder {
	for i := range b.job.Spec.Template.Spec.Containers {
		if c := &b.job.Spec.Template.Spec.Containers[i]; c.Name == container {
			c.Resources.Limits = testpod.List(cpu, memory)
			return b
		}
	}
	panic("testjob: no container " + container)
}

// Suspended sets spec.suspend and the Suspended condition, as the Job
// controller does for a Job created suspended: the template may change.
func (b *Builder) Suspended() *Builder {
	return b.SuspendOnly().Condition(batchv1.JobSuspended, corev1.ConditionTrue)
}

// SuspendOnly sets spec.suspend without the condition (the Job controller
// has not seen the Job yet).
func (b *Builder) SuspendOnly() *Builder {
	b.job.Spec.Suspend = ptr.To(true)
	return b
}

// Resumed sets spec.suspend to false.
func (b *Builder) Resumed() *Builder {
	b.job.Spec.Suspend = ptr.To(false)
	return b
}

// Condition sets a Job condition.
func (b *Builder) Condition(t batchv1.JobConditionType, s corev1.ConditionStatus) *Builder {
	for i := range b.job.Status.Conditions {
		if b.job.Status.Conditions[i].Type == t {
			b.job.Status.Conditions[i].Status = s
			return b
		}
	}
	b.job.Status.Conditions = append(b.job.Status.Conditions, batchv1.JobCondition{Type: t, Status: s})
	return b
}

// Active sets status.active.
func (b *Builder) Active(n int32) *Builder { b.job.Status.Active = n; return b }

// Started sets status.startTime.
func (b *Builder) Started() *Builder {
	b.job.Status.StartTime = &metav1.Time{Time: time.Unix(1_700_000_000, 0)}
	return b
}

// OwnedBy adds a controller ownerReference.
func (b *Builder) OwnedBy(apiVersion, kind, name string) *Builder {
	b.job.OwnerReferences = append(b.job.OwnerReferences, metav1.OwnerReference{
		APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true),
	})
	return b
}

// Obj returns the Job.
func (b *Builder) Obj() *batchv1.Job { return b.job }
