package admission

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// BenchmarkTenantsUnderHostileLoad measures another tenant's admission
// while a hostile tenant (see TestHostileOwnerWalksDoNotStarveOtherTenants)
// creates pods as fast as 32 clients can: each operation is the victim's
// VPA CREATE (its webhook fails closed) then one of its pods' CREATE,
// each timed. The API server answers the hostile walk's GETs after 20 ms
// (loaded) or never (stalled); the request timeout is the default 4 s.
//
// Reported: victim-{vpa,pod}-p50/p99-ms, victim-refused (answers other
// than 200, or a pod without its patch), hostile-reviews/s, hostile-p99-ms
// and hostile-GETs/review.
func BenchmarkTenantsUnderHostileLoad(b *testing.B) {
	for _, tc := range []struct {
		name    string
		hostile int
		latency time.Duration // 0: the API server never answers
	}{
		{"hostile=0", 0, 20 * time.Millisecond},
		{"hostile=32/apiserver=20ms", 32, 20 * time.Millisecond},
		{"hostile=32/apiserver=stalled", 32, 0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			api := newStallingAPIServer(b, tc.latency)
			h, _ := testHandler{gate: true, timeout: 4 * time.Second, resolver: tenantsResolver(b, api)}.build(b)
			ctx := klog.NewContext(context.Background(), logr.Discard())
			send := func(path, body string) (int, string, time.Duration) {
				req := httptest.NewRequestWithContext(ctx, http.MethodPost, path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(rec, req)
				return rec.Code, rec.Body.String(), time.Since(start)
			}

			stop := make(chan struct{})
			var hostile sync.WaitGroup
			var hostileMu sync.Mutex
			var hostileTimes []time.Duration
			var seq atomic.Int64
			for range tc.hostile {
				hostile.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						_, _, took := send(MutatePodsPath, inNamespace(podReview("CREATE", hostilePodJSON(int(seq.Add(1)))), hostileNS))
						hostileMu.Lock()
						hostileTimes = append(hostileTimes, took)
						hostileMu.Unlock()
					}
				})
			}
			// Let the hostile load reach its pace.
			time.Sleep(100 * time.Millisecond)
			hostileMu.Lock()
			hostileTimes = hostileTimes[:0]
			hostileMu.Unlock()
			gets0 := api.gets.Load()

			vpa := inNamespace(vpaReview("CREATE", victimVPAJSON("web-2"), "null"), victimNS)
			pod := inNamespace(podReview("CREATE", podJSON("", appContainer)), victimNS)
			var vpaTimes, podTimes []time.Duration
			refused := 0
			start := time.Now()
			for b.Loop() {
				code, _, took := send(ValidateVPAsPath, vpa)
				vpaTimes = append(vpaTimes, took)
				if code != http.StatusOK {
					refused++
				}
				code, body, took := send(MutatePodsPath, pod)
				podTimes = append(podTimes, took)
				if code != http.StatusOK || !strings.Contains(body, `"patch"`) {
					refused++
				}
			}
			elapsed := time.Since(start)
			close(stop)
			api.unblock()
			hostile.Wait()

			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(percentile(vpaTimes, 50)), "victim-vpa-p50-ms")
			b.ReportMetric(ms(percentile(vpaTimes, 99)), "victim-vpa-p99-ms")
			b.ReportMetric(ms(percentile(podTimes, 50)), "victim-pod-p50-ms")
			b.ReportMetric(ms(percentile(podTimes, 99)), "victim-pod-p99-ms")
			b.ReportMetric(float64(refused), "victim-refused")
			if tc.hostile > 0 {
				hostileMu.Lock()
				n := len(hostileTimes)
				b.ReportMetric(float64(n)/elapsed.Seconds(), "hostile-reviews/s")
				b.ReportMetric(ms(percentile(hostileTimes, 99)), "hostile-p99-ms")
				b.ReportMetric(float64(api.gets.Load()-gets0)/float64(max(n, 1)), "hostile-GETs/review")
				hostileMu.Unlock()
			}
		})
	}
}

// percentile returns the p-th percentile of ds (0 when empty).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
