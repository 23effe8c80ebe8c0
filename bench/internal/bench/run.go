package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"

	"github.com/vpa-inplace/vpa-inplace/bench/internal/proxy"
)

// Phase is one stretch of an updater's run.
type Phase struct {
	Name     string
	Duration time.Duration
	Requests proxy.Counts
	CPU      time.Duration
}

// Result is what one updater did.
type Result struct {
	Spec UpdaterSpec
	// Args are the updater's full command line after the binary.
	Args []string

	Isolated groupResult
	Burst    groupResult
	// BurstWrite is how long the driver took to write every VPA of the burst.
	BurstWrite time.Duration
	Deferred   groupResult
	// SteadyGenBumps counts pod generation changes (accepted resizes)
	// during the steady-state window.
	SteadyGenBumps int
	// SteadyStillDeferred counts deferred pods still held at the end.
	SteadyStillDeferred int

	Phases []Phase
	// PeakRSS is VmHWM at the end of the run, CPU the user+system time.
	PeakRSS int64
	// PeakAnon and PeakFile are the largest RssAnon and RssFile sampled
	// during the run: the process's own memory, and its binary's pages.
	PeakAnon, PeakFile int64
	CPU                time.Duration
	Total              proxy.Counts
	// Latencies are the proxy's observations of the responses.
	Latencies map[proxy.Key]proxy.Latency
	// Profiles lists pprof files fetched, Notes anything odd seen.
	Profiles []string
	Notes    []string

	// The sharded mode's (sharded.go): what the API server was seen doing
	// from the burst's first write to its last resize accepted; the
	// configuration, its replicas and its failover. The figures above are
	// then the configuration's before the failover: the largest replica's
	// memory, the sum of their CPU and requests.
	BurstAPI *APIWindow
	Config   *configuration
	Replicas []*ReplicaResult
	Failover *FailoverResult
}

// Phase returns the named phase.
func (r *Result) Phase(name string) Phase {
	for _, p := range r.Phases {
		if p.Name == name {
			return p
		}
	}
	return Phase{}
}

// Run sets up the workload and runs every updater in turn; it returns the
// results of those that ran.
func Run(ctx context.Context, o *Options, log func(string, ...any)) (*Report, error) {
	config, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading --kubeconfig: %w", err)
	}
	config.QPS, config.Burst = o.DriverQPS, o.DriverBurst
	config.UserAgent = "resize-bench"
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	vpas, err := vpaclientset.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.WorkDir, 0o755); err != nil {
		return nil, err
	}
	report, err := newReport(ctx, o, kube)
	if err != nil {
		return nil, err
	}
	tracker, err := NewTracker(kube, o.NamespaceNames())
	if err != nil {
		return nil, err
	}
	trackerCtx, stopTracker := context.WithCancel(ctx)
	defer func() { stopTracker(); tracker.Shutdown() }()
	if err := tracker.Start(trackerCtx); err != nil {
		return nil, err
	}
	w := newWorkload(o, kube, vpas, tracker, log)
	if err := w.setup(ctx); err != nil {
		return nil, fmt.Errorf("setting up the workload: %w", err)
	}
	if o.Teardown {
		defer func() {
			if err := w.teardown(context.WithoutCancel(ctx)); err != nil {
				log("teardown: %v", err)
			}
		}()
	}
	if o.Sharded.Replicas > 0 {
		return report, runSharded(ctx, o, w, report, log)
	}
	for _, spec := range o.Updaters() {
		if err := w.reset(ctx); err != nil {
			return report, fmt.Errorf("resetting before %s: %w", spec.Name, err)
		}
		tracker.Forget()
		log("== %s: %s", spec.Name, spec.Binary)
		r, err := runOne(ctx, o, w, spec, log)
		if r != nil {
			report.Results = append(report.Results, r)
		}
		if err != nil {
			return report, fmt.Errorf("%s: %w", spec.Name, err)
		}
	}
	return report, nil
}

// runOne runs one updater behind its own proxy through every scenario.
func runOne(ctx context.Context, o *Options, w *workload, spec UpdaterSpec, log func(string, ...any)) (*Result, error) {
	rp, err := startReplica(ctx, o, spec, spec.Name, nil, nil)
	if err != nil {
		return nil, err
	}
	f := newFleet(nil, rp)
	defer f.stop()
	r := &Result{Spec: spec, Args: rp.args}
	if rp.note != "" {
		r.Notes = append(r.Notes, rp.note)
	}
	log("%s: pid %d, address %s, proxy %s, log %s", spec.Name, rp.pid(), rp.addr, rp.proxy.URL(), rp.log.Name())

	// Startup: caches synced (readiness path, and watches of pods and VPAs
	// through the proxy).
	readyURL := ""
	if spec.ReadyPath != "" {
		readyURL = "http://" + rp.addr + spec.ReadyPath
	}
	ok := waitUntil(ctx, 3*time.Minute, func() bool {
		return f.alive() == nil && watching(rp) && (readyURL == "" || httpOK(ctx, readyURL))
	})
	if err := f.alive(); err != nil {
		return r, err
	}
	if !ok {
		return r, fmt.Errorf("not ready after 3m")
	}
	if err := runScenarios(ctx, o, w, f, r, nil, log); err != nil {
		return r, err
	}
	if o.Pprof {
		if file := fetchProfile(ctx, rp.addr, "heap", filepath.Join(o.WorkDir, spec.Name+"-heap.pprof")); file != "" {
			r.Profiles = append(r.Profiles, file)
		}
	}
	fig, err := rp.read()
	if err != nil {
		return r, err
	}
	r.PeakRSS, r.CPU = fig.PeakRSS, fig.CPU
	r.PeakAnon, r.PeakFile = rp.memory.Stop()
	r.Total = fig.Requests
	r.Latencies = fig.Latencies
	if err := w.t.WriteCSV(filepath.Join(o.WorkDir, spec.Name+"-pods.csv")); err != nil {
		log("%s: writing per-pod CSV: %v", spec.Name, err)
	}
	log("%s: steady: %d writes, %d generation changes; peak RSS %.1f MiB, CPU %.1fs",
		spec.Name, r.Phase("steady").Requests.Writes(nil), r.SteadyGenBumps, float64(r.PeakRSS)/(1<<20), r.CPU.Seconds())
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	return r, nil
}

// watching reports whether the replica has opened its watches of pods and
// VPAs.
func watching(rp *replica) bool {
	return rp.proxy.Seen(proxy.Key{Verb: "watch", Resource: "pods"}) &&
		rp.proxy.Seen(proxy.Key{Verb: "watch", Resource: "verticalpodautoscalers"})
}

// runScenarios runs the scenarios against f, ready: the end of the
// startup (a settle time, then no write for Quiet: an updater may write
// every VPA's status once when it starts), isolated changes, the burst
// (api, when not nil, watches the API server from the burst's first write
// to its last resize accepted), the deferral and the steady state. Each
// phase's figures go into r as it ends.
func runScenarios(ctx context.Context, o *Options, w *workload, f *fleet, r *Result, api *apiObserver, log func(string, ...any)) error {
	name := r.Spec.Name
	log("%s: ready after %.1fs; settling %s", name, time.Since(f.last).Seconds(), o.Settle)
	sleep(ctx, o.Settle)
	r.quiesce(ctx, f, "startup", log)
	r.Phases = append(r.Phases, f.endPhase("startup"))

	// Isolated changes: one VPA at a time.
	begin := time.Now()
	for i := range o.IsolatedChanges {
		sleep(ctx, time.Until(begin.Add(time.Duration(i)*o.IsolatedInterval)))
		app := appName(i)
		t0 := time.Now()
		w.t.Expect("isolated", app, isolated, t0)
		if err := w.recommend(ctx, app, isolated); err != nil {
			return err
		}
	}
	tail := 5 * time.Minute
	waitUntil(ctx, tail, func() bool {
		g := w.t.Group("isolated")
		return len(g.Completed) == g.Expected || f.alive() != nil
	})
	r.Isolated = w.t.Group("isolated")
	log("%s: isolated: %d/%d pods accepted, %d completed", name, len(r.Isolated.Accepted), r.Isolated.Expected, len(r.Isolated.Completed))
	r.quiesce(ctx, f, "isolated", log)
	r.Phases = append(r.Phases, f.endPhase("isolated"))
	if err := f.alive(); err != nil {
		return err
	}

	// Burst: every VPA at once. The API server's first reading is taken
	// before the clock starts.
	var watch *apiWatch
	if api != nil {
		watch = api.start(ctx)
	}
	var profiles chan string
	t0 := time.Now()
	for _, app := range w.apps() {
		w.t.Expect("burst", app, burst, t0)
	}
	floor := time.Duration(float64(o.Pods) / float64(o.QPS) * float64(time.Second))
	if o.Pprof {
		profiles = make(chan string, 2*len(f.replicas))
		// Within our updater's 30 s write timeout: the first part of a
		// long burst.
		secs := min(25, max(10, int(floor.Seconds())))
		for _, rp := range f.replicas {
			go func() {
				profiles <- fetchProfile(ctx, rp.addr, fmt.Sprintf("profile?seconds=%d", secs), filepath.Join(o.WorkDir, rp.name+"-cpu-burst.pprof"))
			}()
			go func() {
				sleep(ctx, floor/2)
				profiles <- fetchProfile(ctx, rp.addr, "goroutine?debug=1", filepath.Join(o.WorkDir, rp.name+"-goroutines-burst.txt"))
			}()
		}
	}
	if err := forEach(ctx, w.apps(), func(ctx context.Context, _ int, app string) error {
		return w.recommend(ctx, app, burst)
	}); err != nil {
		if watch != nil {
			watch.stop(ctx)
		}
		return err
	}
	r.BurstWrite = time.Since(t0)
	burstTimeout := max(10*time.Minute, 10*floor)
	deadline := time.Now().Add(burstTimeout)
	// Every resize accepted, then every resize completed: the API server
	// is watched while the updater sends, not while the kubelets work.
	waitUntil(ctx, burstTimeout, func() bool {
		g := w.t.Group("burst")
		return len(g.Accepted) == g.Expected || f.alive() != nil
	})
	if watch != nil {
		r.BurstAPI = watch.stop(ctx)
	}
	waitUntil(ctx, time.Until(deadline), func() bool {
		g := w.t.Group("burst")
		return len(g.Completed) == g.Expected || f.alive() != nil
	})
	r.Burst = w.t.Group("burst")
	log("%s: burst: %d/%d accepted (last %.1fs), %d completed (last %.1fs)", name,
		len(r.Burst.Accepted), r.Burst.Expected, r.Burst.LastAccepted.Seconds(), len(r.Burst.Completed), r.Burst.LastCompleted.Seconds())
	r.quiesce(ctx, f, "burst", log)
	if profiles != nil {
		for range 2 * len(f.replicas) {
			if file := <-profiles; file != "" {
				r.Profiles = append(r.Profiles, file)
			}
		}
	}
	r.Phases = append(r.Phases, f.endPhase("burst"))
	if err := f.alive(); err != nil {
		return err
	}

	// Deferral: the deferred VPA asks for more CPU than the node has left.
	w.t.Expect("deferred", deferredApp, deferred, time.Now())
	if err := w.recommend(ctx, deferredApp, deferred); err != nil {
		return err
	}
	waitUntil(ctx, 4*time.Minute, func() bool {
		g := w.t.Group("deferred")
		return g.Deferred == g.Expected || f.alive() != nil
	})
	r.Deferred = w.t.Group("deferred")
	log("%s: deferral: %d/%d accepted, %d held Deferred", name, len(r.Deferred.Accepted), r.Deferred.Expected, r.Deferred.Deferred)
	if r.Deferred.Deferred != r.Deferred.Expected {
		r.Notes = append(r.Notes, fmt.Sprintf("only %d of %d deferred pods were held Deferred before the steady-state window", r.Deferred.Deferred, r.Deferred.Expected))
	}
	r.quiesce(ctx, f, "deferral", log)
	r.Phases = append(r.Phases, f.endPhase("deferral"))

	// Steady state.
	bumps := w.t.GenBumps()
	log("%s: steady state for %s", name, o.SteadyDuration)
	sleep(ctx, o.SteadyDuration)
	r.SteadyGenBumps = w.t.GenBumps() - bumps
	for _, pod := range w.t.Pods(func(app string) bool { return app == deferredApp }) {
		if resizeReason(pod, "PodResizePending") == "Deferred" {
			r.SteadyStillDeferred++
		}
	}
	r.Phases = append(r.Phases, f.endPhase("steady"))
	return f.alive()
}

// MemorySampleInterval is how often the updater's anonymous and file-backed
// memory are read during a run.
const MemorySampleInterval = 250 * time.Millisecond

// Quiet is how long an updater must make no write for a phase to end once
// its resizes are done: writes it queued (events) belong to the phase.
const Quiet = 10 * time.Second

// quiesce waits until the updater has made no write for Quiet (of those
// f.quiet selects), at most 3 minutes.
func (r *Result) quiesce(ctx context.Context, f *fleet, phase string, log func(string, ...any)) {
	writes := f.writes()
	since := time.Now()
	ok := waitUntil(ctx, 3*time.Minute, func() bool {
		if n := f.writes(); n != writes {
			writes, since = n, time.Now()
		}
		return time.Since(since) >= Quiet
	})
	if !ok && ctx.Err() == nil {
		r.Notes = append(r.Notes, fmt.Sprintf("%s: the updater was still writing 3 minutes after its resizes were done", phase))
		log("%s: %s: still writing after 3m", r.Spec.Name, phase)
	}
}

func stopProcess(cmd *exec.Cmd, exited chan error) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return
	case <-time.After(15 * time.Second):
	}
	_ = cmd.Process.Kill()
	<-exited
}

func writeProxyKubeconfig(path, server string) error {
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
  - name: proxy
    cluster:
      server: %s
users:
  - name: proxy
    user: {}
contexts:
  - name: proxy
    context:
      cluster: proxy
      user: proxy
current-context: proxy
`, server)
	return os.WriteFile(path, []byte(content), 0o600)
}

func freePort(ctx context.Context) (int, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func httpOK(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// fetchProfile saves addr's /debug/pprof/<what> to path; it returns path,
// or "" when the updater does not serve it.
func fetchProfile(ctx context.Context, addr, what, path string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if !fetchProfileFrom(ctx, addr, what, path) {
		return ""
	}
	return path
}

func fetchProfileFrom(ctx context.Context, addr, what, path string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/"+what, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	f, err := os.Create(path)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err == nil
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
