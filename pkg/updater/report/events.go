package report

// Event reasons of the updater. docs/observability.md lists them.

// Event reasons. Infeasible, Invalid, DeferredTooLong, MemoryLimitKept and
// MemoryLimitRefused go on the pod and on its VPA; the others on the pod
// only.
const (
	// EventResizeSent: a resize was sent to the pod's resize subresource.
	EventResizeSent = "InPlaceResizeSent"
	// EventResizeInfeasible: the resize cannot fit the node (kubelet
	// Infeasible, or 403 NodeCapacity); it is not retried until the
	// recommendation asks for less.
	EventResizeInfeasible = "InPlaceResizeInfeasible"
	// EventResizeInvalid: the change cannot be done in place; it is not
	// retried until the recommendation changes.
	EventResizeInvalid = "InPlaceResizeInvalid"
	// EventResizeDeferredTooLong: the kubelet has held the resize Deferred
	// for longer than --deferred-warning-after. The pod keeps waiting.
	EventResizeDeferredTooLong = "InPlaceResizeDeferredTooLong"
	// EventResizeWithheld: a resize is due but not sent (--dry-run, or
	// paused); once per pod and target.
	EventResizeWithheld = "InPlaceResizeWithheld"
	// EventMemoryLimitKept: memory limits are not lowered because the memory
	// in use, plus --memory-limit-decrease-margin, reaches the recommended
	// ones; the rest of the resize is sent. Once per memory record.
	EventMemoryLimitKept = "InPlaceResizeMemoryLimitKept"
	// EventMemoryLimitRefused: the kubelet refused to lower memory limits
	// below the memory in use; recorded, never sent again, and the resize is
	// sent once more with those limits kept. Once per memory record.
	EventMemoryLimitRefused = "InPlaceResizeMemoryLimitRefused"
)

// EventResizeWaitingForBudget: a resize that restarts containers waits
// for the eviction tolerance or a PodDisruptionBudget; once per pod and
// blocker.
const EventResizeWaitingForBudget = "InPlaceResizeWaitingForDisruptionBudget"

// EventRestartReservationExpired: a resize that restarts containers was
// sent and is still not applied (not taken up, not seen on the pod) after
// --restart-reservation-timeout, while the pod stays Ready and shows no
// resize pending that would restart it: its place under the eviction
// tolerance and PodDisruptionBudgets is given back. Warning, once per pod
// and reservation.
const EventRestartReservationExpired = "InPlaceResizeRestartReservationExpired"

// EventResizeWaitingForNodeCapacity: a resize is not sent because it does
// not fit the node now; once per pod and node.
const EventResizeWaitingForNodeCapacity = "InPlaceResizeWaitingForNodeCapacity"

// EventResizePreemption: the scheduler preempted a pod of lower priority on
// the node of the pod's Deferred resize, which it may have done to make room
// for it (KEP-5836, alpha in Kubernetes 1.37). Normal, on the pod and its
// VPA, once per victim. The preemption is the scheduler's: the updater
// evicts nothing and counts it as none of its disruptions.
const EventResizePreemption = "InPlaceResizePreemption"

// EventInitContainerRecommendationIgnored: the VPA's recommendation names
// init containers that are not sidecars (restartPolicy Always); nothing is
// set for them. Warning on the VPA, once per VPA and set of names.
const EventInitContainerRecommendationIgnored = "InPlaceInitContainerRecommendationIgnored"

// EventResizeHeld: a resize, or its decreases, is held back on purpose:
// the recommendation does not rest on enough usage yet
// (docs/resize-timing.md); once per pod, reason and target.
const EventResizeHeld = "InPlaceResizeHeld"

// EventResizeWindowInvalid: a resize-window, resize-window-scope or
// freeze-until annotation cannot be read; the VPA is frozen until it is
// corrected. Warning on the VPA, once per value.
const EventResizeWindowInvalid = "InPlaceResizeWindowInvalid"

// EventWorkerPanic: a worker recovered from a panic while handling an item
// of the VPA (its pod, its Job, its pods' queueing or its condition); the
// item is retried with backoff, and the updater's log has the stack.
const EventWorkerPanic = "InPlaceUpdaterWorkerPanic"

// Event reasons on Jobs (the rejected one also goes on the VPA).
const (
	// EventJobTemplateUpdated: the recommendation was written into a
	// suspended Job's pod template.
	EventJobTemplateUpdated = "InPlaceJobTemplateUpdated"
	// EventJobTemplateRejected: the API server refused to change the Job's
	// pod template (or cannot, on Kubernetes 1.34 and earlier); not retried
	// until the recommendation or the Job changes.
	EventJobTemplateRejected = "InPlaceJobTemplateRejected"
	// EventJobTemplateWithheld: a template write is due but not sent
	// (--dry-run, or paused); once per Job and target.
	EventJobTemplateWithheld = "InPlaceJobTemplateWithheld"
)

// Event reasons of the CPU startup boost, on the pod.
const (
	// EventStartupBoostEnded: a container's CPU startup boost is over (the
	// pod has been Ready for its durationSeconds): the pod was resized in
	// place to its recommendation, or to the CPU recorded at creation, and
	// the boost annotation removed.
	EventStartupBoostEnded = "InPlaceStartupBoostEnded"
	// EventStartupBoostAnnotationInvalid: a boost annotation cannot be read
	// and the VPA recommends no CPU for the container: nothing is known to
	// lower it to. The annotation is removed; the container keeps its CPU
	// until the VPA recommends some.
	EventStartupBoostAnnotationInvalid = "InPlaceStartupBoostAnnotationInvalid"
	// EventStartupBoostAnnotationForbidden: a boost ended but the API
	// server refused the removal of its annotation (403: the updater is
	// not granted patch on pods, or an admission policy refuses it); the
	// removal is tried again when the pod is decided again. Once per pod.
	EventStartupBoostAnnotationForbidden = "InPlaceStartupBoostAnnotationForbidden"
	// EventStartupBoostReapplied: a container that restarted after its
	// startup boost ended was boosted again in place (the resize was
	// accepted); its end is EventStartupBoostEnded.
	EventStartupBoostReapplied = "InPlaceStartupBoostReapplied"
	// EventStartupBoostBackedOff: a container restarted more times than
	// boosts after a restart allow (--startup-boost-max-restarts): its
	// restarts are not boosted any more. On the pod and its VPA, once per
	// pod and set of containers.
	EventStartupBoostBackedOff = "InPlaceStartupBoostBackedOff"
)

// Event reasons of the watch after a resize (docs/safety-after-resize.md).
const (
	// EventResizeHarmed: harm was seen on the pod within the window after
	// its resize (an OOM kill, a restart, Ready lost for longer than the
	// grace, an eviction by the kubelet). Warning, on the pod and the VPA.
	// After a resize that lowered values, the pod is resized back and the
	// values are held for the VPA; after one that raised them, it is
	// reported only.
	EventResizeHarmed = "InPlaceResizeHarmed"
	// EventResizeReverted: the pod was resized back in place to what it
	// had before a resize that lowered values and harmed it. Warning, on
	// the pod and the VPA.
	EventResizeReverted = "InPlaceResizeReverted"
	// EventResizeRevertWaiting: the revert does not fit the node now (it
	// has filled since); it is sent once it fits. Warning, on the pod, once
	// per node.
	EventResizeRevertWaiting = "InPlaceResizeRevertWaitingForNodeCapacity"
	// EventResizeCanary: the pod is a canary of its VPA's decrease: it is
	// lowered first, and the others once it has been watched for the
	// window without harm. On the pod and the VPA.
	EventResizeCanary = "InPlaceResizeCanary"
	// EventResizeCanaryPassed: every canary of a decrease was watched for
	// its window without harm; the other pods get it. On the VPA.
	EventResizeCanaryPassed = "InPlaceResizeCanaryPassed"
	// EventResizeWaitingForCanary: a decrease waits for the VPA's
	// canaries, or is held after harm; once per pod and message.
	EventResizeWaitingForCanary = "InPlaceResizeWaitingForCanary"
	// EventResizeHeldAfterHarm: a decrease is not made: it lowers values
	// to, or below, values harm was seen at; once per pod and hold.
	EventResizeHeldAfterHarm = "InPlaceResizeHeldAfterHarm"
	// EventSafetyAnnotationInvalid: the VPA's canary or observation-window
	// annotation cannot be read; the updater's default is used. Warning,
	// on the VPA, once per value.
	EventSafetyAnnotationInvalid = "InPlaceResizeSafetyAnnotationInvalid"
)
