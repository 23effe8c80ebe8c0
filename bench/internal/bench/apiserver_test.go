package bench

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiServerMetrics is an API server's exposition after n resize patches,
// half under 25 ms and half under 100 ms, with inflight and queued
// requests and rejections growing with n.
func apiServerMetrics(n int) string {
	return fmt.Sprintf(`# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_bucket{verb="PATCH",resource="pods",subresource="resize",scope="resource",le="0.025"} %d
apiserver_request_duration_seconds_bucket{verb="PATCH",resource="pods",subresource="resize",scope="resource",le="0.1"} %d
apiserver_request_duration_seconds_bucket{verb="PATCH",resource="pods",subresource="resize",scope="resource",le="+Inf"} %d
apiserver_request_duration_seconds_sum{verb="PATCH",resource="pods",subresource="resize",scope="resource"} 1
apiserver_request_duration_seconds_count{verb="PATCH",resource="pods",subresource="resize",scope="resource"} %d
apiserver_request_duration_seconds_bucket{verb="GET",resource="pods",subresource="",scope="resource",le="0.025"} 1000
apiserver_request_duration_seconds_bucket{verb="GET",resource="pods",subresource="",scope="resource",le="0.1"} 1000
apiserver_request_duration_seconds_bucket{verb="GET",resource="pods",subresource="",scope="resource",le="+Inf"} 1000
apiserver_request_duration_seconds_sum{verb="GET",resource="pods",subresource="",scope="resource"} 1
apiserver_request_duration_seconds_count{verb="GET",resource="pods",subresource="",scope="resource"} 1000
# TYPE apiserver_current_inflight_requests gauge
apiserver_current_inflight_requests{request_kind="mutating"} %d
apiserver_current_inflight_requests{request_kind="readOnly"} 3
# TYPE apiserver_flowcontrol_current_inqueue_requests gauge
apiserver_flowcontrol_current_inqueue_requests{priority_level="workload-low",flow_schema="service-accounts"} %d
apiserver_flowcontrol_current_inqueue_requests{priority_level="global-default",flow_schema="global-default"} 1
# TYPE apiserver_flowcontrol_current_executing_requests gauge
apiserver_flowcontrol_current_executing_requests{priority_level="workload-low",flow_schema="service-accounts"} 4
# TYPE apiserver_flowcontrol_rejected_requests_total counter
apiserver_flowcontrol_rejected_requests_total{priority_level="workload-low",flow_schema="service-accounts",reason="queue-full"} %d
`, n/2, n, n, n, n/100, n/50, n/1000)
}

// A window's figures: the resize patches between its two ends and their
// percentiles, the largest gauges sampled, the rejections in between.
func TestAPIWatchReadsTheWindow(t *testing.T) {
	var patches atomic.Int64
	patches.Store(1000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, apiServerMetrics(int(patches.Load())))
	}))
	defer srv.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	obs := &apiObserver{kube: kube, pid: os.Getpid()}
	w := obs.start(t.Context())
	patches.Store(5000)
	deadline := time.Now().Add(200 * time.Millisecond)
	for time.Now().Before(deadline) {
		_ = make([]byte, 1<<10) // some CPU time for this process to show
	}
	got := w.stop(t.Context())
	assert.Empty(t, got.Errors)
	assert.Equal(t, uint64(4000), got.Resizes, "the resize patches between the two ends, not the GETs")
	assert.InDelta(t, 0.025, got.P50, 1e-9, "half of them within 25 ms")
	assert.InDelta(t, 0.025+0.075*0.98, got.P99, 1e-9)
	assert.Equal(t, 50.0, got.MaxInflight["mutating"], "the largest sampled, at the end")
	assert.Equal(t, 3.0, got.MaxInflight["readOnly"])
	assert.Equal(t, 101.0, got.MaxInQueue, "summed over the priority levels")
	assert.Equal(t, 4.0, got.MaxExecuting)
	assert.True(t, got.APF)
	assert.Equal(t, 4.0, got.Rejected, "5 at the end, 1 at the start")
	assert.GreaterOrEqual(t, got.Wall, 200*time.Millisecond)
	assert.GreaterOrEqual(t, got.APIServerCPU, time.Duration(0), "the CPU of the process named")
	assert.Positive(t, got.MachineTotal)
	assert.False(t, math.IsNaN(got.MachineBusyFraction()))
	assert.False(t, math.IsNaN(got.APIServerCores()))
}

// Without the API server's pid its CPU is not read, and says so.
func TestAPIWindowWithoutCPU(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	got := (&apiObserver{kube: kube, note: "no pid file"}).start(t.Context()).stop(t.Context())
	assert.True(t, math.IsNaN(got.APIServerCores()))
	require.NotEmpty(t, got.Errors)
	assert.Equal(t, "no pid file", got.Errors[0], "why the CPU was not read comes first")
	assert.Greater(t, len(got.Errors), 1, "the metrics could not be read")
	assert.Zero(t, got.Resizes)
	assert.False(t, got.APF, "nothing read, nothing exported")
	assert.Nil(t, got.MaxInflight)
	var none *APIWindow
	assert.True(t, math.IsNaN(none.APIServerCores()))
	assert.True(t, math.IsNaN(none.MachineBusyFraction()))
}
