package records

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaclient "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/typed/autoscaling.k8s.io/v1"
	vpalisters "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/listers/autoscaling.k8s.io/v1"
)

// pagedVPAs serves VPAs a page at a time, or never answers.
type pagedVPAs struct {
	vpaclient.VerticalPodAutoscalerInterface
	items []vpatypes.VerticalPodAutoscaler
	hang  bool
	calls *[]metav1.ListOptions
}

func (p pagedVPAs) List(ctx context.Context, opts metav1.ListOptions) (*vpatypes.VerticalPodAutoscalerList, error) {
	*p.calls = append(*p.calls, opts)
	if p.hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	start := 0
	if opts.Continue != "" {
		start, _ = strconv.Atoi(opts.Continue)
	}
	end := len(p.items)
	if opts.Limit > 0 {
		end = min(start+int(opts.Limit), end)
	}
	list := &vpatypes.VerticalPodAutoscalerList{Items: p.items[start:end]}
	if end < len(p.items) {
		list.Continue = strconv.Itoa(end)
	}
	return list, nil
}

type pagedGetter struct{ p pagedVPAs }

func (g pagedGetter) VerticalPodAutoscalers(string) vpaclient.VerticalPodAutoscalerInterface {
	return g.p
}

func emptyLister() vpalisters.VerticalPodAutoscalerLister {
	return vpalisters.NewVerticalPodAutoscalerLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
}

func TestVPAStoreLoadReadsEveryPage(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var items []vpatypes.VerticalPodAutoscaler
	for i := range 2*loadPageSize + 7 {
		items = append(items, *annotated("vpa-"+strconv.Itoa(i), map[types.UID]*Record{types.UID("pod-" + strconv.Itoa(i)): rec(KindNodeCapacity, "8", "no room", t0)}))
	}
	var calls []metav1.ListOptions
	s := NewVPAStore(pagedGetter{pagedVPAs{items: items, calls: &calls}}, emptyLister(), VPAStoreConfig{})
	require.NoError(t, s.Load(ctx))
	assert.Equal(t, len(items), s.Len())
	require.Len(t, calls, 3)
	for _, c := range calls {
		assert.EqualValues(t, loadPageSize, c.Limit, "never the whole list at once")
	}
}

func TestVPAStoreLoadGivesUpAfterItsTimeout(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var calls []metav1.ListOptions
	s := NewVPAStore(pagedGetter{pagedVPAs{hang: true, calls: &calls}}, emptyLister(), VPAStoreConfig{LoadTimeout: 50 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- s.Load(ctx) }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(time.Minute):
		t.Fatal("Load did not give up")
	}
	assert.ErrorIs(t, s.Loaded(), context.DeadlineExceeded, "readiness says why")
}
