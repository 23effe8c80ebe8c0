// Package usage reads the memory in use by the containers of a pod from the
// resource metrics API (metrics.k8s.io/v1beta1, served by metrics-server or
// another implementation), so that the updater never lowers a memory limit
// to the memory in use.
//
// The API is optional and may come and go: it is looked for through
// discovery at start, looked for again at most once per recheck interval
// while it is missing or failing, and a pod's usage (or the failure to get
// it) is reused for a short while. Callers treat every error as "usage
// unknown": nothing waits for the API.
//
// The API reports each container's working set. The kubelet compares a new
// limit with the memory usage of the container's cgroup, which also counts
// reclaimable page cache and can be higher: the margin covers part of the
// difference, and the kubelet's own check remains the last line.
package usage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	metricsv1beta1 "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
)

// GroupVersion is the metrics API group version read.
const GroupVersion = "metrics.k8s.io/v1beta1"

var (
	// ErrUnavailable: the metrics API is not served (or not reachable, or
	// not allowed) at the moment.
	ErrUnavailable = errors.New("the metrics API (" + GroupVersion + ") is not available")
	// ErrNoMetrics: the API has no metrics for the pod (yet).
	ErrNoMetrics = errors.New("the metrics API has no metrics for the pod")
)

// Result is the outcome of one request to the metrics API, for metrics.
type Result string

const (
	// ResultFound: the pod's metrics were read.
	ResultFound Result = "Found"
	// ResultNotFound: the API has no metrics for the pod.
	ResultNotFound Result = "NotFound"
	// ResultUnavailable: the API answered that it is unavailable (503) or
	// that the updater may not read it (403).
	ResultUnavailable Result = "Unavailable"
	// ResultError: any other failure.
	ResultError Result = "Error"
)

// Source tells the memory in use by each container of a pod.
type Source interface {
	// MemoryUsage returns the memory in use by each container of pod,
	// keyed by container name; containers without metrics are absent.
	MemoryUsage(ctx context.Context, pod *corev1.Pod) (map[string]resource.Quantity, error)
	// Available reports whether usage can be had at all (for the
	// metrics API: whether it was served when last looked for).
	Available() bool
}

// Discovery is the part of client-go's discovery client used to look for
// the API.
type Discovery interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// Config configures a MetricsSource.
type Config struct {
	// TTL is how long a pod's usage, or the failure to read it, is reused;
	// 0 means 15s (metrics-server's default resolution).
	TTL time.Duration
	// Recheck is how often the API is looked for again while it is missing,
	// or after a failed read; 0 means 1m.
	Recheck time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Observe, when set, is called with the outcome of every request made
	// to the metrics API (not of reads answered from the cache).
	Observe func(Result)
}

// MetricsSource reads usage from the metrics API. It is safe for
// concurrent use.
type MetricsSource struct {
	discovery Discovery
	client    metricsv1beta1.PodMetricsesGetter
	cfg       Config

	// checkMu serializes looking for the API.
	checkMu sync.Mutex

	mu        sync.Mutex
	available bool
	checked   bool
	checkedAt time.Time
	cache     map[types.UID]cached
	prunedAt  time.Time
}

type cached struct {
	usage map[string]resource.Quantity
	err   error
	at    time.Time
}

var _ Source = (*MetricsSource)(nil)

// NewMetricsSource returns a source that has not looked for the API yet:
// call Check at start (MemoryUsage also looks for it when it has to).
func NewMetricsSource(discovery Discovery, client metricsv1beta1.PodMetricsesGetter, cfg Config) *MetricsSource {
	if cfg.TTL <= 0 {
		cfg.TTL = 15 * time.Second
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &MetricsSource{discovery: discovery, client: client, cfg: cfg, cache: map[types.UID]cached{}}
}

// Available reports whether the API was served when last looked for (false
// before the first look).
func (s *MetricsSource) Available() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.available
}

// Check looks for the API through discovery now, remembers the answer and
// returns it.
func (s *MetricsSource) Check(ctx context.Context) bool {
	s.checkMu.Lock()
	defer s.checkMu.Unlock()
	list, err := s.discovery.ServerResourcesForGroupVersion(GroupVersion)
	why := ""
	switch {
	case err != nil:
		why = err.Error()
	case !hasPods(list):
		why = "the group version is served without the pods resource"
	}
	s.setAvailable(ctx, why == "", why)
	return why == ""
}

func hasPods(list *metav1.APIResourceList) bool {
	if list == nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == "pods" {
			return true
		}
	}
	return false
}

// setAvailable records an answer and logs when it changes.
func (s *MetricsSource) setAvailable(ctx context.Context, available bool, why string) {
	s.mu.Lock()
	changed := !s.checked || s.available != available
	s.available, s.checked, s.checkedAt = available, true, s.cfg.Now()
	s.mu.Unlock()
	if !changed {
		return
	}
	logger := klog.FromContext(ctx)
	if available {
		logger.Info("The metrics API is available: memory limits are lowered only above the memory in use plus the margin", "groupVersion", GroupVersion)
		return
	}
	logger.Info("The metrics API is not available: memory limits are lowered without knowing the memory in use, and the kubelet's own check is the last line",
		"groupVersion", GroupVersion, "why", why, "lookAgainIn", s.cfg.Recheck)
}

// recheckDue tells whether the API is to be looked for again: never looked
// for, or missing (or failing) for longer than the recheck interval.
func (s *MetricsSource) recheckDue(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.checked || now.Sub(s.checkedAt) >= s.cfg.Recheck
}

// MemoryUsage implements Source. Errors: ErrUnavailable while the API is
// missing; ErrNoMetrics when it has none for the pod; others wrapped.
func (s *MetricsSource) MemoryUsage(ctx context.Context, pod *corev1.Pod) (map[string]resource.Quantity, error) {
	now := s.cfg.Now()
	s.mu.Lock()
	if e, ok := s.cache[pod.UID]; ok && now.Sub(e.at) < s.cfg.TTL {
		s.mu.Unlock()
		return e.usage, e.err
	}
	available := s.available
	s.mu.Unlock()
	if !available && (!s.recheckDue(now) || !s.Check(ctx)) {
		return nil, ErrUnavailable
	}

	pm, err := s.client.PodMetricses(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	var usage map[string]resource.Quantity
	switch {
	case err == nil:
		s.observe(ResultFound)
		usage = make(map[string]resource.Quantity, len(pm.Containers))
		for _, c := range pm.Containers {
			if q, ok := c.Usage[corev1.ResourceMemory]; ok {
				usage[c.Name] = q.DeepCopy()
			}
		}
	case apierrors.IsServiceUnavailable(err) || apierrors.IsForbidden(err):
		// The aggregator has no backend for the API, or this updater may
		// not read it: nothing is to be had from it for a while.
		s.observe(ResultUnavailable)
		s.setAvailable(ctx, false, err.Error())
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case apierrors.IsNotFound(err):
		// No metrics for this pod yet, or no API any more (a 404 looks the
		// same): look for the API again when due.
		s.observe(ResultNotFound)
		err = ErrNoMetrics
		if s.recheckDue(now) {
			s.Check(ctx)
		}
	default:
		s.observe(ResultError)
		err = fmt.Errorf("reading the metrics of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		if s.recheckDue(now) {
			s.Check(ctx)
		}
	}
	s.remember(pod.UID, cached{usage: usage, err: err, at: now})
	return usage, err
}

func (s *MetricsSource) observe(r Result) {
	if s.cfg.Observe != nil {
		s.cfg.Observe(r)
	}
}

// remember caches an answer and, once per TTL, forgets expired ones.
func (s *MetricsSource) remember(uid types.UID, e cached) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cache[uid] = e
	if e.at.Sub(s.prunedAt) < s.cfg.TTL {
		return
	}
	for k, v := range s.cache {
		if e.at.Sub(v.at) >= s.cfg.TTL {
			delete(s.cache, k)
		}
	}
	s.prunedAt = e.at
}
