// Package admissionbench compares, in one process, our pod admission
// handler with upstream VPA's (v1.8.1, the version bench/go.mod pins), each
// wired as its main wires it, over fake clientsets with synced informers.
package admissionbench

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpafake "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/fake"
)

// Namespace holds every object of the benchmark.
const Namespace = "bench"

// The recommendation of every VPA, which each response must carry.
const (
	RecommendedCPU    = "250m"
	RecommendedMemory = "256Mi"
)

// Cluster is the objects both handlers see: n Deployments app-<i>, each with
// its ReplicaSet app-<i>-7d9f8 and an InPlace VPA app-<i> with a
// recommendation.
type Cluster struct {
	N    int
	Kube *fake.Clientset
	VPAs *vpafake.Clientset
}

// NewCluster returns the fake clientsets of a cluster of n workloads.
func NewCluster(n int) *Cluster {
	var kube, vpas []runtime.Object
	for i := range n {
		name := fmt.Sprintf("app-%d", i)
		labels := map[string]string{"app": name}
		template := podTemplate(labels)
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, UID: types.UID(name + "-dep"), Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](3),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: template,
			},
		}
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-7d9f8", Namespace: Namespace, UID: types.UID(name + "-rs"), Labels: labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: dep.UID, Controller: ptr.To(true)}}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template},
		}
		mode := vpatypes.UpdateModeInPlace
		vpa := &vpatypes.VerticalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace, UID: types.UID(name + "-vpa"), ResourceVersion: "1",
				CreationTimestamp: metav1.Unix(1_700_000_000+int64(i), 0)},
			Spec: vpatypes.VerticalPodAutoscalerSpec{
				TargetRef:    &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
				UpdatePolicy: &vpatypes.PodUpdatePolicy{UpdateMode: &mode},
			},
			Status: vpatypes.VerticalPodAutoscalerStatus{Recommendation: &vpatypes.RecommendedPodResources{
				ContainerRecommendations: []vpatypes.RecommendedContainerResources{{
					ContainerName: "app",
					Target:        list(RecommendedCPU, RecommendedMemory),
					LowerBound:    list("100m", "128Mi"),
					UpperBound:    list("1", "1Gi"),
				}},
			}},
		}
		kube = append(kube, dep, rs)
		vpas = append(vpas, vpa)
	}
	return &Cluster{N: n, Kube: fake.NewClientset(kube...), VPAs: vpafake.NewSimpleClientset(vpas...)}
}

// podTemplate is a pod template of a realistic size: one container with
// environment, probes and mounts.
func podTemplate(labels map[string]string) corev1.PodTemplateSpec {
	var env []corev1.EnvVar
	for i := range 10 {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", i), Value: fmt.Sprintf("value-of-setting-%d", i)})
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"team": "bench", "checksum/config": "0123456789abcdef0123456789abcdef"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "registry.example/app:1.2.3", Args: []string{"--port=8080", "--verbose"},
			Env:            env,
			Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			Resources:      corev1.ResourceRequirements{Requests: list("100m", "128Mi"), Limits: list("200m", "256Mi")},
			VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready"}}},
		}}, Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}}}},
	}
}

func list(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

// Review is the AdmissionReview of a CREATE of a pod of ReplicaSet
// app-0-7d9f8, as the ReplicaSet controller creates it.
func Review() []byte {
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"app-0-7d9f8-","namespace":"bench",` +
		`"labels":{"app":"app-0","pod-template-hash":"7d9f8"},"annotations":{"team":"bench","checksum/config":"0123456789abcdef0123456789abcdef"},` +
		`"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"app-0-7d9f8","uid":"app-0-rs","controller":true,"blockOwnerDeletion":true}]},` +
		`"spec":{"volumes":[{"name":"config","configMap":{"name":"app-config"}},{"name":"kube-api-access-x","projected":{"sources":[` +
		`{"serviceAccountToken":{"expirationSeconds":3607,"path":"token"}},{"configMap":{"name":"kube-root-ca.crt","items":[{"key":"ca.crt","path":"ca.crt"}]}}]}}],` +
		`"containers":[{"name":"app","image":"registry.example/app:1.2.3","args":["--port=8080","--verbose"],` +
		`"ports":[{"name":"http","containerPort":8080,"protocol":"TCP"}],"env":[` + env() + `],` +
		`"resources":{"limits":{"cpu":"200m","memory":"256Mi"},"requests":{"cpu":"100m","memory":"128Mi"}},` +
		`"volumeMounts":[{"name":"config","mountPath":"/etc/app"},{"name":"kube-api-access-x","readOnly":true,"mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"}],` +
		`"readinessProbe":{"httpGet":{"path":"/ready","port":8080,"scheme":"HTTP"},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},` +
		`"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}],` +
		`"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"default",` +
		`"securityContext":{},"schedulerName":"default-scheduler","tolerations":[` +
		`{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300},` +
		`{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}],` +
		`"priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"},"status":{}}`
	return []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"0b4f9a0e-3c1b-4c4e-9d7a-5a2f7f0e1c11",` +
		`"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},` +
		`"requestKind":{"group":"","version":"v1","kind":"Pod"},"requestResource":{"group":"","version":"v1","resource":"pods"},` +
		`"namespace":"bench","operation":"CREATE","userInfo":{"username":"system:serviceaccount:kube-system:replicaset-controller",` +
		`"uid":"5d3c0e6a-1f0b-4a8e-8f1e-2f4a5b6c7d8e","groups":["system:serviceaccounts","system:serviceaccounts:kube-system","system:authenticated"]},` +
		`"object":` + pod + `,"oldObject":null,"dryRun":false,"options":{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}}}`)
}

func env() string {
	out := ""
	for i := range 10 {
		if i > 0 {
			out += ","
		}
		out += fmt.Sprintf(`{"name":"SETTING_%d","value":"value-of-setting-%d"}`, i, i)
	}
	return out
}
