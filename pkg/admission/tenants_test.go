package admission

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/target"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// A hostile tenant's shape (issue #32): in namespace "hostile", one InPlace
// VPA whose target, a custom resource with /scale, no pod ever reaches; pods
// whose labels its selector matches, each with 32 ownerReferences
// (controller: false) to objects that do not exist. The victim, namespace
// "victim", has a Deployment's pods under an InPlace VPA.
const (
	hostileNS    = "hostile"
	victimNS     = "victim"
	hostileGroup = "e2e.vpa-inplace.dev"
	hostileRefs  = 32
)

var linksResource = schema.GroupVersionResource{Group: hostileGroup, Version: "v1", Resource: "links"}

// stallingAPIServer answers metadata GETs of links with 404, after latency
// (0: only once released, or never): a slow or overloaded API server. It
// counts the GETs in flight, and sees when a client gives one up.
type stallingAPIServer struct {
	srv      *httptest.Server
	release  chan struct{}
	once     sync.Once
	inflight atomic.Int32
	gets     atomic.Int32
}

func newStallingAPIServer(t testing.TB, latency time.Duration) *stallingAPIServer {
	t.Helper()
	s := &stallingAPIServer{release: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.gets.Add(1)
		s.inflight.Add(1)
		defer s.inflight.Add(-1)
		var answer <-chan time.Time
		if latency > 0 {
			answer = time.After(latency)
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.release:
		case <-answer:
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}))
	t.Cleanup(func() {
		s.unblock()
		s.srv.Close()
	})
	return s
}

func (s *stallingAPIServer) unblock() { s.once.Do(func() { close(s.release) }) }

// linkResources serves Link, a namespaced kind, as discovery would.
type linkResources struct{}

func (linkResources) Resource(_ context.Context, gk schema.GroupKind) (target.KindResource, bool, error) {
	if gk == (schema.GroupKind{Group: hostileGroup, Kind: "Link"}) {
		return target.KindResource{Resource: linksResource, Namespaced: true}, true, nil
	}
	return target.KindResource{}, false, nil
}

// tenantKinds: Link has no /scale, ScalableSet has.
type tenantKinds struct{}

func (tenantKinds) Lookup(_ context.Context, gk schema.GroupKind) (target.KindInfo, error) {
	switch gk {
	case schema.GroupKind{Group: hostileGroup, Kind: "Link"}:
		return target.KindInfo{Served: true}, nil
	case schema.GroupKind{Group: hostileGroup, Kind: "ScalableSet"}:
		return target.KindInfo{Served: true, Scalable: true}, nil
	}
	return target.KindInfo{}, nil
}

// selectorsByVPA resolves each VPA's target to a selector of its own.
type selectorsByVPA map[string]labels.Selector

func (s selectorsByVPA) Fetch(_ context.Context, vpa *vpatypes.VerticalPodAutoscaler) (labels.Selector, error) {
	if sel, ok := s[vpa.Namespace+"/"+vpa.Name]; ok {
		return sel, nil
	}
	return nil, fmt.Errorf("no target for %s/%s", vpa.Namespace, vpa.Name)
}

// tenantsResolver is pkg/target's resolver, with the owner walk reading
// metadata from api, over the hostile and the victim VPAs.
func tenantsResolver(t testing.TB, api *stallingAPIServer) *target.Resolver {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	hostile := testvpa.New("pool").Namespace(hostileNS).Target(hostileGroup+"/v1", "ScalableSet", "never").InPlace().Obj()
	victim := testvpa.New("web").Namespace(victimNS).InPlace().Recommend("app", "300m", "300Mi").Obj()
	for _, v := range []*vpatypes.VerticalPodAutoscaler{hostile, victim} {
		require.NoError(t, idx.Add(v))
	}
	meta, err := metadata.NewForConfig(&rest.Config{Host: api.srv.URL, QPS: 1e6, Burst: 1e6})
	require.NoError(t, err)
	r, err := target.NewResolver(idx, selectorsByVPA{
		hostileNS + "/pool": labels.SelectorFromSet(labels.Set{"app": "hostile"}),
		victimNS + "/web":   labels.SelectorFromSet(labels.Set{"app": "web"}),
	}, replicaSetsOfDeployments{}, tenantKinds{}, time.Now,
		target.WithOwners(target.NewMetadataOwners(meta, linkResources{}, nil, time.Now)))
	require.NoError(t, err)
	return r
}

// hostilePodJSON is pod i of the hostile tenant: 32 ownerReferences
// (controller: false) to links that do not exist, its own names.
func hostilePodJSON(i int) string {
	var refs []string
	for j := range hostileRefs {
		refs = append(refs, fmt.Sprintf(`{"apiVersion":%q,"kind":"Link","name":"l-%d-%d","uid":"uid-%d-%d","controller":false}`,
			hostileGroup+"/v1", i, j, i, j))
	}
	return `{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"hostile-","labels":{"app":"hostile"},` +
		`"ownerReferences":[` + strings.Join(refs, ",") + `]},"spec":{"containers":` + appContainer + `}}`
}

// inNamespace moves a review (see review) to namespace ns.
func inNamespace(review, ns string) string {
	return strings.Replace(review, `"namespace":"default"`, fmt.Sprintf(`"namespace":%q`, ns), 1)
}

// victimVPAJSON is an InPlace VPA of the victim's Deployment.
func victimVPAJSON(name string) string {
	return `{"apiVersion":"autoscaling.k8s.io/v1","kind":"VerticalPodAutoscaler",` +
		`"metadata":{"name":"` + name + `","namespace":"` + victimNS + `"},"spec":{` + targetRef + `,"updatePolicy":{"updateMode":"InPlace"}}}`
}

// Issue #32, item 1: while a hostile tenant's pod reviews walk owners that
// never answer, another tenant's VPA is validated (that webhook fails
// closed) and its pods get their recommendation; the hostile reviews end at
// their deadline and give their reads up. On 12d10ae the 16 hostile reviews
// took all 16 slots, each walking 32 reads that ignored the deadline, and
// the victim's VPA CREATE was answered 429.
func TestHostileOwnerWalksDoNotStarveOtherTenants(t *testing.T) {
	api := newStallingAPIServer(t, 0)
	// The hostile reviews end at this deadline; the victim's are answered
	// well within it, on a busy machine too.
	const timeout = 2 * time.Second
	h, _ := testHandler{gate: true, timeout: timeout, resolver: tenantsResolver(t, api)}.build(t)

	const hostilePods = DefaultMaxInflightPods
	var done atomic.Int32
	var wg sync.WaitGroup
	codes := make([]int, hostilePods)
	for i := range hostilePods {
		wg.Go(func() {
			defer done.Add(1)
			rec := post(t, h, MutatePodsPath, inNamespace(podReview("CREATE", hostilePodJSON(i)), hostileNS))
			codes[i] = rec.Code
		})
	}
	// Every hostile review is either answered or waiting on a read.
	require.Eventually(t, func() bool { return done.Load()+api.inflight.Load() >= hostilePods }, waitFor, time.Millisecond,
		"the hostile reviews are answered or reading")
	inflightAtVictim := api.inflight.Load()

	vpa := post(t, h, ValidateVPAsPath, inNamespace(vpaReview("CREATE", victimVPAJSON("web-2"), "null"), victimNS))
	require.Equal(t, http.StatusOK, vpa.Code, "the victim's VPA is validated while %d hostile reads are in flight: %s", inflightAtVictim, vpa.Body.String())
	assert.True(t, response(t, vpa).Allowed)

	pod := post(t, h, MutatePodsPath, inNamespace(podReview("CREATE", podJSON("", appContainer)), victimNS))
	got := applyPatch(t, podJSON("", appContainer), response(t, pod))
	assertResources(t, requirements(testpod.List("300m", "300Mi"), testpod.List("600m", "600Mi")), got.Spec.Containers[0].Resources, "app")

	// The API server still answers nothing: the hostile reviews end at
	// their deadline, admitting their pods unchanged, and their reads are
	// given up.
	require.Eventually(t, func() bool { return done.Load() == hostilePods }, waitFor, 5*time.Millisecond,
		"the hostile reviews end at their deadline (%s) while the API server stalls", timeout)
	wg.Wait()
	for i, code := range codes {
		assert.Equal(t, http.StatusOK, code, "hostile review %d", i)
	}
	require.Eventually(t, func() bool { return api.inflight.Load() == 0 }, waitFor, 5*time.Millisecond,
		"no read outlives the reviews that wanted it")
	t.Logf("hostile GETs: %d, in flight when the victim was served: %d", api.gets.Load(), inflightAtVictim)
}

// Issue #32, item 1: pod reviews, however slow, never take the slots of
// VPA reviews, whose webhooks fail closed. On 12d10ae 16 pod reviews held
// the 16 slots of all endpoints together, and a VPA CREATE got 429.
func TestPodReviewsNeverStarveVPAReviews(t *testing.T) {
	resolver := blockingResolver{entered: make(chan struct{}, DefaultMaxInflightPods), release: make(chan struct{})}
	h, metrics := testHandler{gate: true, resolver: resolver}.build(t)
	var held sync.WaitGroup
	for i := range DefaultMaxInflightPods {
		// One namespace each: the pods' pool itself is full.
		held.Go(func() {
			assert.Equal(t, http.StatusOK, post(t, h, MutatePodsPath, inNamespace(podReview("CREATE", podJSON("", appContainer)), fmt.Sprint("ns-", i))).Code)
		})
	}
	for range DefaultMaxInflightPods {
		<-resolver.entered
	}
	rec := post(t, h, MutatePodsPath, podReview("CREATE", podJSON("", appContainer)))
	assert.Equal(t, http.StatusTooManyRequests, rec.Code, "the pods' pool is full")

	for _, path := range []string{ValidateVPAsPath, ValidateVPAQuantitiesPath} {
		rec := post(t, h, path, inNamespace(vpaReview("CREATE", victimVPAJSON("web"), "null"), victimNS))
		require.Equal(t, http.StatusOK, rec.Code, "%s while the pods' pool is full: %s", path, rec.Body.String())
		assert.True(t, response(t, rec).Allowed)
	}
	close(resolver.release)
	held.Wait()
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.requests.WithLabelValues(EndpointMutatePods, OutcomeThrottled)))
	assert.Zero(t, testutil.ToFloat64(metrics.requests.WithLabelValues(EndpointValidateVPAs, OutcomeThrottled)))
}

// No namespace holds more than its share of an endpoint: past it, its pods
// are admitted unchanged at once and its VPA reviews answered 429, while
// other namespaces are served.
func TestNamespaceShareOfEachEndpoint(t *testing.T) {
	resolver := blockingResolver{entered: make(chan struct{}, 2*DefaultMaxInflightPerNamespace), release: make(chan struct{})}
	h, metrics := testHandler{gate: true, resolver: resolver}.build(t)
	var held sync.WaitGroup
	defer func() {
		close(resolver.release)
		held.Wait()
	}()
	for range DefaultMaxInflightPerNamespace {
		held.Go(func() {
			post(t, h, MutatePodsPath, inNamespace(podReview("CREATE", podJSON("", appContainer)), hostileNS))
		})
	}
	for range DefaultMaxInflightPerNamespace {
		<-resolver.entered
	}

	rec := post(t, h, MutatePodsPath, inNamespace(podReview("CREATE", podJSON("", appContainer)), hostileNS))
	resp := response(t, rec)
	assert.True(t, resp.Allowed)
	assert.Empty(t, resp.Patch, "past its namespace's share a pod is admitted unchanged, at once")
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.requests.WithLabelValues(EndpointMutatePods, OutcomeNamespaceThrottled)))

	held.Go(func() {
		post(t, h, MutatePodsPath, inNamespace(podReview("CREATE", podJSON("", appContainer)), victimNS))
	})
	select {
	case <-resolver.entered:
	case <-time.After(waitFor):
		t.Fatal("another namespace's pod was not reviewed")
	}

	vpas := h.pools[EndpointValidateVPAs]
	for range DefaultMaxInflightPerNamespace {
		release, ok := vpas.enterNamespace(hostileNS)
		require.True(t, ok)
		defer release()
	}
	rec = post(t, h, ValidateVPAsPath, inNamespace(vpaReview("CREATE", victimVPAJSON("web"), "null"), hostileNS))
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	assert.Contains(t, rec.Body.String(), `admission requests of namespace "hostile" at once`)
	assert.Equal(t, 1.0, testutil.ToFloat64(metrics.requests.WithLabelValues(EndpointValidateVPAs, OutcomeNamespaceThrottled)))
	rec = post(t, h, ValidateVPAsPath, inNamespace(vpaReview("CREATE", victimVPAJSON("web"), "null"), victimNS))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}

// Many requests of few namespaces take shares at once: no namespace ever
// holds more than its share. Checking the count and taking a share in two
// steps lets a namespace past it.
func TestInflightNamespaceShareUnderContention(t *testing.T) {
	const size, share, namespaces, workers, rounds = 16, 3, 4, 64, 200
	p := newInflight(size, share)
	held := make([]atomic.Int32, namespaces)
	var most atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			ns := w % namespaces
			for range rounds {
				release, ok := p.enterNamespace(fmt.Sprint(ns))
				if !ok {
					continue
				}
				n := held[ns].Add(1)
				for {
					old := most.Load()
					if n <= old || most.CompareAndSwap(old, n) {
						break
					}
				}
				held[ns].Add(-1)
				release()
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int32(share))
	assert.Empty(t, p.byNamespace, "every share given back")
}

// A request finding its endpoint's slots taken waits for one, first come
// first served, up to slotWait, instead of being refused at once: a
// tenant's requests refused for their namespace's share give their slots
// back within moments, and another tenant's request gets one.
func TestRequestWaitsBrieflyForASlot(t *testing.T) {
	resolver := blockingResolver{entered: make(chan struct{}, 1), release: make(chan struct{})}
	h, metrics := testHandler{gate: true, resolver: resolver, maxInflight: 1}.build(t)
	// Waiting for a slot is what is tested, not how long: a busy machine
	// may take longer than slotWait to hand the slot over.
	pool := h.pools[EndpointMutatePods]
	pool.wait = waitFor
	held := make(chan int, 1)
	go func() { held <- post(t, h, MutatePodsPath, podReview("CREATE", podJSON("", appContainer))).Code }()
	<-resolver.entered

	waiting := make(chan int, 1)
	go func() {
		waiting <- post(t, h, MutatePodsPath, inNamespace(podReview("CREATE", podJSON("", appContainer)), victimNS)).Code
	}()
	require.Eventually(t, func() bool { return pool.waiting.Load() == 1 }, waitFor, time.Millisecond, "the second request waits for a slot")
	close(resolver.release)
	assert.Equal(t, http.StatusOK, <-held)
	assert.Equal(t, http.StatusOK, <-waiting, "the waiting request got the slot given back")
	assert.Zero(t, testutil.ToFloat64(metrics.requests.WithLabelValues(EndpointMutatePods, OutcomeThrottled)))
}
