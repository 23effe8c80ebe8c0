//go:build e2e

package e2e

// Custom controllers (README "Custom controllers"): pods created directly by
// a custom resource, as Strimzi's StrimziPodSet creates Kafka pods. Each test
// installs its own CustomResourceDefinition in the group e2e.vpa-inplace.dev
// and removes it afterwards; the test creates the pods itself, with a
// controller ownerReference to the custom resource, as the custom
// controller would.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

const (
	customGroup      = "e2e.vpa-inplace.dev"
	customAPIVersion = customGroup + "/v1"
	// servingGate is the readiness gate of the budget test's pods: the test
	// makes a pod unready by setting this condition False.
	servingGate corev1.PodConditionType = customGroup + "/serving"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// A VPA targeting a custom resource without /scale resizes the pods the
// resource controls, in place, and no other pod; a pod the resource creates
// later gets the recommendation at admission.
func TestCustomControllerResizedInPlace(t *testing.T) {
	parallel(t)
	podSets := installCRD(t, "podsets", "PodSet", false)
	ns := newNamespace(t, nil)
	kafka := createCustomResource(t, podSets, ns, "PodSet", "kafka", nil)
	zoo := createCustomResource(t, podSets, ns, "PodSet", "zoo", nil)
	pods := createOwnedPods(t, ns, kafka, ownedPod{count: 3})
	zooPods := createOwnedPods(t, ns, zoo, ownedPod{count: 1})
	before := snap(pods)

	newCustomVPA(t, ns, "kafka", "PodSet", "kafka")
	recommend(t, ns, "kafka", "200m", "150Mi")
	for _, p := range pods {
		got := waitResized(t, ns, p.Name, "200m", "150Mi")
		assert.Equal(t, p.Generation+1, got.Generation, "exactly one resize patch for pod %s", p.Name)
		waitEvent(t, ns, p.Name, eventSent, 1)
	}
	requireNotDisrupted(t, ns, "kafka", before)
	requireStable(t, ns, zooPods[0].Name)
	assert.Equal(t, "100m", getPod(t, ns, zooPods[0].Name).Spec.Containers[0].Resources.Requests.Cpu().String(),
		"another PodSet's pod is not the VPA's")

	// A pod the PodSet creates now gets the recommendation at creation.
	created, err := kube.CoreV1().Pods(ns).Create(ctxFor(t), ownedPod{node: nodeFor(t)}.pod(ns, kafka, "kafka-new"), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "200m", created.Spec.Containers[0].Resources.Requests.Cpu().String(), "admission applies the recommendation")
	assert.Equal(t, "150Mi", created.Spec.Containers[0].Resources.Requests.Memory().String())
}

// Resizes that restart containers respect --eviction-tolerance (0.5 in the
// suite) counted from the pods the custom resource owns: of its 4 pods, at
// most 2 may be disrupted at once. Two pods are made unready (they count as
// disrupted): each of them sees one other disrupted pod and is resized; the
// two ready pods see two and wait. Once the first two are ready again, the
// other two are resized. Counting the custom resource's replicas as 0 would
// allow one pod at a time (none of the first two could go); approving every
// pod, as upstream's updater does for custom controllers, would resize the
// ready pods at once.
func TestCustomControllerDisruptionBudget(t *testing.T) {
	podSets := installCRD(t, "podsets", "PodSet", false)
	ns := newNamespace(t, nil)
	kafka := createCustomResource(t, podSets, ns, "PodSet", "kafka", nil)
	spec := ownedPod{count: 4, gated: true, policy: []corev1.ContainerResizePolicy{
		{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer},
		{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.NotRequired},
	}}
	pods := createOwnedPods(t, ns, kafka, spec)
	uids := map[string]types.UID{}
	for _, p := range pods {
		uids[p.Name] = p.UID
	}
	unready, waiting := []string{pods[0].Name, pods[1].Name}, []string{pods[2].Name, pods[3].Name}
	for _, name := range unready {
		setGate(t, ns, name, corev1.ConditionFalse)
	}
	for _, name := range unready {
		waitReady(t, ns, name, false)
	}

	newCustomVPA(t, ns, "kafka", "PodSet", "kafka")
	recommend(t, ns, "kafka", "200m", "100Mi")
	for _, name := range unready {
		waitResized(t, ns, name, "200m", "100Mi")
	}
	waitConditionMessage(t, ns, "kafka", "2 pods wait for the eviction tolerance")
	// A resize bumps the generation, which never goes back: watching one
	// pod for the settle time and reading the other's generation after it
	// covers both.
	requireStable(t, ns, waiting[0])
	for i, name := range waiting {
		p := getPod(t, ns, name)
		assert.Equal(t, pods[2+i].Generation, p.Generation, "no resize sent to %s while two pods are disrupted", name)
		assert.Equal(t, "100m", p.Spec.Containers[0].Resources.Requests.Cpu().String())
	}

	for _, name := range unready {
		setGate(t, ns, name, corev1.ConditionTrue)
	}
	for _, name := range waiting {
		waitResized(t, ns, name, "200m", "100Mi")
	}
	for _, p := range podsOf(t, ns, "kafka") {
		assert.Equal(t, uids[p.Name], p.UID, "pod %s is the same pod: resized, never evicted or recreated", p.Name)
	}
	assert.Len(t, podsOf(t, ns, "kafka"), len(uids))
}

// A custom resource with a /scale subresource (status.selector) is resolved
// as upstream VPA resolves it: its pods are those its selector matches whose
// top-most controller it is.
func TestScalableCustomControllerResizedInPlace(t *testing.T) {
	parallel(t)
	sets := installCRD(t, "scalablesets", "ScalableSet", true)
	ns := newNamespace(t, nil)
	web := createCustomResource(t, sets, ns, "ScalableSet", "web", map[string]any{"replicas": int64(2)})
	setScaleStatus(t, sets, ns, "web", 2, "app=web")
	pods := createOwnedPods(t, ns, web, ownedPod{count: 2})
	before := snap(pods)

	newCustomVPA(t, ns, "web", "ScalableSet", "web")
	recommend(t, ns, "web", "250m", "200Mi")
	for _, p := range pods {
		waitResized(t, ns, p.Name, "250m", "200Mi")
	}
	requireNotDisrupted(t, ns, "web", before)
}

// installCRD creates a namespaced CustomResourceDefinition <plural>.<group>
// (version v1, any content, a status subresource, and /scale when scale is
// set), waits until discovery serves it, and deletes it when the test ends.
func installCRD(t *testing.T, plural, kind string, scale bool) schema.GroupVersionResource {
	t.Helper()
	ctx := ctxFor(t)
	name := plural + "." + customGroup
	deleteCRD(t, name) // left over from an interrupted run
	subresources := map[string]any{"status": map[string]any{}}
	if scale {
		subresources["scale"] = map[string]any{
			"specReplicasPath":   ".spec.replicas",
			"statusReplicasPath": ".status.replicas",
			"labelSelectorPath":  ".status.selector",
		}
	}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"group": customGroup,
			"scope": "Namespaced",
			"names": map[string]any{
				"plural": plural, "singular": strings.ToLower(kind), "kind": kind, "listKind": kind + "List",
			},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object", "x-kubernetes-preserve-unknown-fields": true,
				}},
				"subresources": subresources,
			}},
		},
	}}
	_, err := dyn.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { deleteCRD(t, name) })

	waitFor(t, eventually, "CRD "+name+" established", func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conditions {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	want := []string{plural}
	if scale {
		want = append(want, plural+"/scale")
	}
	waitFor(t, eventually, "discovery of "+name, func(context.Context) (bool, error) {
		list, err := kube.Discovery().ServerResourcesForGroupVersion(customAPIVersion)
		if err != nil {
			return false, nil
		}
		served := map[string]bool{}
		for _, r := range list.APIResources {
			served[r.Name] = true
		}
		for _, w := range want {
			if !served[w] {
				return false, nil
			}
		}
		return true, nil
	})
	return schema.GroupVersionResource{Group: customGroup, Version: "v1", Resource: plural}
}

// deleteCRD deletes a CRD, if present, and waits until it is gone (with its
// custom resources).
func deleteCRD(t *testing.T, name string) {
	t.Helper()
	err := dyn.Resource(crdGVR).Delete(context.Background(), name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	require.NoError(t, err)
	waitFor(t, eventually, "CRD "+name+" deleted", func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func createCustomResource(t *testing.T, gvr schema.GroupVersionResource, ns, kind, name string, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	if spec == nil {
		spec = map[string]any{}
	}
	obj, err := dyn.Resource(gvr).Namespace(ns).Create(ctxFor(t), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": customAPIVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return obj
}

// setScaleStatus writes the status the /scale subresource reads.
func setScaleStatus(t *testing.T, gvr schema.GroupVersionResource, ns, name string, replicas int64, selector string) {
	t.Helper()
	obj, err := dyn.Resource(gvr).Namespace(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedMap(obj.Object, map[string]any{"replicas": replicas, "selector": selector}, "status"))
	_, err = dyn.Resource(gvr).Namespace(ns).UpdateStatus(ctxFor(t), obj, metav1.UpdateOptions{})
	require.NoError(t, err)
	scale, err := dyn.Resource(gvr).Namespace(ns).Get(ctxFor(t), name, metav1.GetOptions{}, "scale")
	require.NoError(t, err)
	got, _, _ := unstructured.NestedString(scale.Object, "status", "selector")
	require.Equal(t, selector, got, "/scale serves the selector")
}

// ownedPod describes the pods a custom resource creates: container "app"
// with requests 100m/100Mi and limits 200m/200Mi, label app=<owner name>.
type ownedPod struct {
	// node is where the pods run (createOwnedPods: nodeFor(t) if empty).
	node   string
	count  int
	policy []corev1.ContainerResizePolicy
	// gated pods have the readiness gate servingGate; they start unready
	// and createOwnedPods makes them ready.
	gated bool
}

func (o ownedPod) pod(ns string, owner *unstructured.Unstructured, name string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels: map[string]string{"app": owner.GetName()},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(),
				Controller: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": o.node},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:         "app",
				Image:        "registry.invalid/app:1",
				Resources:    corev1.ResourceRequirements{Requests: rl("100m", "100Mi"), Limits: rl("200m", "200Mi")},
				ResizePolicy: o.policy,
			}},
		},
	}
	if o.gated {
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: servingGate}}
	}
	return p
}

// createOwnedPods creates the pods <owner>-0 ... and waits until they run
// and are ready.
func createOwnedPods(t *testing.T, ns string, owner *unstructured.Unstructured, o ownedPod) []corev1.Pod {
	t.Helper()
	if o.node == "" {
		o.node = nodeFor(t)
	}
	var names []string
	for i := range o.count {
		name := fmt.Sprintf("%s-%d", owner.GetName(), i)
		_, err := kube.CoreV1().Pods(ns).Create(ctxFor(t), o.pod(ns, owner, name), metav1.CreateOptions{})
		require.NoError(t, err)
		names = append(names, name)
	}
	if o.gated {
		for _, name := range names {
			waitFor(t, eventually, "pod "+name+" running", func(context.Context) (bool, error) {
				return getPod(t, ns, name).Status.Phase == corev1.PodRunning, nil
			})
			setGate(t, ns, name, corev1.ConditionTrue)
		}
	}
	pods := make([]corev1.Pod, 0, len(names))
	for _, name := range names {
		waitReady(t, ns, name, true)
		pods = append(pods, *getPod(t, ns, name))
	}
	return pods
}

// setGate sets the pod's servingGate condition, as the component that owns
// the readiness gate would; the kubelet then sets Ready accordingly.
func setGate(t *testing.T, ns, pod string, status corev1.ConditionStatus) {
	t.Helper()
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":%q,"lastTransitionTime":%q}]}}`,
		servingGate, status, time.Now().UTC().Format(time.RFC3339))
	_, err := kube.CoreV1().Pods(ns).Patch(ctxFor(t), pod, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	require.NoError(t, err)
}

func waitReady(t *testing.T, ns, pod string, want bool) {
	t.Helper()
	waitFor(t, eventually, fmt.Sprintf("pod %s ready=%t", pod, want), func(context.Context) (bool, error) {
		p := getPod(t, ns, pod)
		return p.Status.Phase == corev1.PodRunning && ready(p) == want, nil
	})
}

// newCustomVPA creates an InPlace VPA targeting the custom resource
// <kind>.e2e.vpa-inplace.dev <target>.
func newCustomVPA(t *testing.T, ns, name, kind, target string) {
	t.Helper()
	mode := vpatypes.UpdateModeInPlace
	_, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Create(ctxFor(t), &vpatypes.VerticalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: vpatypes.VerticalPodAutoscalerSpec{
			TargetRef:    &autoscalingv1.CrossVersionObjectReference{APIVersion: customAPIVersion, Kind: kind, Name: target},
			UpdatePolicy: &vpatypes.PodUpdatePolicy{UpdateMode: &mode},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// waitConditionMessage waits until the VPA's InPlaceResizeBlocked condition
// message contains part.
func waitConditionMessage(t *testing.T, ns, name, part string) {
	t.Helper()
	var last string
	waitFor(t, eventually, fmt.Sprintf("condition %s of VPA %s saying %q", conditionBlocked, name, part), func(ctx context.Context) (bool, error) {
		v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range v.Status.Conditions {
			if c.Type == conditionBlocked {
				last = c.Reason + ": " + c.Message
				return strings.Contains(c.Message, part), nil
			}
		}
		return false, nil
	})
	t.Logf("%s: %s", conditionBlocked, last)
}
