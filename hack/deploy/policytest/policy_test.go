package policytest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

const (
	policyFile = "../../../deploy/base/updater/policy/admission-policy.yaml"
	updater    = "system:serviceaccount:vpa-inplace-system:vpa-inplace-updater"

	onlyPatch       = "vpa-inplace-updater may only patch Jobs: no create, delete or subresource"
	onlySuspended   = "vpa-inplace-updater may change only suspended Jobs, and may not resume them"
	jobMetadata     = "vpa-inplace-updater may not change a Job's metadata"
	resourcesOnly   = "vpa-inplace-updater may change only the resources of a suspended Job's containers and init containers"
	vpaOnlyPatch    = "vpa-inplace-updater may only patch VerticalPodAutoscalers and their status: no create, delete or other subresource"
	vpaSpec         = "vpa-inplace-updater may not change a VerticalPodAutoscaler's spec"
	vpaMetadata     = "vpa-inplace-updater may change only its own annotations in a VerticalPodAutoscaler's metadata"
	vpaAnnotations  = "vpa-inplace-updater may change only its own annotations (vpa-inplace.dev/..., not vpa-inplace.dev/paused or vpa-inplace.dev/resize-when)"
	vpaStatus       = "vpa-inplace-updater may change only its InPlaceResizeBlocked condition in a VerticalPodAutoscaler's status"
	podOnlyUpdate   = "vpa-inplace-updater may only update pods, to remove their startup boost annotations: no create or delete"
	podSpec         = "vpa-inplace-updater may not change a pod's spec (resources change through pods/resize)"
	podStatus       = "vpa-inplace-updater may not change a pod's status"
	podMetadata     = "vpa-inplace-updater may change only the startup boost annotations in a pod's metadata"
	podAdded        = "vpa-inplace-updater may not add or change a pod's annotations (it only removes startup boost annotations)"
	podRemoved      = "vpa-inplace-updater may remove only a pod's startup boost annotations (vpaCpuStartupBoost/...)"
	cmKillSwitch    = "vpa-inplace-updater may not write its kill switch (--config-map)"
	cmName          = "vpa-inplace-updater may write only its records ConfigMaps (named with its --records-prefix) and node room buckets (never deleted)"
	cmLabel         = "vpa-inplace-updater may write only its records ConfigMaps, labelled vpa-inplace.dev/records before and after"
	cmStore         = "vpa-inplace-updater may write only its records ConfigMaps, named after the store their label vpa-inplace.dev/records names"
	cmOwner         = "vpa-inplace-updater may write only its records ConfigMaps and node room buckets, owned by its Lease (--records-owner) or by nothing"
	recordsKey      = "vpa-inplace.dev/infeasible-attempts"
	memoryRecordKey = "vpa-inplace.dev/memory-limit-holds"
)

var (
	jobs     = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	jobKind  = schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
	vpas     = schema.GroupVersionResource{Group: "autoscaling.k8s.io", Version: "v1", Resource: "verticalpodautoscalers"}
	vpaKind  = schema.GroupVersionKind{Group: "autoscaling.k8s.io", Version: "v1", Kind: "VerticalPodAutoscaler"}
	pods     = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	podKind  = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	cms      = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	cmKind   = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	policies map[string]*Policy
)

func load(t testing.TB) map[string]*Policy {
	t.Helper()
	if policies == nil {
		p, err := Load(policyFile)
		if err != nil {
			t.Fatal(err)
		}
		if p["vpa-inplace-updater-jobs"] == nil || p["vpa-inplace-updater-vpas"] == nil || p["vpa-inplace-updater-pods"] == nil ||
			p["vpa-inplace-updater-configmaps"] == nil {
			t.Fatalf("%s: want policies vpa-inplace-updater-jobs, vpa-inplace-updater-vpas, vpa-inplace-updater-pods and "+
				"vpa-inplace-updater-configmaps, got %d", policyFile, len(p))
		}
		policies = p
	}
	return policies
}

func requests(cpu, mem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
	}}
}

// job is a suspended Job as the API server stores it, with containers
// containers and one init container.
func job(containers int) *batchv1.Job {
	j := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "train", Namespace: "team-a", UID: "4c1f3c9e-0000-4000-8000-000000000001", ResourceVersion: "100",
			Generation: 1, Labels: map[string]string{"app": "train"}, Annotations: map[string]string{"team": "a"},
		},
		Spec: batchv1.JobSpec{
			Suspend: ptr(true), Parallelism: ptr[int32](1), Completions: ptr[int32](1), BackoffLimit: ptr[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "4c1f3c9e"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "train", "batch.kubernetes.io/controller-uid": "4c1f3c9e"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					NodeSelector:  map[string]string{"pool": "batch"},
					InitContainers: []corev1.Container{{
						Name: "fetch", Image: "registry.example/fetch:1", Resources: requests("50m", "32Mi"),
					}},
				},
			},
		},
	}
	for i := range containers {
		j.Spec.Template.Spec.Containers = append(j.Spec.Template.Spec.Containers, corev1.Container{
			Name: fmt.Sprintf("app-%d", i), Image: "registry.example/app:1", Command: []string{"train", "--epochs=10"},
			Env:       []corev1.EnvVar{{Name: "MODE", Value: "batch"}},
			Resources: requests("100m", "100Mi"),
		})
	}
	return j
}

func ptr[T any](v T) *T { return &v }

func jobUpdate(old *batchv1.Job, edit func(*batchv1.Job)) Request {
	next := old.DeepCopy()
	edit(next)
	next.ResourceVersion = "101"
	next.Generation = old.Generation + 1
	return Request{User: updater, Operation: admission.Update, Resource: jobs, Kind: jobKind, Object: next, OldObject: old}
}

func vpa() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling.k8s.io/v1",
		"kind":       "VerticalPodAutoscaler",
		"metadata": map[string]any{
			"name": "train", "namespace": "team-a", "uid": "4c1f3c9e-0000-4000-8000-000000000002", "resourceVersion": "200",
			"generation": int64(1),
			"labels":     map[string]any{"app": "train"},
			"annotations": map[string]any{
				"team": "a", "vpa-inplace.dev/paused": "false", recordsKey: `{"version":1}`,
			},
		},
		"spec": map[string]any{
			"targetRef":    map[string]any{"apiVersion": "batch/v1", "kind": "Job", "name": "train"},
			"updatePolicy": map[string]any{"updateMode": "InPlace"},
		},
		"status": map[string]any{
			"recommendation": map[string]any{"containerRecommendations": []any{
				map[string]any{"containerName": "app-0", "target": map[string]any{"cpu": "200m", "memory": "200Mi"}},
			}},
			"conditions": []any{
				map[string]any{"type": "RecommendationProvided", "status": "True", "lastTransitionTime": "2026-11-24T10:00:00Z"},
			},
		},
	}}
}

func vpaUpdate(subresource string, edit func(map[string]any)) Request {
	old := vpa()
	next := old.DeepCopy()
	edit(next.Object)
	next.SetResourceVersion("201")
	return Request{User: updater, Operation: admission.Update, Resource: vpas, Kind: vpaKind, Subresource: subresource, Object: next, OldObject: old}
}

func annotations(o map[string]any) map[string]any {
	return o["metadata"].(map[string]any)["annotations"].(map[string]any)
}

func conditions(o map[string]any) []any {
	return o["status"].(map[string]any)["conditions"].([]any)
}

func blocked(status string) map[string]any {
	return map[string]any{"type": "InPlaceResizeBlocked", "status": status, "reason": "Infeasible", "lastTransitionTime": "2026-11-24T11:00:00Z"}
}

func TestUpdaterJobChanges(t *testing.T) {
	p := load(t)["vpa-inplace-updater-jobs"]
	suspended := job(2)
	running := job(2)
	running.Spec.Suspend = ptr(false)
	for _, tc := range []struct {
		name string
		req  Request
		want string // "" allowed, else the message
	}{
		{"container resources of a suspended Job", jobUpdate(suspended, func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[1].Resources = requests("250m", "200Mi")
		}), ""},
		{"resources of every container and init container", jobUpdate(suspended, func(j *batchv1.Job) {
			for i := range j.Spec.Template.Spec.Containers {
				j.Spec.Template.Spec.Containers[i].Resources = requests("1", "1Gi")
			}
			j.Spec.Template.Spec.InitContainers[0].Resources = requests("60m", "40Mi")
		}), ""},
		{"limits added", jobUpdate(suspended, func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
		}), ""},
		{"nothing changed", jobUpdate(suspended, func(*batchv1.Job) {}), ""},
		{"resuming", jobUpdate(suspended, func(j *batchv1.Job) { j.Spec.Suspend = ptr(false) }), onlySuspended},
		{"resuming with new resources", jobUpdate(suspended, func(j *batchv1.Job) {
			j.Spec.Suspend = nil
			j.Spec.Template.Spec.Containers[0].Resources = requests("1", "1Gi")
		}), onlySuspended},
		{"resources of a running Job", jobUpdate(running, func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].Resources = requests("1", "1Gi")
		}), onlySuspended},
		{"suspending a running Job", jobUpdate(running, func(j *batchv1.Job) { j.Spec.Suspend = ptr(true) }), onlySuspended},
		{"a label", jobUpdate(suspended, func(j *batchv1.Job) { j.Labels["extra"] = "x" }), jobMetadata},
		{"an annotation removed", jobUpdate(suspended, func(j *batchv1.Job) { j.Annotations = nil }), jobMetadata},
		{"an owner reference", jobUpdate(suspended, func(j *batchv1.Job) {
			j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u"}}
		}), jobMetadata},
		{"parallelism", jobUpdate(suspended, func(j *batchv1.Job) { j.Spec.Parallelism = ptr[int32](4) }), resourcesOnly},
		{"active deadline added", jobUpdate(suspended, func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr[int64](60) }), resourcesOnly},
		{"backoff limit removed", jobUpdate(suspended, func(j *batchv1.Job) { j.Spec.BackoffLimit = nil }), resourcesOnly},
		{"pod template labels", jobUpdate(suspended, func(j *batchv1.Job) { j.Spec.Template.Labels["extra"] = "x" }), resourcesOnly},
		{"node selector", jobUpdate(suspended, func(j *batchv1.Job) { j.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "gpu"} }), resourcesOnly},
		{"tolerations added", jobUpdate(suspended, func(j *batchv1.Job) {
			j.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}), resourcesOnly},
		{"image", jobUpdate(suspended, func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "registry.example/other:1" }), resourcesOnly},
		{"command, along with resources", jobUpdate(suspended, func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[1].Command = []string{"sh"}
			j.Spec.Template.Spec.Containers[1].Resources = requests("1", "1Gi")
		}), resourcesOnly},
		{"a container field added", jobUpdate(suspended, func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr(true)}
		}), resourcesOnly},
		{"a container removed", jobUpdate(suspended, func(j *batchv1.Job) {
			j.Spec.Template.Spec.Containers = j.Spec.Template.Spec.Containers[:1]
		}), resourcesOnly},
		{"containers renamed", jobUpdate(suspended, func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[1].Name = "other" }), resourcesOnly},
		{"containers swapped", jobUpdate(suspended, func(j *batchv1.Job) {
			c := j.Spec.Template.Spec.Containers
			c[0], c[1] = c[1], c[0]
		}), resourcesOnly},
		{"init container image", jobUpdate(suspended, func(j *batchv1.Job) {
			j.Spec.Template.Spec.InitContainers[0].Image = "registry.example/other:1"
		}), resourcesOnly},
		{"an init container added", jobUpdate(suspended, func(j *batchv1.Job) {
			j.Spec.Template.Spec.InitContainers = append(j.Spec.Template.Spec.InitContainers, corev1.Container{Name: "more", Image: "x"})
		}), resourcesOnly},
		{"init containers removed", jobUpdate(suspended, func(j *batchv1.Job) { j.Spec.Template.Spec.InitContainers = nil }), resourcesOnly},
		{"the status subresource", func() Request {
			r := jobUpdate(suspended, func(*batchv1.Job) {})
			r.Subresource = "status"
			return r
		}(), onlyPatch},
		{"create", Request{User: updater, Operation: admission.Create, Resource: jobs, Kind: jobKind, Object: suspended}, onlyPatch},
		{"delete", Request{User: updater, Operation: admission.Delete, Resource: jobs, Kind: jobKind, OldObject: suspended}, onlyPatch},
		{"resuming, by someone else", func() Request {
			r := jobUpdate(suspended, func(j *batchv1.Job) { j.Spec.Suspend = ptr(false) })
			r.User = "system:serviceaccount:team-a:default"
			return r
		}(), ""},
		{"resuming, by a ServiceAccount of the same name elsewhere", func() Request {
			r := jobUpdate(suspended, func(j *batchv1.Job) { j.Spec.Suspend = ptr(false) })
			r.User = "system:serviceaccount:team-a:vpa-inplace-updater"
			return r
		}(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) { check(t, p, tc.req, tc.want) })
	}
}

func TestUpdaterVPAChanges(t *testing.T) {
	p := load(t)["vpa-inplace-updater-vpas"]
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"records written", vpaUpdate("", func(o map[string]any) { annotations(o)[recordsKey] = `{"version":1,"attempts":[]}` }), ""},
		{"memory records added", vpaUpdate("", func(o map[string]any) { annotations(o)[memoryRecordKey] = `{}` }), ""},
		{"records removed", vpaUpdate("", func(o map[string]any) { delete(annotations(o), recordsKey) }), ""},
		{"a new annotation of ours", vpaUpdate("", func(o map[string]any) { annotations(o)["vpa-inplace.dev/records-moved"] = "true" }), ""},
		{"the condition added", vpaUpdate("status", func(o map[string]any) {
			o["status"].(map[string]any)["conditions"] = append(conditions(o), blocked("True"))
		}), ""},
		{"the condition changed", func() Request {
			r := vpaUpdate("status", func(o map[string]any) {
				o["status"].(map[string]any)["conditions"] = append(conditions(o), blocked("False"))
			})
			old := r.OldObject.(*unstructured.Unstructured)
			old.Object["status"].(map[string]any)["conditions"] = append(conditions(old.Object), blocked("True"))
			return r
		}(), ""},
		{"the condition removed", func() Request {
			r := vpaUpdate("status", func(map[string]any) {})
			old := r.OldObject.(*unstructured.Unstructured)
			old.Object["status"].(map[string]any)["conditions"] = append(conditions(old.Object), blocked("True"))
			return r
		}(), ""},
		{"the condition on a VPA without status", func() Request {
			r := vpaUpdate("status", func(o map[string]any) { o["status"] = map[string]any{"conditions": []any{blocked("True")}} })
			delete(r.OldObject.(*unstructured.Unstructured).Object, "status")
			return r
		}(), ""},
		{"updateMode", vpaUpdate("", func(o map[string]any) {
			o["spec"].(map[string]any)["updatePolicy"] = map[string]any{"updateMode": "Recreate"}
		}), vpaSpec},
		{"spec removed", vpaUpdate("", func(o map[string]any) { delete(o, "spec") }), vpaSpec},
		{"a foreign annotation", vpaUpdate("", func(o map[string]any) { annotations(o)["team"] = "b" }), vpaAnnotations},
		{"a foreign annotation removed", vpaUpdate("", func(o map[string]any) { delete(annotations(o), "team") }), vpaAnnotations},
		{"a foreign annotation added", vpaUpdate("", func(o map[string]any) { annotations(o)["other.example/x"] = "y" }), vpaAnnotations},
		{"the user's paused", vpaUpdate("", func(o map[string]any) { annotations(o)["vpa-inplace.dev/paused"] = "true" }), vpaAnnotations},
		{"the user's paused removed", vpaUpdate("", func(o map[string]any) { delete(annotations(o), "vpa-inplace.dev/paused") }), vpaAnnotations},
		{"the user's resize-when", vpaUpdate("", func(o map[string]any) { annotations(o)["vpa-inplace.dev/resize-when"] = "always" }), vpaAnnotations},
		{"every annotation removed", vpaUpdate("", func(o map[string]any) { delete(o["metadata"].(map[string]any), "annotations") }), vpaAnnotations},
		{"a label", vpaUpdate("", func(o map[string]any) { o["metadata"].(map[string]any)["labels"] = map[string]any{"app": "x"} }), vpaMetadata},
		{"a finalizer", vpaUpdate("", func(o map[string]any) { o["metadata"].(map[string]any)["finalizers"] = []any{"x"} }), vpaMetadata},
		{"the recommendation", vpaUpdate("status", func(o map[string]any) {
			o["status"].(map[string]any)["recommendation"] = map[string]any{"containerRecommendations": []any{
				map[string]any{"containerName": "app-0", "target": map[string]any{"cpu": "4", "memory": "4Gi"}},
			}}
		}), vpaStatus},
		{"the recommendation removed", vpaUpdate("status", func(o map[string]any) { delete(o["status"].(map[string]any), "recommendation") }), vpaStatus},
		{"the recommender's condition", vpaUpdate("status", func(o map[string]any) {
			conditions(o)[0].(map[string]any)["status"] = "False"
		}), vpaStatus},
		{"the recommender's condition removed", vpaUpdate("status", func(o map[string]any) {
			o["status"].(map[string]any)["conditions"] = []any{blocked("True")}
		}), vpaStatus},
		{"the scale subresource", vpaUpdate("scale", func(map[string]any) {}), vpaOnlyPatch},
		{"create", Request{User: updater, Operation: admission.Create, Resource: vpas, Kind: vpaKind, Object: vpa()}, vpaOnlyPatch},
		{"delete", Request{User: updater, Operation: admission.Delete, Resource: vpas, Kind: vpaKind, OldObject: vpa()}, vpaOnlyPatch},
		{"updateMode, by someone else", func() Request {
			r := vpaUpdate("", func(o map[string]any) {
				o["spec"].(map[string]any)["updatePolicy"] = map[string]any{"updateMode": "Off"}
			})
			r.User = "alice"
			return r
		}(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) { check(t, p, tc.req, tc.want) })
	}
}

// boostKey is the annotation upstream VPA's admission controller (and ours)
// writes on a pod for each container whose CPU it boosted at creation.
func boostKey(container string) string { return "vpaCpuStartupBoost/" + container }

// pod is a running pod as the API server stores it, with containers
// containers, each boosted (a boost annotation each), and an annotation and
// a label of its owner's.
func pod(containers int) *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "kafka-0", Namespace: "team-a", UID: "4c1f3c9e-0000-4000-8000-000000000003", ResourceVersion: "300",
			Generation: 1, Labels: map[string]string{"app": "kafka"}, Annotations: map[string]string{"team": "a"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "kafka", UID: "s", Controller: ptr(true)}},
		},
		Spec: corev1.PodSpec{NodeName: "node-1", RestartPolicy: corev1.RestartPolicyAlways},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
	for i := range containers {
		name := fmt.Sprintf("app-%d", i)
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			Name: name, Image: "registry.example/kafka:4", Resources: requests("2", "1Gi"),
		})
		p.Annotations[boostKey(name)] = `{"requests":{"cpu":"1"},"limits":{}}`
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: name, Ready: true, Image: "registry.example/kafka:4", Resources: ptr(requests("2", "1Gi")),
		})
	}
	return p
}

func podUpdate(old *corev1.Pod, edit func(*corev1.Pod)) Request {
	next := old.DeepCopy()
	edit(next)
	next.ResourceVersion = "301"
	return Request{User: updater, Operation: admission.Update, Resource: pods, Kind: podKind, Object: next, OldObject: old}
}

func TestUpdaterPodChanges(t *testing.T) {
	p := load(t)["vpa-inplace-updater-pods"]
	boosted := pod(2)
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"one boost annotation removed", podUpdate(boosted, func(p *corev1.Pod) { delete(p.Annotations, boostKey("app-0")) }), ""},
		{"two boost annotations removed", podUpdate(boosted, func(p *corev1.Pod) {
			delete(p.Annotations, boostKey("app-0"))
			delete(p.Annotations, boostKey("app-1"))
		}), ""},
		{"the last annotation, a boost, removed", func() Request {
			old := pod(1)
			delete(old.Annotations, "team")
			return podUpdate(old, func(p *corev1.Pod) { p.Annotations = nil })
		}(), ""},
		{"nothing changed", podUpdate(boosted, func(*corev1.Pod) {}), ""},
		{"a boost annotation added", podUpdate(boosted, func(p *corev1.Pod) { p.Annotations[boostKey("sidecar")] = `{"requests":{"cpu":"1"}}` }), podAdded},
		{"a boost annotation added to a pod without annotations", func() Request {
			old := pod(1)
			old.Annotations = nil
			return podUpdate(old, func(p *corev1.Pod) { p.Annotations = map[string]string{boostKey("app-0"): "{}"} })
		}(), podAdded},
		{"a boost annotation changed", podUpdate(boosted, func(p *corev1.Pod) { p.Annotations[boostKey("app-1")] = `{"requests":{"cpu":"8"}}` }), podAdded},
		{"a boost annotation changed while another is removed", podUpdate(boosted, func(p *corev1.Pod) {
			delete(p.Annotations, boostKey("app-0"))
			p.Annotations[boostKey("app-1")] = `{"requests":{"cpu":"8"}}`
		}), podAdded},
		{"another annotation added", podUpdate(boosted, func(p *corev1.Pod) { p.Annotations["other.example/x"] = "y" }), podAdded},
		{"another annotation changed", podUpdate(boosted, func(p *corev1.Pod) { p.Annotations["team"] = "b" }), podAdded},
		{"another annotation removed", podUpdate(boosted, func(p *corev1.Pod) { delete(p.Annotations, "team") }), podRemoved},
		{"another annotation removed along with a boost one", podUpdate(boosted, func(p *corev1.Pod) {
			delete(p.Annotations, "team")
			delete(p.Annotations, boostKey("app-0"))
		}), podRemoved},
		{"every annotation removed", podUpdate(boosted, func(p *corev1.Pod) { p.Annotations = nil }), podRemoved},
		{"a key that only looks like a boost", func() Request {
			old := pod(1)
			old.Annotations["vpaCpuStartupBoost"] = "x"
			return podUpdate(old, func(p *corev1.Pod) { delete(p.Annotations, "vpaCpuStartupBoost") })
		}(), podRemoved},
		{"a label changed", podUpdate(boosted, func(p *corev1.Pod) { p.Labels["app"] = "other" }), podMetadata},
		{"a label added along with a boost removed", podUpdate(boosted, func(p *corev1.Pod) {
			p.Labels["extra"] = "x"
			delete(p.Annotations, boostKey("app-0"))
		}), podMetadata},
		{"labels removed", podUpdate(boosted, func(p *corev1.Pod) { p.Labels = nil }), podMetadata},
		{"owner references removed", podUpdate(boosted, func(p *corev1.Pod) { p.OwnerReferences = nil }), podMetadata},
		{"a finalizer", podUpdate(boosted, func(p *corev1.Pod) { p.Finalizers = []string{"example.com/hold"} }), podMetadata},
		{"image", podUpdate(boosted, func(p *corev1.Pod) { p.Spec.Containers[0].Image = "registry.example/other:1" }), podSpec},
		{"resources", podUpdate(boosted, func(p *corev1.Pod) { p.Spec.Containers[1].Resources = requests("1", "1Gi") }), podSpec},
		{"resources along with a boost removed", podUpdate(boosted, func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = requests("1", "1Gi")
			delete(p.Annotations, boostKey("app-0"))
		}), podSpec},
		{"tolerations added", podUpdate(boosted, func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}), podSpec},
		{"status phase", podUpdate(boosted, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), podStatus},
		{"status condition", podUpdate(boosted, func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }), podStatus},
		{"create", Request{User: updater, Operation: admission.Create, Resource: pods, Kind: podKind, Object: boosted}, podOnlyUpdate},
		{"delete", Request{User: updater, Operation: admission.Delete, Resource: pods, Kind: podKind, OldObject: boosted}, podOnlyUpdate},
		{"a label, by someone else", func() Request {
			r := podUpdate(boosted, func(p *corev1.Pod) { p.Labels["app"] = "other" })
			r.User = "system:serviceaccount:team-a:default"
			return r
		}(), ""},
		{"a boost annotation added, by a ServiceAccount of the same name elsewhere", func() Request {
			r := podUpdate(boosted, func(p *corev1.Pod) { p.Annotations[boostKey("sidecar")] = "{}" })
			r.User = "system:serviceaccount:team-a:vpa-inplace-updater"
			return r
		}(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) { check(t, p, tc.req, tc.want) })
	}
}

// recordsConfigMap is a records ConfigMap of the updater of deploy/ as
// pkg/records.ConfigMapStore writes it, for store (infeasible or memory).
func recordsConfigMap(store string) *corev1.ConfigMap {
	return installRecords(deployInstall, store)
}

// killSwitch is the cluster-wide kill switch the updater of deploy/ reads.
func killSwitch() *corev1.ConfigMap {
	return deployInstall.killSwitch()
}

// install names what one install of the updater writes and reads: the
// manifests of deploy/, or a release of the chart.
type install struct {
	namespace, fullname string
}

// deployInstall is deploy/'s: the chart's release vpa-inplace in
// vpa-inplace-system has the same names.
var deployInstall = install{namespace: "vpa-inplace-system", fullname: "vpa-inplace"}

func (i install) user() string {
	return "system:serviceaccount:" + i.namespace + ":" + i.fullname + "-updater"
}

func (i install) prefix() string { return i.fullname + "-records-" }

func (i install) lease() metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: i.fullname + "-updater", UID: "4c1f3c9e-0000-4000-8000-00000000000a"}
}

func (i install) killSwitch() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: i.fullname + "-updater-config", Namespace: i.namespace, ResourceVersion: "500"},
		Data:       map[string]string{"paused": "true"},
	}
}

// installRecords is a records ConfigMap of store that install i writes:
// named with its prefix, owned by its Lease.
func installRecords(i install, store string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: i.prefix() + store + "-4c1f3c9e-0000-4000-8000-000000000002", Namespace: i.namespace,
			ResourceVersion: "400",
			Labels:          map[string]string{"vpa-inplace.dev/records": store, "app.kubernetes.io/managed-by": "vpa-inplace-updater"},
			Annotations: map[string]string{
				"vpa-inplace.dev/vpa-namespace": "team-a", "vpa-inplace.dev/vpa-name": "train",
				"vpa-inplace.dev/vpa-uid": "4c1f3c9e-0000-4000-8000-000000000002",
			},
			OwnerReferences: []metav1.OwnerReference{i.lease()},
		},
		Data: map[string]string{"records": "v1\n"},
	}
}

// installBucket is node room bucket b of install i as the updater writes
// it with --shards above 1 (pkg/updater/noderoom/buckets): named after its
// --shard-lease-prefix (the manifests and the chart: its Lease's name), one
// reservation in it, owned by its Lease when the updater created it; the
// manifests ship it without an owner.
func installBucket(i install, b int) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-updater-noderoom-%d", i.fullname, b), Namespace: i.namespace, ResourceVersion: "300",
			Labels:          map[string]string{"app.kubernetes.io/name": i.fullname + "-updater"},
			OwnerReferences: []metav1.OwnerReference{i.lease()},
		},
		Data: map[string]string{"4c1f3c9e-0000-4000-8000-000000000003": `{"node":"node-1","pod":"team-a/web-0","cpu":"500m","holder":"vpa-inplace-updater-0_x"}`},
	}
}

func cmUpdate(old *corev1.ConfigMap, edit func(*corev1.ConfigMap)) Request {
	next := old.DeepCopy()
	edit(next)
	next.ResourceVersion = "501"
	return Request{User: updater, Operation: admission.Update, Resource: cms, Kind: cmKind, Object: next, OldObject: old}
}

func cmCreate(cm *corev1.ConfigMap) Request {
	cm = cm.DeepCopy()
	cm.ResourceVersion = ""
	return Request{User: updater, Operation: admission.Create, Resource: cms, Kind: cmKind, Object: cm}
}

func cmDelete(cm *corev1.ConfigMap) Request {
	return Request{User: updater, Operation: admission.Delete, Resource: cms, Kind: cmKind, OldObject: cm}
}

// by is the request sent by user.
func (r Request) by(user string) Request {
	r.User = user
	return r
}

// The updater writes its records ConfigMaps and its node room buckets, and
// only them: RBAC grants it create, update and delete on every ConfigMap of
// its namespace, the kill switch included.
func TestUpdaterConfigMapChanges(t *testing.T) {
	p := load(t)["vpa-inplace-updater-configmaps"]
	records := recordsConfigMap("infeasible")
	unlabelled := recordsConfigMap("memory")
	unlabelled.Labels = nil
	unowned := recordsConfigMap("infeasible")
	unowned.OwnerReferences = nil
	tenantLease := install{namespace: "vpa-inplace-system", fullname: "tenant-vpa-inplace"}.lease()
	rootCA := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "vpa-inplace-system", ResourceVersion: "1"},
		Data:       map[string]string{"ca.crt": "-----BEGIN CERTIFICATE-----"},
	}
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"records created", cmCreate(records), ""},
		{"memory records created", cmCreate(recordsConfigMap("memory")), ""},
		{"safety records created", cmCreate(recordsConfigMap("safety")), ""},
		{"records rewritten", cmUpdate(records, func(cm *corev1.ConfigMap) { cm.Data["records"] = "v1\nmore\n" }), ""},
		{"records rewritten with a label added", cmUpdate(records, func(cm *corev1.ConfigMap) {
			cm.Labels["vpa-inplace.dev/vpa-uid"] = "4c1f3c9e-0000-4000-8000-000000000002"
		}), ""},
		{"records created with another label", cmCreate(func() *corev1.ConfigMap {
			cm := recordsConfigMap("infeasible")
			cm.Labels["vpa-inplace.dev/vpa-uid"] = "4c1f3c9e-0000-4000-8000-000000000002"
			return cm
		}()), ""},
		{"records deleted", cmDelete(records), ""},
		{"nothing changed", cmUpdate(records, func(*corev1.ConfigMap) {}), ""},
		{"the check that records can be written (a dry-run create)", cmCreate(func() *corev1.ConfigMap {
			cm := recordsConfigMap("infeasible")
			cm.Name, cm.Annotations, cm.OwnerReferences = "vpa-inplace-records-infeasible-write-check", nil, nil
			return cm
		}()), ""},
		{"records written before they had an owner, rewritten with the Lease", cmUpdate(unowned, func(cm *corev1.ConfigMap) {
			cm.OwnerReferences = []metav1.OwnerReference{deployInstall.lease()}
		}), ""},
		{"records written before they had an owner, deleted", cmDelete(unowned), ""},
		{"the kill switch turned off", cmUpdate(killSwitch(), func(cm *corev1.ConfigMap) { cm.Data["paused"] = "false" }), cmKillSwitch},
		{"the kill switch emptied", cmUpdate(killSwitch(), func(cm *corev1.ConfigMap) { cm.Data = nil }), cmKillSwitch},
		{"the kill switch labelled as records", cmUpdate(killSwitch(), func(cm *corev1.ConfigMap) {
			cm.Labels = map[string]string{"vpa-inplace.dev/records": "infeasible"}
		}), cmKillSwitch},
		{"the kill switch deleted", cmDelete(killSwitch()), cmKillSwitch},
		{"the kill switch created", cmCreate(killSwitch()), cmKillSwitch},
		{"the kill switch created with the records label", cmCreate(func() *corev1.ConfigMap {
			cm := killSwitch()
			cm.Labels = map[string]string{"vpa-inplace.dev/records": "infeasible"}
			return cm
		}()), cmKillSwitch},
		{"another ConfigMap of the namespace rewritten", cmUpdate(rootCA, func(cm *corev1.ConfigMap) { cm.Data["ca.crt"] = "x" }), cmName},
		{"another ConfigMap of the namespace deleted", cmDelete(rootCA), cmName},
		{"a name that is the prefix without its dash", cmCreate(func() *corev1.ConfigMap {
			cm := recordsConfigMap("infeasible")
			cm.Name = "vpa-inplace-records"
			return cm
		}()), cmName},
		{"another install's records rewritten", cmUpdate(installRecords(install{namespace: "vpa-inplace-system", fullname: "tenant-vpa-inplace"}, "infeasible"),
			func(cm *corev1.ConfigMap) { cm.Data["records"] = "" }), cmName},
		{"records created without the label", cmCreate(unlabelled), cmLabel},
		{"records rewritten without the label", cmUpdate(records, func(cm *corev1.ConfigMap) { cm.Labels = nil }), cmLabel},
		{"a ConfigMap without the label deleted", cmDelete(unlabelled), cmLabel},
		// The label is read on the object before the update too: a
		// ConfigMap of the records' name that is not one (a kill switch
		// whose name begins as the records' do) cannot be made one.
		{"a ConfigMap of the records' name labelled as records", cmUpdate(unlabelled, func(cm *corev1.ConfigMap) {
			cm.Labels = map[string]string{"vpa-inplace.dev/records": "memory"}
		}), cmLabel},
		{"records of another store's name", cmCreate(func() *corev1.ConfigMap {
			cm := recordsConfigMap("infeasible")
			cm.Labels["vpa-inplace.dev/records"] = "memory"
			return cm
		}()), cmStore},
		{"records moved to another store by their label", cmUpdate(records, func(cm *corev1.ConfigMap) {
			cm.Labels["vpa-inplace.dev/records"] = "memory"
		}), cmStore},
		{"records named after no store", cmCreate(func() *corev1.ConfigMap {
			cm := recordsConfigMap("infeasible")
			cm.Labels["vpa-inplace.dev/records"] = ""
			return cm
		}()), cmStore},
		{"records created owned by another Lease", cmCreate(func() *corev1.ConfigMap {
			cm := recordsConfigMap("infeasible")
			cm.OwnerReferences = []metav1.OwnerReference{tenantLease}
			return cm
		}()), cmOwner},
		{"records handed to another Lease", cmUpdate(records, func(cm *corev1.ConfigMap) {
			cm.OwnerReferences = []metav1.OwnerReference{tenantLease}
		}), cmOwner},
		{"records of another Lease taken", cmUpdate(func() *corev1.ConfigMap {
			cm := recordsConfigMap("infeasible")
			cm.OwnerReferences = []metav1.OwnerReference{tenantLease}
			return cm
		}(), func(cm *corev1.ConfigMap) { cm.OwnerReferences = []metav1.OwnerReference{deployInstall.lease()} }), cmOwner},
		{"records of another Lease deleted", cmDelete(func() *corev1.ConfigMap {
			cm := recordsConfigMap("infeasible")
			cm.OwnerReferences = []metav1.OwnerReference{tenantLease}
			return cm
		}()), cmOwner},
		{"records owned by a Deployment of the Lease's name", cmCreate(func() *corev1.ConfigMap {
			cm := recordsConfigMap("infeasible")
			cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "vpa-inplace-updater", UID: "u"}}
			return cm
		}()), cmOwner},
		// The node room buckets (--shards above 1): written, created when
		// missing, never deleted; named after this install's Lease and
		// numbered, owned by its Lease or by nothing, with no records label.
		{"a node room bucket written", cmUpdate(installBucket(deployInstall, 3), func(cm *corev1.ConfigMap) { cm.Data = nil }), ""},
		{"a node room bucket shipped without an owner written", cmUpdate(func() *corev1.ConfigMap {
			cm := installBucket(deployInstall, 0)
			cm.OwnerReferences = nil
			return cm
		}(), func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"k": "v"} }), ""},
		{"a missing node room bucket created", cmCreate(func() *corev1.ConfigMap {
			cm := installBucket(deployInstall, 63)
			cm.Labels, cm.Data = nil, nil
			return cm
		}()), ""},
		{"a node room bucket deleted", cmDelete(installBucket(deployInstall, 3)), cmName},
		{"a node room bucket handed to another Lease", cmUpdate(installBucket(deployInstall, 3), func(cm *corev1.ConfigMap) {
			cm.OwnerReferences = []metav1.OwnerReference{tenantLease}
		}), cmOwner},
		{"a node room bucket beyond the 64 the updater numbers", cmCreate(installBucket(deployInstall, 640)), cmName},
		{"a ConfigMap named as the buckets but not numbered", cmCreate(func() *corev1.ConfigMap {
			cm := installBucket(deployInstall, 0)
			cm.Name = "vpa-inplace-updater-noderoom-x"
			return cm
		}()), cmName},
		{"a ConfigMap named as the buckets, and more", cmUpdate(func() *corev1.ConfigMap {
			cm := installBucket(deployInstall, 0)
			cm.Name = "vpa-inplace-updater-noderoom-0-extra"
			return cm
		}(), func(cm *corev1.ConfigMap) { cm.Data = nil }), cmName},
		{"another install's node room bucket written", cmUpdate(installBucket(install{namespace: "vpa-inplace-system", fullname: "tenant-vpa-inplace"}, 3),
			func(cm *corev1.ConfigMap) { cm.Data = nil }), cmName},
		{"the kill switch, by someone else", cmUpdate(killSwitch(), func(cm *corev1.ConfigMap) { cm.Data["paused"] = "false" }).by("kubernetes-admin"), ""},
		{"the kill switch, by a ServiceAccount of the same name elsewhere", cmDelete(killSwitch()).by("system:serviceaccount:team-a:vpa-inplace-updater"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) { check(t, p, tc.req, tc.want) })
	}
}

// TestPodsPolicyLeavesResizesAlone: the API server sends the updater's
// changes of a pod to the pods policy, but not its resizes (pods/resize),
// which change resources, nor any other subresource; and not the Jobs or
// VPAs policy either.
func TestPodsPolicyLeavesResizesAlone(t *testing.T) {
	ps := load(t)
	resize := podUpdate(pod(2), func(p *corev1.Pod) { p.Spec.Containers[0].Resources = requests("1", "1Gi") })
	resize.Subresource = "resize"
	status := podUpdate(pod(2), func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })
	status.Subresource = "status"
	for _, tc := range []struct {
		name   string
		policy string
		req    Request
		want   bool
	}{
		{"a pod's annotations", "vpa-inplace-updater-pods", podUpdate(pod(2), func(p *corev1.Pod) { delete(p.Annotations, boostKey("app-0")) }), true},
		{"a pod created", "vpa-inplace-updater-pods", Request{User: updater, Operation: admission.Create, Resource: pods, Kind: podKind, Object: pod(1)}, true},
		{"a pod deleted", "vpa-inplace-updater-pods", Request{User: updater, Operation: admission.Delete, Resource: pods, Kind: podKind, OldObject: pod(1)}, true},
		{"pods/resize", "vpa-inplace-updater-pods", resize, false},
		{"pods/status", "vpa-inplace-updater-pods", status, false},
		{"pods/resize, by the Jobs policy", "vpa-inplace-updater-jobs", resize, false},
		{"pods/resize, by the VPA policy", "vpa-inplace-updater-vpas", resize, false},
		{"a Job, by the pods policy", "vpa-inplace-updater-pods", jobUpdate(job(1), func(*batchv1.Job) {}), false},
		{"a ConfigMap, by the ConfigMaps policy", "vpa-inplace-updater-configmaps", cmDelete(killSwitch()), true},
		{"a ConfigMap created, by the ConfigMaps policy", "vpa-inplace-updater-configmaps", cmCreate(recordsConfigMap("memory")), true},
		{"a ConfigMap, by the pods policy", "vpa-inplace-updater-pods", cmDelete(killSwitch()), false},
		{"a pod, by the ConfigMaps policy", "vpa-inplace-updater-configmaps", podUpdate(pod(1), func(*corev1.Pod) {}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ps[tc.policy].Matches(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("%s matched: %v, want %v", tc.policy, got, tc.want)
			}
		})
	}
	// The resize would be refused if the policy saw it: only the matching
	// keeps it out.
	if d := ps["vpa-inplace-updater-pods"].Validate(context.Background(), func() Request { r := resize; r.Subresource = ""; return r }()); !d.Denied || d.Message != podSpec {
		t.Errorf("a change of resources on the pod itself: %+v, want refused with %q", d, podSpec)
	}
}

func check(t *testing.T, p *Policy, req Request, want string) {
	t.Helper()
	got := p.Validate(context.Background(), req)
	switch {
	case want == "" && got.Denied:
		t.Errorf("refused (%s): %s", got.Reason, got.Message)
	case want != "" && !got.Denied:
		t.Errorf("allowed, want refused with %q", want)
	case want != "" && (got.Message != want || got.Reason != metav1.StatusReasonForbidden):
		t.Errorf("refused with %s %q, want Forbidden %q", got.Reason, got.Message, want)
	}
}

// TestCostStaysWithinTheAPIServersBudget evaluates every rule on the
// updater's change of Jobs of up to 100 containers (the expressions compare
// containers pairwise), of a VPA, and of pods of up to 100 boosted
// containers, and prints the cost: each must stay
// within the budget the API server gives one policy, with room to spare.
func TestCostStaysWithinTheAPIServersBudget(t *testing.T) {
	ps := load(t)
	budget := int64(celconfig.RuntimeCELCostBudget)
	for _, n := range []int{1, 10, 100} {
		req := jobUpdate(job(n), func(j *batchv1.Job) {
			for i := range j.Spec.Template.Spec.Containers {
				j.Spec.Template.Spec.Containers[i].Resources = requests("1", "1Gi")
			}
		})
		if d := ps["vpa-inplace-updater-jobs"].Validate(context.Background(), req); d.Denied {
			t.Fatalf("%d containers: refused: %s", n, d.Message)
		}
		cost, err := ps["vpa-inplace-updater-jobs"].Cost(context.Background(), req)
		if err != nil {
			t.Fatalf("%d containers: %v", n, err)
		}
		t.Logf("Job of %3d containers: cost %8d (%.3f%% of the budget %d)", n, cost, 100*float64(cost)/float64(budget), budget)
		if cost <= 0 || cost > budget/10 {
			t.Errorf("Job of %d containers: cost %d, want within a tenth of the budget %d", n, cost, budget)
		}
	}
	for _, n := range []int{1, 10, 100} {
		old := pod(n)
		for i := range 50 {
			old.Annotations[fmt.Sprintf("other.example/key-%d", i)] = strings.Repeat("x", 1<<10)
		}
		req := podUpdate(old, func(p *corev1.Pod) {
			for i := range p.Spec.Containers {
				delete(p.Annotations, boostKey(p.Spec.Containers[i].Name))
			}
		})
		if d := ps["vpa-inplace-updater-pods"].Validate(context.Background(), req); d.Denied {
			t.Fatalf("pod of %d containers: refused: %s", n, d.Message)
		}
		cost, err := ps["vpa-inplace-updater-pods"].Cost(context.Background(), req)
		if err != nil {
			t.Fatalf("pod of %d containers: %v", n, err)
		}
		t.Logf("pod of %3d boosted containers and 50 other annotations: cost %8d (%.3f%% of the budget)", n, cost, 100*float64(cost)/float64(budget))
		if cost <= 0 || cost > budget/10 {
			t.Errorf("pod of %d containers: cost %d, want within a tenth of the budget %d", n, cost, budget)
		}
	}
	full := recordsConfigMap("infeasible")
	full.Data["records"] = strings.Repeat("x", 1000<<10)
	for i := range 50 {
		full.Labels[fmt.Sprintf("other.example/key-%d", i)] = "x"
	}
	cmReq := cmUpdate(full, func(cm *corev1.ConfigMap) { cm.Data["records"] = strings.Repeat("y", 1000<<10) })
	if d := ps["vpa-inplace-updater-configmaps"].Validate(context.Background(), cmReq); d.Denied {
		t.Fatalf("records ConfigMap: refused: %s", d.Message)
	}
	cost, err := ps["vpa-inplace-updater-configmaps"].Cost(context.Background(), cmReq)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("records ConfigMap of 1,000 KiB and 52 labels: cost %d (%.3f%% of the budget)", cost, 100*float64(cost)/float64(budget))
	if cost <= 0 || cost > budget/10 {
		t.Errorf("records ConfigMap: cost %d, want within a tenth of the budget %d", cost, budget)
	}
	bucket := installBucket(deployInstall, 63)
	for i := range 256 {
		bucket.Data[fmt.Sprintf("4c1f3c9e-0000-4000-8000-%012d", i)] = strings.Repeat("x", 1<<10)
	}
	bucketReq := cmUpdate(bucket, func(cm *corev1.ConfigMap) { delete(cm.Data, "4c1f3c9e-0000-4000-8000-000000000000") })
	if d := ps["vpa-inplace-updater-configmaps"].Validate(context.Background(), bucketReq); d.Denied {
		t.Fatalf("node room bucket: refused: %s", d.Message)
	}
	cost, err = ps["vpa-inplace-updater-configmaps"].Cost(context.Background(), bucketReq)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node room bucket of 256 entries of 1 KiB: cost %d (%.3f%% of the budget)", cost, 100*float64(cost)/float64(budget))
	if cost <= 0 || cost > budget/10 {
		t.Errorf("node room bucket: cost %d, want within a tenth of the budget %d", cost, budget)
	}
	req := vpaUpdate("", func(o map[string]any) { annotations(o)[recordsKey] = strings.Repeat("x", 64<<10) })
	cost, err = ps["vpa-inplace-updater-vpas"].Cost(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("VPA with a 64 KiB record annotation: cost %d (%.3f%% of the budget)", cost, 100*float64(cost)/float64(budget))
	if cost <= 0 || cost > budget/10 {
		t.Errorf("VPA: cost %d, want within a tenth of the budget %d", cost, budget)
	}
}
