package cachetrim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
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
			Conditions: []corev1.PodCondition{{
				Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred, Message: "no room",
			}},
			Resize:                corev1.PodResizeStatusDeferred,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", Resources: ptr.To(resources("100m", "128Mi")), VolumeMounts: []corev1.VolumeMountStatus{{Name: "data"}}}},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "app", Resources: ptr.To(resources("100m", "128Mi")), RestartCount: 2,
				AllocatedResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
				VolumeMounts:       []corev1.VolumeMountStatus{{Name: "data"}},
			}},
			EphemeralContainerStatuses: []corev1.ContainerStatus{{Name: "debug"}},
		},
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
		assert.Equal(t, full.Status.Conditions, pod.Status.Conditions)
		assert.Equal(t, full.Status.Resize, pod.Status.Resize)
		require.Len(t, pod.Status.ContainerStatuses, 1)
		cs := pod.Status.ContainerStatuses[0]
		assert.Equal(t, full.Status.ContainerStatuses[0].Resources, cs.Resources)
		assert.Equal(t, full.Status.ContainerStatuses[0].AllocatedResources, cs.AllocatedResources)
		assert.Equal(t, int32(2), cs.RestartCount)
		assert.Equal(t, full.Status.InitContainerStatuses[0].Resources, pod.Status.InitContainerStatuses[0].Resources)
	})
	t.Run("drops the rest", func(t *testing.T) {
		c := pod.Spec.Containers[0]
		assert.Nil(t, c.Command)
		assert.Nil(t, c.Args)
		assert.Empty(t, c.WorkingDir)
		assert.Nil(t, c.Ports)
		assert.Nil(t, c.EnvFrom)
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
		assert.Nil(t, pod.Status.ContainerStatuses[0].VolumeMounts)
		assert.Nil(t, pod.Status.InitContainerStatuses[0].VolumeMounts)
		assert.Nil(t, pod.Status.EphemeralContainerStatuses)
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
