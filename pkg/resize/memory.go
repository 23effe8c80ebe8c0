package resize

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// Safe memory-limit decreases.
//
// Since Kubernetes 1.34 a memory limit may be lowered in place. The kubelet
// then checks, on a best-effort basis, that the new limit stays above the
// memory in use; when it does not, it leaves the whole resize unapplied and
// reports PodResizeInProgress with reason Error ("cannot decrease memory
// limits: ..."), and tries the same spec again at every pod sync. The
// updater avoids that outcome before patching, and recovers from it after:
//
//   - With usage (from the metrics API), a container's memory limit is only
//     lowered to a value above usage x (1 + margin). Otherwise the container
//     keeps its running limit, and everything else is resized.
//   - Without usage, the kubelet's check is the last line. Its refusal is
//     recorded (a memory record, durable like infeasible ones) and the resize
//     is sent once more with the refused limits kept at their running
//     values, so that the rest of it completes. A memory record keeps any
//     later target from lowering those containers' limits to the refused
//     values or below.
//
// Kubernetes 1.33 forbids lowering memory limits at validation (Validate
// says so before patching): nothing here applies to it. Containers whose
// memory resizePolicy is RestartContainer are restarted with the new limit,
// which the kubelet does not compare with usage (a restarted container
// starts with none): they are left alone too.

// memoryRefusal starts the kubelet's message when it will not lower memory
// limits (kuberuntime validateMemoryResizeAction, 1.34 to 1.38).
const memoryRefusal = "cannot decrease memory limits"

// IsMemoryLimitRefusal reports whether a PodResizeInProgress Error message
// is the kubelet refusing to lower memory limits below usage.
func IsMemoryLimitRefusal(message string) bool {
	return strings.Contains(message, memoryRefusal)
}

// HeldLimit is a container memory limit kept at its running value instead of
// the lower value the recommendation asks for.
type HeldLimit struct {
	Container string
	// Sidecar tells that Container is a sidecar.
	Sidecar bool
	// Running is the limit kept (nil: the container runs without one and
	// none is added).
	Running *resource.Quantity
	// Wanted is the limit the recommendation asks for.
	Wanted resource.Quantity
	// Usage and Floor are set when usage decided: the container's memory
	// usage and usage x (1 + margin), at or below which a limit is unsafe.
	Usage, Floor *resource.Quantity
	// Margin is the margin Floor was computed with.
	Margin float64
	// Refused is set when a memory record decided: the kubelet refused (or
	// usage forbade) lowering the limit to this value, and Wanted is not above it.
	Refused *resource.Quantity
}

// String says what was kept and why, for events, logs and the condition.
func (h HeldLimit) String() string {
	kept := "no memory limit kept"
	if h.Running != nil {
		kept = "memory limit kept at " + h.Running.String()
	}
	var why []string
	if h.Floor != nil {
		why = append(why, fmt.Sprintf("usage %s plus the %s margin is %s", h.Usage.String(), percent(h.Margin), h.Floor.String()))
	}
	if h.Refused != nil {
		why = append(why, fmt.Sprintf("lowering it to %s or less was refused before", h.Refused.String()))
	}
	who := "container " + h.Container
	switch {
	case h.Container == resources.PodLevel:
		who = "pod level"
	case h.Sidecar:
		who = "sidecar " + h.Container
	}
	return fmt.Sprintf("%s: %s instead of %s (%s)", who, kept, h.Wanted.String(), strings.Join(why, "; "))
}

func percent(f float64) string {
	return strconv.FormatFloat(f*100, 'g', 4, 64) + "%"
}

// DescribeHeld says what was kept and why, for all of held.
func DescribeHeld(held []HeldLimit) string { return heldString(held) }

func heldString(held []HeldLimit) string {
	parts := make([]string, len(held))
	for i, h := range held {
		parts[i] = h.String()
	}
	return strings.Join(parts, "; ")
}

// runningMemoryLimit is the memory limit a container runs with: the one the
// kubelet reports as actuated (a sidecar's in initContainerStatuses), or,
// without a report, the spec's. A resize the kubelet refused is in the
// spec, not in the report.
func runningMemoryLimit(pod *corev1.Pod, ref recommendation.Ref) (resource.Quantity, bool) {
	if st := recommendation.Status(pod, ref); st != nil && st.Resources != nil {
		q, ok := st.Resources.Limits[corev1.ResourceMemory]
		return q, ok
	}
	q, ok := ref.Container.Resources.Limits[corev1.ResourceMemory]
	return q, ok
}

// lowersMemoryLimit tells whether want lowers a container's running memory
// limit, and whether the container's memory limit can be kept if it does
// (an added limit cannot be taken back once in the spec: limits cannot be
// removed in place).
func lowersMemoryLimit(pod *corev1.Pod, ref recommendation.Ref, want resource.Quantity) (lowers, keepable bool) {
	if policyFor(ref.Container, corev1.ResourceMemory) == corev1.RestartContainer {
		return false, false
	}
	running, has := runningMemoryLimit(pod, ref)
	if has {
		return want.Cmp(running) < 0, true
	}
	_, inSpec := ref.Container.Resources.Limits[corev1.ResourceMemory]
	return true, !inSpec
}

// NeedsMemoryUsage tells whether deciding for pod would lower a memory limit
// (adding one counts) of a container the kubelet resizes live: only then is
// the containers' memory usage worth fetching. It is false on Kubernetes 1.33
// and while a resize is under way.
func NeedsMemoryUsage(pod *corev1.Pod, desired recommendation.Desired, serverMinor int) bool {
	if serverMinor == 33 || len(desired) == 0 || pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
		return false
	}
	switch ReadStatus(pod).State {
	case StateNone, StateInfeasible:
	default:
		return false
	}
	for ref := range recommendation.Containers(pod) {
		if want, ok := targetMemoryLimit(ref, desired); ok {
			if lowers, keepable := lowersMemoryLimit(pod, ref, want); lowers && keepable {
				return true
			}
		}
	}
	return podLevelLowersMemoryLimit(pod, desired)
}

// targetMemoryLimit is the memory limit Target gives the container, without
// building the whole Target: the recommended one, else the container's own;
// none for a container the recommendation does not name.
func targetMemoryLimit(ref recommendation.Ref, desired recommendation.Desired) (resource.Quantity, bool) {
	want, named := desired[ref.Container.Name]
	if !named {
		return resource.Quantity{}, false
	}
	if q, ok := want.Limits[corev1.ResourceMemory]; ok {
		return q, true
	}
	q, ok := ref.Container.Resources.Limits[corev1.ResourceMemory]
	return q, ok
}

// holdMemoryLimits returns target with every unsafe memory-limit decrease
// taken out, and what was kept. A decrease is unsafe when the new limit is
// at or below usage x (1 + margin), or at or below the value a memory record
// holds for the container (the kubelet refused it, or usage forbade it).
// Where keeping a limit would change the pod's QoS class (a Guaranteed pod
// has memory request = limit), the container's memory request is kept at
// that limit as well.
func holdMemoryLimits(pod *corev1.Pod, target resources.Resources, usage map[string]resource.Quantity, margin float64, record *records.Record) (resources.Resources, []HeldLimit) {
	var held []HeldLimit
	out := target
	copied := false
	for ref := range recommendation.Containers(pod) {
		c := ref.Container
		t, ok := target[c.Name]
		if !ok {
			continue
		}
		want, ok := t.Limits[corev1.ResourceMemory]
		if !ok {
			continue
		}
		lowers, keepable := lowersMemoryLimit(pod, ref, want)
		if !lowers || !keepable {
			continue
		}
		h := HeldLimit{Container: c.Name, Sidecar: ref.Sidecar, Wanted: want.DeepCopy()}
		if u, ok := usage[c.Name]; ok {
			if floor := usageFloor(u, margin); want.Cmp(floor) <= 0 {
				h.Usage, h.Floor, h.Margin = ptrTo(u.DeepCopy()), &floor, margin
			}
		}
		if r, ok := record.ContainerMemoryLimit(c.Name); ok && want.Cmp(r) <= 0 {
			h.Refused = ptrTo(r.DeepCopy())
		}
		if h.Floor == nil && h.Refused == nil {
			continue
		}
		if !copied {
			out = copyResources(target)
			copied = true
		}
		kept := out[c.Name]
		if running, has := runningMemoryLimit(pod, ref); has {
			h.Running = ptrTo(running.DeepCopy())
			kept.Limits[corev1.ResourceMemory] = running.DeepCopy()
		} else {
			delete(kept.Limits, corev1.ResourceMemory)
		}
		out[c.Name] = kept
		held = append(held, h)
	}
	if len(held) == 0 {
		return target, nil
	}
	if qosClass(pod, out) != qosClass(pod, nil) {
		for _, h := range held {
			if h.Running == nil {
				continue
			}
			kept := out[h.Container]
			if kept.Requests == nil {
				kept.Requests = corev1.ResourceList{}
			}
			kept.Requests[corev1.ResourceMemory] = h.Running.DeepCopy()
			out[h.Container] = kept
		}
	}
	return out, held
}

// usageFloor is usage x (1 + margin), rounded up to a byte.
func usageFloor(usage resource.Quantity, margin float64) resource.Quantity {
	v := math.Ceil(float64(usage.Value()) * (1 + margin))
	if v >= math.MaxInt64 {
		return *resource.NewQuantity(math.MaxInt64, resource.BinarySI)
	}
	return *resource.NewQuantity(int64(v), resource.BinarySI)
}

func ptrTo[T any](v T) *T { return &v }

func copyResources(in resources.Resources) resources.Resources {
	out := make(resources.Resources, len(in))
	for name, r := range in {
		out[name] = *r.DeepCopy()
	}
	return out
}

// refusedLimits returns the memory limits of the spec that the kubelet
// refused to apply: those below the limit the container runs with. Limits
// added where a container runs without one count too.
func refusedLimits(pod *corev1.Pod) resources.Resources {
	out := resources.Resources{}
	for ref := range recommendation.Containers(pod) {
		c := ref.Container
		spec, ok := c.Resources.Limits[corev1.ResourceMemory]
		if !ok || policyFor(c, corev1.ResourceMemory) == corev1.RestartContainer {
			continue
		}
		running, has := runningMemoryLimit(pod, ref)
		if has && spec.Cmp(running) >= 0 {
			continue
		}
		out[c.Name] = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: spec.DeepCopy()}}
	}
	podLevelRefused(pod, out)
	return out
}

// mergeMemoryRecord returns record (which may be nil) with the memory limits
// of limits set in it, as a record of kind with message. Containers of the
// record not in limits keep their values; a container's value only ever
// grows (the highest limit known to be unsafe is what matters).
func mergeMemoryRecord(record *records.Record, limits resources.Resources, kind records.Kind, message string) *records.Record {
	merged := resources.Resources{}
	if record != nil {
		for name, r := range record.Attempted {
			merged[name] = *r.DeepCopy()
		}
	}
	names := make([]string, 0, len(limits))
	for name := range limits {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		q := limits[name].Limits[corev1.ResourceMemory]
		if old, ok := merged[name].Limits[corev1.ResourceMemory]; ok && old.Cmp(q) >= 0 {
			continue
		}
		merged[name] = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: q.DeepCopy()}}
	}
	return &records.Record{Kind: kind, Attempted: merged, Message: message}
}

// sameMemoryRecord reports whether b says nothing that a does not.
func sameMemoryRecord(a, b *records.Record) bool {
	return a != nil && b != nil && a.Kind == b.Kind && resources.Equal(a.Attempted, b.Attempted)
}

// usageRecord returns the memory record to keep after holds decided by
// usage, or nil when record already covers them.
func usageRecord(record *records.Record, held []HeldLimit) *records.Record {
	limits := resources.Resources{}
	var why []string
	for _, h := range held {
		if h.Floor == nil {
			continue
		}
		if r, ok := record.ContainerMemoryLimit(h.Container); ok && r.Cmp(h.Wanted) >= 0 {
			continue
		}
		limits[h.Container] = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: h.Wanted.DeepCopy()}}
		why = append(why, h.String())
	}
	if len(limits) == 0 {
		return nil
	}
	kind := records.KindMemoryLimitUnsafe
	return mergeMemoryRecord(record, limits, kind, "memory in use too close to the recommended limit: "+strings.Join(why, "; "))
}
