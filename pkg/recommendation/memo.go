package recommendation

import (
	"encoding/binary"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// memoShapes is how many pod shapes are remembered per VPA: two, so that
// while a VPA's pods are being resized, pods still at the old values and pods
// already at the new ones both find theirs.
const memoShapes = 2

// PodCalculator computes what a pod's containers should get: Calculator.
type PodCalculator interface {
	ForPod(*corev1.Pod, *vpatypes.VerticalPodAutoscaler) (Desired, error)
}

// Memo remembers what a PodCalculator computed, per VPA, for the last pod
// shapes it was asked about. What a pod should get depends only on the VPA
// object (its resourceVersion), the namespace's LimitRanges, and the names
// and current cpu and memory requests and limits of the pod's containers
// (its shape). The pods of a workload share one, so a pass over all pods
// computes once per VPA instead of once per pod.
//
// The Desired returned is shared: callers must not modify it. Safe for
// concurrent use.
type Memo struct {
	calc PodCalculator
	// limitRanges returns a number that changes whenever a LimitRange
	// changes (nil: LimitRanges never change).
	limitRanges func() uint64

	mu    sync.Mutex
	byVPA map[types.UID]*memoVPA
	// gone holds the UIDs of the VPAs forgotten lately, in the order of
	// goneOrder (at most memoGone): a worker that read a VPA before its
	// deletion and computes after Forget stores nothing for it.
	gone      map[types.UID]struct{}
	goneOrder []types.UID
}

// memoGone bounds the deleted VPAs remembered as gone: a worker holds a
// read of a VPA for one sync only, so the latest few suffice.
const memoGone = 1024

// memoVPA holds one VPA's remembered results, most recent first.
type memoVPA struct {
	version     string
	limitRanges uint64
	shapes      [memoShapes]memoShape
}

type memoShape struct {
	key     string
	desired Desired
}

// NewMemo returns a Memo over calc. limitRanges must return a value that
// changes once a LimitRange change is visible to calc (a count of the
// LimitRange informer's events does); nil when calc ignores LimitRanges.
func NewMemo(calc PodCalculator, limitRanges func() uint64) *Memo {
	return &Memo{calc: calc, limitRanges: limitRanges, byVPA: map[types.UID]*memoVPA{}, gone: map[types.UID]struct{}{}}
}

// ForPod returns what calc.ForPod returns for pod and vpa, computed once per
// VPA version, LimitRange version and pod shape. Errors are not remembered,
// nor results for a VPA without a resourceVersion (not read from the API
// server: nothing tells its versions apart).
func (m *Memo) ForPod(pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler) (Desired, error) {
	if pod == nil || vpa == nil || vpa.ResourceVersion == "" {
		return m.calc.ForPod(pod, vpa)
	}
	var generation uint64
	if m.limitRanges != nil {
		generation = m.limitRanges()
	}
	var buf [256]byte
	key := appendShape(buf[:0], pod)

	m.mu.Lock()
	entry := m.byVPA[vpa.UID]
	if entry != nil && entry.version == vpa.ResourceVersion && entry.limitRanges == generation {
		for _, s := range entry.shapes {
			if s.desired != nil && s.key == string(key) {
				m.mu.Unlock()
				return s.desired, nil
			}
		}
	}
	m.mu.Unlock()

	desired, err := m.calc.ForPod(pod, vpa)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, gone := m.gone[vpa.UID]; gone {
		return desired, nil
	}
	entry = m.byVPA[vpa.UID]
	if entry == nil || entry.version != vpa.ResourceVersion || entry.limitRanges != generation {
		// A worker holding an older read of the VPA replaces a newer
		// entry; the next pod puts it back.
		entry = &memoVPA{version: vpa.ResourceVersion, limitRanges: generation}
		m.byVPA[vpa.UID] = entry
	}
	copy(entry.shapes[1:], entry.shapes[:memoShapes-1])
	entry.shapes[0] = memoShape{key: string(key), desired: desired}
	return desired, nil
}

// Forget drops what is remembered for the VPA with uid (it was deleted).
func (m *Memo) Forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.byVPA, uid)
	if _, ok := m.gone[uid]; ok {
		return
	}
	if len(m.goneOrder) == memoGone {
		delete(m.gone, m.goneOrder[0])
		m.goneOrder = append(m.goneOrder[:0], m.goneOrder[1:]...)
	}
	m.gone[uid] = struct{}{}
	m.goneOrder = append(m.goneOrder, uid)
}

// Len returns the number of VPAs with results remembered.
func (m *Memo) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byVPA)
}

// appendShape appends to out what ForPod reads of pod besides its namespace:
// whether the pod exists (a UID: fit's rule for resizes), each container's
// kind (app container or sidecar), name and cpu and memory requests and
// limits, those the kubelet reports in the container's status when it does,
// else those of the spec (as upstream VPA reads them), in canonical form,
// followed by the spec's when they differ and the pod exists (fit compares
// with the spec), and the resources the pod sets at pod level. Quantities
// read from the API server are canonical, so equal strings are equal values
// of the same format.
func appendShape(out []byte, pod *corev1.Pod) []byte {
	exists := pod.UID != ""
	if exists {
		out = append(out, 3)
	}
	for ref := range Containers(pod) {
		c := ref.Container
		resources := &c.Resources
		if cs := Status(pod, ref); cs != nil && cs.Resources != nil {
			resources = cs.Resources
		}
		out = appendContainerShape(out, ref.Sidecar, c.Name, resources)
		if exists && resources != &c.Resources && !sameCPUAndMemory(resources, &c.Resources) {
			out = appendContainerShape(append(out, 4), ref.Sidecar, c.Name, &c.Resources)
		}
	}
	// What the pod shares at pod level, and which containers set their own
	// (SharedAtPodLevel reads the spec).
	for _, r := range sharedByPod(pod) {
		out = append(append(out, 2), r...)
		for _, list := range [2][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range list {
				b := byte('0')
				if setsOwn(&list[i], r) {
					b = '1'
				}
				out = append(out, b)
			}
		}
	}
	return out
}

// appendContainerShape appends one container's part of a shape: its kind
// and its name's length first (a name, not validated yet at admission, may
// hold any bytes, and must not pass for the containers of another shape),
// its name, then its cpu and memory requests and limits.
func appendContainerShape(out []byte, sidecar bool, name string, resources *corev1.ResourceRequirements) []byte {
	kind := byte(0)
	if sidecar {
		kind = 1
	}
	out = binary.AppendUvarint(append(out, kind), uint64(len(name)))
	out = append(out, name...)
	for _, list := range [2]corev1.ResourceList{resources.Requests, resources.Limits} {
		for _, r := range [2]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			out = append(out, 0)
			if q, ok := list[r]; ok {
				number, suffix := q.CanonicalizeBytes(out[len(out):])
				out = append(out, number...)
				out = append(out, suffix...)
			}
		}
	}
	return append(out, 1)
}

// sameCPUAndMemory tells whether a and b have the same cpu and memory
// requests and limits.
func sameCPUAndMemory(a, b *corev1.ResourceRequirements) bool {
	for _, r := range [2]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if !sameTotal(r, a.Requests, b.Requests) || !sameTotal(r, a.Limits, b.Limits) {
			return false
		}
	}
	return true
}

var (
	_ PodCalculator = (*Calculator)(nil)
	_ PodCalculator = (*Memo)(nil)
)
