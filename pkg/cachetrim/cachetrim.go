// Package cachetrim keeps out of the informer caches of vpa-inplace's
// binaries what neither of them reads, so that their memory grows with the
// number of pods and workloads as little as it can.
//
// Both binaries cache every pod under a VPA (the updater) and every
// well-known workload controller (target resolution, shared with upstream
// VPA's selector and controller fetchers). What they read of them:
//
//   - pods: metadata (labels, annotations, owner references, generation),
//     each container's name, resources, resize policy and restart policy
//     (and, of a container that runs a JVM, or may when its VPA declares
//     it, what pkg/jvm reads of its heap: command, args, env and envFrom,
//     or its envFrom alone: jvm.SpecNeeded),
//     the pod's OS, node and pod-level resources, and of its status the
//     phase, QoS class, observed generation, resize status, the Ready and
//     resize conditions, each container's name, state, readiness, restart
//     count and actual and allocated resources, and the pod-level actual
//     and allocated resources of a pod with pod-level resources;
//   - Deployments, ReplicaSets, StatefulSets, DaemonSets and
//     ReplicationControllers: metadata, selector, replicas and status; never
//     their pod template's spec;
//   - Jobs and CronJobs: all of it (Job templates are resized in place);
//   - VerticalPodAutoscalerCheckpoints: the VPA and container they are of,
//     how many samples over which span they hold and when they were
//     written; never their histograms.
//
// Everything else is dropped on arrival: managed fields, volumes, probes,
// environment, commands, scheduling constraints, the pods' addresses, other
// conditions and container images in their status, the pod templates of the
// controllers above. Objects are only ever patched, never written back whole
// from the cache, so what is dropped here cannot be lost on the server.
//
// Pods' resource lists are interned (see intern): pods asking for the same
// resources share one map.
package cachetrim

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/jvm"
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
		trimPod(o, intern)
	case *appsv1.Deployment:
		trimTemplate(&o.Spec.Template)
	case *appsv1.ReplicaSet:
		trimTemplate(&o.Spec.Template)
	case *appsv1.StatefulSet:
		trimTemplate(&o.Spec.Template)
		o.Spec.VolumeClaimTemplates = nil
	case *appsv1.DaemonSet:
		trimTemplate(&o.Spec.Template)
	case *vpatypes.VerticalPodAutoscalerCheckpoint:
		o.Status.CPUHistogram, o.Status.MemoryHistogram = vpatypes.HistogramCheckpoint{}, vpatypes.HistogramCheckpoint{}
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

// trimPod trims a pod; in is applied to each resource list it keeps
// (intern, or the identity in benchmarks).
func trimPod(p *corev1.Pod, in func(corev1.ResourceList) corev1.ResourceList) {
	s := &p.Spec
	s.Volumes = nil
	for i := range s.InitContainers {
		trimContainer(&s.InitContainers[i], in)
	}
	for i := range s.Containers {
		trimContainer(&s.Containers[i], in)
	}
	if s.Resources != nil {
		internRequirements(s.Resources, in)
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
	// Cloned: the decoded slice has room for all of a pod's conditions
	// (a kilobyte for a running pod's five), and one to three are kept.
	st.Conditions = slices.Clone(slices.DeleteFunc(st.Conditions, func(c corev1.PodCondition) bool { return !keptConditions.Has(c.Type) }))
	for i := range st.InitContainerStatuses {
		trimContainerStatus(&st.InitContainerStatuses[i], in)
	}
	for i := range st.ContainerStatuses {
		trimContainerStatus(&st.ContainerStatuses[i], in)
	}
	st.EphemeralContainerStatuses = nil
	st.Message = ""
	// The watch after a resize tells an eviction by the kubelet from the
	// reason; every other reason goes.
	if st.Reason != evictedReason {
		st.Reason = ""
	}
	st.NominatedNodeName = ""
	st.HostIP = ""
	st.HostIPs = nil
	st.PodIP = ""
	st.PodIPs = nil
	st.StartTime = nil
	st.ResourceClaimStatuses = nil
	st.ExtendedResourceClaimStatus = nil
	// The pod-level status (KEP-5419: what the pod cgroup has, what the
	// kubelet allocated) is read when the pod has pod-level resources
	// (pkg/resize/podlevel.go); dropped otherwise.
	if s.Resources == nil {
		st.Resources = nil
		st.AllocatedResources = nil
	} else {
		if st.Resources != nil {
			internRequirements(st.Resources, in)
		}
		st.AllocatedResources = in(st.AllocatedResources)
	}
}

// keptConditions are the pod conditions read: readiness, the two resize
// conditions and DisruptionTarget (a victim of the scheduler's resize
// preemption, pkg/updater/preemption; the watch after a resize tells a
// termination by the kubelet from it). The others (scheduled, initialized,
// ...) are a third of a running pod's status.
var keptConditions = sets.New(corev1.PodReady, corev1.PodResizePending, corev1.PodResizeInProgress, corev1.DisruptionTarget)

// evictedReason is the pod status reason the kubelet's eviction manager
// sets.
const evictedReason = "Evicted"

// trimContainerStatus keeps a container's name, state, readiness, restart
// count, its actual and allocated resources (interned), and of its last
// termination the reason, exit code and time (the watch after a resize
// tells an OOM kill from them).
func trimContainerStatus(s *corev1.ContainerStatus, in func(corev1.ResourceList) corev1.ResourceList) {
	s.Image = ""
	s.ImageID = ""
	s.ContainerID = ""
	last := s.LastTerminationState.Terminated
	s.LastTerminationState = corev1.ContainerState{}
	if last != nil {
		s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: last.Reason, ExitCode: last.ExitCode, FinishedAt: last.FinishedAt}
	}
	s.VolumeMounts = nil
	s.User = nil
	s.AllocatedResourcesStatus = nil
	s.StopSignal = nil
	if s.Resources != nil {
		internRequirements(s.Resources, in)
	}
	s.AllocatedResources = in(s.AllocatedResources)
}

// trimContainer keeps a container's name, image, resources (interned),
// resize policy and restart policy (a sidecar is an init container that
// always restarts), and what pkg/jvm reads of a JVM's heap (docs/jvm.md):
// a JVM's command, args, env and envFrom; the envFrom of a container a
// declaration on its VPA would read it of. Other containers lose them.
func trimContainer(c *corev1.Container, in func(corev1.ResourceList) corev1.ResourceList) {
	switch jvm.SpecNeeded(c) {
	case jvm.NeedAll:
	case jvm.NeedEnvFrom:
		c.Command, c.Args, c.Env = nil, nil, nil
	default:
		c.Command, c.Args, c.Env, c.EnvFrom = nil, nil, nil, nil
	}
	c.WorkingDir = ""
	c.Ports = nil
	c.VolumeMounts = nil
	c.VolumeDevices = nil
	c.LivenessProbe = nil
	c.ReadinessProbe = nil
	c.StartupProbe = nil
	c.Lifecycle = nil
	c.SecurityContext = nil
	c.RestartPolicyRules = nil
	internRequirements(&c.Resources, in)
}
