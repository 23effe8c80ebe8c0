// Package records remembers resize attempts that cannot succeed, keyed by
// pod UID, so that the same infeasible resize is not sent again and again.
// The same store remembers, keyed by Job UID, the recommendations a suspended
// Job's pod template could not be given (KindJobRejected, KindJobUnsupported).
//
// A record holds the values that were attempted: what was patched (kubelet
// reported Infeasible), what the API server refused (403 with a NodeCapacity
// cause), or what validation forbids (422, or a change known to be impossible
// in place). The rules deciding whether a new target may be tried against a
// record follow AEP-8818.
//
// Records survive a restart of the updater and a change of leader:
// ConfigMapStore writes the records of a VPA's pods into a ConfigMap of the
// updater's namespace (compact.go) and reads them all back before the first
// decision. VPAStore, which kept them in an annotation on the VPA
// (annotation.go), is what earlier versions used; ConfigMapStore moves its
// records.
package records

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// Kind says why an attempt was recorded.
type Kind string

const (
	// KindInfeasible: the resize was accepted and the kubelet then marked it
	// PodResizePending with reason Infeasible.
	KindInfeasible Kind = "Infeasible"
	// KindNodeCapacity: the API server refused the resize with HTTP 403 and a
	// NodeCapacity cause (Kubernetes 1.36+).
	KindNodeCapacity Kind = "NodeCapacity"
	// KindInvalid: the change cannot be done in place (rejected by
	// validation, or known beforehand to be impossible).
	KindInvalid Kind = "Invalid"
	// KindJobRejected: the API server refused to change the resources of a
	// suspended Job's pod template (422 Invalid, 403 Forbidden, 400): the
	// MutablePodResourcesForSuspendedJobs gate is off, or an admission
	// policy or validation forbids the values. Keyed by Job UID.
	KindJobRejected Kind = "JobRejected"
	// KindJobUnsupported: not sent, because the API server's version cannot
	// change a Job's pod template at all (Kubernetes 1.34 and earlier). Keyed
	// by Job UID.
	KindJobUnsupported Kind = "JobUnsupported"

	// Memory records (kept apart from the kinds above, in a store of their
	// own) hold, per container, a memory limit that must not be lowered to,
	// or below: Attempted names only those limits.

	// KindMemoryLimitRefused: the kubelet refused to lower the memory limits
	// below the memory in use (PodResizeInProgress, reason Error, "cannot
	// decrease memory limits").
	KindMemoryLimitRefused Kind = "MemoryLimitRefused"
	// KindMemoryLimitUnsafe: the updater kept the memory limits because the
	// memory in use, plus the margin, reached the recommended ones.
	KindMemoryLimitUnsafe Kind = "MemoryLimitUnsafe"

	// Safety records (a store of their own, StoreSafety) keep what the
	// watch after a resize must not forget across a restart or a change of
	// leader (docs/safety-after-resize.md). Attempted holds values a resize
	// lowered, as lowered; From, where set, what they were before.

	// KindCanary: the pod is a canary of its VPA's decrease: its resize
	// lowered From to Attempted. Its Watch holds that lowering, flagged
	// Canary, whose Since is when its watch began (the resize seen
	// completed), zero while the resize is under way (CanarySince), beside
	// the pod's other lowerings still watched. Keyed by the pod's UID.
	KindCanary Kind = "Canary"
	// KindRevert: harm was seen after the pod's resize lowered From to
	// Attempted; the pod is resized back to From, and the record goes once
	// that resize is accepted. Message says what harm. Keyed by the pod's
	// UID.
	KindRevert Kind = "Revert"
	// KindHarmHold: harm was seen after a resize of one of the VPA's pods
	// lowered values to Attempted (from From): no pod of the VPA is
	// lowered to them, or below, until the recommendation rises above them
	// or Until. Holds counts the holds in a row of those values (harm again
	// soon after a hold ended lengthens the next). Message says what harm.
	// Keyed by the VPA's own UID.
	KindHarmHold Kind = "HarmHold"
	// KindWatch: values a resize of the pod lowered are still watched
	// (Watch, watch.go); a canary's record keeps its Watch too. Keyed by
	// the pod's UID.
	KindWatch Kind = "Watch"

	// KindLimitAtStart (a store of its own, StoreJVM): Attempted holds,
	// per container, the memory limit in force when the container last
	// started, and Starts the restart count of that start (start.go): what
	// a JVM's heap sized from its limit was sized from. Keyed by the
	// pod's UID.
	KindLimitAtStart Kind = "LimitAtStart"
)

// Record is one remembered attempt.
type Record struct {
	Kind      Kind
	Attempted resources.Resources
	Message   string
	// RecordedAt is when the record was made: every record a store puts
	// carries it, so that of two writers' records of one pod the newest
	// is kept (ConfigMapStore, after a conflict).
	RecordedAt time.Time
	// Generation is the metadata.generation of the Job a Job record was
	// taken on: a record of an older generation no longer holds (the Job's
	// spec changed since). Zero for pod records.
	Generation int64
	// From is what the values of Attempted were before the resize that
	// lowered them (KindCanary, KindRevert, KindHarmHold); nil for the
	// other kinds.
	From resources.Resources
	// Until is when a hold ends (KindHarmHold); zero for the other kinds,
	// and in holds written before it was kept (then the updater's
	// --harm-hold after RecordedAt).
	Until time.Time
	// Holds counts the holds in a row of a VPA's values (KindHarmHold),
	// from 1 to MaxHolds; zero for the other kinds.
	Holds int
	// Watch is the watch of the pod's lowered values (KindWatch,
	// KindCanary); nil for the other kinds. A canary's record read in the
	// shape of earlier versions (its watch's start in a field of its own,
	// or no watch) is given one (decode.go).
	Watch *Watch
	// Starts are, per container of Attempted, the restart count of the
	// start whose memory limit Attempted holds (KindLimitAtStart); nil for
	// the other kinds.
	Starts map[string]int32
}

// ContainerMemoryLimit returns the memory limit the record holds for a
// container. A nil record holds none.
func (r *Record) ContainerMemoryLimit(container string) (resource.Quantity, bool) {
	if r == nil {
		return resource.Quantity{}, false
	}
	q, ok := r.Attempted[container].Limits[corev1.ResourceMemory]
	return q, ok
}

// Verdict is the outcome of comparing a new target with a record.
type Verdict int

const (
	// Same: the target is what was attempted. Skip the pod.
	Same Verdict = iota
	// Lower: at least one value is lower than attempted (for KindInvalid:
	// the target differs). Clear the record and try.
	Lower
	// NotLower: every value is greater than or equal to what was attempted
	// and one is greater. It would fail again: skip the pod, keep the record.
	NotLower
)

// isCapacity tells whether a kind says that the values did not fit: then
// only a lower value is worth another attempt.
func (k Kind) isCapacity() bool {
	return k == KindInfeasible || k == KindNodeCapacity
}

func (v Verdict) String() string {
	switch v {
	case Same:
		return "Same"
	case Lower:
		return "Lower"
	default:
		return "NotLower"
	}
}

// Compare tells whether target may be tried given this record.
//
// For capacity outcomes (KindInfeasible, KindNodeCapacity) a target is only
// worth trying when it asks for less of something. For the other kinds
// (KindInvalid and the Job kinds) any different target is worth trying,
// since validity does not grow with size.
func (r *Record) Compare(target resources.Resources) Verdict {
	equal, lower := true, false
	visit := func(container string, list string, name corev1.ResourceName, attempted, now *resource.Quantity) {
		switch {
		case attempted == nil && now == nil:
		case attempted == nil || now == nil:
			equal = false
			if now == nil {
				lower = true // a value no longer asked for is less than any value
			}
		default:
			if c := now.Cmp(*attempted); c != 0 {
				equal = false
				if c < 0 {
					lower = true
				}
			}
		}
	}
	resources.ForEachValue(r.Attempted, target, visit)
	switch {
	case equal:
		return Same
	case !r.Kind.isCapacity() || lower:
		return Lower
	default:
		return NotLower
	}
}

// Owner is the VPA a pod belongs to. A durable store keeps a pod's record on
// its VPA, so that the record lives and dies with the VPA.
type Owner struct {
	Namespace string
	Name      string
	UID       types.UID
}

// Key is "namespace/name".
func (o Owner) Key() string { return o.Namespace + "/" + o.Name }

// id identifies the VPA records are held for: its UID, or the key of an
// Owner that has none (fakes). A new VPA of the same name is another VPA:
// it never sees the records of the one before.
func (o Owner) id() string {
	if o.UID != "" {
		return string(o.UID)
	}
	return o.Key()
}

// Store holds records by pod UID, each for the VPA it was recorded under.
// Implementations are safe for concurrent use. InMemoryStore keeps them in
// memory only; ConfigMapStore and VPAStore also write them, so that they
// survive a restart and a change of leader.
type Store interface {
	// Get returns the record of a pod, if any, whatever VPA it is held
	// for: for reports and tests. Decisions use GetFor.
	Get(uid types.UID) (*Record, bool)
	// Of returns the records held for owner, by UID: its pods' and Jobs',
	// and for the safety records its own (KindHarmHold). Whether each pod
	// is still owner's is told by GetFor, at its sync.
	Of(owner Owner) map[types.UID]*Record
	// GetFor returns the record of a pod held for owner, the VPA the pod
	// belongs to now. A record held for another VPA is not believed: that
	// VPA does not own the pod (a record read from a value someone else
	// may have written, or a pod that moved), so the record is forgotten
	// and not returned. This is how a loaded record's owner is checked, at
	// the pod's first sync, with the VPA the sync resolves anyway.
	GetFor(owner Owner, uid types.UID) (*Record, bool)
	// Put stores or replaces the record of a pod whose VPA is owner.
	Put(owner Owner, uid types.UID, r *Record)
	// Update replaces, in one step, the record of a pod (whatever VPA it
	// is held for) with what next makes of it: nil forgets it, the record
	// itself keeps it, another is held for owner (a zero owner keeps the
	// record's own, and puts none where there is none). next must not
	// call the store.
	Update(owner Owner, uid types.UID, next func(cur *Record, ok bool) *Record)
	// Delete forgets a pod's record; it reports whether there was one.
	Delete(uid types.UID) bool
	// Retain forgets every record whose pod is not live and returns the UIDs
	// it forgot.
	Retain(live func(types.UID) bool) []types.UID
	// ForgetOwner forgets the records held for a VPA that is gone and
	// returns how many it forgot.
	ForgetOwner(owner Owner) int
	// WriteError is nil while the records held for owner are kept durably
	// (or there are none, or the store keeps nothing durably); otherwise
	// the error of the last write of them, which is being retried: until
	// one succeeds they are held in memory only.
	WriteError(owner Owner) error
	// Len is the number of records held.
	Len() int
	// Load reads the records kept durably, replacing what is held. It is
	// called once, before any decision is taken.
	Load(ctx context.Context) error
	// Loaded is nil once the last Load has succeeded; before a Load has
	// ended, and while one runs, an error saying so; after a failed Load,
	// its error. Readiness reflects it.
	Loaded() error
	// Run writes changed records durably until ctx is cancelled. It returns
	// at once when the store keeps nothing durably.
	Run(ctx context.Context)
}
