package updater

import (
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
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
	// workload's --eviction-tolerance.
	PodWaiting PodState = "DisruptionBudget"
	// PodWaitingForNode: the resize does not fit the node now and its VPA
	// sends only what fits (resize-when: fits-node); values holds the node.
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
	// PodWithheld: a resize is due but not sent (--dry-run, or paused).
	PodWithheld PodState = "Withheld"
	// PodNotRunning: not running (pending, terminating): nothing to do yet.
	PodNotRunning PodState = "NotRunning"
	// PodNoRecommendation: the VPA recommends nothing for its containers.
	PodNoRecommendation PodState = "NoRecommendation"
)

// pendingStates are the states in which a recommendation waits to be
// applied, in the order metrics list them.
var pendingStates = []PodState{PodDeferred, PodInProgress, PodError, PodWaiting, PodWaitingForNode, PodWithheld}

// podStatus is what is reported about one pod.
type podStatus struct {
	vpa   string // namespace/name of the pod's VPA
	name  string
	state PodState
	// since is when the pod entered this state: the kubelet's condition
	// time when there is one, otherwise when the updater first saw it.
	since   time.Time
	message string
	// values are the recorded values (Infeasible, Invalid) or the target
	// (Withheld, InProgress).
	values string
	kind   records.Kind
}

func (a podStatus) equal(b podStatus) bool {
	return a.vpa == b.vpa && a.name == b.name && a.state == b.state && a.since.Equal(b.since) &&
		a.message == b.message && a.values == b.values && a.kind == b.kind
}

// stateOf tells the state of a pod from a decision that sends nothing.
// record and memRecord are the pod's records after the decision.
func stateOf(d resize.Decision, record, memRecord *records.Record, st resize.Status) podStatus {
	kept := func() podStatus {
		if memRecord == nil {
			return podStatus{state: PodMemoryLimitKept, values: d.Target.String(), message: d.Message}
		}
		return podStatus{state: PodMemoryLimitKept, values: memRecord.Attempted.String(), message: memRecord.Message,
			kind: memRecord.Kind, since: memRecord.RecordedAt}
	}
	switch d.Reason {
	case resize.ReasonMemoryLimitUnsafe:
		return kept()
	case resize.ReasonUpToDate, resize.ReasonBelowThreshold:
		if memRecord != nil {
			return kept()
		}
	}
	switch d.Reason {
	case resize.ReasonPodNotRunning:
		return podStatus{state: PodNotRunning, message: d.Message}
	case resize.ReasonNoRecommendation:
		return podStatus{state: PodNoRecommendation, message: d.Message}
	case resize.ReasonUpToDate, resize.ReasonBelowThreshold:
		return podStatus{state: PodResized}
	case resize.ReasonResizeDeferred:
		return podStatus{state: PodDeferred, since: st.Since, message: st.Message}
	case resize.ReasonResizeInProgress, resize.ReasonResizeUnknown:
		return podStatus{state: PodInProgress, since: st.Since, message: d.Message}
	case resize.ReasonResizeError:
		return podStatus{state: PodError, since: st.Since, message: st.Message}
	case resize.ReasonDisruptionBudget:
		return podStatus{state: PodWaiting, message: d.Message}
	case resize.ReasonWaitingForNodeCapacity:
		return podStatus{state: PodWaitingForNode, message: d.Message}
	}
	if record != nil {
		s := podStatus{state: PodInfeasible, values: record.Attempted.String(), message: record.Message, kind: record.Kind, since: record.RecordedAt}
		if record.Kind == records.KindInvalid {
			s.state = PodInvalid
		}
		return s
	}
	return podStatus{state: PodInProgress, message: d.Message}
}

// sentResize is a resize the updater sent and has not seen completed.
type sentResize struct {
	// target is shared with the pods sent an equal one (see tracker.targets):
	// read it, never change it.
	target resources.Resources
	key    string
	at     time.Time
}

// sharedTarget is a target of resizes under way and how many pods hold it.
type sharedTarget struct {
	target resources.Resources
	pods   int
}

// staleVersion tells which cached versions of a pod predate a resize sent
// to it: deciding on a cached pod at such a version would send the resize
// again.
type staleVersion struct {
	// cached is the version the cache held when the resize was decided
	// (on it, or on the pod read from the API server).
	cached string
	// sent is the version the resize patch produced, when the API server
	// said. Resource versions are comparable integers (KEP-5504): any
	// cached version below sent predates the resize, the one decided on as
	// well as an older one a lagging watch still holds.
	sent  string
	since time.Time
}

// predates reports whether a cached pod at version predates the resize.
func (s *staleVersion) predates(version string) bool {
	if s.sent != "" {
		if c, err := resourceversion.CompareResourceVersion(version, s.sent); err == nil {
			return c < 0
		}
	}
	// Not comparable: only the version the cache held is known to be stale.
	return version == s.cached
}

type podEntry struct {
	podStatus
	// warnedSince is the Deferred episode a long-wait warning was sent for.
	warnedSince time.Time
	// withheldFor is the target a withheld event was sent for.
	withheldFor string
	// waitingFor is the blocker a waiting-for-budget event was sent for.
	waitingFor string
	sent       *sentResize
	// stale is kept until the cache has moved past it, whatever became of
	// the resize meanwhile.
	stale *staleVersion
}

// vpaGroups groups the UIDs of tracked pods or Jobs by the key of the VPA
// they count under. Not safe for concurrent use: the trackers lock.
type vpaGroups map[string]sets.Set[types.UID]

func (g vpaGroups) add(vpa string, uid types.UID) {
	if g[vpa] == nil {
		g[vpa] = sets.New[types.UID]()
	}
	g[vpa].Insert(uid)
}

func (g vpaGroups) remove(vpa string, uid types.UID) {
	if s := g[vpa]; s != nil {
		s.Delete(uid)
		if s.Len() == 0 {
			delete(g, vpa)
		}
	}
}

// drop removes a VPA's group and returns its members.
func (g vpaGroups) drop(vpa string) sets.Set[types.UID] {
	s := g[vpa]
	delete(g, vpa)
	return s
}

// tracker remembers the state of every pod of an InPlace VPA, grouped by
// VPA, for the VPA condition and the gauges.
type tracker struct {
	mu    sync.Mutex
	pods  map[types.UID]*podEntry
	byVPA vpaGroups
	// targets shares equal targets of resizes under way, by rendering: the
	// pods of a workload are sent the same one, and a burst keeps a target
	// per pod until each resize is seen completed (three maps each,
	// otherwise). A target is dropped when no pod holds it any more.
	targets map[string]*sharedTarget
	// gone holds the pods deleted lately, and when: a worker that decided
	// on a pod while it was being deleted must not track it again.
	gone map[types.UID]time.Time
}

// goneFor is how long a deleted pod is remembered as deleted: far longer
// than a worker takes on a pod (UIDs are never reused).
const goneFor = 10 * time.Minute

func newTracker() *tracker {
	return &tracker{pods: map[types.UID]*podEntry{}, byVPA: vpaGroups{}, targets: map[string]*sharedTarget{}, gone: map[types.UID]time.Time{}}
}

// entry returns the pod's entry, creating it under vpa. Callers hold t.mu.
func (t *tracker) entry(uid types.UID, vpa, name string) *podEntry {
	e, ok := t.pods[uid]
	if !ok {
		e = &podEntry{podStatus: podStatus{vpa: vpa, name: name}}
		t.pods[uid] = e
	}
	if e.vpa != vpa {
		t.byVPA.remove(e.vpa, uid)
		e.vpa = vpa
	}
	t.byVPA.add(vpa, uid)
	return e
}

// set records a pod's status. A zero since keeps the time the pod entered
// the state (now when it is new). It returns the VPAs whose summary changed.
func (t *tracker) set(uid types.UID, st podStatus, now time.Time) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, deleted := t.gone[uid]; deleted {
		return nil
	}
	old, existed := t.pods[uid]
	var before podStatus
	if existed {
		before = old.podStatus
	}
	e := t.entry(uid, st.vpa, st.name)
	if st.since.IsZero() {
		if existed && before.state == st.state && !before.since.IsZero() {
			st.since = before.since
		} else {
			st.since = now
		}
	}
	if existed && before.equal(st) {
		return nil
	}
	e.podStatus = st
	if st.state != PodDeferred {
		e.warnedSince = time.Time{}
	}
	if st.state != PodWithheld {
		e.withheldFor = ""
	}
	if st.state != before.state {
		e.waitingFor = ""
	}
	if existed && before.vpa != st.vpa {
		return []string{before.vpa, st.vpa}
	}
	return []string{st.vpa}
}

// forget drops a pod and returns the VPA it was counted under.
func (t *tracker) forget(uid types.UID) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.pods[uid]
	if !ok {
		return "", false
	}
	t.release(e)
	delete(t.pods, uid)
	t.byVPA.remove(e.vpa, uid)
	return e.vpa, true
}

// deleted forgets a deleted pod for good and returns the VPA it was counted
// under.
func (t *tracker) deleted(uid types.UID, now time.Time) (string, bool) {
	t.mu.Lock()
	t.gone[uid] = now
	t.mu.Unlock()
	return t.forget(uid)
}

// retain forgets the pods live says are gone, and the deletions older than
// goneFor; it returns the VPAs whose pods changed.
func (t *tracker) retain(live func(types.UID) bool, now time.Time) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid, at := range t.gone {
		if now.Sub(at) > goneFor {
			delete(t.gone, uid)
		}
	}
	changed := sets.New[string]()
	for uid, e := range t.pods {
		if live(uid) {
			continue
		}
		t.release(e)
		delete(t.pods, uid)
		t.byVPA.remove(e.vpa, uid)
		changed.Insert(e.vpa)
	}
	return sets.List(changed)
}

// forgetVPA drops every pod counted under a VPA.
func (t *tracker) forgetVPA(vpa string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid := range t.byVPA.drop(vpa) {
		if e, ok := t.pods[uid]; ok {
			t.release(e)
		}
		delete(t.pods, uid)
	}
}

// podsOf returns the statuses of a VPA's pods, by pod name.
func (t *tracker) podsOf(vpa string) []podStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]podStatus, 0, t.byVPA[vpa].Len())
	for uid := range t.byVPA[vpa] {
		out = append(out, t.pods[uid].podStatus)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// pending counts pods in each pending state and tells how long the oldest
// has been in it.
func (t *tracker) pending(now time.Time) (map[PodState]int, map[PodState]time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	counts := map[PodState]int{}
	oldest := map[PodState]time.Duration{}
	for _, e := range t.pods {
		counts[e.state]++
		if age := now.Sub(e.since); age > oldest[e.state] {
			oldest[e.state] = age
		}
	}
	return counts, oldest
}

// markSent remembers a resize sent to a pod. The target is only read from
// then on, and may be shared with other pods.
func (t *tracker) markSent(uid types.UID, vpa, name string, target resources.Resources, at time.Time) {
	// Equal renderings are equal targets: String writes all a Resources
	// holds (each container's cpu and memory requests and limits), each
	// quantity in its canonical form.
	key := target.String()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, deleted := t.gone[uid]; deleted {
		return
	}
	e := t.entry(uid, vpa, name)
	t.release(e)
	shared := t.targets[key]
	if shared == nil {
		shared = &sharedTarget{target: target}
		t.targets[key] = shared
	}
	shared.pods++
	e.sent = &sentResize{target: shared.target, key: key, at: at}
}

// release forgets the resize under way of a pod, dropping its target when no
// other pod holds it. Callers hold t.mu.
func (t *tracker) release(e *podEntry) {
	if e.sent == nil {
		return
	}
	if shared := t.targets[e.sent.key]; shared != nil {
		if shared.pods--; shared.pods <= 0 {
			delete(t.targets, e.sent.key)
		}
	}
	e.sent = nil
}

// awaitUpdate remembers that a resize sent at "at", decided while the cache
// held the pod at resourceVersion cached, made resourceVersion sent ("" when
// the API server did not say): until the cache holds sent or a later
// version, the cache is behind.
func (t *tracker) awaitUpdate(uid types.UID, cached, sent string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.pods[uid]; ok {
		e.stale = &staleVersion{cached: cached, sent: sent, since: at}
	}
}

// cacheLag reports whether the cached pod, at resourceVersion version,
// predates the resize awaitUpdate was told of (behind), and forgets what it
// was told once the cache holds a version that does not. The pod's update
// event normally brings the cache up to date; overdue tells that it has not
// come for maxCacheLag or more, when the pod is to be read from the API
// server instead, so that a lagging watch neither leaves a pod undecided nor
// gets it patched twice.
func (t *tracker) cacheLag(uid types.UID, version string, now time.Time) (behind, overdue bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.pods[uid]
	if !ok || e.stale == nil {
		return false, false
	}
	if !e.stale.predates(version) {
		e.stale = nil
		return false, false
	}
	return true, now.Sub(e.stale.since) >= maxCacheLag
}

// maxCacheLag is how long a pod whose cached version predates a resize sent
// to it waits for its update event before it is read from the API server.
const maxCacheLag = time.Minute

// settle tells what became of a resize sent to a pod, given its resize
// status now and its current resources: "" while still under way.
func (t *tracker) settle(uid types.UID, st resize.State, current func(resources.Resources) resources.Resources) (outcome string, sent *sentResize) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.pods[uid]
	if !ok || e.sent == nil {
		return "", nil
	}
	sent = e.sent
	switch st {
	case resize.StateNone:
		t.release(e)
		if resources.Equal(current(sent.target), sent.target) {
			return outcomeCompleted, sent
		}
		return outcomeSuperseded, sent
	case resize.StateInfeasible:
		t.release(e)
		return outcomeKubeletInfeasible, sent
	case resize.StateMemoryLimitRefused:
		t.release(e)
		return outcomeKubeletMemoryLimitRefused, sent
	}
	return "", nil
}

const (
	outcomeCompleted                 = "Completed"
	outcomeSuperseded                = "Superseded"
	outcomeKubeletInfeasible         = "KubeletInfeasible"
	outcomeKubeletMemoryLimitRefused = "KubeletMemoryLimitRefused"
)

// warnOnce reports whether the long-Deferred warning for the episode that
// began at since is still to be sent, and marks it sent.
func (t *tracker) warnOnce(uid types.UID, since time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.pods[uid]
	if !ok || e.warnedSince.Equal(since) {
		return false
	}
	e.warnedSince = since
	return true
}

// withheldOnce reports whether the withheld event for target is still to be
// sent, and marks it sent.
func (t *tracker) withheldOnce(uid types.UID, target string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.pods[uid]
	if !ok || e.withheldFor == target {
		return false
	}
	e.withheldFor = target
	return true
}

// since returns when the pod entered its current state.
func (t *tracker) since(uid types.UID) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.pods[uid]
	if !ok {
		return time.Time{}, false
	}
	return e.since, true
}

// notifyOnce reports whether the waiting-for-budget event for blocker is
// still to be sent, and marks it sent.
func (t *tracker) notifyOnce(uid types.UID, blocker string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.pods[uid]
	if !ok || e.waitingFor == blocker {
		return false
	}
	e.waitingFor = blocker
	return true
}

// waitingOnNode returns the keys of the pods whose resize waits for room on
// node.
func (t *tracker) waitingOnNode(node string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, e := range t.pods {
		if e.state == PodWaitingForNode && e.values == node {
			namespace, _, _ := strings.Cut(e.vpa, "/")
			out = append(out, namespace+"/"+e.name)
		}
	}
	return out
}

// waitingIn returns the keys of the pods of namespace whose restarting
// resize waits for a disruption budget.
func (t *tracker) waitingIn(namespace string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, e := range t.pods {
		if e.state == PodWaiting && strings.HasPrefix(e.vpa, namespace+"/") {
			out = append(out, namespace+"/"+e.name)
		}
	}
	return out
}
