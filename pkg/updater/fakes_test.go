package updater

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// event is one recorded event.
type event struct {
	kind, name, eventType, reason, message string
}

func (e event) String() string {
	return e.kind + "/" + e.name + " " + e.eventType + " " + e.reason + " " + e.message
}

// eventRecorder records events with the kind of object they are about.
var _ record.EventRecorder = (*eventRecorder)(nil)

type eventRecorder struct {
	mu     sync.Mutex
	events []event
	read   map[string]int
}

func (r *eventRecorder) Event(obj runtime.Object, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := event{eventType: eventType, reason: reason, message: message}
	switch o := obj.(type) {
	case *corev1.Pod:
		e.kind, e.name = "Pod", o.Name
	case *vpatypes.VerticalPodAutoscaler:
		e.kind, e.name = "VerticalPodAutoscaler", o.Name
	case *batchv1.Job:
		e.kind, e.name = "Job", o.Name
	default:
		e.kind = fmt.Sprintf("%T", obj)
	}
	r.events = append(r.events, e)
}

func (r *eventRecorder) Eventf(obj runtime.Object, eventType, reason, messageFmt string, args ...any) {
	r.Event(obj, eventType, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *eventRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventType, reason, messageFmt string, args ...any) {
	r.Eventf(obj, eventType, reason, messageFmt, args...)
}

// unread returns the events about objects of kind not returned before.
func (r *eventRecorder) unread(kind string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.read == nil {
		r.read = map[string]int{}
	}
	var out []string
	seen := 0
	for _, e := range r.events {
		if e.kind != kind {
			continue
		}
		seen++
		if seen > r.read[kind] {
			out = append(out, e.String())
		}
	}
	r.read[kind] = seen
	return out
}

// watchedClock is the controller's clock, telling a test when the
// controller waits on it with After (the records load's backoffs), once it
// waits. A test steps the fake clock once the wait it means to end has
// begun: a step before it is lost, the wait counting from the stepped time.
type watchedClock struct {
	clock.WithTicker
	mu    sync.Mutex
	waits int
}

func (c *watchedClock) After(d time.Duration) <-chan time.Time {
	ch := c.WithTicker.After(d)
	c.mu.Lock()
	c.waits++
	c.mu.Unlock()
	return ch
}

// afters returns how many After waits have begun.
func (c *watchedClock) afters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waits
}

// delays records the AddAfter calls of a queue, each once the queue has
// it: a test that steps the clock once it sees one does not step before
// the queue reads the time the delay counts from.
type delays struct {
	workqueue.TypedRateLimitingInterface[string]
	mu    sync.Mutex
	after map[string][]time.Duration
}

func (d *delays) AddAfter(key string, after time.Duration) {
	d.TypedRateLimitingInterface.AddAfter(key, after)
	d.mu.Lock()
	d.after[key] = append(d.after[key], after)
	d.mu.Unlock()
}

// count returns how many delayed adds of key were asked.
func (d *delays) count(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.after[key])
}

// asked returns the delays asked for key, in order.
func (d *delays) asked(key string) []time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.after[key])
}

// of returns the longest delay asked for key.
func (d *delays) of(key string) (time.Duration, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var longest time.Duration
	for _, after := range d.after[key] {
		longest = max(longest, after)
	}
	return longest, len(d.after[key]) > 0
}

// bumpResourceVersions gives every pod written (patched or updated) a new,
// higher resourceVersion, as the API server does (the fake tracker does
// not), in one write: written twice, a patched pod would reach watchers at
// its old version first.
func bumpResourceVersions(kube *kubefake.Clientset) {
	var mu sync.Mutex
	version := 1000
	tracker := kube.Tracker()
	kube.PrependReactor("update", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		pod, ok := a.(clienttesting.UpdateAction).GetObject().(*corev1.Pod)
		if !ok {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		pod = pod.DeepCopy()
		version++
		pod.ResourceVersion = strconv.Itoa(version)
		return true, pod, tracker.Update(a.GetResource(), pod, pod.Namespace)
	})
	kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		obj, err := patched(tracker, a.(clienttesting.PatchAction))
		pod, ok := obj.(*corev1.Pod)
		if err != nil || !ok {
			return true, obj, err
		}
		version++
		pod.ResourceVersion = strconv.Itoa(version)
		return true, pod, tracker.Update(a.GetResource(), pod, pod.Namespace)
	})
	// Job patches carry the resourceVersion they were decided on: refuse a
	// stale one with a conflict, and bump it (and the generation, for the
	// template) on success, as the API server does.
	kube.PrependReactor("patch", "jobs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		pa := a.(clienttesting.PatchAction)
		mu.Lock()
		defer mu.Unlock()
		current, err := tracker.Get(a.GetResource(), pa.GetNamespace(), pa.GetName())
		if err != nil {
			return true, nil, err
		}
		var sent struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(pa.GetPatch(), &sent); err != nil {
			return true, nil, err
		}
		if rv := current.(*batchv1.Job).ResourceVersion; sent.Metadata.ResourceVersion != "" && sent.Metadata.ResourceVersion != rv {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), pa.GetName(), fmt.Errorf("resourceVersion %s, not %s", rv, sent.Metadata.ResourceVersion))
		}
		obj, err := patched(tracker, pa)
		job, ok := obj.(*batchv1.Job)
		if err != nil || !ok {
			return true, obj, err
		}
		version++
		job.ResourceVersion = strconv.Itoa(version)
		job.Generation++
		return true, job, tracker.Update(a.GetResource(), job, job.Namespace)
	})
}

// patched returns what a patch makes of the tracker's object, without
// writing it: the patch is applied on a scratch tracker holding a copy.
func patched(tracker clienttesting.ObjectTracker, a clienttesting.PatchAction) (runtime.Object, error) {
	current, err := tracker.Get(a.GetResource(), a.GetNamespace(), a.GetName())
	if err != nil {
		return nil, err
	}
	scratch := clienttesting.NewObjectTracker(scheme.Scheme, scheme.Codecs.UniversalDecoder())
	if err := scratch.Add(current); err != nil {
		return nil, err
	}
	_, obj, err := clienttesting.ObjectReaction(scratch)(a)
	return obj, err
}
