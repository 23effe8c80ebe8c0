package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"
	vpainformers "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/informers/externalversions"
)

// amounts are a container's CPU (millicores) and memory (bytes): its
// requests, or a recommendation's target.
type amounts struct {
	CPU    int64
	Memory int64
}

func amountsOf(r corev1.ResourceList) amounts {
	return amounts{CPU: r.Cpu().MilliValue(), Memory: r.Memory().Value()}
}

func (a amounts) String() string {
	return fmt.Sprintf("cpu %dm, memory %.1f MiB", a.CPU, float64(a.Memory)/(1<<20))
}

// podSample is a pod as seen at one time: a new sample is kept each time its
// UID, generation or requests change.
type podSample struct {
	At         time.Time
	UID        types.UID
	Generation int64
	Requests   amounts
}

// targetSample is a VPA's target for the container, kept each time it
// changes.
type targetSample struct {
	At     time.Time
	Target amounts
}

// recRecorder watches the pods and VPAs of one namespace and keeps their
// history: what the recommender wrote and what the updater did, with the
// times the driver saw them.
type recRecorder struct {
	pods    informers.SharedInformerFactory
	vpas    vpainformers.SharedInformerFactory
	synced  []cache.InformerSynced
	now     func() time.Time
	mu      sync.Mutex
	podTL   map[string][]podSample    // pod name -> history
	podApp  map[string]string         // pod name -> its app label (its VPA)
	current map[string]*corev1.Pod    // pod name -> latest object
	vpaTL   map[string][]targetSample // VPA name -> history
}

func newRecRecorder(kube kubernetes.Interface, vpas vpaclientset.Interface, namespace string) (*recRecorder, error) {
	r := &recRecorder{
		pods:    informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(namespace)),
		vpas:    vpainformers.NewSharedInformerFactoryWithOptions(vpas, 0, vpainformers.WithNamespace(namespace)),
		now:     time.Now,
		podTL:   map[string][]podSample{},
		podApp:  map[string]string{},
		current: map[string]*corev1.Pod{},
		vpaTL:   map[string][]targetSample{},
	}
	pi := r.pods.Core().V1().Pods().Informer()
	if _, err := pi.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.observePod,
		UpdateFunc: func(_, obj any) { r.observePod(obj) },
	}); err != nil {
		return nil, err
	}
	vi := r.vpas.Autoscaling().V1().VerticalPodAutoscalers().Informer()
	if _, err := vi.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.observeVPA,
		UpdateFunc: func(_, obj any) { r.observeVPA(obj) },
	}); err != nil {
		return nil, err
	}
	r.synced = []cache.InformerSynced{pi.HasSynced, vi.HasSynced}
	return r, nil
}

func (r *recRecorder) start(ctx context.Context) error {
	r.pods.Start(ctx.Done())
	r.vpas.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), r.synced...) {
		return fmt.Errorf("pod and VPA caches did not sync")
	}
	return nil
}

func (r *recRecorder) shutdown() {
	r.pods.Shutdown()
	r.vpas.Shutdown()
}

func (r *recRecorder) observePod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	s := podSample{At: r.now(), UID: p.UID, Generation: p.Generation, Requests: amountsOf(specRequests(p))}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current[p.Name] = p
	r.podApp[p.Name] = p.Labels[labelApp]
	tl := r.podTL[p.Name]
	if n := len(tl); n > 0 && tl[n-1].UID == s.UID && tl[n-1].Generation == s.Generation && tl[n-1].Requests == s.Requests {
		return
	}
	r.podTL[p.Name] = append(tl, s)
}

func (r *recRecorder) observeVPA(obj any) {
	v, ok := obj.(*vpatypes.VerticalPodAutoscaler)
	if !ok || v.Status.Recommendation == nil {
		return
	}
	for _, c := range v.Status.Recommendation.ContainerRecommendations {
		if c.ContainerName != containerName {
			continue
		}
		s := targetSample{At: r.now(), Target: amountsOf(c.Target)}
		r.mu.Lock()
		tl := r.vpaTL[v.Name]
		if n := len(tl); n == 0 || tl[n-1].Target != s.Target {
			r.vpaTL[v.Name] = append(tl, s)
		}
		r.mu.Unlock()
	}
}

// snapshot copies the histories.
func (r *recRecorder) snapshot() (pods map[string][]podSample, apps map[string]string, targets map[string][]targetSample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pods = make(map[string][]podSample, len(r.podTL))
	for k, v := range r.podTL {
		pods[k] = slices.Clone(v)
	}
	apps = make(map[string]string, len(r.podApp))
	for k, v := range r.podApp {
		apps[k] = v
	}
	targets = make(map[string][]targetSample, len(r.vpaTL))
	for k, v := range r.vpaTL {
		targets[k] = slices.Clone(v)
	}
	return pods, apps, targets
}

// podList returns the latest pods, sorted by name.
func (r *recRecorder) podList() []*corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(r.current))
	for _, p := range r.current {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// resizesBetween counts the resizes of one pod in (from, to]: each
// generation step of the same pod (same UID) is one accepted change of its
// spec, which for a running pod is a resize. A pod that was replaced (new
// UID) is counted in replaced.
func resizesBetween(tl []podSample, from, to time.Time) (resizes, replaced int) {
	var prev *podSample
	for i := range tl {
		s := &tl[i]
		if s.At.After(to) {
			break
		}
		if !s.At.After(from) {
			prev = s
			continue
		}
		if prev != nil {
			switch {
			case s.UID != prev.UID:
				replaced++
			case s.Generation > prev.Generation:
				resizes += int(s.Generation - prev.Generation)
			}
		}
		prev = s
	}
	return resizes, replaced
}

// targetChangesBetween counts the target changes of one VPA in (from, to]
// that move CPU or memory by more than threshold (relative to the previous
// target): the changes an updater with that threshold may follow.
func targetChangesBetween(tl []targetSample, from, to time.Time, threshold float64) int {
	n := 0
	for i := 1; i < len(tl); i++ {
		if !tl[i].At.After(from) || tl[i].At.After(to) {
			continue
		}
		if moved(tl[i-1].Target.CPU, tl[i].Target.CPU, threshold) || moved(tl[i-1].Target.Memory, tl[i].Target.Memory, threshold) {
			n++
		}
	}
	return n
}

func moved(before, after int64, threshold float64) bool {
	if before <= 0 {
		return after != before
	}
	d := float64(after-before) / float64(before)
	return d > threshold || d < -threshold
}

// stepTiming is what followed a usage step on one pod, per resource: when
// the VPA's target first passed the bar (Recommended) and when the pod's
// requests did (Resized); zero when not seen.
type stepTiming struct {
	Recommended, Resized             time.Time
	RecommendedCPU, ResizedCPU       time.Time
	RecommendedMemory, ResizedMemory time.Time
}

// stepLatency follows one pod after its usage was raised at step. The bar,
// per resource, is the larger of the pod's requests and its VPA's target at
// the step, times 1 + threshold: a target above it is a recommendation the
// step caused (not a flap of the old one) that an updater with that
// threshold acts on, and requests above it are the resize that follows it.
// CPU and memory are timed apart; Recommended and Resized are the first of
// the two.
func stepLatency(pod []podSample, target []targetSample, step time.Time, threshold float64) stepTiming {
	var req0, tgt0 amounts
	for _, s := range pod {
		if s.At.After(step) {
			break
		}
		req0 = s.Requests
	}
	for _, s := range target {
		if s.At.After(step) {
			break
		}
		tgt0 = s.Target
	}
	bar := amounts{
		CPU:    int64(float64(max(req0.CPU, tgt0.CPU)) * (1 + threshold)),
		Memory: int64(float64(max(req0.Memory, tgt0.Memory)) * (1 + threshold)),
	}
	first := func(samples int, at func(int) time.Time, over func(int) bool) time.Time {
		for i := range samples {
			if at(i).After(step) && over(i) {
				return at(i)
			}
		}
		return time.Time{}
	}
	tAt := func(i int) time.Time { return target[i].At }
	pAt := func(i int) time.Time { return pod[i].At }
	st := stepTiming{
		RecommendedCPU:    first(len(target), tAt, func(i int) bool { return target[i].Target.CPU > bar.CPU }),
		RecommendedMemory: first(len(target), tAt, func(i int) bool { return target[i].Target.Memory > bar.Memory }),
		ResizedCPU:        first(len(pod), pAt, func(i int) bool { return pod[i].Requests.CPU > bar.CPU }),
		ResizedMemory:     first(len(pod), pAt, func(i int) bool { return pod[i].Requests.Memory > bar.Memory }),
	}
	st.Recommended = earliest(st.RecommendedCPU, st.RecommendedMemory)
	st.Resized = earliest(st.ResizedCPU, st.ResizedMemory)
	return st
}

// earliest is the earlier of two times, zero meaning never.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}
