package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2/ktesting"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	controllerfetcher "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target/controller_fetcher"
	"k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/limitrange"

	"github.com/vpa-inplace/vpa-inplace/pkg/features"
	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/target"
)

// testHandler builds a Handler for tests. vpas are the VPAs in the cluster;
// pods owned by ReplicaSet web-7d9f8 belong to Deployment web, the target of
// testvpa's VPAs, and the target selector is app=web.
// waitFor bounds each wait for a condition that the code meets within
// milliseconds on an idle machine: generous, so that a busy one (other
// builds, the race detector) does not fail a test that would pass.
const waitFor = time.Minute

type testHandler struct {
	gate bool
	// boost turns on the CPUStartupBoost gate, and the InPlace gate with it.
	boost       bool
	recorder    record.EventRecorder
	vpas        []*vpatypes.VerticalPodAutoscaler
	resolver    VPAResolver
	recommender Recommender
	limitRange  *corev1.LimitRangeItem
	// limitRanges and quotas are the objects of the cluster, read through
	// informers as the admission controller does.
	limitRanges []*corev1.LimitRange
	quotas      []*corev1.ResourceQuota
	ignored     []string
	namespace   string
	maxBytes    int64
	timeout     time.Duration
	maxInflight int
	// holds are the VPAs' holds after harm; now the time they are read at.
	holds HoldReader
	now   func() time.Time
}

func (c testHandler) build(t testing.TB) (*Handler, *Metrics) {
	t.Helper()
	gate := features.NewFeatureGate()
	require.NoError(t, gate.Set(fmt.Sprintf("%s=%t,%s=%t", features.InPlace, c.gate || c.boost, features.CPUStartupBoost, c.boost)))
	metrics, err := NewMetrics(nil)
	require.NoError(t, err)
	resolver := c.resolver
	if resolver == nil {
		resolver = clusterResolver(t, c.vpas...)
	}
	var admissionLimits *Limits
	var lister corelisters.LimitRangeLister
	recommender := c.recommender
	if recommender == nil {
		var limits limitrange.LimitRangeCalculator = limitrange.NewNoopLimitsCalculator()
		if c.limitRange != nil {
			limits = fixedLimitRange{c.limitRange}
		}
		if c.limitRanges != nil || c.quotas != nil {
			factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
			lister = factory.Core().V1().LimitRanges().Lister()
			for _, lr := range c.limitRanges {
				require.NoError(t, factory.Core().V1().LimitRanges().Informer().GetIndexer().Add(lr))
			}
			for _, q := range c.quotas {
				require.NoError(t, factory.Core().V1().ResourceQuotas().Informer().GetIndexer().Add(q))
			}
			var err error
			limits, err = limitrange.NewLimitsRangeCalculator(factory)
			require.NoError(t, err)
			admissionLimits, err = NewLimits(factory)
			require.NoError(t, err)
		}
		calc := recommendation.NewCalculator(limits)
		if c.limitRanges != nil {
			calc.WithLimitRanges(lister)
		}
		recommender = calc
	}
	h, err := NewHandler(Config{
		FeatureGate:       gate,
		VPAs:              resolver,
		Recommendations:   recommender,
		Limits:            admissionLimits,
		Metrics:           metrics,
		Recorder:          c.recorder,
		Namespace:         c.namespace,
		IgnoredNamespaces: c.ignored,
		MaxRequestBytes:   c.maxBytes,
		Timeout:           c.timeout,
		MaxInflightPods:   c.maxInflight,
		Holds:             c.holds,
		Now:               c.now,
	})
	require.NoError(t, err)
	return h, metrics
}

// clusterResolver is pkg/target's resolver over a VPA lister, with the
// selector and controller hierarchy of a small cluster, which also serves
// the custom resource PodSet (group e2e.vpa-inplace.dev) without /scale.
func clusterResolver(t testing.TB, vpas ...*vpatypes.VerticalPodAutoscaler) *target.Resolver {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, v := range vpas {
		require.NoError(t, idx.Add(v))
	}
	r, err := target.NewResolver(idx,
		staticSelector{labels.SelectorFromSet(labels.Set{"app": "web"})}, replicaSetsOfDeployments{}, podSetKinds{}, time.Now)
	require.NoError(t, err)
	return r
}

type podSetKinds struct{}

func (podSetKinds) Lookup(_ context.Context, gk schema.GroupKind) (target.KindInfo, error) {
	return target.KindInfo{Served: gk == schema.GroupKind{Group: "e2e.vpa-inplace.dev", Kind: "PodSet"}}, nil
}

type staticSelector struct{ selector labels.Selector }

func (s staticSelector) Fetch(context.Context, *vpatypes.VerticalPodAutoscaler) (labels.Selector, error) {
	return s.selector, nil
}

// replicaSetsOfDeployments: ReplicaSet "<name>-<hash>" belongs to
// Deployment "<name>".
type replicaSetsOfDeployments struct{}

func (replicaSetsOfDeployments) FindTopMostWellKnownOrScalable(_ context.Context, key *controllerfetcher.ControllerKeyWithAPIVersion) (*controllerfetcher.ControllerKeyWithAPIVersion, error) {
	if key.Kind != "ReplicaSet" {
		return key, nil
	}
	name := key.Name
	if i := strings.LastIndex(name, "-"); i > 0 {
		name = name[:i]
	}
	return &controllerfetcher.ControllerKeyWithAPIVersion{
		ControllerKey: controllerfetcher.ControllerKey{Namespace: key.Namespace, Kind: "Deployment", Name: name},
		ApiVersion:    "apps/v1",
	}, nil
}

type fixedLimitRange struct{ container *corev1.LimitRangeItem }

func (f fixedLimitRange) GetContainerLimitRangeItem(string) (*corev1.LimitRangeItem, error) {
	return f.container, nil
}
func (fixedLimitRange) GetPodLimitRangeItem(string) (*corev1.LimitRangeItem, error) { return nil, nil }

// podJSON is a pod as the ReplicaSet controller creates it: generateName, no
// name, no uid, no namespace in the object (the request carries it).
// containers is the JSON array of spec.containers; extraMeta is spliced into
// metadata (e.g. `"annotations":{"a":"b"},`).
func podJSON(extraMeta, containers string) string {
	return `{"apiVersion":"v1","kind":"Pod","metadata":{` + extraMeta + `"generateName":"web-7d9f8-","labels":{"app":"web"},` +
		`"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9f8","uid":"rs-uid","controller":true,"blockOwnerDeletion":true}]},` +
		`"spec":{"containers":` + containers + `}}`
}

// appContainer is one container "app" with requests 100m/100Mi and limits
// 200m/200Mi.
const appContainer = `[{"name":"app","image":"registry.example/app:1","resources":{"requests":{"cpu":"100m","memory":"100Mi"},"limits":{"cpu":"200m","memory":"200Mi"}}}]`

// review wraps a request into an admission.k8s.io/v1 AdmissionReview.
func review(resource, operation, object, oldObject string) string {
	group, kind, version := "", "Pod", "v1"
	if resource == "verticalpodautoscalers" {
		group, kind = "autoscaling.k8s.io", "VerticalPodAutoscaler"
	}
	return fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{`+
		`"uid":"705ab4f5-6393-11e8-b7cc-42010a800002",`+
		`"kind":{"group":%q,"version":%q,"kind":%q},`+
		`"resource":{"group":%q,"version":%q,"resource":%q},`+
		`"requestKind":{"group":%q,"version":%q,"kind":%q},`+
		`"requestResource":{"group":%q,"version":%q,"resource":%q},`+
		`"namespace":"default","operation":%q,`+
		`"userInfo":{"username":"system:serviceaccount:kube-system:replicaset-controller"},`+
		`"object":%s,"oldObject":%s,"dryRun":false}}`,
		group, version, kind, group, version, resource, group, version, kind, group, version, resource,
		operation, object, oldObject)
}

const reviewUID = "705ab4f5-6393-11e8-b7cc-42010a800002"

func podReview(operation, pod string) string { return review("pods", operation, pod, "null") }

func vpaReview(operation, vpa, old string) string {
	return review("verticalpodautoscalers", operation, vpa, old)
}

// post sends body to path the way the API server does.
func post(t testing.TB, h http.Handler, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// response decodes a 200 answer and checks its envelope and UID.
func response(t testing.TB, rec *httptest.ResponseRecorder) *admissionv1.AdmissionResponse {
	t.Helper()
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var out admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	require.Equal(t, "admission.k8s.io/v1", out.APIVersion)
	require.Equal(t, "AdmissionReview", out.Kind)
	require.NotNil(t, out.Response)
	require.Equal(t, reviewUID, string(out.Response.UID), "the request's UID is echoed")
	return out.Response
}
