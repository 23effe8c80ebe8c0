package updater

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	controllerfetcher "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target/controller_fetcher"

	"github.com/vpa-inplace/vpa-inplace/pkg/target"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// tenantKinds: PodSet and Link are served without /scale, ScalableSet with.
type tenantKinds struct{}

func (tenantKinds) Lookup(_ context.Context, gk schema.GroupKind) (target.KindInfo, error) {
	switch gk {
	case schema.GroupKind{Group: "e2e.vpa-inplace.dev", Kind: "PodSet"}, schema.GroupKind{Group: "e2e.vpa-inplace.dev", Kind: "Link"}:
		return target.KindInfo{Served: true}, nil
	case schema.GroupKind{Group: "e2e.vpa-inplace.dev", Kind: "ScalableSet"}:
		return target.KindInfo{Served: true, Scalable: true}, nil
	}
	return target.KindInfo{}, nil
}

// linkResources: Link is namespaced, read as links.
type linkResources struct{}

func (linkResources) Resource(_ context.Context, gk schema.GroupKind) (target.KindResource, bool, error) {
	if gk == (schema.GroupKind{Group: "e2e.vpa-inplace.dev", Kind: "Link"}) {
		return target.KindResource{Resource: schema.GroupVersionResource{Group: "e2e.vpa-inplace.dev", Version: "v1", Resource: "links"}, Namespaced: true}, true, nil
	}
	return target.KindResource{}, false, nil
}

// hostileSelector: the hostile VPA's target selects the hostile pods.
type hostileSelector struct{}

func (hostileSelector) Fetch(_ context.Context, vpa *vpatypes.VerticalPodAutoscaler) (labels.Selector, error) {
	if vpa.Namespace == "hostile" {
		return labels.SelectorFromSet(labels.Set{"app": "hostile"}), nil
	}
	return nil, fmt.Errorf("no selector for %s", vpa.Name)
}

// Issue #32, item 1, in the updater: while a hostile tenant's pods walk
// owners an API server never answers, the workers left resize another
// tenant's pod. On 12d10ae every worker took a hostile pod, each walking 32
// reads of 10 s that nothing ended, and the victim's pod waited.
func TestHostileOwnerWalksLeaveWorkersToOthers(t *testing.T) {
	var inflight atomic.Int32
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		inflight.Add(1)
		defer inflight.Add(-1)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() { close(stop); srv.Close() })
	meta, err := metadata.NewForConfig(&rest.Config{Host: srv.URL, QPS: 1e6, Burst: 1e6})
	require.NoError(t, err)
	resolver := func(t testing.TB, vpas cache.Indexer) Resolver {
		r, err := target.NewResolver(vpas, hostileSelector{}, controllerfetcher.NilControllerFetcher{}, tenantKinds{}, time.Now,
			target.WithOwners(target.NewMetadataOwners(meta, linkResources{}, nil, time.Now)))
		require.NoError(t, err)
		return r
	}

	const workers, hostilePods = 4, 12
	var pods []*corev1.Pod
	for i := range hostilePods {
		p := testpod.New(fmt.Sprintf("hostile-%d", i)).Namespace("hostile").Labels(map[string]string{"app": "hostile"}).
			Container("c", "100m", "100Mi").Running().Obj()
		for j := range 32 {
			p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "e2e.vpa-inplace.dev/v1", Kind: "Link",
				Name: fmt.Sprintf("l-%d-%d", i, j), UID: types.UID(fmt.Sprintf("uid-%d-%d", i, j)), Controller: ptr.To(false)})
		}
		pods = append(pods, p)
	}
	pods = append(pods, podSetPod("kafka-0", "kafka").Namespace("victim").Running().Obj())
	victim := podSetVPA("300m", "100Mi")
	victim.Namespace = "victim"
	hostile := testvpa.New("pool").Namespace("hostile").Target("e2e.vpa-inplace.dev/v1", "ScalableSet", "never").InPlace().
		Recommend("c", "300m", "100Mi").Obj()
	f := newFixture(t, pods, []*vpatypes.VerticalPodAutoscaler{hostile, victim}, fixtureOpts{resolver: resolver, workers: workers})
	f.run()

	require.Eventually(t, func() bool {
		for _, p := range f.resizedPods() {
			if p == "kafka-0" {
				return true
			}
		}
		return false
	}, 8*time.Second, 20*time.Millisecond, "the victim's pod is resized while the hostile walks stall (%d reads in flight)", inflight.Load())
	require.LessOrEqual(t, inflight.Load(), int32(target.DefaultNamespaceReads), "the hostile namespace reads within its share")
}
