package cachetrim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

var managed = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate}}

func resources(cpu, memory string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)},
	}
}

// heavyContainer has every field a container of a real workload tends to
// carry.
func heavyContainer(name string) corev1.Container {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz"}}}
	return corev1.Container{
		Name:           name,
		Image:          "example.invalid/" + name + ":1",
		Command:        []string{"/bin/" + name},
		Args:           []string{"--port=8080"},
		WorkingDir:     "/srv",
		Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
		EnvFrom:        []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		Env:            []corev1.EnvVar{{Name: "MODE", Value: "prod"}},
		Resources:      resources("100m", "128Mi"),
		ResizePolicy:   []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}},
		VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
		LivenessProbe:  probe,
		ReadinessProbe: probe,
		StartupProbe:   probe,
		Lifecycle:      &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot: ptr.To(true),
		},
	}
}

func heavyPod() *corev1.Pod {
	sidecar := heavyContainer("proxy")
	sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-0", Namespace: "default", UID: "uid-web-0", Generation: 3, ResourceVersion: "42",
			Labels:          map[string]string{"app": "web"},
			Annotations:     map[string]string{"example.dev/note": "kept"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-6f", UID: "uid-rs", Controller: ptr.To(true)}},
			ManagedFields:   managed,
		},
		Spec: corev1.PodSpec{
			Volumes:                   []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			InitContainers:            []corev1.Container{sidecar},
			Containers:                []corev1.Container{heavyContainer("app")},
			EphemeralContainers:       []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug"}}},
			NodeName:                  "node-1",
			OS:                        &corev1.PodOS{Name: corev1.Linux},
			Resources:                 &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}},
			Affinity:                  &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}},
			Tolerations:               []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone"}},
			ImagePullSecrets:          []corev1.LocalObjectReference{{Name: "pull"}},
			HostAliases:               []corev1.HostAlias{{IP: "127.0.0.1", Hostnames: []string{"db"}}},
			DNSConfig:                 &corev1.PodDNSConfig{Nameservers: []string{"127.0.0.1"}},
			SecurityContext:           &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)},
			ReadinessGates:            []corev1.PodReadinessGate{{ConditionType: "example.dev/ready"}},
			SchedulingGates:           []corev1.PodSchedulingGate{{Name: "example.dev/wait"}},
		},
		Status: corev1.PodStatus{
			Phase:              corev1.PodRunning,
			QOSClass:           corev1.PodQOSBurstable,
			ObservedGeneration: 3,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred, Message: "no room"},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue, Reason: corev1.PodReasonError, Message: "refused"},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
			},
			Resize:                      corev1.PodResizeStatusDeferred,
			InitContainerStatuses:       []corev1.ContainerStatus{heavyContainerStatus("proxy")},
			ContainerStatuses:           []corev1.ContainerStatus{heavyContainerStatus("app")},
			EphemeralContainerStatuses:  []corev1.ContainerStatus{{Name: "debug"}},
			Message:                     "running",
			Reason:                      "Started",
			NominatedNodeName:           "node-2",
			HostIP:                      "192.0.2.1",
			HostIPs:                     []corev1.HostIP{{IP: "192.0.2.1"}},
			PodIP:                       "198.51.100.7",
			PodIPs:                      []corev1.PodIP{{IP: "198.51.100.7"}},
			StartTime:                   &started,
			ResourceClaimStatuses:       []corev1.PodResourceClaimStatus{{Name: "gpu"}},
			ExtendedResourceClaimStatus: &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "gpu"},
			Resources:                   ptr.To(resources("200m", "256Mi")),
			AllocatedResources:          corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")},
		},
	}
}

var started = metav1.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// heavyContainerStatus has every field a running container's status carries.
func heavyContainerStatus(name string) corev1.ContainerStatus {
	return corev1.ContainerStatus{
		Name:  name,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled",
			Signal: 9, Message: "killed", StartedAt: started, FinishedAt: started, ContainerID: "containerd://fedcba9876543210"}},
		Ready:                    true,
		RestartCount:             2,
		Image:                    "example.invalid/" + name + ":1",
		ImageID:                  "example.invalid/" + name + "@sha256:0123456789abcdef",
		ContainerID:              "containerd://0123456789abcdef",
		Started:                  ptr.To(true),
		Resources:                ptr.To(resources("100m", "128Mi")),
		AllocatedResources:       corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		VolumeMounts:             []corev1.VolumeMountStatus{{Name: "data"}},
		User:                     &corev1.ContainerUser{Linux: &corev1.LinuxContainerUser{UID: 1000, GID: 1000}},
		AllocatedResourcesStatus: []corev1.ResourceStatus{{Name: "example.dev/gpu"}},
		StopSignal:               ptr.To(corev1.SIGTERM),
	}
}

func TestTransformPod(t *testing.T) {
	full := heavyPod()
	out, err := Transform(heavyPod())
	require.NoError(t, err)
	pod := out.(*corev1.Pod)

	t.Run("keeps what the updater reads", func(t *testing.T) {
		want := full.ObjectMeta.DeepCopy()
		want.ManagedFields = nil
		assert.Equal(t, *want, pod.ObjectMeta)
		require.Len(t, pod.Spec.Containers, 1)
		require.Len(t, pod.Spec.InitContainers, 1)
		for i, c := range []corev1.Container{pod.Spec.InitContainers[0], pod.Spec.Containers[0]} {
			orig := append(full.Spec.InitContainers, full.Spec.Containers...)[i]
			assert.Equal(t, orig.Name, c.Name)
			assert.Equal(t, orig.Image, c.Image)
			assert.Equal(t, orig.Resources, c.Resources)
			assert.Equal(t, orig.ResizePolicy, c.ResizePolicy)
			assert.Equal(t, orig.RestartPolicy, c.RestartPolicy, "a sidecar stays a sidecar")
		}
		assert.Equal(t, full.Spec.NodeName, pod.Spec.NodeName)
		assert.Equal(t, full.Spec.OS, pod.Spec.OS)
		assert.Equal(t, full.Spec.Resources, pod.Spec.Resources)
		assert.Equal(t, full.Status.Phase, pod.Status.Phase)
		assert.Equal(t, full.Status.QOSClass, pod.Status.QOSClass)
		assert.Equal(t, full.Status.ObservedGeneration, pod.Status.ObservedGeneration)
		c := full.Status.Conditions
		assert.Equal(t, []corev1.PodCondition{c[1], c[3], c[4]}, pod.Status.Conditions, "Ready and the resize conditions, in order")
		assert.Equal(t, 3, cap(pod.Status.Conditions), "no room kept for the dropped conditions")
		assert.Equal(t, full.Status.Resize, pod.Status.Resize)
		require.Len(t, pod.Status.ContainerStatuses, 1)
		require.Len(t, pod.Status.InitContainerStatuses, 1)
		for i, cs := range []corev1.ContainerStatus{pod.Status.InitContainerStatuses[0], pod.Status.ContainerStatuses[0]} {
			orig := append(full.Status.InitContainerStatuses, full.Status.ContainerStatuses...)[i]
			assert.Equal(t, orig.Name, cs.Name)
			assert.Equal(t, orig.State, cs.State)
			assert.Equal(t, orig.Ready, cs.Ready)
			assert.Equal(t, orig.Started, cs.Started)
			assert.Equal(t, orig.RestartCount, cs.RestartCount)
			assert.Equal(t, orig.Resources, cs.Resources)
			assert.Equal(t, orig.AllocatedResources, cs.AllocatedResources)
			assert.Equal(t, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", FinishedAt: started}},
				cs.LastTerminationState, "the last termination's reason, exit code and time: the watch after a resize tells an OOM kill from them")
		}
	})
	t.Run("keeps what tells an eviction by the kubelet", func(t *testing.T) {
		full := heavyPod()
		full.Status.Reason = "Evicted"
		full.Status.Conditions = append(full.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet"})
		out, err := Transform(full)
		require.NoError(t, err)
		pod := out.(*corev1.Pod)
		assert.Equal(t, "Evicted", pod.Status.Reason)
		assert.Equal(t, corev1.DisruptionTarget, pod.Status.Conditions[len(pod.Status.Conditions)-1].Type)
	})
	t.Run("keeps what pkg/jvm reads of a JVM's heap", func(t *testing.T) {
		full := heavyPod()
		full.Spec.Containers[0].Env = append(full.Spec.Containers[0].Env, corev1.EnvVar{Name: "KAFKA_HEAP_OPTS", Value: "-Xms1g -Xmx1g"})
		want := full.Spec.Containers[0].DeepCopy()
		full.Spec.InitContainers[0].EnvFrom = nil
		out, err := Transform(full)
		require.NoError(t, err)
		c := out.(*corev1.Pod).Spec.Containers[0]
		assert.Equal(t, want.Command, c.Command)
		assert.Equal(t, want.Args, c.Args)
		assert.Equal(t, want.Env, c.Env)
		assert.Equal(t, want.EnvFrom, c.EnvFrom)
		sidecar := out.(*corev1.Pod).Spec.InitContainers[0]
		assert.Nil(t, sidecar.Env, "no JVM, nothing a declaration reads")
		assert.Nil(t, sidecar.Command)
	})
	t.Run("drops the rest", func(t *testing.T) {
		c := pod.Spec.Containers[0]
		assert.Nil(t, c.Command)
		assert.Nil(t, c.Args)
		assert.Empty(t, c.WorkingDir)
		assert.Nil(t, c.Ports)
		assert.Equal(t, heavyContainer("app").EnvFrom, c.EnvFrom, "a JVM's options may come from it, should its VPA declare one (jvm.SpecNeeded)")
		assert.Nil(t, c.Env)
		assert.Nil(t, c.VolumeMounts)
		assert.Nil(t, c.LivenessProbe)
		assert.Nil(t, c.ReadinessProbe)
		assert.Nil(t, c.StartupProbe)
		assert.Nil(t, c.Lifecycle)
		assert.Nil(t, c.SecurityContext)
		assert.Nil(t, pod.Spec.InitContainers[0].Env)
		s := pod.Spec
		assert.Nil(t, s.Volumes)
		assert.Nil(t, s.EphemeralContainers)
		assert.Nil(t, s.Affinity)
		assert.Nil(t, s.Tolerations)
		assert.Nil(t, s.TopologySpreadConstraints)
		assert.Nil(t, s.ImagePullSecrets)
		assert.Nil(t, s.HostAliases)
		assert.Nil(t, s.DNSConfig)
		assert.Nil(t, s.SecurityContext)
		assert.Nil(t, s.ReadinessGates)
		assert.Nil(t, s.SchedulingGates)
		for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
			assert.Empty(t, cs.Image)
			assert.Empty(t, cs.ImageID)
			assert.Empty(t, cs.ContainerID)
			assert.Nil(t, cs.VolumeMounts)
			assert.Nil(t, cs.User)
			assert.Nil(t, cs.AllocatedResourcesStatus)
			assert.Nil(t, cs.StopSignal)
		}
		st := pod.Status
		assert.Nil(t, st.EphemeralContainerStatuses)
		assert.Empty(t, st.Message)
		assert.Empty(t, st.Reason)
		assert.Empty(t, st.NominatedNodeName)
		assert.Empty(t, st.HostIP)
		assert.Nil(t, st.HostIPs)
		assert.Empty(t, st.PodIP)
		assert.Nil(t, st.PodIPs)
		assert.Nil(t, st.StartTime)
		assert.Nil(t, st.ResourceClaimStatuses)
		assert.Nil(t, st.ExtendedResourceClaimStatus)
		// The pod-level status (KEP-5419) is kept: it says whether the
		// pod's node resizes its pod-level values, and what it holds.
		assert.Equal(t, full.Status.Resources, st.Resources)
		assert.Equal(t, full.Status.AllocatedResources, st.AllocatedResources)
	})
	t.Run("idempotent", func(t *testing.T) {
		again, err := Transform(pod.DeepCopy())
		require.NoError(t, err)
		assert.Equal(t, pod, again)
	})
}

func TestTransformControllers(t *testing.T) {
	template := func() corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"}, Name: "ignored"},
			Spec:       heavyPod().Spec,
		}
	}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "web", Namespace: "default", OwnerReferences: []metav1.OwnerReference{{Kind: "Example", Name: "web"}}, ManagedFields: managed}
	}
	trimmed := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"}}}
	tests := []struct {
		name string
		obj  any
		// check returns the object's template and selector after the
		// transform.
		check func(any) (corev1.PodTemplateSpec, any)
	}{
		{"Deployment", &appsv1.Deployment{ObjectMeta: meta(), Spec: appsv1.DeploymentSpec{Selector: selector, Template: template(), Replicas: ptr.To[int32](3)}},
			func(o any) (corev1.PodTemplateSpec, any) {
				d := o.(*appsv1.Deployment)
				return d.Spec.Template, d.Spec.Selector
			}},
		{"ReplicaSet", &appsv1.ReplicaSet{ObjectMeta: meta(), Spec: appsv1.ReplicaSetSpec{Selector: selector, Template: template()}},
			func(o any) (corev1.PodTemplateSpec, any) {
				r := o.(*appsv1.ReplicaSet)
				return r.Spec.Template, r.Spec.Selector
			}},
		{"StatefulSet", &appsv1.StatefulSet{ObjectMeta: meta(), Spec: appsv1.StatefulSetSpec{Selector: selector, Template: template(),
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}}},
			func(o any) (corev1.PodTemplateSpec, any) {
				s := o.(*appsv1.StatefulSet)
				assert.Nil(t, s.Spec.VolumeClaimTemplates)
				return s.Spec.Template, s.Spec.Selector
			}},
		{"DaemonSet", &appsv1.DaemonSet{ObjectMeta: meta(), Spec: appsv1.DaemonSetSpec{Selector: selector, Template: template()}},
			func(o any) (corev1.PodTemplateSpec, any) {
				d := o.(*appsv1.DaemonSet)
				return d.Spec.Template, d.Spec.Selector
			}},
		{"ReplicationController", &corev1.ReplicationController{ObjectMeta: meta(), Spec: corev1.ReplicationControllerSpec{
			Selector: map[string]string{"app": "web"}, Template: ptr.To(template())}},
			func(o any) (corev1.PodTemplateSpec, any) {
				r := o.(*corev1.ReplicationController)
				return *r.Spec.Template, r.Spec.Selector
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Transform(tc.obj)
			require.NoError(t, err)
			got, sel := tc.check(out)
			assert.Equal(t, trimmed, got, "the pod template keeps its labels and annotations only")
			if m, ok := sel.(map[string]string); ok {
				assert.Equal(t, map[string]string{"app": "web"}, m)
			} else {
				assert.Equal(t, selector, sel)
			}
			a := out.(metav1.Object)
			assert.Nil(t, a.GetManagedFields())
			assert.Len(t, a.GetOwnerReferences(), 1, "owner references are what the controller fetcher walks")
		})
	}
}

func TestTransformKeepsJobTemplates(t *testing.T) {
	spec := heavyPod().Spec
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "train", ManagedFields: managed},
		Spec:       batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: *spec.DeepCopy()}},
	}
	cron := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nightly"}}, Spec: *spec.DeepCopy()}}}},
	}
	out, err := Transform(job)
	require.NoError(t, err)
	assert.Equal(t, spec, out.(*batchv1.Job).Spec.Template.Spec, "Job templates are resized: kept whole")
	assert.Nil(t, out.(*batchv1.Job).ManagedFields)
	out, err = Transform(cron)
	require.NoError(t, err)
	assert.Equal(t, spec, out.(*batchv1.CronJob).Spec.JobTemplate.Spec.Template.Spec)
}

func TestTransformTombstone(t *testing.T) {
	pod := heavyPod()
	tombstone := cache.DeletedFinalStateUnknown{Key: "default/web-0", Obj: pod}
	out, err := Transform(tombstone)
	require.NoError(t, err)
	assert.Equal(t, tombstone, out)
	assert.Equal(t, heavyPod(), pod, "a tombstone's object is not touched")
}

// Checkpoints keep what the evidence rule reads (whose, how many samples
// over which span, when written) and lose their histograms.
func TestTransformCheckpoint(t *testing.T) {
	first := metav1.NewTime(time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC))
	cp := &vpatypes.VerticalPodAutoscalerCheckpoint{
		ObjectMeta: metav1.ObjectMeta{Name: "web-c", ManagedFields: managed},
		Spec:       vpatypes.VerticalPodAutoscalerCheckpointSpec{VPAObjectName: "web", ContainerName: "c"},
		Status: vpatypes.VerticalPodAutoscalerCheckpointStatus{
			CPUHistogram:     vpatypes.HistogramCheckpoint{BucketWeights: map[int]uint32{1: 10000, 7: 3}, TotalWeight: 12.5},
			MemoryHistogram:  vpatypes.HistogramCheckpoint{BucketWeights: map[int]uint32{4: 10000}, TotalWeight: 2},
			FirstSampleStart: first, LastSampleStart: metav1.NewTime(first.Add(time.Hour)), TotalSamplesCount: 60,
			LastUpdateTime: metav1.NewTime(first.Add(time.Hour + time.Minute)),
		},
	}
	out, err := Transform(cp)
	require.NoError(t, err)
	got := out.(*vpatypes.VerticalPodAutoscalerCheckpoint)
	assert.Nil(t, got.Status.CPUHistogram.BucketWeights)
	assert.Nil(t, got.Status.MemoryHistogram.BucketWeights)
	assert.Nil(t, got.ManagedFields)
	assert.Equal(t, "web", got.Spec.VPAObjectName)
	assert.Equal(t, "c", got.Spec.ContainerName)
	assert.Equal(t, 60, got.Status.TotalSamplesCount)
	assert.True(t, got.Status.LastSampleStart.Equal(&metav1.Time{Time: first.Add(time.Hour)}))
	assert.True(t, got.Status.LastUpdateTime.Equal(&metav1.Time{Time: first.Add(time.Hour + time.Minute)}), "how old it is")
}
