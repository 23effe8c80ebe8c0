package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// expectation is what the driver waits for on one pod after a
// recommendation change: the resize accepted (the pod's generation moves
// and its spec holds the target) and then completed (the kubelet has
// observed that generation and no resize is pending or in progress).
type expectation struct {
	group     string
	namespace string
	uid       string
	target    corev1.ResourceList
	t0        time.Time
	startGen  int64

	accepted  time.Time
	completed time.Time
	deferred  time.Time
}

// Tracker watches the workload's pods and timestamps what happens to them.
type Tracker struct {
	factory informers.SharedInformerFactory
	synced  cache.InformerSynced
	// namespaces are those watched when there are several (the informer
	// then watches every namespace); nil when there is one (the informer
	// watches it alone, and pods are known by their names).
	namespaces map[string]bool

	mu sync.Mutex
	// pods and exp are keyed by the pods' key: the name with one
	// namespace, namespace/name with several.
	pods     map[string]*corev1.Pod
	exp      map[string]*expectation
	past     []podRecord
	genBumps int
}

// podRecord is a finished expectation, kept for the per-pod CSV.
type podRecord struct {
	pod string
	e   expectation
}

// NewTracker watches the pods of namespaces.
func NewTracker(kube kubernetes.Interface, namespaces []string) (*Tracker, error) {
	if len(namespaces) == 0 {
		return nil, fmt.Errorf("no namespace to watch")
	}
	t := &Tracker{pods: map[string]*corev1.Pod{}, exp: map[string]*expectation{}}
	if len(namespaces) == 1 {
		t.factory = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(namespaces[0]))
	} else {
		t.factory = informers.NewSharedInformerFactoryWithOptions(kube, 0)
		t.namespaces = map[string]bool{}
		for _, ns := range namespaces {
			t.namespaces[ns] = true
		}
	}
	inf := t.factory.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.observe(obj) },
		UpdateFunc: func(_, obj any) { t.observe(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok && t.watched(p) {
				t.mu.Lock()
				delete(t.pods, t.key(p))
				t.mu.Unlock()
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("adding pod handler: %w", err)
	}
	t.synced = inf.HasSynced
	return t, nil
}

// Start runs the informer until ctx ends and waits for its cache.
func (t *Tracker) Start(ctx context.Context) error {
	t.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), t.synced) {
		return fmt.Errorf("pod cache did not sync")
	}
	return nil
}

// Shutdown stops the informer.
func (t *Tracker) Shutdown() { t.factory.Shutdown() }

// watched reports whether p is of a namespace of the workload.
func (t *Tracker) watched(p *corev1.Pod) bool {
	return t.namespaces == nil || t.namespaces[p.Namespace]
}

// key is how the tracker knows p: its name with one namespace,
// namespace/name with several.
func (t *Tracker) key(p *corev1.Pod) string {
	if t.namespaces == nil {
		return p.Name
	}
	return p.Namespace + "/" + p.Name
}

func (t *Tracker) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !t.watched(pod) {
		return
	}
	now := time.Now()
	key := t.key(pod)
	t.mu.Lock()
	defer t.mu.Unlock()
	if old := t.pods[key]; old != nil && old.UID == pod.UID && pod.Generation > old.Generation {
		t.genBumps++
	}
	t.pods[key] = pod
	e := t.exp[key]
	if e == nil || e.uid != string(pod.UID) {
		return
	}
	if e.accepted.IsZero() && pod.Generation > e.startGen && sameResources(specRequests(pod), e.target) {
		e.accepted = now
	}
	if e.accepted.IsZero() {
		return
	}
	if e.completed.IsZero() && settled(pod, e.target) {
		e.completed = now
	}
	if e.deferred.IsZero() && resizeReason(pod, corev1.PodResizePending) == corev1.PodReasonDeferred {
		e.deferred = now
	}
}

// Expect registers, for every live pod of app, that its requests should
// become target after a change made at t0 (call it before the change).
// It returns how many pods are expected.
func (t *Tracker) Expect(group, app string, target corev1.ResourceList, t0 time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for name, p := range t.pods {
		if p.Labels[labelApp] != app || p.DeletionTimestamp != nil {
			continue
		}
		if old := t.exp[name]; old != nil {
			t.past = append(t.past, podRecord{pod: name, e: *old})
		}
		t.exp[name] = &expectation{group: group, namespace: p.Namespace, uid: string(p.UID), target: target, t0: t0, startGen: p.Generation}
		n++
	}
	return n
}

// Forget drops every expectation (before the next updater runs).
func (t *Tracker) Forget() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.exp = map[string]*expectation{}
	t.past = nil
}

// WriteCSV writes one line per expectation: group, pod, change time and
// seconds to accepted and to completed (empty when not seen).
func (t *Tracker) WriteCSV(path string) error {
	t.mu.Lock()
	records := slices.Clone(t.past)
	for name, e := range t.exp {
		records = append(records, podRecord{pod: name, e: *e})
	}
	t.mu.Unlock()
	slices.SortFunc(records, func(a, b podRecord) int {
		if c := a.e.t0.Compare(b.e.t0); c != 0 {
			return c
		}
		return strings.Compare(a.pod, b.pod)
	})
	var b strings.Builder
	b.WriteString("group,pod,t0,accepted_s,completed_s,deferred\n")
	since := func(at, t0 time.Time) string {
		if at.IsZero() {
			return ""
		}
		return strconv.FormatFloat(at.Sub(t0).Seconds(), 'f', 3, 64)
	}
	for _, r := range records {
		fmt.Fprintf(&b, "%s,%s,%s,%s,%s,%t\n", r.e.group, r.pod, r.e.t0.UTC().Format(time.RFC3339Nano),
			since(r.e.accepted, r.e.t0), since(r.e.completed, r.e.t0), !r.e.deferred.IsZero())
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// groupResult is what happened to the pods of one group of expectations.
type groupResult struct {
	Expected  int
	Accepted  []time.Duration // from t0, one per pod that was accepted
	Completed []time.Duration // from t0
	Deferred  int
	// LastAccepted and LastCompleted are the latest times, from the
	// earliest t0 of the group.
	LastAccepted, LastCompleted time.Duration
}

// Group summarizes the expectations of group.
func (t *Tracker) Group(group string) groupResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	var r groupResult
	var first time.Time
	for _, e := range t.exp {
		if e.group == group && (first.IsZero() || e.t0.Before(first)) {
			first = e.t0
		}
	}
	for _, e := range t.exp {
		if e.group != group {
			continue
		}
		r.Expected++
		if !e.accepted.IsZero() {
			r.Accepted = append(r.Accepted, e.accepted.Sub(e.t0))
			r.LastAccepted = max(r.LastAccepted, e.accepted.Sub(first))
		}
		if !e.completed.IsZero() {
			r.Completed = append(r.Completed, e.completed.Sub(e.t0))
			r.LastCompleted = max(r.LastCompleted, e.completed.Sub(first))
		}
		if !e.deferred.IsZero() {
			r.Deferred++
		}
	}
	return r
}

// acceptance is one pod's resize accepted: the pod's namespace and the
// time from its group's change.
type acceptance struct {
	namespace string
	after     time.Duration
}

// Acceptances returns the resizes of group accepted so far, one per pod.
func (t *Tracker) Acceptances(group string) []acceptance {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []acceptance
	for _, e := range t.exp {
		if e.group == group && !e.accepted.IsZero() {
			out = append(out, acceptance{namespace: e.namespace, after: e.accepted.Sub(e.t0)})
		}
	}
	return out
}

// GenBumps counts the generation changes seen on pods so far.
func (t *Tracker) GenBumps() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.genBumps
}

// Pods returns the live pods whose app label passes keep.
func (t *Tracker) Pods(keep func(app string) bool) []*corev1.Pod {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*corev1.Pod
	for _, p := range t.pods {
		if p.DeletionTimestamp == nil && keep(p.Labels[labelApp]) {
			out = append(out, p)
		}
	}
	return out
}

// waitUntil polls cond every 250ms until it holds or timeout passes.
func waitUntil(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// waitProgress polls count until it reaches want (true) or has not grown for
// stall, or ctx ends (false); it returns the last count.
func waitProgress(ctx context.Context, stall time.Duration, count func() int, want int) (int, bool) {
	best, since := -1, time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		n := count()
		switch {
		case n >= want:
			return n, true
		case n > best:
			best, since = n, time.Now()
		case time.Since(since) >= stall:
			return n, false
		}
		select {
		case <-ctx.Done():
			return n, false
		case <-tick.C:
		}
	}
}

func specRequests(p *corev1.Pod) corev1.ResourceList {
	for _, c := range p.Spec.Containers {
		if c.Name == containerName {
			return c.Resources.Requests
		}
	}
	return nil
}

func sameResources(a, b corev1.ResourceList) bool {
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		x, y := a[r], b[r]
		if x.Cmp(y) != 0 {
			return false
		}
	}
	return true
}

// settled: the spec holds target, the kubelet has observed the pod's
// generation, no resize is pending or in progress and the container's
// status resources (when reported) match.
func settled(p *corev1.Pod, target corev1.ResourceList) bool {
	if !sameResources(specRequests(p), target) || p.Status.ObservedGeneration < p.Generation {
		return false
	}
	if resizeReason(p, corev1.PodResizePending) != "" || resizeReason(p, corev1.PodResizeInProgress) != "" {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == containerName && cs.Resources != nil && !sameResources(cs.Resources.Requests, target) {
			return false
		}
	}
	return p.Status.Phase == corev1.PodRunning
}

// resizeReason returns the reason of condition typ when it is True, "-"
// when it is True without a reason, and "" when absent.
func resizeReason(p *corev1.Pod, typ corev1.PodConditionType) string {
	for _, c := range p.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			if c.Reason == "" {
				return "-"
			}
			return c.Reason
		}
	}
	return ""
}

func ready(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
