package updater

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpainformers "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/informers/externalversions/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/gate"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// What is held back of a resize before it is sent (pkg/resize's evidence
// rule): the pod path gives Decide what is known of the usage behind the
// recommendation, decides the pod again when time alone may end the hold,
// and says once per held target why it waits.

// noteHeld: a resize held back, per reason and target.
const noteHeld = "held"

// DefaultRecommenderInterval is upstream's recommender's default
// --recommender-interval: how often it writes its checkpoints.
const DefaultRecommenderInterval = time.Minute

// evidence is what the pod path knows of the usage vpa's recommendation
// rests on: the VPA (its age, its bounds, its resource policy), the
// recommender's checkpoints of its containers, --decrease-min-history and
// --recommender-interval.
func (c *Controller) evidence(vpa *vpatypes.VerticalPodAutoscaler) *resize.Evidence {
	return &resize.Evidence{VPA: vpa, Histories: c.histories(vpa), MinHistory: c.cfg.DecreaseMinHistory,
		RecommenderInterval: c.recommenderInterval()}
}

// recommenderInterval is --recommender-interval, its default when unset.
func (c *Controller) recommenderInterval() time.Duration {
	if c.cfg.RecommenderInterval <= 0 {
		return DefaultRecommenderInterval
	}
	return c.cfg.RecommenderInterval
}

// evidenceGate gives the decision what is known of the usage behind the
// recommendation (pkg/resize's evidence rule): a decrease waits for enough
// history, any change of a container with no sample yet waits for one.
type evidenceGate struct{ c *Controller }

func (evidenceGate) Name() string { return "evidence" }

func (evidenceGate) Scope() gate.Scope { return gate.Changes }

func (g evidenceGate) Hold(_ context.Context, a *attempt) {
	a.in.Evidence = g.c.evidence(a.vpa)
}

// checkpointIndex indexes checkpoints by the namespace/name of their VPA.
const checkpointIndex = "vpa"

// readCheckpoints indexes the checkpoints of informer by VPA (nil: none are
// read). They are cached without their histograms (cachetrim.Transform, the
// binary's factory).
func (c *Controller) readCheckpoints(informer vpainformers.VerticalPodAutoscalerCheckpointInformer) error {
	if informer == nil {
		return nil
	}
	if err := addIndexers(informer.Informer(), cache.Indexers{checkpointIndex: func(obj any) ([]string, error) {
		cp, ok := obj.(*vpatypes.VerticalPodAutoscalerCheckpoint)
		if !ok {
			return nil, nil
		}
		return []string{cp.Namespace + "/" + cp.Spec.VPAObjectName}, nil
	}}); err != nil {
		return fmt.Errorf("adding checkpoint index: %w", err)
	}
	// Not waited for: an install whose VPA CRDs lack the checkpoints'
	// would never start. Until they are cached, the bounds and the VPA's
	// age tell.
	c.checkpoints = informer.Informer().GetIndexer()
	// A decrease whose checkpoint proves nothing (no sample yet, or not
	// written for two recommender intervals) is held with no timer
	// (nothing tells when the recommender writes it): the write that makes
	// it prove something decides the VPA's pods again, instead of its next
	// status write or the resync.
	// The initial list adds nothing: every pod is decided at start anyway.
	if err := c.handle(informer.Informer(), cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initialList bool) {
			if !initialList {
				c.onCheckpoint(nil, obj)
			}
		},
		UpdateFunc: func(oldObj, obj any) {
			old, _ := oldObj.(*vpatypes.VerticalPodAutoscalerCheckpoint)
			c.onCheckpoint(old, obj)
		},
	}); err != nil {
		return fmt.Errorf("watching checkpoints: %w", err)
	}
	return nil
}

// onCheckpoint queues the VPA of a checkpoint that proves something for a
// decrease now and may not have before (old: the checkpoint before, nil
// when it was just added): it shows its container's first sample, or it
// is written again after a gap long enough for the one before to prove
// nothing (pkg/resize's evidence rule). Later writes in the recommender's
// rhythm change no decision at once: a decrease waiting for more history
// has its own timer.
func (c *Controller) onCheckpoint(old *vpatypes.VerticalPodAutoscalerCheckpoint, obj any) {
	cp, ok := obj.(*vpatypes.VerticalPodAutoscalerCheckpoint)
	if !ok || cp.Status.TotalSamplesCount <= 0 || cp.Spec.VPAObjectName == "" || c.ignored.Has(cp.Namespace) {
		return
	}
	if old != nil && old.Status.TotalSamplesCount > 0 && !c.writtenAfterGap(old, cp) {
		return
	}
	c.vpaQueue.Add(cp.Namespace + "/" + cp.Spec.VPAObjectName)
}

// writtenAfterGap tells whether cp was written so long after old (or old
// did not say when it was) that old may have been judged stale meanwhile:
// more than one and a half recommender intervals, for a pod decided after
// cp was written and before the cache had it.
func (c *Controller) writtenAfterGap(old, cp *vpatypes.VerticalPodAutoscalerCheckpoint) bool {
	was, is := old.Status.LastUpdateTime.Time, cp.Status.LastUpdateTime.Time
	if is.IsZero() {
		return false // proves nothing either
	}
	return was.IsZero() || is.Sub(was) > c.recommenderInterval()*3/2
}

// histories tells, by container, what the recommender's checkpoints of
// vpa say of their samples; nil without checkpoints.
func (c *Controller) histories(vpa *vpatypes.VerticalPodAutoscaler) map[string]resize.History {
	if c.checkpoints == nil {
		return nil
	}
	objs, err := c.checkpoints.ByIndex(checkpointIndex, vpa.Namespace+"/"+vpa.Name)
	if err != nil || len(objs) == 0 {
		return nil
	}
	out := make(map[string]resize.History, len(objs))
	for _, obj := range objs {
		cp, ok := obj.(*vpatypes.VerticalPodAutoscalerCheckpoint)
		if !ok {
			continue
		}
		out[cp.Spec.ContainerName] = resize.History{
			FirstSample: cp.Status.FirstSampleStart.Time, LastSample: cp.Status.LastSampleStart.Time,
			Samples: cp.Status.TotalSamplesCount, Written: cp.Status.LastUpdateTime.Time,
		}
	}
	return out
}

// heldState is the state of a pod whose resize is held back, ok false for
// any other decision.
func heldState(d resize.Decision) (state.Pod, bool) {
	switch d.Reason {
	case resize.ReasonAwaitingEvidence, resize.ReasonOutsideWindow:
		return state.Pod{State: state.PodHeld, Values: d.Target.String(), Message: d.Message}, true
	}
	return state.Pod{}, false
}

// reportHeld sends, once per reason and target, an event on the pod saying
// why its resize is held back; the pod is decided again when the hold may
// end.
func (c *Controller) reportHeld(_ context.Context, pod *corev1.Pod, d resize.Decision) {
	format := ""
	switch d.Reason {
	case resize.ReasonAwaitingEvidence, resize.ReasonOutsideWindow:
		format = "Resize to %s held back: %s"
	case resize.ReasonDecreasesHeld:
		format = "Resizing in place to %s, increases only: %s"
	default:
		return
	}
	if c.tracker.Once(pod.UID, noteHeld, string(d.Reason)+" "+d.Target.String()) {
		c.recorder.Eventf(pod, corev1.EventTypeNormal, report.EventResizeHeld, format, d.Target.String(), d.Message)
	}
}
