// Command admission-bench compares our pod admission handler with upstream
// VPA's in one process (package admissionbench), prints the tables and
// writes them as markdown. hack/bench-admission.sh (make bench-admission)
// runs it; see bench/README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/vpa-inplace/vpa-inplace/bench/internal/admissionbench"
)

func main() {
	os.Exit(run())
}

func run() int {
	fs := pflag.NewFlagSet("admission-bench", pflag.ContinueOnError)
	sizes := fs.IntSlice("vpas", []int{1, 100, 1000}, "Numbers of VPAs (and Deployments, ReplicaSets) in the namespace.")
	rounds := fs.Int("rounds", 5, "Runs of each benchmark; the median is reported.")
	heapN := fs.Int("heap-vpas", 1000, "VPAs, Deployments and ReplicaSets for the heap held after sync.")
	results := fs.String("results", "", "Markdown file to write. Empty: print only.")
	reproduce := fs.String("reproduce", "make bench-admission", "Command that reproduces the run, quoted in the report.")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == pflag.ErrHelp {
			return 0
		}
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if *rounds < 1 || *heapN < 1 || len(*sizes) == 0 {
		fmt.Fprintln(os.Stderr, "--rounds, --heap-vpas and --vpas must be positive")
		return 2
	}
	// As `go test -cpu 1`: one P, so that neither side gains from the
	// other core of a shared machine.
	runtime.GOMAXPROCS(1)
	// Handlers log every review at their default verbosity; keep that out
	// of the figures and the output.
	klog.SetOutput(discard{})
	klog.LogToStderr(false)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var b strings.Builder
	fmt.Fprintf(&b, "# Admission: our pod webhook and upstream VPA v1.8.1's, in process\n\n")
	fmt.Fprintf(&b, "%s, %s; reproduce with `%s`.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), environment(), *reproduce)
	fmt.Fprintf(&b, "One CREATE review of a one-container pod of a Deployment's ReplicaSet (%d bytes), served by each handler as its main wires it "+
		"(ours: `admission.Handler`, no wrapper; upstream: `AdmissionServer.Serve` and its health check), over fake clientsets with synced informers. "+
		"GOMAXPROCS 1, median of %d runs of `testing.Benchmark` each, alternating. Every response is checked, outside the timed part, "+
		"to patch the pod's requests to the recommendation (%s, %s).\n\n",
		len(admissionbench.Review()), *rounds, admissionbench.RecommendedCPU, admissionbench.RecommendedMemory)
	fmt.Fprintf(&b, "| VPAs in the namespace | ours ns/op | upstream ns/op | ratio | ours B/op | upstream B/op | ratio | ours allocs/op | upstream allocs/op | ratio |\n")
	fmt.Fprintf(&b, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, n := range *sizes {
		r, err := admissionbench.Reviews(ctx, n, *rounds)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%d VPAs: %v\n", n, err)
			return 1
		}
		o, u := r["ours"], r["upstream"]
		fmt.Fprintf(&b, "| %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f |\n", n,
			o.NsPerOp, u.NsPerOp, o.NsPerOp/u.NsPerOp, o.BytesPerOp, u.BytesPerOp, o.BytesPerOp/u.BytesPerOp,
			o.AllocsPerOp, u.AllocsPerOp, o.AllocsPerOp/u.AllocsPerOp)
		fmt.Fprint(os.Stderr, ".")
	}
	heap, err := admissionbench.HeapAfterSync(ctx, *heapN)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(&b, "\nLive heap held once the informers have synced, %d VPAs + %d Deployments + %d ReplicaSets "+
		"(heap after a collection, less the heap before the handler was built):\n\n", *heapN, *heapN, *heapN)
	fmt.Fprintf(&b, "| | ours | upstream | ratio |\n|---|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| heap after sync | %.1f MiB | %.1f MiB | %.2f |\n",
		float64(heap["ours"])/(1<<20), float64(heap["upstream"])/(1<<20), float64(heap["ours"])/float64(heap["upstream"]))

	fmt.Fprintln(os.Stderr)
	fmt.Print(b.String())
	if *results != "" {
		if err := os.WriteFile(*results, []byte(b.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintln(os.Stderr, "wrote", *results)
	}
	return 0
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// environment describes the machine and the build.
func environment() string {
	parts := []string{runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH, fmt.Sprintf("%d CPUs", runtime.NumCPU())}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		parts = append(parts, "load average "+strings.Join(strings.Fields(string(b))[:3], " ")+" at start")
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		rev := strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			rev += " with local changes"
		}
		parts = append(parts, "ours at "+rev)
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "k8s.io/autoscaler/vertical-pod-autoscaler" {
				parts = append(parts, "upstream "+d.Version)
			}
		}
	}
	return strings.Join(parts, ", ")
}
