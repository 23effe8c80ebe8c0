package updater

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/gate"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/noderoom"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/noderoom/buckets"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// Sending only what the node can take. A resize the node has no room for is
// held Deferred by the kubelet; for some operators that state is not
// harmless: Strimzi's reconcilers restart a Kafka pod whose resize shows
// PodResizePending Deferred or Infeasible, whoever made it. For such pods the
// updater checks the node before the patch (its allocatable less what the
// other pods bound to it hold, of every namespace, and what the resizes it
// sent and the cache does not show yet take: pkg/resize.FitsNode,
// pkg/updater/noderoom) and sends nothing that does not fit: the pod waits,
// reported as WaitingForNodeCapacity, and is looked at again when a pod on
// its node goes or shrinks, a resize's room is given back, or the node's
// allocatable changes. Check and hold are one step: workers deciding on two
// pods of one node at once cannot both take the last room.

// ResizeWhenAnnotation on a VPA chooses when its pods' resizes are sent:
// ResizeWhenFitsNode or ResizeWhenAlways. Without it: fits-node for pods
// controlled by a StrimziPodSet, always otherwise.
const (
	ResizeWhenAnnotation = "vpa-inplace.dev/resize-when"
	// ResizeWhenFitsNode: only resizes the node can take now are sent.
	ResizeWhenFitsNode = "fits-node"
	// ResizeWhenAlways: resizes are sent, and the kubelet may defer them.
	ResizeWhenAlways = "always"
)

// nodeIndex indexes pods by the node they are bound to.
const nodeIndex = "vpa-inplace/node"

func indexByNode(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil, nil
	}
	return []string{pod.Spec.NodeName}, nil
}

// strimziPodSets is the kind whose pods Strimzi restarts on a Deferred
// resize.
var strimziPodSets = schema.GroupKind{Group: "core.strimzi.io", Kind: "StrimziPodSet"}

// fitsNodeOnly tells whether pod's resizes are sent only when they fit its
// node (the VPA's annotation, or the default for the pod's controller).
func fitsNodeOnly(vpa *vpatypes.VerticalPodAutoscaler, pod *corev1.Pod) bool {
	switch strings.TrimSpace(vpa.Annotations[ResizeWhenAnnotation]) {
	case ResizeWhenFitsNode:
		return true
	case ResizeWhenAlways:
		return false
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && (schema.GroupKind{Group: gv.Group, Kind: ref.Kind}) == strimziPodSets
}

// SharedRoom reserves node room through the API, across the spans of
// shards of a replica and across replicas (pkg/updater/noderoom/buckets):
// with shards, two controllers deciding on pods of one node are not one
// process, and the ledger of each sees only its own resizes.
type SharedRoom interface {
	// Reserve writes the reservation of a fits-node resize if it fits,
	// counting every replica's reservations on the node.
	Reserve(ctx context.Context, r buckets.Request) buckets.Answer
	// Release removes the reservation of a pod's resize, if any: it was not
	// sent, was refused, or the pod went.
	Release(pod *corev1.Pod)
	// Seen removes the reservation of a pod's resize once the node view
	// (pod is its object) shows it.
	Seen(pod *corev1.Pod)
	// Subscribe calls fn with each node whose reservations went.
	Subscribe(fn func(node string)) (cancel func())
}

var _ SharedRoom = (*buckets.Reservations)(nil)

// reserveRoom holds the room pod, resized to target, takes of its node
// (noderoom), in one step with the check when its VPA sends only what fits:
// a resize that does not fit is refused, with what is short. Every resize
// sent to a bound pod holds its room, checked or not, so that the fits-node
// pods of its node count it before the cache shows it. Without a node cache
// (or before the pod is bound, or with its node gone from the cache) a
// resize fits: the kubelet has the last word.
// A revert after harm (check) is checked whatever the VPA says: the pod had
// that room before, and when the node has filled since, it waits and says
// so rather than being held Deferred.
// With shards (c.shared), a checked resize that the ledger lets through is
// then reserved through the API, against every replica's reservations on
// the node, before it may be sent; refused there, the ledger's hold is
// given back. until is when a refusal may end by time alone.
func (c *Controller) reserveRoom(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler, pod *corev1.Pod, target resources.Resources, check bool) (fits bool, why string, until time.Time) {
	if c.room == nil || pod.Spec.NodeName == "" {
		return true, "", time.Time{}
	}
	var node *corev1.Node
	if check || fitsNodeOnly(vpa, pod) {
		if n, err := c.nodes.Get(pod.Spec.NodeName); err == nil {
			node = n
		}
	}
	if fits, why = c.room.Reserve(pod, target, node); !fits || node == nil || c.shared == nil {
		return fits, why, time.Time{}
	}
	a := c.shared.Reserve(ctx, buckets.Request{Pod: pod, Target: target, Node: node, Pods: c.podsOnNode(node.Name), Held: c.room.Held(node.Name, pod.UID)})
	if !a.Fits {
		// Given back without queueing the pods waiting for room on the
		// node: they would be refused as this one was, and queue it
		// again. They are queued when a reservation of the node goes
		// (Subscribe), or when one counted expires (until).
		c.room.Release(pod)
		return false, a.Why, a.Until
	}
	return true, "", time.Time{}
}

// releaseRoom gives back the room a pod's resize held: nothing was
// applied. The pods waiting for room on its node are looked at again.
func (c *Controller) releaseRoom(pod *corev1.Pod) {
	if c.shared != nil {
		c.shared.Release(pod)
	}
	if c.room != nil && c.room.Release(pod) {
		c.enqueueWaitingOnNode(pod.Spec.NodeName)
	}
}

// roomGate holds the room every resize sent to a bound pod takes of its
// node, checked first for a fits-node pod and for a revert (reserveRoom).
// The room is kept while the resize is, or may be, on its way to the cache,
// and given back otherwise.
type roomGate struct{ c *Controller }

func (roomGate) Name() string { return "node room" }

func (roomGate) Scope() gate.Scope { return gate.Changes | gate.Boosts | gate.Reverts }

func (g roomGate) Admit(ctx context.Context, a *attempt) gate.Verdict {
	fits, why, until := g.c.reserveRoom(ctx, a.vpa, a.pod, a.d.Target, a.Class().Revert)
	if fits {
		return passed
	}
	a.amend(resize.WaitForNode(a.d, why))
	return gate.Verdict{Answer: gate.Wait, Reason: "NodeCapacity", Why: why, Until: until}
}

func (g roomGate) Release(_ context.Context, a *attempt, o gate.Outcome) {
	if !o.MayApply() {
		g.c.releaseRoom(a.pod)
	}
}

// roomHolds counts the holds of node room, for the gauge.
func (c *Controller) roomHolds() int {
	if c.room == nil {
		return 0
	}
	return c.room.Len()
}

// podsOnNode returns the cached pods bound to node (noderoom.Pods).
func (c *Controller) podsOnNode(node string) []*corev1.Pod {
	objs, err := c.nodePodIdx.ByIndex(nodeIndex, node)
	if err != nil {
		return nil
	}
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// watchNodePods sets up what fits-node reads of the pods bound to nodes:
// deps.NodePods, cluster-wide, or the pods' own cache when it is the same
// (an updater serving every namespace).
func (c *Controller) watchNodePods(logger klog.Logger, deps Deps) error {
	nodePods := deps.NodePods
	if nodePods == nil || nodePods.Informer().GetIndexer() == deps.Pods.Informer().GetIndexer() {
		c.nodePodIdx = deps.Pods.Informer().GetIndexer()
		c.room = noderoom.New(deps.Clock, c.podsOnNode)
		c.roomSeenByPods = true
		return nil
	}
	informer := nodePods.Informer()
	if err := addIndexers(informer, cache.Indexers{nodeIndex: indexByNode}); err != nil {
		return fmt.Errorf("adding the node index of the pods bound to nodes: %w", err)
	}
	if err := c.handle(informer, cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, obj any) {
			old, okOld := oldObj.(*corev1.Pod)
			pod, ok := obj.(*corev1.Pod)
			if okOld && ok && freesRoom(old, pod) {
				c.enqueueWaitingOnNode(pod.Spec.NodeName)
			}
			if okOld && ok {
				c.room.Seen(pod)
				if c.shared != nil {
					c.shared.Seen(pod)
				}
				c.observePreemption(logger, old, pod)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				if c.shared != nil {
					c.shared.Release(pod)
				}
				c.enqueueWaitingOnNode(pod.Spec.NodeName)
				c.preemptionGone(pod)
			}
		},
	}); err != nil {
		return fmt.Errorf("adding the handler of the pods bound to nodes: %w", err)
	}
	logger.V(2).Info("Pods bound to nodes are watched cluster-wide, for the resizes sent only when they fit")
	c.nodePodIdx = informer.GetIndexer()
	c.synced = append(c.synced, informer.HasSynced)
	c.room = noderoom.New(deps.Clock, c.podsOnNode)
	return nil
}

// enqueueWaitingOnNode queues the pods whose resize waits for room on node.
func (c *Controller) enqueueWaitingOnNode(node string) {
	if node == "" {
		return
	}
	for _, key := range waiting(c.tracker, func(s state.Pod) bool { return s.State == state.PodWaitingForNode && s.Values == node }) {
		c.queue.Add(key)
	}
}

// onNode queues the pods waiting for room on a node whose allocatable
// changed.
func (c *Controller) onNode(oldObj, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	if old, ok := oldObj.(*corev1.Node); ok && equalLists(old.Status.Allocatable, node.Status.Allocatable) {
		return
	}
	c.enqueueWaitingOnNode(node.Name)
}

// freesRoom reports whether an update of a pod may leave more room on its
// node: it terminated, or a request went down.
func freesRoom(old, pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return old.Status.Phase != pod.Status.Phase
	}
	return requestDown(old.Spec.Containers, pod.Spec.Containers) || requestDown(old.Spec.InitContainers, pod.Spec.InitContainers)
}

// requestDown tells whether a container of now requests less than it did
// before (sidecars are init containers).
func requestDown(before, now []corev1.Container) bool {
	for i := range now {
		if i >= len(before) {
			break
		}
		for name, q := range before[i].Resources.Requests {
			if n, ok := now[i].Resources.Requests[name]; ok && n.Cmp(q) < 0 {
				return true
			}
		}
	}
	return false
}

func equalLists(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		if v, ok := b[name]; !ok || v.Cmp(q) != 0 {
			return false
		}
	}
	return true
}
