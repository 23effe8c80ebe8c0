// Package cachetrim keeps out of the informer caches of vpa-inplace's
// binaries what neither of them reads, so that their memory grows with the
// number of pods and workloads as little as it can.
//
// Both binaries cache every pod under a VPA (the updater) and every
// well-known workload controller (target resolution, shared with upstream
// VPA's selector and controller fetchers). What they read of them:
//
//   - pods: metadata (labels, annotations, owner references, generation),
//     each container's name, resources, resize policy and restart policy,
//     the pod's OS, node, pod-level resources and status (phase, QoS class,
//     conditions, resize status, container statuses with their resources);
//   - Deployments, ReplicaSets, StatefulSets, DaemonSets and
//     ReplicationControllers: metadata, selector, replicas and status; never
//     their pod template's spec;
//   - Jobs and CronJobs: all of it (Job templates are resized in place).
//
// Everything else is dropped on arrival: managed fields, volumes, probes,
// environment, commands, scheduling constraints, the pod templates of the
// controllers above. Objects are only ever patched, never written back whole
// from the cache, so what is dropped here cannot be lost on the server.
package cachetrim

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

var _ cache.TransformFunc = Transform

// Transform is the informer transform of both binaries' factories. It trims
// the object in place and returns it; it is idempotent, as informers may
// apply it more than once to one object. Objects of other types only lose
// their managed fields; tombstones are left as they are (what they hold was
// trimmed when it was cached).
func Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case cache.DeletedFinalStateUnknown:
		return obj, nil
	case *corev1.Pod:
		trimPod(o)
	case *appsv1.Deployment:
		trimTemplate(&o.Spec.Template)
	case *appsv1.ReplicaSet:
		trimTemplate(&o.Spec.Template)
	case *appsv1.StatefulSet:
		trimTemplate(&o.Spec.Template)
		o.Spec.VolumeClaimTemplates = nil
	case *appsv1.DaemonSet:
		trimTemplate(&o.Spec.Template)
	case *corev1.ReplicationController:
		if o.Spec.Template != nil {
			trimTemplate(o.Spec.Template)
		}
	}
	if a, err := meta.Accessor(obj); err == nil && a.GetManagedFields() != nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// trimTemplate keeps a controller's pod template labels and annotations
// (what a selector may be compared with) and drops its pod spec.
func trimTemplate(t *corev1.PodTemplateSpec) {
	t.ObjectMeta = metav1.ObjectMeta{Labels: t.Labels, Annotations: t.Annotations}
	t.Spec = corev1.PodSpec{}
}

func trimPod(p *corev1.Pod) {
	s := &p.Spec
	s.Volumes = nil
	for i := range s.InitContainers {
		trimContainer(&s.InitContainers[i])
	}
	for i := range s.Containers {
		trimContainer(&s.Containers[i])
	}
	// Ephemeral containers have no resources and are never resized.
	s.EphemeralContainers = nil
	s.Affinity = nil
	s.Tolerations = nil
	s.TopologySpreadConstraints = nil
	s.ImagePullSecrets = nil
	s.HostAliases = nil
	s.DNSConfig = nil
	s.SecurityContext = nil
	s.ReadinessGates = nil
	s.SchedulingGates = nil

	st := &p.Status
	for i := range st.InitContainerStatuses {
		st.InitContainerStatuses[i].VolumeMounts = nil
	}
	for i := range st.ContainerStatuses {
		st.ContainerStatuses[i].VolumeMounts = nil
	}
	st.EphemeralContainerStatuses = nil
}

// trimContainer keeps a container's name, image, resources, resize policy
// and restart policy (a sidecar is an init container that always restarts).
func trimContainer(c *corev1.Container) {
	c.Command = nil
	c.Args = nil
	c.WorkingDir = ""
	c.Ports = nil
	c.EnvFrom = nil
	c.Env = nil
	c.VolumeMounts = nil
	c.VolumeDevices = nil
	c.LivenessProbe = nil
	c.ReadinessProbe = nil
	c.StartupProbe = nil
	c.Lifecycle = nil
	c.SecurityContext = nil
	c.RestartPolicyRules = nil
}
