package target

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// wellKnownKinds are the controllers upstream VPA resolves through informers,
// by kind alone (whatever the API group), plus Node, which owns static pods
// and is never a target. A targetRef or an owner of one of these kinds is
// always left to upstream's resolution.
var wellKnownKinds = map[string]bool{
	"CronJob":               true,
	"DaemonSet":             true,
	"Deployment":            true,
	"Job":                   true,
	"Node":                  true,
	"ReplicaSet":            true,
	"ReplicationController": true,
	"StatefulSet":           true,
}

// Owner names a custom resource in a namespace: one that controls pods
// directly (the pods' targets are found through their controller
// ownerReference instead of a label selector), or one a pod reaches through
// its ownerReferences (reachableOwners).
type Owner struct {
	Namespace string
	// Group is the API group (the version does not matter: every version of
	// a resource names the same object).
	Group string
	Kind  string
	Name  string
}

// Key identifies the owner within the cluster; pods whose CustomOwnerOf has
// the same key are the owner's pods.
func (o Owner) Key() string {
	return o.Namespace + "/" + o.Group + "/" + o.Kind + "/" + o.Name
}

// String is "<kind>.<group> <namespace>/<name>".
func (o Owner) String() string {
	return o.Kind + "." + o.Group + " " + o.Namespace + "/" + o.Name
}

// customOwner returns the owner named by apiVersion, kind and name in
// namespace when it may be a custom resource: outside the core API group and
// not of a well-known kind.
func customOwner(namespace, apiVersion, kind, name string) (Owner, bool) {
	if kind == "" || name == "" || wellKnownKinds[kind] {
		return Owner{}, false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || gv.Group == "" {
		return Owner{}, false
	}
	return Owner{Namespace: namespace, Group: gv.Group, Kind: kind, Name: name}, true
}

// CustomOwnerOf returns the pod's controller (its ownerReference with
// controller: true) when that controller may be a custom resource: outside
// the core API group and not of a well-known kind.
func CustomOwnerOf(pod *corev1.Pod) (Owner, bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return Owner{}, false
	}
	return customOwner(pod.Namespace, ref.APIVersion, ref.Kind, ref.Name)
}

// Target is how the pods of a VPA are found: either by a label selector (the
// targetRef is a well-known controller or has a /scale subresource, as
// upstream VPA resolves it) or by their controller (the targetRef is a
// custom resource without /scale).
type Target struct {
	// Selector selects the target's pods by label; nil when Owner is set.
	Selector labels.Selector
	// Owner, when set, is the custom resource whose pods (those whose
	// controller ownerReference names it) the VPA targets.
	Owner *Owner
}

// String describes the target for logs.
func (t Target) String() string {
	if t.Owner != nil {
		return "pods controlled by " + t.Owner.String()
	}
	if t.Selector == nil {
		return "nothing"
	}
	return "pods matching " + strings.TrimSpace(t.Selector.String())
}
