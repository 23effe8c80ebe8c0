package admission

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testheap"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

const mib = 1 << 20

// tinyLabels is a labels object of about size bytes: "l0":"","l1":"",...
func tinyLabels(size int) string {
	var b strings.Builder
	b.WriteString(`"labels":{"app":"web"`)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, `,"l%d":""`, i)
	}
	b.WriteString(`},`)
	return b.String()
}

// Finding 4 of the hostile-input review: one pod of 6 MiB of tiny labels
// cost 64 MiB, because the whole pod was decoded before anything was
// checked. A request now costs about its body.
func TestMutatePodsLargePodCostsAboutItsBody(t *testing.T) {
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{` + tinyLabels(6*mib-4096) + `"generateName":"web-7d9f8-",` +
		`"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d9f8","uid":"rs-uid","controller":true}]},` +
		`"spec":{"containers":` + appContainer + `}}`
	body := podReview("CREATE", pod)
	require.Less(t, len(body), int(DefaultMaxRequestBytes))
	inPlace := testvpa.New("web").InPlace().Recommend("app", "300m", "300Mi").Obj()
	elsewhere := testvpa.New("web").Namespace("elsewhere").InPlace().Recommend("app", "300m", "300Mi").Obj()
	tests := []struct {
		name         string
		vpas         []*vpatypes.VerticalPodAutoscaler
		wantTooLarge bool
	}{
		{name: "no VPA in the pod's namespace: the pod is not decoded", vpas: []*vpatypes.VerticalPodAutoscaler{elsewhere}},
		{name: "an InPlace VPA in the namespace: labels that large are not decoded", vpas: []*vpatypes.VerticalPodAutoscaler{inPlace}, wantTooLarge: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, metrics := testHandler{gate: true, vpas: tc.vpas}.build(t)
			post(t, h, MutatePodsPath, podReview("CREATE", podJSON("", appContainer))) // warm up
			var resp *http.Response
			allocated := testheap.Allocated(func() {
				rec := post(t, h, MutatePodsPath, body)
				resp = rec.Result()
				assert.True(t, response(t, rec).Allowed)
			})
			require.Equal(t, http.StatusOK, resp.StatusCode)
			t.Logf("a %.1f MiB review allocated %.1f MiB", float64(len(body))/mib, float64(allocated)/mib)
			// The body is read once (6 MiB); everything else is small.
			assert.Less(t, allocated, int64(len(body)+2*mib), "allocated %d bytes for a body of %d", allocated, len(body))
			wantTooLarge := 0.0
			if tc.wantTooLarge {
				wantTooLarge = 1
			}
			assert.Equal(t, wantTooLarge, testutil.ToFloat64(metrics.mutationFailures.WithLabelValues(FailureTooLarge)))
		})
	}
}

// blockingResolver holds every lookup until release is closed, and tells
// each one on entered.
type blockingResolver struct {
	entered chan struct{}
	release chan struct{}
}

func (b blockingResolver) VPAForPod(ctx context.Context, _ *corev1.Pod) (*vpatypes.VerticalPodAutoscaler, error) {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return nil, nil
}

// Finding 4: 16 concurrent 3 MiB requests cost 483 MiB. Past the bound on
// requests in flight, a request is answered 429 before its body is read.
func TestMutatePodsBoundsRequestsInFlight(t *testing.T) {
	const inflight, extra = 2, 14
	resolver := blockingResolver{entered: make(chan struct{}, inflight+extra), release: make(chan struct{})}
	h, metrics := testHandler{resolver: resolver, maxInflight: inflight}.build(t)
	body := podReview("CREATE", podJSON(`"annotations":{"a":"`+strings.Repeat("x", 3*mib)+`"},`, appContainer))

	var held sync.WaitGroup
	codes := make(chan int, inflight)
	throttled := make(chan *httptest.ResponseRecorder, extra)
	allocated := testheap.Allocated(func() {
		for range inflight {
			held.Go(func() { codes <- post(t, h, MutatePodsPath, body).Code })
		}
		for range inflight {
			<-resolver.entered
		}
		for range extra {
			held.Go(func() { throttled <- post(t, h, MutatePodsPath, body) })
		}
		// The extra requests are answered once they have waited slotWait
		// for a slot, while the first two are still held.
		deadline := time.After(waitFor)
		for range extra {
			select {
			case rec := <-throttled:
				assert.Equal(t, http.StatusTooManyRequests, rec.Code)
				assert.Equal(t, "1", rec.Header().Get("Retry-After"))
				assert.Contains(t, rec.Body.String(), "more than 2 admission requests at once")
			case <-deadline:
				t.Error("a request past the bound was not answered while the others were held")
			}
		}
		close(resolver.release)
		held.Wait()
	})
	close(codes)
	for code := range codes {
		assert.Equal(t, http.StatusOK, code)
	}
	t.Logf("%d requests of %.1f MiB allocated %.1f MiB", inflight+extra, float64(len(body))/mib, float64(allocated)/mib)
	assert.Less(t, allocated, int64(inflight*(len(body)+2*mib)), "only the requests in flight read their body")
	assert.Equal(t, float64(extra), testutil.ToFloat64(metrics.requests.WithLabelValues(EndpointMutatePods, OutcomeThrottled)))

	// Once they are done, requests are served again.
	resp := response(t, post(t, h, MutatePodsPath, podReview("CREATE", podJSON("", appContainer))))
	assert.True(t, resp.Allowed)
}
