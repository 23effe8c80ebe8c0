package admissionbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
)

// Handlers are the two sides, in the order of every table.
var Handlers = []struct {
	Name string
	Path string
	New  func(context.Context, *Cluster) (http.Handler, error)
}{
	{"ours", "/mutate-pods", Ours},
	{"upstream", "/", Upstream},
}

// Result is one handler's figures for one review, medians of the rounds.
type Result struct {
	NsPerOp     float64
	BytesPerOp  float64
	AllocsPerOp float64
}

// Reviews benchmarks each handler on a cluster of n workloads: rounds runs
// of testing.Benchmark each, alternating, and the median of each figure.
// Every response is checked, outside the timed part, to be a patch that
// gives the pod the recommended requests.
func Reviews(ctx context.Context, n, rounds int) (map[string]Result, error) {
	body := Review()
	out := map[string]Result{}
	handlers := map[string]http.Handler{}
	for _, h := range Handlers {
		handler, err := h.New(ctx, NewCluster(n))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.Name, err)
		}
		if err := Check(serve(handler, h.Path, body)); err != nil {
			return nil, fmt.Errorf("%s: %w", h.Name, err)
		}
		handlers[h.Name] = handler
	}
	runs := map[string][]testing.BenchmarkResult{}
	for range rounds {
		for _, h := range Handlers {
			var failure error
			r := testing.Benchmark(func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					rec := serve(handlers[h.Name], h.Path, body)
					b.StopTimer()
					if err := Check(rec); err != nil && failure == nil {
						failure = err
					}
					b.StartTimer()
				}
			})
			if failure != nil {
				return nil, fmt.Errorf("%s: %w", h.Name, failure)
			}
			runs[h.Name] = append(runs[h.Name], r)
		}
	}
	for name, rs := range runs {
		out[name] = Result{
			NsPerOp:     median(rs, func(r testing.BenchmarkResult) float64 { return float64(r.NsPerOp()) }),
			BytesPerOp:  median(rs, func(r testing.BenchmarkResult) float64 { return float64(r.AllocedBytesPerOp()) }),
			AllocsPerOp: median(rs, func(r testing.BenchmarkResult) float64 { return float64(r.AllocsPerOp()) }),
		}
	}
	return out, nil
}

func median(rs []testing.BenchmarkResult, f func(testing.BenchmarkResult) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func serve(h http.Handler, path string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Check tells whether rec answers the review with a JSON Patch that sets
// the container's requests to the recommendation.
func Check(rec *httptest.ResponseRecorder) error {
	if rec.Code != http.StatusOK {
		return fmt.Errorf("status %d: %s", rec.Code, rec.Body.String())
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil {
		return fmt.Errorf("decoding the response: %w", err)
	}
	if review.Response == nil || !review.Response.Allowed {
		return fmt.Errorf("not allowed: %s", rec.Body.String())
	}
	var ops []struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	if err := json.Unmarshal(review.Response.Patch, &ops); err != nil {
		return fmt.Errorf("decoding the patch: %w", err)
	}
	got := map[string]string{}
	for _, op := range ops {
		const requests = "/spec/containers/0/resources/requests"
		switch {
		case op.Path == requests:
			if m, ok := op.Value.(map[string]any); ok {
				for k, v := range m {
					got[k], _ = v.(string)
				}
			}
		case strings.HasPrefix(op.Path, requests+"/"):
			got[strings.TrimPrefix(op.Path, requests+"/")], _ = op.Value.(string)
		}
	}
	if got["cpu"] != RecommendedCPU || got["memory"] != RecommendedMemory {
		return fmt.Errorf("the patch sets requests %v, want cpu %s and memory %s: %s", got, RecommendedCPU, RecommendedMemory, review.Response.Patch)
	}
	return nil
}

// HeapAfterSync returns the live heap each handler holds once its
// informers have synced on a cluster of n workloads: the heap after a
// collection, less the heap before the handler was built (the fake
// clientsets' own objects are built before and not counted).
func HeapAfterSync(ctx context.Context, n int) (map[string]int64, error) {
	out := map[string]int64{}
	for _, h := range Handlers {
		cluster := NewCluster(n)
		hctx, cancel := context.WithCancel(ctx)
		before := liveHeap()
		handler, err := h.New(hctx, cluster)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("%s: %w", h.Name, err)
		}
		// Let the informers settle: events handled, watch goroutines idle.
		time.Sleep(time.Second)
		after := liveHeap()
		runtime.KeepAlive(handler)
		runtime.KeepAlive(cluster)
		cancel()
		out[h.Name] = after - before
		time.Sleep(time.Second)
	}
	return out, nil
}

func liveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
