package target

import (
	"context"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpatarget "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target"
)

// RefreshInterval is how often, at most, the selector fetcher is built anew
// for a target whose kind it does not know.
const RefreshInterval = 10 * time.Second

// refreshingFetcher is upstream's selector fetcher, built anew when a fetch
// fails because the fetcher's REST mapper does not know the target's kind.
// Upstream refreshes that mapper every 5 minutes only, so a VPA on a custom
// resource whose CRD was installed after the start (a Strimzi operator
// installed after the updater, say) would find no pods for up to 5 minutes.
// Each fetcher built runs until the next one replaces it.
type refreshingFetcher struct {
	parent context.Context
	build  func(stop <-chan struct{}) vpatarget.VpaTargetSelectorFetcher
	now    func() time.Time

	mu      sync.Mutex
	current vpatarget.VpaTargetSelectorFetcher
	// generation counts the fetchers built: a fetch tells by it whether the
	// one it used was replaced meanwhile.
	generation int
	stop       context.CancelFunc
	builtAt    time.Time
}

func newRefreshingFetcher(ctx context.Context, now func() time.Time,
	build func(stop <-chan struct{}) vpatarget.VpaTargetSelectorFetcher) *refreshingFetcher {
	f := &refreshingFetcher{parent: ctx, build: build, now: now}
	f.renew()
	return f
}

// renew builds a fetcher and stops the one it replaces. Callers hold f.mu,
// or own f alone.
func (f *refreshingFetcher) renew() {
	ctx, stop := context.WithCancel(f.parent)
	f.current = f.build(ctx.Done())
	f.generation++
	if f.stop != nil {
		f.stop()
	}
	f.stop, f.builtAt = stop, f.now()
}

// Fetch implements upstream's VpaTargetSelectorFetcher.
func (f *refreshingFetcher) Fetch(ctx context.Context, vpa *vpatypes.VerticalPodAutoscaler) (labels.Selector, error) {
	f.mu.Lock()
	current, generation := f.current, f.generation
	f.mu.Unlock()
	sel, err := current.Fetch(ctx, vpa)
	if err == nil || !unknownKind(err) {
		return sel, err
	}
	f.mu.Lock()
	switch {
	case f.generation != generation:
		// Another fetch built a new one meanwhile.
	case f.now().Sub(f.builtAt) < RefreshInterval:
		f.mu.Unlock()
		return sel, err
	default:
		f.renew()
	}
	current = f.current
	f.mu.Unlock()
	return current.Fetch(ctx, vpa)
}

// unknownKind tells whether a fetch failed because the REST mapper does not
// know the target's kind. Upstream's fetcher folds the mapper's error into
// its own message with %v, so only the text is left to read.
func unknownKind(err error) bool {
	return strings.Contains(err.Error(), "no matches for kind")
}
