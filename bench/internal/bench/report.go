package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vpa-inplace/vpa-inplace/bench/internal/proxy"
)

// Report is the outcome of a benchmark run.
type Report struct {
	Options *Options
	Start   time.Time
	End     time.Time
	// Environment.
	CPUs          int
	MemTotal      string
	LoadStart     string
	LoadEnd       string
	ServerVersion string
	Nodes         int
	Results       []*Result
}

func newReport(ctx context.Context, o *Options, kube kubernetes.Interface) (*Report, error) {
	r := &Report{Options: o, Start: time.Now(), CPUs: runtime.NumCPU(), LoadStart: LoadAverage(), MemTotal: memTotal()}
	v, err := kube.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the server version: %w", err)
	}
	r.ServerVersion = v.GitVersion
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	r.Nodes = len(nodes.Items)
	return r, nil
}

// LoadAverage is the 1, 5 and 15 minute load average of the machine.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err == nil {
				return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			}
		}
	}
	return "?"
}

// percentile returns the nearest-rank p-th percentile of ds.
func percentile(ds []time.Duration, p float64) (time.Duration, bool) {
	if len(ds) == 0 {
		return 0, false
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(0, min(len(s)-1, rank-1))], true
}

// changeStats are the per-actuated-change request figures of one result
// (isolated and burst phases together).
type changeStats struct {
	Actuated int
	Writes   int // every write except events and Leases
	Events   int
	// Leases counts the Leases' renewals (leader election, shards): they
	// go on whatever changes.
	Leases      int
	PodWrites   proxy.Counts
	OtherWrites proxy.Counts
}

func (r *Result) changes() changeStats {
	var s changeStats
	s.Actuated = len(r.Isolated.Accepted) + len(r.Burst.Accepted)
	s.PodWrites, s.OtherWrites = proxy.Counts{}, proxy.Counts{}
	for _, name := range []string{"isolated", "burst"} {
		for k, v := range r.Phase(name).Requests {
			switch {
			case !k.IsWrite():
			case k.Resource == "events":
				s.Events += v
			case k.Resource == "leases":
				s.Leases += v
			case k.Resource == "pods":
				s.Writes += v
				s.PodWrites[k] += v
			default:
				s.Writes += v
				s.OtherWrites[k] += v
			}
		}
	}
	return s
}

func (r *Result) floor(o *Options) time.Duration {
	return time.Duration(float64(r.Burst.Expected) / float64(o.QPS) * float64(time.Second))
}

// row is one line of the comparison table.
type row struct {
	name   string
	values []float64 // per result; NaN: not measured
	format func(float64) string
	ratio  bool
}

func secs(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v < 10:
		return fmt.Sprintf("%.2f s", v)
	default:
		return fmt.Sprintf("%.1f s", v)
	}
}

func count(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", v)
}

func perChange(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}

func mib(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f MiB", v/(1<<20))
}

func times(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", v)
}

func (rep *Report) rows() []row {
	o := rep.Options
	var rows []row
	add := func(name string, format func(float64) string, ratio bool, f func(r *Result) float64) {
		rw := row{name: name, format: format, ratio: ratio}
		for _, r := range rep.Results {
			rw.values = append(rw.values, f(r))
		}
		rows = append(rows, rw)
	}
	pct := func(ds []time.Duration, p float64) float64 {
		d, ok := percentile(ds, p)
		if !ok {
			return math.NaN()
		}
		return d.Seconds()
	}
	for _, p := range []float64{50, 95, 99, 100} {
		label := fmt.Sprintf("p%.0f", p)
		if p == 100 {
			label = "max"
		}
		add(fmt.Sprintf("isolated: recommendation → resize accepted, %s", label), secs, true, func(r *Result) float64 { return pct(r.Isolated.Accepted, p) })
	}
	for _, p := range []float64{50, 95, 99, 100} {
		label := fmt.Sprintf("p%.0f", p)
		if p == 100 {
			label = "max"
		}
		add(fmt.Sprintf("isolated: recommendation → resize completed, %s", label), secs, true, func(r *Result) float64 { return pct(r.Isolated.Completed, p) })
	}
	add("isolated: pods resized / expected", func(v float64) string { return fmt.Sprintf("%.0f%%", v*100) }, false, func(r *Result) float64 {
		return float64(len(r.Isolated.Accepted)) / float64(max(1, r.Isolated.Expected))
	})
	add("burst: last resize accepted", secs, true, func(r *Result) float64 {
		if len(r.Burst.Accepted) < r.Burst.Expected {
			return math.NaN()
		}
		return r.Burst.LastAccepted.Seconds()
	})
	add(fmt.Sprintf("burst: QPS floor (pods / %g QPS)", o.QPS), secs, false, func(r *Result) float64 { return r.floor(o).Seconds() })
	add("burst: last accepted ÷ floor", times, true, func(r *Result) float64 {
		if len(r.Burst.Accepted) < r.Burst.Expected {
			return math.NaN()
		}
		return r.Burst.LastAccepted.Seconds() / r.floor(o).Seconds()
	})
	add("burst: last resize completed", secs, true, func(r *Result) float64 {
		if len(r.Burst.Completed) < r.Burst.Expected {
			return math.NaN()
		}
		return r.Burst.LastCompleted.Seconds()
	})
	add("writes per actuated change (events apart)", perChange, true, func(r *Result) float64 {
		c := r.changes()
		return float64(c.Writes) / float64(max(1, c.Actuated))
	})
	add("events written per actuated change", perChange, true, func(r *Result) float64 {
		c := r.changes()
		return float64(c.Events) / float64(max(1, c.Actuated))
	})
	add(fmt.Sprintf("steady state: writes in %s (%d pods Deferred)", o.SteadyDuration, o.DeferredPods), count, true, func(r *Result) float64 {
		return float64(r.Phase("steady").Requests.Writes(nil))
	})
	add("API requests, whole run", count, true, func(r *Result) float64 { return float64(r.Total.Total()) })
	add("peak RSS (VmHWM)", mib, true, func(r *Result) float64 { return float64(r.PeakRSS) })
	add("peak anonymous memory (RssAnon, sampled)", mib, true, func(r *Result) float64 { return float64(r.PeakAnon) })
	add("peak file-backed memory (RssFile, sampled)", mib, true, func(r *Result) float64 { return float64(r.PeakFile) })
	add("CPU time, whole run", secs, true, func(r *Result) float64 { return r.CPU.Seconds() })
	return rows
}

// Table renders the comparison table in markdown.
func (rep *Report) Table() string {
	if rep.Options.Sharded.Replicas > 0 {
		return rep.shardedTable()
	}
	var b strings.Builder
	b.WriteString("| metric |")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, " %s |", r.Spec.Name)
	}
	twoUp := len(rep.Results) == 2
	if twoUp {
		fmt.Fprintf(&b, " %s ÷ %s |", rep.Results[0].Spec.Name, rep.Results[1].Spec.Name)
	}
	b.WriteString("\n|---|")
	for range rep.Results {
		b.WriteString("---:|")
	}
	if twoUp {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, rw := range rep.rows() {
		fmt.Fprintf(&b, "| %s |", rw.name)
		for _, v := range rw.values {
			fmt.Fprintf(&b, " %s |", rw.format(v))
		}
		if twoUp {
			ratio := ""
			a, c := rw.values[0], rw.values[1]
			if rw.ratio && !math.IsNaN(a) && !math.IsNaN(c) && c != 0 {
				ratio = fmt.Sprintf("%.3g", a/c)
			} else if rw.ratio && a == 0 && c == 0 {
				ratio = "–"
			}
			fmt.Fprintf(&b, " %s |", ratio)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// targets checks the targets for the first result (ours).
func (rep *Report) targets() string {
	if len(rep.Results) == 0 || rep.Results[0].Spec.Name != rep.Options.Ours.Name {
		return ""
	}
	o := rep.Options
	r := rep.Results[0]
	var b strings.Builder
	b.WriteString("| target (ours) | measured | |\n|---|---|---|\n")
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	if p99, ok := percentile(r.Isolated.Accepted, 99); ok {
		full := len(r.Isolated.Accepted) == r.Isolated.Expected
		note := ""
		if o.Pods != 1000 {
			note = fmt.Sprintf(" (target set at 1,000 pods; this run has %d)", o.Pods)
		}
		fmt.Fprintf(&b, "| isolated p99 recommendation → resize accepted ≤ 1 s%s | %s (%d/%d pods) | %s |\n", note, secs(p99.Seconds()), len(r.Isolated.Accepted), r.Isolated.Expected, verdict(full && p99 <= time.Second))
	}
	fl := r.floor(o)
	burstDone := len(r.Burst.Accepted) == r.Burst.Expected
	burstOK := burstDone && r.Burst.LastAccepted.Seconds() <= 1.2*fl.Seconds()
	measured := fmt.Sprintf("%s (%.2fx)", secs(r.Burst.LastAccepted.Seconds()), r.Burst.LastAccepted.Seconds()/fl.Seconds())
	if !burstDone {
		measured = fmt.Sprintf("only %d/%d accepted, the last after %s", len(r.Burst.Accepted), r.Burst.Expected, secs(r.Burst.LastAccepted.Seconds()))
	}
	fmt.Fprintf(&b, "| burst: last resize accepted ≤ 1.2 × floor (%s) | %s | %s |\n", secs(1.2*fl.Seconds()), measured, verdict(burstOK))
	c := r.changes()
	fmt.Fprintf(&b, "| exactly 1 write per actuated change | %d writes (events apart) for %d changes: %s | %s |\n", c.Writes, c.Actuated, c.PodWrites.String(), verdict(c.Writes == c.Actuated))
	steady := r.Phase("steady").Requests
	fmt.Fprintf(&b, "| 0 writes in steady state | %d (%s) | %s |\n", steady.Writes(nil), writesOnly(steady).String(), verdict(steady.Writes(nil) == 0))
	if len(rep.Results) == 2 {
		u := rep.Results[1]
		ratio := float64(r.PeakRSS) / float64(u.PeakRSS)
		if o.Pods >= 10000 {
			fmt.Fprintf(&b, "| peak RSS ≤ ½ upstream's at 10,000 pods | %s vs %s (%.2fx) | %s |\n", mib(float64(r.PeakRSS)), mib(float64(u.PeakRSS)), ratio, verdict(ratio <= 0.5))
		} else {
			fmt.Fprintf(&b, "| peak RSS ≤ ½ upstream's at 10,000 pods | at %d pods: %s vs %s (%.2fx) | not evaluated at this size |\n", o.Pods, mib(float64(r.PeakRSS)), mib(float64(u.PeakRSS)), ratio)
		}
	}
	return b.String()
}

func writesOnly(c proxy.Counts) proxy.Counts {
	out := proxy.Counts{}
	for k, v := range c {
		if k.IsWrite() {
			out[k] = v
		}
	}
	return out
}

// Markdown renders the whole report.
func (rep *Report) Markdown(reproduce string) string {
	o := rep.Options
	if o.Sharded.Replicas > 0 {
		return rep.shardedMarkdown(reproduce)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Updater benchmark: %s, %s\n\n", o.Profile, rep.Start.UTC().Format("2006-01-02"))
	if reproduce != "" {
		fmt.Fprintf(&b, "Reproduce: `%s`\n\n", reproduce)
	}
	fmt.Fprintf(&b, "%s pods in %d Deployments under %d VPAs in `InPlace` mode (10 pods each), plus %d pods of one more VPA on node `%s`, "+
		"which a filler pod keeps full. Kubernetes %s, %d hollow nodes (real kubelet code, fake runtime). "+
		"Machine: %d CPUs, %s; load average %s at the start, %s at the end. Run from %s to %s (UTC).\n\n",
		thousands(o.Pods), o.Deployments, o.Deployments, o.DeferredPods, o.DeferredNode, rep.ServerVersion, rep.Nodes,
		rep.CPUs, rep.MemTotal, rep.LoadStart, rep.LoadEnd, rep.Start.UTC().Format("15:04"), rep.End.UTC().Format("15:04"))
	if o.Namespaces > 1 {
		fmt.Fprintf(&b, "The Deployments and their VPAs are spread over %d namespaces, round robin (`%s` to `%s`); the deferred VPA and the filler pod are in the first.\n\n",
			o.Namespaces, o.NamespaceNames()[0], o.NamespaceNames()[o.Namespaces-1])
	}
	if o.Cluster != "" {
		fmt.Fprintf(&b, "Nodes: %s.\n\n", o.Cluster)
	}
	if !o.TokenVolume {
		b.WriteString("The bench pods have `automountServiceAccountToken: false`: no token volume to mount and refresh per pod. " +
			"It spares the hollow kubelets and the API server a TokenRequest and a projected volume per pod; " +
			"neither updater reads volumes (upstream's cache keeps them, so the pods it caches are smaller than usual).\n\n")
	}
	b.WriteString("## Results\n\n")
	b.WriteString(rep.Table())
	if len(rep.Results) == 2 {
		b.WriteString("\nRatios are ours ÷ upstream: below 1, ours is faster, smaller or makes fewer requests.")
	}
	b.WriteString("\nLatencies are per pod, from the start of the driver's write of the VPA status to the moment the driver's own watch sees " +
		"the pod's generation move with the new requests in its spec (accepted), and then `status.observedGeneration` reach it with " +
		"no `PodResizePending`/`PodResizeInProgress` condition left (completed).\n\n")
	if t := rep.targets(); t != "" {
		b.WriteString("## Targets\n\n")
		b.WriteString(t)
		b.WriteString("\n")
	}
	b.WriteString("## How it was run\n\n")
	fmt.Fprintf(&b, "- Both updaters get the same client limits: `--kube-api-qps=%g --kube-api-burst=%d`. The driver itself uses %g/%d and talks to the API server directly.\n", o.QPS, o.Burst, o.DriverQPS, o.DriverBurst)
	b.WriteString("- API requests are counted by a reverse proxy on 127.0.0.1 in front of the API server, one per updater: the updater's kubeconfig points at it (plain HTTP, no credentials) and the proxy forwards over TLS with the updater's credentials; it counts every request by verb, resource and subresource (the way the API server's request info names them). Watches count once, when opened.\n")
	b.WriteString("- Peak RSS is `VmHWM` of `/proc/<pid>/status` at the end of the run; CPU time is `utime + stime` of `/proc/<pid>/stat`, for the whole run (startup included).\n")
	fmt.Fprintf(&b, "- Its two parts are sampled every %s: `RssAnon`, the process's own memory (heap, stacks), and `RssFile`, the pages of its binary it has mapped. The page cache of each binary is dropped before it starts, so that `RssFile` depends on what the process runs, not on how its file came into the cache (a binary just built can show megabytes more of it).\n", MemorySampleInterval)
	b.WriteString("- One updater at a time, on the same cluster and pods. Before each, with no updater running, the driver resets every VPA to the baseline recommendation and resizes every pod back to it, and waits until every resize has completed.\n")
	fmt.Fprintf(&b, "- Scenarios, in order: startup (ready, then %s settle, then no write for 10 s); **isolated**: %d VPAs changed one at a time, %s apart (%s → %s), then up to 5 min for the tail; "+
		"**burst**: every VPA changed at once (→ %s; all %d writes by the driver took the time shown under *burst write*); "+
		"**deferral**: the %d pods on `%s` asked for %s CPU, which the filler pod leaves no room for, until the kubelet holds them `Deferred`; "+
		"**steady state**: %s with nothing changing while those pods stay Deferred. "+
		"Every phase but the steady state ends only once the updater has made no write for 10 s, so that writes it queued (events, the VPA condition at startup) count in the phase that caused them.\n",
		o.Settle, o.IsolatedChanges, o.IsolatedInterval, fmtRes(baseline), fmtRes(isolated), fmtRes(burst), o.Deployments, o.DeferredPods, o.DeferredNode, deferred.Cpu().String(), o.SteadyDuration)
	b.WriteString("- Recommendations are written into the VPA status by the driver (target = lower bound = upper bound = uncapped target); no recommender runs. Neither updater needs an admission controller here: no pod is created during the scenarios.\n\n")
	b.WriteString("| updater | build | command line (binary, then flags) | credentials |\n|---|---|---|---|\n")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "| %s | %s | `%s %s` | %s |\n", r.Spec.Name, r.Spec.Version, shortBinary(r.Spec.Binary), strings.Join(r.Args, " "), r.Spec.Identity)
	}
	b.WriteString("\n## Requests and CPU by phase\n\n")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "### %s\n\n", r.Spec.Name)
		b.WriteString("| phase | duration | requests | writes | CPU | requests by kind |\n|---|---:|---:|---:|---:|---|\n")
		for _, p := range r.Phases {
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %s |\n", p.Name, secs(p.Duration.Seconds()), p.Requests.Total(), p.Requests.Writes(nil), secs(p.CPU.Seconds()), p.Requests.String())
		}
		c := r.changes()
		fmt.Fprintf(&b, "\nIsolated: %d/%d pods accepted, %d completed. Burst: %d/%d accepted, %d completed; burst write %s. "+
			"Deferral: %d/%d accepted, %d held Deferred; still Deferred at the end of the steady state: %d; resizes accepted during the steady state: %d. "+
			"Actuated changes (isolated + burst): %d; their writes: %s; events: %d.\n\n",
			len(r.Isolated.Accepted), r.Isolated.Expected, len(r.Isolated.Completed),
			len(r.Burst.Accepted), r.Burst.Expected, len(r.Burst.Completed), secs(r.BurstWrite.Seconds()),
			len(r.Deferred.Accepted), r.Deferred.Expected, r.Deferred.Deferred, r.SteadyStillDeferred, r.SteadyGenBumps,
			c.Actuated, joinCounts(c.PodWrites, c.OtherWrites), c.Events)
		b.WriteString(latencyTable(r.Latencies))
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- note: %s\n", n)
		}
		for _, p := range r.Profiles {
			fmt.Fprintf(&b, "- profile: `%s`\n", p)
		}
		if len(r.Notes)+len(r.Profiles) > 0 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// latencyTable renders the responses seen by the proxy, watches apart:
// count, mean and max time through the proxy, failed responses.
func latencyTable(ls map[proxy.Key]proxy.Latency) string {
	if len(ls) == 0 {
		return ""
	}
	keys := make([]proxy.Key, 0, len(ls))
	for k := range ls {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b proxy.Key) int {
		if c := ls[b].Count - ls[a].Count; c != 0 {
			return c
		}
		return strings.Compare(a.String(), b.String())
	})
	var b strings.Builder
	b.WriteString("| request (watches apart) | count | mean | max | failed (status=count) |\n|---|---:|---:|---:|---|\n")
	for _, k := range keys {
		l := ls[k]
		failed := []string{}
		for code, n := range l.Failed {
			failed = append(failed, fmt.Sprintf("%d=%d", code, n))
		}
		slices.Sort(failed)
		mean := time.Duration(0)
		if l.Count > 0 {
			mean = l.Total / time.Duration(l.Count)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", k, l.Count, mean.Round(100*time.Microsecond), l.Max.Round(100*time.Microsecond), strings.Join(failed, ", "))
	}
	b.WriteString("\n")
	return b.String()
}

func joinCounts(a, b proxy.Counts) string {
	all := proxy.Counts{}
	for k, v := range a {
		all[k] += v
	}
	for k, v := range b {
		all[k] += v
	}
	return all.String()
}

func fmtRes(r corev1.ResourceList) string {
	return r.Cpu().String() + "/" + r.Memory().String()
}

func shortBinary(path string) string {
	if i := strings.LastIndex(path, "/"); i >= 0 {
		return path[i+1:]
	}
	return path
}

func thousands(n int) string {
	s := fmt.Sprint(n)
	var out []string
	for len(s) > 3 {
		out = append([]string{s[len(s)-3:]}, out...)
		s = s[:len(s)-3]
	}
	return strings.Join(append([]string{s}, out...), ",")
}
