package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/kubernetes"

	"github.com/vpa-inplace/vpa-inplace/bench/internal/metricstext"
	"github.com/vpa-inplace/vpa-inplace/bench/internal/proc"
)

// The API server's metrics read over a window.
const (
	metricRequestDuration = "apiserver_request_duration_seconds"
	metricInflight        = "apiserver_current_inflight_requests"
	metricInQueue         = "apiserver_flowcontrol_current_inqueue_requests"
	metricExecuting       = "apiserver_flowcontrol_current_executing_requests"
	metricRejected        = "apiserver_flowcontrol_rejected_requests_total"
)

// resizePatches selects the resize patches in the API server's request
// metrics.
var resizePatches = metricstext.Labels{"verb": "PATCH", "resource": "pods", "subresource": "resize"}

// APISampleInterval is how often the API server's gauges are read during a
// window: each read is a scrape of its whole /metrics.
const APISampleInterval = 5 * time.Second

// apiObserver watches the API server over windows: its CPU time (the local
// cluster's API server runs on this machine: /proc), the machine's, and,
// from the API server's own /metrics, the resize patches it served and
// their latency, and the requests in flight and queued by its priority and
// fairness.
type apiObserver struct {
	kube kubernetes.Interface
	// pid is the API server's; 0: its CPU is not read, and note says why.
	pid  int
	note string
}

// APIWindow is what was seen of the API server over a window.
type APIWindow struct {
	Wall time.Duration
	// APIServerCPU is the API server's CPU time (user + system) in the
	// window; negative when it was not read.
	APIServerCPU time.Duration
	// MachineBusy and MachineTotal are the machine's CPU time in the
	// window, every CPU together: running anything, and in all.
	MachineBusy, MachineTotal time.Duration
	// Resizes counts the resize patches the API server served in the
	// window (its own histogram); P50 and P99 are their latency in
	// seconds, as the API server measures it, interpolated in its buckets.
	Resizes  uint64
	P50, P99 float64
	Buckets  string
	// MaxInflight is the largest apiserver_current_inflight_requests
	// sampled, by request_kind (mutating, readOnly); nil when the API
	// server does not export it.
	MaxInflight map[string]float64
	// MaxInQueue and MaxExecuting are the largest sums over the priority
	// levels of the requests waiting in the queues of priority and
	// fairness, and executing, sampled; APF tells whether the API server
	// exports them.
	MaxInQueue, MaxExecuting float64
	APF                      bool
	// Rejected counts the requests priority and fairness rejected in the
	// window.
	Rejected float64
	// Samples counts the scrapes of the gauges; Errors are the reads that
	// failed.
	Samples int
	Errors  []string
}

// APIServerCores is the API server's CPU time over the wall time: how many
// CPUs it kept busy on average; NaN when not read.
func (a *APIWindow) APIServerCores() float64 {
	if a == nil || a.APIServerCPU < 0 || a.Wall <= 0 {
		return math.NaN()
	}
	return a.APIServerCPU.Seconds() / a.Wall.Seconds()
}

// MachineBusyFraction is the share of the machine's CPU time spent running
// anything; NaN when not read.
func (a *APIWindow) MachineBusyFraction() float64 {
	if a == nil || a.MachineTotal <= 0 {
		return math.NaN()
	}
	return a.MachineBusy.Seconds() / a.MachineTotal.Seconds()
}

// sample keeps the largest gauges of one scrape.
func (a *APIWindow) sample(f metricstext.Families) {
	a.Samples++
	f.Each(metricInflight, nil, func(m *dto.Metric, v float64) {
		if a.MaxInflight == nil {
			a.MaxInflight = map[string]float64{}
		}
		kind := metricstext.Label(m, "request_kind")
		a.MaxInflight[kind] = max(a.MaxInflight[kind], v)
	})
	if v, ok := f.Sum(metricInQueue, nil); ok {
		a.APF = true
		a.MaxInQueue = max(a.MaxInQueue, v)
	}
	if v, ok := f.Sum(metricExecuting, nil); ok {
		a.APF = true
		a.MaxExecuting = max(a.MaxExecuting, v)
	}
}

// between sets the counters' and histogram's figures from the scrapes at
// the window's start and end.
func (a *APIWindow) between(before, after metricstext.Families) {
	a.Resizes, a.P50, a.P99, a.Buckets = metricstext.Delta(before.Hist(metricRequestDuration, resizePatches), after.Hist(metricRequestDuration, resizePatches))
	r0, _ := before.Sum(metricRejected, nil)
	r1, _ := after.Sum(metricRejected, nil)
	a.Rejected = r1 - r0
}

// apiWatch is a window being watched.
type apiWatch struct {
	o        *apiObserver
	start    time.Time
	before   metricstext.Families
	cpu      time.Duration
	cpuOK    bool
	machine  proc.Machine
	machOK   bool
	stopOnce sync.Once
	quit     chan struct{}
	done     chan struct{}

	mu     sync.Mutex
	window APIWindow
}

// start begins a window now.
func (o *apiObserver) start(ctx context.Context) *apiWatch {
	w := &apiWatch{o: o, start: time.Now(), quit: make(chan struct{}), done: make(chan struct{})}
	w.window.APIServerCPU = -1
	if o.note != "" {
		w.failLocked(errors.New(o.note))
	}
	if o.pid > 0 {
		if s, err := proc.Read(o.pid); err == nil {
			w.cpu, w.cpuOK = s.CPU, true
		} else {
			w.fail(fmt.Errorf("reading the API server's CPU: %w", err))
		}
	}
	if m, err := proc.ReadMachine(); err == nil {
		w.machine, w.machOK = m, true
	} else {
		w.fail(err)
	}
	if f, err := metricstext.ScrapeAPIServer(ctx, o.kube); err == nil {
		w.before = f
		w.window.sample(f)
	} else {
		w.fail(err)
	}
	go func() {
		defer close(w.done)
		t := time.NewTicker(APISampleInterval)
		defer t.Stop()
		for {
			select {
			case <-w.quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			f, err := metricstext.ScrapeAPIServer(ctx, o.kube)
			w.mu.Lock()
			if err != nil {
				w.failLocked(err)
			} else {
				w.window.sample(f)
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *apiWatch) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failLocked(err)
}

// failLocked keeps the first few errors.
func (w *apiWatch) failLocked(err error) {
	if len(w.window.Errors) < 5 {
		w.window.Errors = append(w.window.Errors, err.Error())
	}
}

// stop ends the window now and returns what was seen.
func (w *apiWatch) stop(ctx context.Context) *APIWindow {
	w.stopOnce.Do(func() { close(w.quit) })
	<-w.done
	wall := time.Since(w.start)
	var cpu *time.Duration
	if w.cpuOK {
		if s, err := proc.Read(w.o.pid); err == nil {
			d := s.CPU - w.cpu
			cpu = &d
		} else {
			w.fail(fmt.Errorf("reading the API server's CPU: %w", err))
		}
	}
	var machine *proc.Machine
	if w.machOK {
		if m, err := proc.ReadMachine(); err == nil {
			machine = &m
		} else {
			w.fail(err)
		}
	}
	after, err := metricstext.ScrapeAPIServer(ctx, w.o.kube)
	if err != nil {
		w.fail(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.window
	out.Wall = wall
	if cpu != nil {
		out.APIServerCPU = *cpu
	}
	if machine != nil {
		out.MachineBusy, out.MachineTotal = machine.Busy-w.machine.Busy, machine.Total-w.machine.Total
	}
	if w.before != nil && after != nil {
		out.sample(after)
		out.between(w.before, after)
	}
	return &out
}
