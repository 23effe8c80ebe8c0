// Package state remembers where each pod and each suspended Job of an
// InPlace VPA stands with its recommendation: one tracker, keyed by UID and
// grouped by VPA, serves both. The VPA condition, the gauges and the
// once-only events read it; the pod and Job paths write it.
package state

import (
	"time"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
)

// PodState is where a pod of an InPlace VPA stands with its recommendation,
// as the VPA condition and the metrics report it.
type PodState string

const (
	// PodResized: the pod runs with what the VPA recommends (or close enough
	// to it: within --pod-update-threshold).
	PodResized PodState = "Resized"
	// PodInProgress: a resize was sent, or the kubelet is applying one.
	PodInProgress PodState = "InProgress"
	// PodDeferred: the kubelet holds the resize until the node has room.
	PodDeferred PodState = "Deferred"
	// PodWaiting: the resize restarts containers and waits for the
	// workload's --eviction-tolerance or a PodDisruptionBudget; Values
	// holds the blocker.
	PodWaiting PodState = "DisruptionBudget"
	// PodWaitingForNode: the resize does not fit the node now and its VPA
	// sends only what fits (resize-when: fits-node); Values holds the node.
	PodWaitingForNode PodState = "WaitingForNodeCapacity"
	// PodError: the kubelet failed to apply the resize and retries, or the
	// resize patch fails and is retried.
	PodError PodState = "Error"
	// PodInfeasible: recorded; the resize does not fit the node.
	PodInfeasible PodState = "Infeasible"
	// PodInvalid: recorded; the change cannot be made in place.
	PodInvalid PodState = "Invalid"
	// PodMemoryLimitKept: the pod has the recommendation except memory
	// limits that cannot be lowered safely (a memory record holds them).
	PodMemoryLimitKept PodState = "MemoryLimitKept"
	// PodJVMHeapFloor: the pod has the recommendation except the memory of
	// a JVM container, kept at its heap floor (heap + overhead).
	PodJVMHeapFloor PodState = "JVMHeapFloor"
	// PodJVMHeapUnknown: the pod has the recommendation except the memory
	// of a JVM container whose heap is unknown, not lowered in place.
	PodJVMHeapUnknown PodState = "JVMHeapUnknown"
	// PodWithheld: a resize is due but not sent (--dry-run, or paused).
	PodWithheld PodState = "Withheld"
	// PodNotRunning: not running (pending, terminating): nothing to do yet.
	PodNotRunning PodState = "NotRunning"
	// PodNoRecommendation: the VPA recommends nothing for its containers.
	PodNoRecommendation PodState = "NoRecommendation"
	// PodHeld: a resize is held back on purpose, not blocked: the
	// recommendation does not rest on enough usage yet (pkg/resize's
	// evidence rule). Values holds the target held back.
	PodHeld PodState = "Held"
	// PodBoosted: the pod runs with a CPU startup boost (pkg/boost) that
	// has not ended yet: it is not otherwise resized until it does.
	PodBoosted PodState = "StartupBoost"
	// PodCanaryWait: a decrease waits until the VPA's canaries have been
	// watched for their window without harm; Values holds until when.
	PodCanaryWait PodState = "CanaryWait"
	// PodHeldAfterHarm: a decrease is not made: it lowers values to, or
	// below, values harm was seen at (the VPA's hold).
	PodHeldAfterHarm PodState = "HeldAfterHarm"
	// PodBoostBackedOff: the pod has what the VPA recommends, but a
	// container of it restarted more times than boosts after a restart
	// allow (--startup-boost-max-restarts): it runs unboosted, within what
	// would have been its boost.
	PodBoostBackedOff PodState = "StartupBoostBackedOff"
)

// PendingPodStates are the states in which a recommendation waits to be
// applied, in the order metrics list them.
var PendingPodStates = []PodState{PodDeferred, PodInProgress, PodError, PodWaiting, PodWaitingForNode, PodWithheld}

// JobState is where a suspended Job of an InPlace VPA stands with its
// recommendation. Only suspended Jobs are tracked: once resumed, their pods
// are.
type JobState string

const (
	// JobTemplateUpToDate: the Job's pod template has the recommendation
	// (written by the updater, or already there).
	JobTemplateUpToDate JobState = "TemplateUpToDate"
	// JobWaiting: the API server does not accept the change yet (pods of the
	// Job still active, Suspended condition not yet True). The Job's next
	// status update brings it back.
	JobWaiting JobState = "Waiting"
	// JobWithheld: a template write is due but not sent (--dry-run, or
	// paused).
	JobWithheld JobState = "Withheld"
	// JobRejected: recorded; the API server refused the write (or would,
	// whatever the values); not sent again until the recommendation or the
	// Job's spec changes.
	JobRejected JobState = "Rejected"
	// JobError: the write failed and is retried with backoff.
	JobError JobState = "Error"
	// JobNoRecommendation: the VPA recommends nothing for the template's
	// containers.
	JobNoRecommendation JobState = "NoRecommendation"
)

// JobStates lists the states in the order metrics and the condition show
// them.
var JobStates = []JobState{JobTemplateUpToDate, JobWaiting, JobWithheld, JobRejected, JobError, JobNoRecommendation}

// Status is what is reported about one pod (S is PodState) or one Job (S is
// JobState).
type Status[S ~string] struct {
	VPA   string // namespace/name of the object's VPA
	Name  string
	State S
	// Since is when the object entered this state: the kubelet's condition
	// time when there is one, otherwise when the updater first saw it.
	Since   time.Time
	Message string
	// Values are the recorded values (Infeasible, Invalid, Rejected), the
	// target (Withheld, InProgress), the blocker (Waiting) or the node
	// (WaitingForNodeCapacity).
	Values string
	Kind   records.Kind
}

// Equal compares two statuses, their times as instants.
func (a Status[S]) Equal(b Status[S]) bool {
	return a.VPA == b.VPA && a.Name == b.Name && a.State == b.State && a.Since.Equal(b.Since) &&
		a.Message == b.Message && a.Values == b.Values && a.Kind == b.Kind
}

// Pod is the status of a pod; Job, of a suspended Job.
type (
	Pod = Status[PodState]
	Job = Status[JobState]
)

// VPAKey is the key objects are grouped by: the VPA's namespace/name.
func VPAKey(vpa *vpatypes.VerticalPodAutoscaler) string {
	return vpa.Namespace + "/" + vpa.Name
}
