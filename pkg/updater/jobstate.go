package updater

import (
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
)

// JobState is where a suspended Job of an InPlace VPA stands with its
// recommendation, as the VPA condition and the metrics report it. Only
// suspended Jobs are tracked: once resumed, their pods are.
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

// jobStates lists the states in the order metrics and the condition show them.
var jobStates = []JobState{JobTemplateUpToDate, JobWaiting, JobWithheld, JobRejected, JobError, JobNoRecommendation}

// jobStatus is what is reported about one Job.
type jobStatus struct {
	vpa   string // namespace/name of the Job's VPA
	name  string
	state JobState
	// since is when the Job entered this state.
	since   time.Time
	message string
	// values are the recorded values (Rejected) or the target (Withheld).
	values string
	kind   records.Kind
}

func (a jobStatus) equal(b jobStatus) bool {
	return a.vpa == b.vpa && a.name == b.name && a.state == b.state && a.since.Equal(b.since) &&
		a.message == b.message && a.values == b.values && a.kind == b.kind
}

type jobEntry struct {
	jobStatus
	// withheldFor is the target a withheld event was sent for.
	withheldFor string
	// stale tells which cached versions of the Job predate a write the
	// updater made: the same rule as for pods.
	stale *staleVersion
}

// jobTracker remembers the state of every suspended Job of an InPlace VPA,
// grouped by VPA.
type jobTracker struct {
	mu    sync.Mutex
	jobs  map[types.UID]*jobEntry
	byVPA vpaGroups
}

func newJobTracker() *jobTracker {
	return &jobTracker{jobs: map[types.UID]*jobEntry{}, byVPA: vpaGroups{}}
}

// set records a Job's status; a zero since keeps the time the Job entered
// the state (now when it is new). It returns the VPAs whose summary changed.
func (t *jobTracker) set(uid types.UID, st jobStatus, now time.Time) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, existed := t.jobs[uid]
	if !existed {
		e = &jobEntry{}
		t.jobs[uid] = e
	}
	before := e.jobStatus
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
	if existed && before.vpa != st.vpa {
		t.byVPA.remove(before.vpa, uid)
	}
	t.byVPA.add(st.vpa, uid)
	e.jobStatus = st
	if st.state != JobWithheld {
		e.withheldFor = ""
	}
	if existed && before.vpa != st.vpa {
		return []string{before.vpa, st.vpa}
	}
	return []string{st.vpa}
}

// forget drops a Job and returns the VPA it was counted under.
func (t *jobTracker) forget(uid types.UID) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.jobs[uid]
	if !ok {
		return "", false
	}
	delete(t.jobs, uid)
	t.byVPA.remove(e.vpa, uid)
	return e.vpa, true
}

// retain forgets the Jobs live says are gone and returns the VPAs whose
// Jobs changed.
func (t *jobTracker) retain(live func(types.UID) bool) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var changed []string
	for uid, e := range t.jobs {
		if !live(uid) {
			delete(t.jobs, uid)
			t.byVPA.remove(e.vpa, uid)
			changed = append(changed, e.vpa)
		}
	}
	return changed
}

// forgetVPA drops every Job counted under a VPA.
func (t *jobTracker) forgetVPA(vpa string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for uid := range t.byVPA.drop(vpa) {
		delete(t.jobs, uid)
	}
}

// jobsOf returns the statuses of a VPA's Jobs, by name.
func (t *jobTracker) jobsOf(vpa string) []jobStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]jobStatus, 0, t.byVPA[vpa].Len())
	for uid := range t.byVPA[vpa] {
		out = append(out, t.jobs[uid].jobStatus)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// counts returns the number of tracked Jobs in each state.
func (t *jobTracker) counts() map[JobState]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[JobState]int{}
	for _, e := range t.jobs {
		out[e.state]++
	}
	return out
}

// withheldOnce reports whether the withheld event for target is still to be
// sent, and marks it sent.
func (t *jobTracker) withheldOnce(uid types.UID, target string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.jobs[uid]
	if !ok || e.withheldFor == target {
		return false
	}
	e.withheldFor = target
	return true
}

// markSent remembers a write accepted at "at" for a Job decided at
// resourceVersion cached, which made resourceVersion sent ("" when the API
// server did not say). Call it after set, which creates the entry.
func (t *jobTracker) markSent(uid types.UID, cached, sent string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.jobs[uid]; ok {
		e.stale = &staleVersion{cached: cached, sent: sent, since: at}
	}
}

// cacheBehind reports whether the cached Job, at resourceVersion version,
// predates a write the updater made: deciding on it would write again (and
// fail on the resourceVersion). The Job's update event brings it back. After
// maxCacheLag the cache is trusted again.
func (t *jobTracker) cacheBehind(uid types.UID, version string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.jobs[uid]
	if !ok || e.stale == nil {
		return false
	}
	if !e.stale.predates(version) || now.Sub(e.stale.since) >= maxCacheLag {
		e.stale = nil
		return false
	}
	return true
}
