//go:build e2e

package e2e

// Kafka on Strimzi (README "Kafka on Strimzi"): a VPA whose targetRef names a
// KafkaNodePool. The CRDs are of Strimzi's shape (testdata/strimzi-crds.yaml,
// in Strimzi's own API groups, so that the RBAC shipped for them is what is
// tested); the test plays the operator: it writes the pool's status
// (replicas, labelSelector), creates the StrimziPodSet owned by the pool
// (controller: false) and the broker pods controlled by the pod set.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

var (
	nodePoolGVR = schema.GroupVersionResource{Group: "kafka.strimzi.io", Version: "v1", Resource: "kafkanodepools"}
	podSetGVR   = schema.GroupVersionResource{Group: "core.strimzi.io", Version: "v1", Resource: "strimzipodsets"}
)

// The pool's selector, as Strimzi writes it into status.labelSelector.
const brokerSelector = "strimzi.io/cluster=my-cluster,strimzi.io/kind=Kafka,strimzi.io/name=my-cluster-kafka,strimzi.io/pool-name=brokers"

// A VPA on a KafkaNodePool resizes its 3 brokers in place (same pods, no
// restart), and not a pod its selector matches that does not belong to the
// pool; a broker created later gets the recommendation at admission.
func TestStrimziNodePoolResizedInPlace(t *testing.T) {
	parallel(t)
	installStrimziCRDs(t)
	ns := newNamespace(t, nil)
	kafka := newKafkaCluster(t, ns, nodeFor(t))
	// A pod set the pool does not own, whose pod the pool's selector matches.
	stray := createPodSet(t, ns, "stray", nil)
	strayPod := createBrokers(t, ns, stray, nodeFor(t), "stray", 1)[0]

	newPoolVPA(t, ns, nil)
	recommendKafka(t, ns, "500m", "150Mi")
	for _, p := range kafka.brokers {
		got := waitResized(t, ns, p.Name, "500m", "150Mi")
		assert.Equal(t, p.Generation+1, got.Generation, "exactly one resize patch for %s", p.Name)
		waitEvent(t, ns, p.Name, eventSent, 1)
	}
	waitConditionMessage(t, ns, "brokers", "3 pods: 3 resized or resizing.")
	requireNotDisrupted(t, ns, "my-cluster-brokers", kafka.before)
	requireStable(t, ns, strayPod.Name)
	assert.Equal(t, "200m", getPod(t, ns, strayPod.Name).Spec.Containers[0].Resources.Requests.Cpu().String(),
		"a pod the selector matches but which does not reach the pool is not the pool's")

	// The operator adds a broker: the admission controller gives it the
	// recommendation at creation.
	created, err := kube.CoreV1().Pods(ns).Create(ctxFor(t), brokerPod(ns, kafka.podSet, nodeFor(t), "my-cluster-brokers", "my-cluster-brokers-3"), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "500m", created.Spec.Containers[0].Resources.Requests.Cpu().String(), "admission applies the recommendation")
	assert.Equal(t, "150Mi", created.Spec.Containers[0].Resources.Requests.Memory().String())
}

// With the default policy of Strimzi's pods (resize-when: fits-node), while a
// filler pod leaves the node too little CPU, no resize is sent to any broker
// and none ever shows PodResizePending (which Strimzi answers by rolling the
// broker); once the filler goes, the three resizes are sent.
func TestStrimziNodePoolWaitsForNodeRoom(t *testing.T) {
	installStrimziCRDs(t)
	ns := newNamespace(t, nil)
	node := env("E2E_DEFERRED_NODE", "hollow-2")
	kafka := newKafkaCluster(t, ns, node)
	filler := fillLeaving(t, ns, node, "100m")
	seen := watchResizePending(t, ns)

	newPoolVPA(t, ns, nil)
	recommendKafka(t, ns, "500m", "100Mi")
	waitConditionMessage(t, ns, "brokers", "3 waiting for node capacity")
	requireStable(t, ns, kafka.brokers[0].Name)
	for _, p := range kafka.brokers {
		got := getPod(t, ns, p.Name)
		assert.Equal(t, p.Generation, got.Generation, "no resize sent to %s", p.Name)
		assert.Positive(t, eventCount(t, ns, p.Name, "InPlaceResizeWaitingForNodeCapacity"), "%s is reported waiting", p.Name)
	}

	require.NoError(t, kube.CoreV1().Pods(ns).Delete(ctxFor(t), filler, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	start := time.Now()
	for _, p := range kafka.brokers {
		got := waitResized(t, ns, p.Name, "500m", "100Mi")
		assert.Equal(t, p.Generation+1, got.Generation, "one resize patch for %s", p.Name)
	}
	t.Logf("3 brokers resized %s after the filler's deletion", time.Since(start).Round(10*time.Millisecond))
	assert.Empty(t, seen(), "no broker ever showed PodResizePending")
	requireNotDisrupted(t, ns, "my-cluster-brokers", kafka.before)
}

// The same VPA with resize-when: always sends the resizes, which the kubelet
// defers; the updater waits, never sending them again, as for any pod.
func TestStrimziNodePoolResizeWhenAlwaysIsDeferred(t *testing.T) {
	installStrimziCRDs(t)
	ns := newNamespace(t, nil)
	node := env("E2E_DEFERRED_NODE", "hollow-2")
	kafka := newKafkaCluster(t, ns, node)
	fillLeaving(t, ns, node, "100m")

	newPoolVPA(t, ns, map[string]string{"vpa-inplace.dev/resize-when": "always"})
	recommendKafka(t, ns, "500m", "100Mi")
	for _, p := range kafka.brokers {
		waitFor(t, eventually, "resize of "+p.Name+" Deferred", func(context.Context) (bool, error) {
			return strings.Contains(resizeConditions(getPod(t, ns, p.Name)), "Deferred"), nil
		})
	}
	requireStable(t, ns, kafka.brokers[0].Name)
	for _, p := range kafka.brokers {
		assert.Equal(t, p.Generation+1, getPod(t, ns, p.Name).Generation, "one patch to %s, then waiting", p.Name)
	}
	requireNotDisrupted(t, ns, "my-cluster-brokers", kafka.before)
}

// installStrimziCRDs creates the CRDs of testdata/strimzi-crds.yaml, waits
// until discovery serves them (with /scale for the pool), and deletes them
// when the test ends.
func installStrimziCRDs(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile("testdata/strimzi-crds.yaml")
	require.NoError(t, err)
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var crd unstructured.Unstructured
		if err := dec.Decode(&crd.Object); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		name := crd.GetName()
		deleteCRD(t, name) // left over from an interrupted run
		_, err := dyn.Resource(crdGVR).Create(ctxFor(t), &crd, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { deleteCRD(t, name) })
	}
	for gv, want := range map[string][]string{
		"kafka.strimzi.io/v1": {"kafkanodepools", "kafkanodepools/scale"},
		"core.strimzi.io/v1":  {"strimzipodsets"},
	} {
		waitFor(t, eventually, "discovery of "+gv, func(context.Context) (bool, error) {
			list, err := kube.Discovery().ServerResourcesForGroupVersion(gv)
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
	}
}

// kafkaCluster is a node pool "brokers" with its pod set and 3 running
// brokers.
type kafkaCluster struct {
	podSet  *unstructured.Unstructured
	brokers []corev1.Pod
	before  snapshot
}

// newKafkaCluster plays Strimzi's operator for a pool of 3 brokers on node:
// the KafkaNodePool with its status, the StrimziPodSet it owns with
// controller: false, the pods the pod set controls.
func newKafkaCluster(t *testing.T, ns, node string) kafkaCluster {
	t.Helper()
	pool, err := dyn.Resource(nodePoolGVR).Namespace(ns).Create(ctxFor(t), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kafka.strimzi.io/v1",
		"kind":       "KafkaNodePool",
		"metadata":   map[string]any{"name": "brokers", "labels": map[string]any{"strimzi.io/cluster": "my-cluster"}},
		"spec":       map[string]any{"replicas": int64(3), "roles": []any{"broker"}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedMap(pool.Object, map[string]any{
		"replicas": int64(3), "labelSelector": brokerSelector, "nodeIds": []any{int64(0), int64(1), int64(2)},
	}, "status"))
	_, err = dyn.Resource(nodePoolGVR).Namespace(ns).UpdateStatus(ctxFor(t), pool, metav1.UpdateOptions{})
	require.NoError(t, err)
	scale, err := dyn.Resource(nodePoolGVR).Namespace(ns).Get(ctxFor(t), "brokers", metav1.GetOptions{}, "scale")
	require.NoError(t, err)
	got, _, _ := unstructured.NestedString(scale.Object, "status", "selector")
	require.Equal(t, brokerSelector, got, "/scale serves the pool's selector")

	podSet := createPodSet(t, ns, "my-cluster-brokers", &metav1.OwnerReference{
		APIVersion: "kafka.strimzi.io/v1", Kind: "KafkaNodePool", Name: pool.GetName(), UID: pool.GetUID(),
		Controller: ptr.To(false), BlockOwnerDeletion: ptr.To(false),
	})
	brokers := createBrokers(t, ns, podSet, node, "my-cluster-brokers", 3)
	return kafkaCluster{podSet: podSet, brokers: brokers, before: snap(brokers)}
}

func createPodSet(t *testing.T, ns, name string, owner *metav1.OwnerReference) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "core.strimzi.io/v1",
		"kind":       "StrimziPodSet",
		"metadata":   map[string]any{"name": name, "labels": map[string]any{"strimzi.io/cluster": "my-cluster"}},
		"spec":       map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"strimzi.io/pool-name": "brokers"}}},
	}}
	if owner != nil {
		obj.SetOwnerReferences([]metav1.OwnerReference{*owner})
	}
	created, err := dyn.Resource(podSetGVR).Namespace(ns).Create(ctxFor(t), obj, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

// brokerPod is a broker as a StrimziPodSet creates it: controlled by the pod
// set, with Strimzi's labels (and app=<app>, by which the suite's helpers
// find pods), container "kafka" requesting 200m and 100Mi.
func brokerPod(ns string, podSet *unstructured.Unstructured, node, app, name string) *corev1.Pod {
	l := map[string]string{"app": app}
	for _, kv := range strings.Split(brokerSelector, ",") {
		k, v, _ := strings.Cut(kv, "=")
		l[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, Labels: l,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: podSet.GetAPIVersion(), Kind: podSet.GetKind(), Name: podSet.GetName(), UID: podSet.GetUID(),
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:      "kafka",
				Image:     "registry.invalid/kafka:1",
				Resources: corev1.ResourceRequirements{Requests: rl("200m", "100Mi")},
			}},
		},
	}
}

// createBrokers creates the pods <prefix>-0 ... controlled by podSet and
// waits until they run and are ready.
func createBrokers(t *testing.T, ns string, podSet *unstructured.Unstructured, node, prefix string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		_, err := kube.CoreV1().Pods(ns).Create(ctxFor(t), brokerPod(ns, podSet, node, prefix, name), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		waitReady(t, ns, name, true)
		pods = append(pods, *getPod(t, ns, name))
	}
	return pods
}

// newPoolVPA creates the InPlace VPA "brokers" on the KafkaNodePool, as the
// README writes it.
func newPoolVPA(t *testing.T, ns string, annotations map[string]string) {
	t.Helper()
	mode := vpatypes.UpdateModeInPlace
	_, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Create(ctxFor(t), &vpatypes.VerticalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "brokers", Annotations: annotations},
		Spec: vpatypes.VerticalPodAutoscalerSpec{
			TargetRef:    &autoscalingv1.CrossVersionObjectReference{APIVersion: "kafka.strimzi.io/v1", Kind: "KafkaNodePool", Name: "brokers"},
			UpdatePolicy: &vpatypes.PodUpdatePolicy{UpdateMode: &mode},
			ResourcePolicy: &vpatypes.PodResourcePolicy{ContainerPolicies: []vpatypes.ContainerResourcePolicy{{
				ContainerName:       "kafka",
				ControlledResources: &[]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory},
			}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// recommendKafka writes a recommendation for container "kafka" into the
// status of VPA "brokers", as a recommender would.
func recommendKafka(t *testing.T, ns, cpu, mem string) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(context.Background(), "brokers", metav1.GetOptions{})
		if err != nil {
			return err
		}
		target := rl(cpu, mem)
		v.Status.Recommendation = &vpatypes.RecommendedPodResources{ContainerRecommendations: []vpatypes.RecommendedContainerResources{{
			ContainerName: "kafka", Target: target, LowerBound: target, UpperBound: target, UncappedTarget: target,
		}}}
		_, err = vpas.AutoscalingV1().VerticalPodAutoscalers(ns).UpdateStatus(context.Background(), v, metav1.UpdateOptions{})
		return err
	}))
}

// fillLeaving runs fill's pod on node with what leaves only free CPU there,
// once no pod of an earlier test is still terminating on the node, nor in a
// namespace being deleted (its pods would free room later). It returns the
// filler's name.
func fillLeaving(t *testing.T, ns, node, free string) string {
	t.Helper()
	var requested resource.Quantity
	waitFor(t, eventually, "no terminating pod on "+node, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
		if err != nil {
			return false, nil
		}
		requested = resource.Quantity{}
		terminating := map[string]bool{}
		for _, p := range list.Items {
			if _, ok := terminating[p.Namespace]; !ok {
				n, err := kube.CoreV1().Namespaces().Get(ctx, p.Namespace, metav1.GetOptions{})
				terminating[p.Namespace] = err != nil || n.DeletionTimestamp != nil
			}
			if p.DeletionTimestamp != nil || terminating[p.Namespace] {
				return false, nil
			}
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			for _, c := range p.Spec.Containers {
				requested.Add(*c.Resources.Requests.Cpu())
			}
		}
		return true, nil
	})
	n, err := kube.CoreV1().Nodes().Get(ctxFor(t), node, metav1.GetOptions{})
	require.NoError(t, err)
	size := n.Status.Allocatable.Cpu().DeepCopy()
	size.Sub(requested)
	size.Sub(resource.MustParse(free))
	require.Positive(t, size.MilliValue(), "node %s has room for the filler", node)
	t.Logf("node %s: allocatable %s, requested %s, filler %dm", node, n.Status.Allocatable.Cpu(), &requested, size.MilliValue())
	return fill(t, ns, node, fmt.Sprintf("%dm", size.MilliValue()))
}

// watchResizePending watches the namespace's pods until the test ends and
// returns a function listing the pods seen with PodResizePending so far.
func watchResizePending(t *testing.T, ns string) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				mu.Lock()
				seen = append(seen, "watch error: "+fmt.Sprint(ev.Object))
				mu.Unlock()
				return
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodResizePending {
					mu.Lock()
					seen = append(seen, fmt.Sprintf("%s %s/%s", p.Name, c.Reason, c.Message))
					mu.Unlock()
				}
			}
		}
		if ctx.Err() == nil {
			mu.Lock()
			seen = append(seen, "the watch ended before the test")
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}
