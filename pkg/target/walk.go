package target

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The walk up a pod's owners (the rule is in the package comment). Owners
// are followed through every ownerReference, controller or not, but never
// through or to a well-known controller or an object of the core API group:
// those are upstream's rule.

const (
	// MaxOwnerDepth bounds the walk: objects more than this many
	// ownerReferences away from the pod are not reached. Strimzi's broker
	// pods reach their KafkaNodePool in 2.
	MaxOwnerDepth = 4
	// MaxOwnerObjects bounds the objects one walk reaches, whatever the
	// number of ownerReferences each of them names.
	MaxOwnerObjects = 32
	// MaxOwnerReads bounds the objects one walk reads (cached reads
	// included): a broker pod of a Strimzi node pool reads one, its pod
	// set. Objects reached beyond it are not read: a walk that needs them
	// ends without them.
	MaxOwnerReads = 8
)

// OwnerReader reads the ownerReferences of an object a pod's walk reaches.
type OwnerReader interface {
	// OwnersOf returns the ownerReferences of o. uid is the UID the
	// ownerReference naming o gave ("" when it gave none). found is false
	// when there is no such object to walk through: it is gone, another
	// object (another UID) now has its name, its kind is not served or is
	// not namespaced, or it may not be read. An error means the read
	// failed and may succeed later.
	OwnersOf(ctx context.Context, o Owner, uid types.UID) (refs []metav1.OwnerReference, found bool, err error)
}

// walkStep is an object reached, to be read for its own owners.
type walkStep struct {
	owner Owner
	uid   types.UID
	depth int
}

// reachableOwners returns, breadth first, the custom resources reachable
// from pod through ownerReferences (see the package comment), the pod's
// own owners first, its controller before the others. want is keyed by the
// keys (Owner.Key) of the objects VPAs of the pod's namespace target: an
// object's ownerReferences are read only while some of them are not
// reached yet, so that a pod whose targets are all reached costs no read.
// The walk is bounded by MaxOwnerDepth, MaxOwnerObjects and MaxOwnerReads,
// never reaches an object twice (a cycle ends it), and goes on past an
// object that is missing or whose read fails; the errors of failed reads
// are returned, joined, with what was reached. It stops at once when ctx
// ends or the namespace's share of reads is in use (ErrNamespaceBusy),
// returning that error.
func reachableOwners[V any](ctx context.Context, read OwnerReader, pod *corev1.Pod, want map[string]V) ([]Owner, error) {
	seen := map[string]bool{}
	var reached []Owner
	var queue []walkStep
	missing := len(want)
	add := func(namespace string, refs []metav1.OwnerReference, depth int) {
		for _, ref := range refs {
			if len(seen) >= MaxOwnerObjects {
				return
			}
			o, ok := customOwner(namespace, ref.APIVersion, ref.Kind, ref.Name)
			if !ok || seen[o.Key()] {
				continue
			}
			seen[o.Key()] = true
			reached = append(reached, o)
			if _, ok := want[o.Key()]; ok {
				missing--
			}
			queue = append(queue, walkStep{owner: o, uid: ref.UID, depth: depth})
		}
	}
	add(pod.Namespace, controllerFirst(pod.OwnerReferences), 1)
	var errs []error
	for reads := 0; len(queue) > 0 && missing > 0 && reads < MaxOwnerReads; {
		s := queue[0]
		queue = queue[1:]
		if s.depth >= MaxOwnerDepth {
			continue
		}
		if err := ctx.Err(); err != nil {
			return reached, fmt.Errorf("walk stopped after %d reads: %w", reads, err)
		}
		reads++
		refs, found, err := read.OwnersOf(ctx, s.owner, s.uid)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, ErrNamespaceBusy) {
				// Nothing more can be read now.
				return reached, err
			}
			errs = append(errs, err)
			continue
		}
		if found {
			add(s.owner.Namespace, refs, s.depth+1)
		}
	}
	return reached, errors.Join(errs...)
}

// controllerFirst returns refs with the controller reference first, the
// others in their order: a pod's controller is the likeliest way to its
// target, whatever else its ownerReferences name.
func controllerFirst(refs []metav1.OwnerReference) []metav1.OwnerReference {
	for i, ref := range refs {
		if ref.Controller != nil && *ref.Controller {
			if i == 0 {
				return refs
			}
			out := make([]metav1.OwnerReference, 0, len(refs))
			out = append(out, ref)
			out = append(out, refs[:i]...)
			return append(out, refs[i+1:]...)
		}
	}
	return refs
}
