package updater

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/observe"
)

// Every open watch of lowered values is a record in the safety store
// (records.KindWatch, keyed by the pod's UID): the lowerings (what each
// lowered, from what, since when, whether a canary's) and the restart
// counts no harm is above. A restarted updater, or a new leader, takes the
// watch up from there, and judges what happened while no updater ran from
// the pod's status before it passes anything. A canary's record
// (records.KindCanary, the gate's) keeps the watch of its pod beside what
// the gate keeps; once its own lowering has passed, the watch it keeps
// says so.

// saveWatch keeps the pod's watch in its record, in one step with what the
// record holds: the watch of a canary's pod goes on its canary record; a
// revert due is left alone (the watch of what it lowered ended with harm);
// a record of a watch that watches nothing lowered goes.
func (c *Controller) saveWatch(owner records.Owner, uid types.UID) {
	now := c.now()
	c.safetyStore.Update(owner, uid, func(cur *records.Record, ok bool) *records.Record {
		s, watching := c.watcher.Saved(uid)
		switch {
		case ok && cur.Kind == records.KindCanary:
			next := *cur
			next.Watch = recordWatch(s)
			return &next
		case ok && cur.Kind != records.KindWatch:
			return cur
		case !watching:
			return nil
		default:
			return records.NewWatchRecord(recordWatch(s), now)
		}
	})
}

// restoreWatch takes up the watch of a pod not watched from its record,
// if it has one held for its VPA: a watch record, or a canary's.
func (c *Controller) restoreWatch(pod *corev1.Pod, vpa *vpatypes.VerticalPodAutoscaler, window time.Duration) {
	owner := ownerOf(vpa)
	rec, ok := c.safetyStore.GetFor(owner, pod.UID)
	if !ok || rec.Kind != records.KindWatch && rec.Kind != records.KindCanary {
		return
	}
	id := observe.Resize{VPA: vpaKey(vpa), VPAUID: vpa.UID, Name: pod.Name}
	if rec.Watch == nil {
		return // none is written so, nor read so (records.Record.Watch)
	}
	s := savedWatch(rec.Watch)
	c.watcher.Restore(pod.UID, id, window, s, pod)
	if rec.Kind != records.KindCanary {
		return
	}
	for _, l := range s.Lowered {
		if l.Canary {
			return
		}
	}
	// Its own lowering passed before the restart: the gate, which read
	// the canary back, learns it again.
	if _, to, _, unpassed := c.canaries.Canary(owner, pod.UID, window); unpassed {
		c.enqueuePods(c.canaries.Passed(owner, pod.UID, resize.Current(pod, to)))
	}
}

// recordWatch is what a record keeps of a saved watch.
func recordWatch(s observe.Saved) *records.Watch {
	w := &records.Watch{Began: s.Began, Restarts: s.Restarts}
	for _, l := range s.Lowered {
		w.Lowered = append(w.Lowered, records.Lowering{From: l.From, To: l.To, Since: l.Since, Canary: l.Canary})
	}
	return w
}

// savedWatch is the saved watch a record keeps.
func savedWatch(w *records.Watch) observe.Saved {
	s := observe.Saved{Began: w.Began, Restarts: w.Restarts}
	for _, l := range w.Lowered {
		s.Lowered = append(s.Lowered, observe.SavedLowering{From: l.From, To: l.To, Since: l.Since, Canary: l.Canary})
	}
	return s
}

// canaryRecords is the safety store as the gate of decreases sees it
// (pkg/updater/canary): the gate writes its canaries' records with their
// lowering in the watch the pod's record keeps (records.Watch.WithCanary),
// and forgets them without knowing the rest of that watch. One it forgets
// (its canary role over) leaves the watch of the pod's lowerings still open
// as the pod's watch record.
type canaryRecords struct {
	records.Store
}

// Delete implements records.Store.
func (s canaryRecords) Delete(uid types.UID) bool {
	had := false
	s.Update(records.Owner{}, uid, func(cur *records.Record, ok bool) *records.Record {
		had = ok
		if !ok || cur.Kind != records.KindCanary || cur.Watch == nil || len(cur.Watch.Lowered) == 0 {
			return nil
		}
		return records.NewWatchRecord(cur.Watch, cur.RecordedAt)
	})
	return had
}
