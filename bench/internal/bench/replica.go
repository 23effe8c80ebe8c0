package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/vpa-inplace/vpa-inplace/bench/internal/proc"
	"github.com/vpa-inplace/vpa-inplace/bench/internal/proxy"
)

// replica is one updater process behind a counting proxy of its own.
type replica struct {
	// name names its files (<name>.log, <name>-proxy.kubeconfig, its
	// profiles) and, for a replica with an identity, its POD_NAME.
	name   string
	binary string
	args   []string
	addr   string
	proxy  *proxy.Proxy
	cmd    *exec.Cmd
	exited chan error
	memory *proc.Sampler
	log    *os.File
	start  time.Time
	// note says why its binary's page cache could not be dropped.
	note string
	// killed is set once the driver has killed it (SIGKILL): it is gone on
	// purpose, its figures were read before.
	killed bool

	// Counts and CPU at the end of the previous phase.
	lastCounts proxy.Counts
	lastCPU    time.Duration
	phases     []Phase
}

// updaterArgs is an updater's command line after its binary: the client
// and address flags the driver sets, spec's flags, then extra (which win
// over spec's: the last of a flag is the one kept), then --profiling.
func updaterArgs(o *Options, spec UpdaterSpec, kubeconfig, addr string, extra []string) []string {
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--kube-api-qps=" + strconv.FormatFloat(float64(o.QPS), 'f', -1, 32),
		"--kube-api-burst=" + strconv.Itoa(o.Burst),
		"--address=" + addr,
	}
	args = append(args, spec.Args...)
	args = append(args, extra...)
	if o.Pprof {
		// Both updaters serve /debug/pprof on --address with this flag.
		args = append(args, "--profiling")
	}
	return args
}

// startReplica starts spec's binary as name, with extra flags after
// spec's and env added to the driver's environment, behind a proxy of its
// own that authenticates with spec's kubeconfig.
func startReplica(ctx context.Context, o *Options, spec UpdaterSpec, name string, extra, env []string) (_ *replica, err error) {
	creds, err := clientcmd.BuildConfigFromFlags("", spec.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading --%s-kubeconfig: %w", spec.Name, err)
	}
	p, err := proxy.Start(ctx, creds)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = p.Close()
		}
	}()
	kubeconfig := filepath.Join(o.WorkDir, name+"-proxy.kubeconfig")
	if err := writeProxyKubeconfig(kubeconfig, p.URL()); err != nil {
		return nil, err
	}
	port, err := freePort(ctx)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	rp := &replica{name: name, binary: spec.Binary, addr: addr, proxy: p, lastCounts: proxy.Counts{}}
	rp.args = updaterArgs(o, spec, kubeconfig, addr, extra)
	rp.log, err = os.Create(filepath.Join(o.WorkDir, name+".log"))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = rp.log.Close()
		}
	}()
	if err := proc.DropCache(spec.Binary); err != nil {
		rp.note = fmt.Sprintf("the page cache of the binary was not dropped before the start (%v): its file-backed memory may not compare with other runs'", err)
	}
	rp.cmd = exec.Command(spec.Binary, rp.args...)
	rp.cmd.Stdout, rp.cmd.Stderr = rp.log, rp.log
	if len(env) > 0 {
		rp.cmd.Env = append(os.Environ(), env...)
	}
	// The updater dies with the driver, whatever happens to the driver.
	rp.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	rp.start = time.Now()
	if err := rp.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", spec.Binary, err)
	}
	rp.exited = make(chan error, 1)
	go func() { rp.exited <- rp.cmd.Wait() }()
	rp.memory = proc.Sample(rp.cmd.Process.Pid, MemorySampleInterval)
	return rp, nil
}

func (rp *replica) pid() int { return rp.cmd.Process.Pid }

// alive returns an error once the process has exited.
func (rp *replica) alive() error {
	if rp.killed {
		return nil
	}
	select {
	case err := <-rp.exited:
		rp.exited <- err
		return fmt.Errorf("%s exited: %v (log %s)", rp.name, err, rp.log.Name())
	default:
		return nil
	}
}

// endPhase closes a phase of this replica: its requests and CPU since the
// previous one.
func (rp *replica) endPhase(name string, d time.Duration) Phase {
	counts := rp.proxy.Snapshot()
	cpu := rp.lastCPU
	if s, err := proc.Read(rp.pid()); err == nil {
		cpu = s.CPU
	}
	ph := Phase{Name: name, Duration: d, Requests: counts.Sub(rp.lastCounts), CPU: cpu - rp.lastCPU}
	rp.phases = append(rp.phases, ph)
	rp.lastCounts, rp.lastCPU = counts, cpu
	return ph
}

// figures are a replica's memory, CPU and requests at one moment.
type figures struct {
	PeakRSS            int64
	PeakAnon, PeakFile int64
	CPU                time.Duration
	Requests           proxy.Counts
	Latencies          map[proxy.Key]proxy.Latency
}

// read returns the replica's figures so far.
func (rp *replica) read() (figures, error) {
	s, err := proc.Read(rp.pid())
	if err != nil {
		return figures{}, fmt.Errorf("reading /proc of %s: %w", rp.name, err)
	}
	f := figures{PeakRSS: s.PeakRSS, CPU: s.CPU, Requests: rp.proxy.Snapshot(), Latencies: rp.proxy.Latencies()}
	f.PeakAnon, f.PeakFile = rp.memory.Peaks()
	return f, nil
}

// kill sends SIGKILL and waits for the process to end.
func (rp *replica) kill() {
	rp.killed = true
	_ = rp.cmd.Process.Kill()
	err := <-rp.exited
	rp.exited <- err
	rp.memory.Stop()
}

// stop stops the process (SIGTERM, SIGKILL after 15 s), then the sampler,
// the log and the proxy.
func (rp *replica) stop() {
	rp.memory.Stop()
	stopProcess(rp.cmd, rp.exited)
	_ = rp.log.Close()
	_ = rp.proxy.Close()
}

// fleet is the replicas of one run of an updater: one, or several sharing
// the shards.
type fleet struct {
	replicas []*replica
	// last is when the previous phase ended (the first replica's start).
	last time.Time
	// quiet selects the writes that must stop for a phase to end (nil:
	// all of them).
	quiet func(proxy.Key) bool
}

func newFleet(quiet func(proxy.Key) bool, replicas ...*replica) *fleet {
	return &fleet{replicas: replicas, last: replicas[0].start, quiet: quiet}
}

// live returns the replicas not killed.
func (f *fleet) live() []*replica {
	var out []*replica
	for _, rp := range f.replicas {
		if !rp.killed {
			out = append(out, rp)
		}
	}
	return out
}

// alive returns the first error of a replica that has exited.
func (f *fleet) alive() error {
	for _, rp := range f.replicas {
		if err := rp.alive(); err != nil {
			return err
		}
	}
	return nil
}

// writes counts the writes of every replica that quiet selects.
func (f *fleet) writes() int {
	n := 0
	for _, rp := range f.replicas {
		n += rp.proxy.Snapshot().Writes(f.quiet)
	}
	return n
}

// endPhase closes a phase on every live replica and returns their sum.
func (f *fleet) endPhase(name string) Phase {
	now := time.Now()
	sum := Phase{Name: name, Duration: now.Sub(f.last), Requests: proxy.Counts{}}
	for _, rp := range f.live() {
		ph := rp.endPhase(name, sum.Duration)
		sum.Requests = sum.Requests.Add(ph.Requests)
		sum.CPU += ph.CPU
	}
	f.last = now
	return sum
}

// stop stops every replica still running.
func (f *fleet) stop() {
	for _, rp := range f.replicas {
		if rp.killed {
			_ = rp.log.Close()
			_ = rp.proxy.Close()
			continue
		}
		rp.stop()
	}
}
