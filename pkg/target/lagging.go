package target

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	controllerfetcher "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target/controller_fetcher"
)

// Upstream's resolution reads well-known controllers from informer caches,
// which lag the API server: a Deployment creates its ReplicaSet, and the
// ReplicaSet its pods, as soon as each exists, and the admission controller
// decides a pod once. From a lagging cache, a new pod of a new Deployment
// would get neither its recommendation nor its startup boost. When
// upstream's walk or selector fetch fails, what the caches lacked is read
// from the API server instead: budgeted, bounded in time, in its own API
// group only.

// builtinControllers are the API groups of the well-known controllers, by
// kind: those whose informer caches upstream's walk reads.
var builtinControllers = map[string]string{
	"DaemonSet":             "apps",
	"Deployment":            "apps",
	"ReplicaSet":            "apps",
	"StatefulSet":           "apps",
	"CronJob":               "batch",
	"Job":                   "batch",
	"ReplicationController": "",
}

// builtinGroup returns the API group of kind when kind is a well-known
// controller named in that group by apiVersion: a kind of the same name in
// another group (a tenant's CRD) is not one.
func builtinGroup(apiVersion, kind string) (group string, ok bool) {
	group, ok = builtinControllers[kind]
	if !ok {
		return "", false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || gv.Group != group {
		return "", false
	}
	return group, true
}

// pastLaggingCaches walks up from pod's controller once upstream's walk
// has failed (upstreamErr), in case a well-known controller on the way is
// only missing from the informer caches. Each well-known controller on the
// way, in its own API group, is read through the owner reader (its
// metadata: budgeted, cached, its UID checked against the ownerReference
// naming it), at most MaxOwnerDepth of them, and upstream's walk goes on
// from its controller. A controller missing from the API server as well
// (gone, or named by a tenant's made-up ownerReference) leaves upstream's
// error.
func (r *Resolver) pastLaggingCaches(ctx context.Context, pod *corev1.Pod, upstreamErr error) (*controllerfetcher.ControllerKeyWithAPIVersion, error) {
	ref := metav1.GetControllerOf(pod)
	if r.owners == nil || ref == nil {
		return nil, upstreamErr
	}
	for range MaxOwnerDepth {
		group, builtin := builtinGroup(ref.APIVersion, ref.Kind)
		if !builtin {
			return nil, upstreamErr
		}
		key := controllerKey(pod.Namespace, ref)
		refs, found, err := r.owners.OwnersOf(ctx, Owner{Namespace: pod.Namespace, Group: group, Kind: ref.Kind, Name: ref.Name}, ref.UID)
		switch {
		case err != nil:
			return nil, err
		case !found:
			return nil, upstreamErr
		}
		klog.FromContext(ctx).V(2).Info("Read a controller the informer caches lack from the API server",
			"pod", klog.KObj(pod), "controller", ref.Kind+" "+ref.Name, "cacheErr", upstreamErr)
		if ref = controllerRef(refs); ref == nil {
			return key, nil
		}
		parent, err := r.controllers.FindTopMostWellKnownOrScalable(ctx, controllerKey(pod.Namespace, ref))
		switch {
		case err == nil && parent == nil:
			// Above key, nothing well-known or scalable.
			return key, nil
		case err == nil:
			return parent, nil
		case ctx.Err() != nil:
			return nil, err
		}
		upstreamErr = err
	}
	return nil, upstreamErr
}

// controllerKey is upstream's key of the controller ref names in namespace.
func controllerKey(namespace string, ref *metav1.OwnerReference) *controllerfetcher.ControllerKeyWithAPIVersion {
	return &controllerfetcher.ControllerKeyWithAPIVersion{
		ControllerKey: controllerfetcher.ControllerKey{Namespace: namespace, Kind: ref.Kind, Name: ref.Name},
		ApiVersion:    ref.APIVersion,
	}
}

// controllerRef is the ownerReference of refs with controller set, if any.
func controllerRef(refs []metav1.OwnerReference) *metav1.OwnerReference {
	for i := range refs {
		if c := refs[i].Controller; c != nil && *c {
			return &refs[i]
		}
	}
	return nil
}

// SelectorReader reads the label selector of a well-known controller from
// the API server.
type SelectorReader interface {
	// Selector returns the selector of the object of kind (a key of
	// builtinControllers) named name in namespace, as upstream's selector
	// fetch makes it; found is false when there is no such object. An error
	// means the read failed and may succeed later.
	Selector(ctx context.Context, namespace, kind, name string) (sel labels.Selector, found bool, err error)
}

// WithSelectorReader makes the Resolver read the selector of a VPA's
// well-known target from the API server when upstream's fetch, from the
// informer caches, fails (selectorPastLaggingCaches).
func WithSelectorReader(s SelectorReader) Option {
	return func(r *Resolver) { r.liveSelectors = s }
}

// selectorPastLaggingCaches reads the selector of vpa's target when
// upstream's fetch (upstreamErr) has failed: the target may be missing from
// the informer caches only because they lag. A target missing from the API
// server as well leaves upstream's error.
func (r *Resolver) selectorPastLaggingCaches(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler, upstreamErr error) (labels.Selector, error) {
	ref := vpa.Spec.TargetRef
	if _, builtin := builtinGroup(ref.APIVersion, ref.Kind); r.liveSelectors == nil || !builtin {
		return nil, upstreamErr
	}
	sel, found, err := r.liveSelectors.Selector(ctx, vpa.Namespace, ref.Kind, ref.Name)
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, upstreamErr
	}
	klog.FromContext(ctx).V(2).Info("Read a VPA's target the informer caches lack from the API server",
		"vpa", klog.KObj(vpa), "target", ref.Kind+" "+ref.Name, "cacheErr", upstreamErr)
	return sel, nil
}

// APISelectors is a SelectorReader over a clientset. Each read takes a
// share of a ReadBudget (of the object's namespace) and is bounded by
// ownerReadTimeout.
type APISelectors struct {
	client kubernetes.Interface
	budget *ReadBudget
}

var _ SelectorReader = (*APISelectors)(nil)

// NewAPISelectors builds an APISelectors whose reads take shares of budget.
func NewAPISelectors(client kubernetes.Interface, budget *ReadBudget) *APISelectors {
	return &APISelectors{client: client, budget: budget}
}

// Selector implements SelectorReader.
func (a *APISelectors) Selector(ctx context.Context, namespace, kind, name string) (labels.Selector, bool, error) {
	release, err := a.budget.Acquire(ctx, namespace)
	if err != nil {
		return nil, false, err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, ownerReadTimeout)
	defer cancel()
	ls, err := a.read(ctx, namespace, kind, name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("reading %s %s/%s: %w", kind, namespace, name, err)
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, false, fmt.Errorf("the selector of %s %s/%s: %w", kind, namespace, name, err)
	}
	return sel, true, nil
}

// read returns the selector of the object as upstream's fetch reads it.
func (a *APISelectors) read(ctx context.Context, namespace, kind, name string) (*metav1.LabelSelector, error) {
	get := metav1.GetOptions{}
	apps, batch := a.client.AppsV1(), a.client.BatchV1()
	switch kind {
	case "Deployment":
		o, err := apps.Deployments(namespace).Get(ctx, name, get)
		if err != nil {
			return nil, err
		}
		return o.Spec.Selector, nil
	case "ReplicaSet":
		o, err := apps.ReplicaSets(namespace).Get(ctx, name, get)
		if err != nil {
			return nil, err
		}
		return o.Spec.Selector, nil
	case "StatefulSet":
		o, err := apps.StatefulSets(namespace).Get(ctx, name, get)
		if err != nil {
			return nil, err
		}
		return o.Spec.Selector, nil
	case "DaemonSet":
		o, err := apps.DaemonSets(namespace).Get(ctx, name, get)
		if err != nil {
			return nil, err
		}
		return o.Spec.Selector, nil
	case "Job":
		o, err := batch.Jobs(namespace).Get(ctx, name, get)
		if err != nil {
			return nil, err
		}
		return o.Spec.Selector, nil
	case "CronJob":
		o, err := batch.CronJobs(namespace).Get(ctx, name, get)
		if err != nil {
			return nil, err
		}
		return metav1.SetAsLabelSelector(o.Spec.JobTemplate.Spec.Template.Labels), nil
	case "ReplicationController":
		o, err := a.client.CoreV1().ReplicationControllers(namespace).Get(ctx, name, get)
		if err != nil {
			return nil, err
		}
		return metav1.SetAsLabelSelector(o.Spec.Selector), nil
	}
	return nil, fmt.Errorf("%s is not a well-known controller", kind)
}
