package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// churn is resizes per pod per hour over the window.
func (r *RecResult) churn() float64 {
	w := r.WindowEnd.Sub(r.WindowStart)
	if len(r.Resizes) == 0 || w <= 0 {
		return math.NaN()
	}
	return float64(r.totalResizes()) / float64(len(r.Resizes)) / w.Hours()
}

func (r *RecResult) totalResizes() int {
	n := 0
	for _, v := range r.Resizes {
		n += v
	}
	return n
}

// targetChurn is the recommender's target changes larger than the
// threshold per VPA per hour over the window.
func (r *RecResult) targetChurn() float64 {
	w := r.WindowEnd.Sub(r.WindowStart)
	if len(r.TargetChanges) == 0 || w <= 0 {
		return math.NaN()
	}
	n := 0
	for _, v := range r.TargetChanges {
		n += v
	}
	return float64(n) / float64(len(r.TargetChanges)) / w.Hours()
}

// stepDurations returns, over the pods that got there, the usage step →
// recommendation, recommendation → resize and step → resize times of one
// resource ("cpu", "memory"; "": the first of the two).
func (r *RecResult) stepDurations(res string) (rec, upd, total []time.Duration) {
	for name, t := range r.Step {
		at := r.StepAt[name]
		recommended, resized := t.Recommended, t.Resized
		switch res {
		case "cpu":
			recommended, resized = t.RecommendedCPU, t.ResizedCPU
		case "memory":
			recommended, resized = t.RecommendedMemory, t.ResizedMemory
		}
		if !recommended.IsZero() {
			rec = append(rec, recommended.Sub(at))
		}
		if !resized.IsZero() {
			total = append(total, resized.Sub(at))
			if !recommended.IsZero() {
				upd = append(upd, resized.Sub(recommended))
			}
		}
	}
	return rec, upd, total
}

// stepResized counts the pods whose CPU and memory were both resized past
// the bar.
func (r *RecResult) stepResized() int {
	n := 0
	for _, t := range r.Step {
		if !t.ResizedCPU.IsZero() && !t.ResizedMemory.IsZero() {
			n++
		}
	}
	return n
}

func perHour(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", v)
}

func p50max(ds []time.Duration) string {
	p50, ok := percentile(ds, 50)
	if !ok {
		return "n/a"
	}
	mx, _ := percentile(ds, 100)
	return fmt.Sprintf("%s / %s", secs(p50.Seconds()), secs(mx.Seconds()))
}

func (rep *RecReport) rows() [][]string {
	var rows [][]string
	add := func(name string, f func(r *RecResult) string) {
		row := []string{name}
		for _, r := range rep.Results {
			row = append(row, f(r))
		}
		rows = append(rows, row)
	}
	add("converged after the pods ran", func(r *RecResult) string {
		s := fmt.Sprintf("%.0f s", r.Converged.Seconds())
		if !r.ConvergedQuietly {
			s += " (timeout, not quiet)"
		}
		return s
	})
	add("before the window: resizes (all pods) / target moves (all VPAs)", func(r *RecResult) string {
		return fmt.Sprintf("%d / %d", r.ConvergeResizes, r.ConvergeTargetChanges)
	})
	add("steady window", func(r *RecResult) string {
		return r.WindowEnd.Sub(r.WindowStart).Round(time.Second).String()
	})
	add("resizes in the window (pod generation steps)", func(r *RecResult) string {
		counts := make([]int, 0, len(r.Resizes))
		for _, v := range r.Resizes {
			counts = append(counts, v)
		}
		if len(counts) == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%d (per pod %d to %d)", r.totalResizes(), slices.Min(counts), slices.Max(counts))
	})
	add("pods/resize patches in the window", func(r *RecResult) string { return fmt.Sprint(r.ResizeWrites) })
	add("**churn: resizes per pod per hour**", func(r *RecResult) string { return "**" + perHour(r.churn()) + "**" })
	add(fmt.Sprintf("recommender: target moves > %.0f %% per VPA per hour", rep.Options.Threshold*100), func(r *RecResult) string {
		return perHour(r.targetChurn())
	})
	add("step: pods resized (cpu and memory)", func(r *RecResult) string { return fmt.Sprintf("%d/%d", r.stepResized(), len(r.Step)) })
	for _, res := range []string{"cpu", "memory"} {
		add(fmt.Sprintf("step, %s: usage → recommendation above the bar, p50 / max", res), func(r *RecResult) string { rec, _, _ := r.stepDurations(res); return p50max(rec) })
		add(fmt.Sprintf("step, %s: recommendation → resize, p50 / max", res), func(r *RecResult) string { _, upd, _ := r.stepDurations(res); return p50max(upd) })
		add(fmt.Sprintf("**step, %s: usage → resize, p50 / max**", res), func(r *RecResult) string { _, _, total := r.stepDurations(res); return p50max(total) })
	}
	add("updater CPU in the window", func(r *RecResult) string { return secs(r.WindowCPU.Seconds()) })
	add("updater peak RSS", func(r *RecResult) string { return mib(float64(r.PeakRSS)) })
	return rows
}

// Table is the comparison as a markdown table.
func (rep *RecReport) Table() string {
	var b strings.Builder
	b.WriteString("| |")
	for _, r := range rep.Results {
		fmt.Fprintf(&b, " %s |", r.Spec.Name)
	}
	b.WriteString("\n|---|")
	for range rep.Results {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, row := range rep.rows() {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	return b.String()
}

// Markdown is the full report.
func (rep *RecReport) Markdown(reproduce string) string {
	o := rep.Options
	var b strings.Builder
	fmt.Fprintf(&b, "# Recommender-driven benchmark, %s\n\n", rep.Start.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "%d pods in %d Deployments under InPlace VPAs, usage `%s` with ±%d %% seeded noise, "+
		"stepped to `%s`; upstream's recommender writes every recommendation. One updater at a time, each on "+
		"a fresh namespace (no recommender history). See bench/README.md, \"Recommender-driven phase\".\n\n",
		o.Pods, o.Deployments, o.Usage, o.Noise, o.StepUsage)
	if reproduce != "" {
		fmt.Fprintf(&b, "Reproduce: `%s`\n\n", reproduce)
	}
	b.WriteString(rep.Table())
	b.WriteString("\n")
	fmt.Fprintf(&b, "*Churn* counts each pod's generation steps (accepted spec changes, i.e. resizes) over the steady "+
		"window, which starts once every pod has been resized at least once and none for %s (or %s after the pods ran). "+
		"*Step*: each pod's usage annotation is raised; the bar, per resource, is the larger of the pod's requests and "+
		"its VPA's target at the step, times %.2f; the first target above it is the recommendation the step caused, "+
		"the first requests above it the resize. Times are the driver's watch events.\n\n",
		o.ConvergeQuiet, o.ConvergeTimeout, 1+o.Threshold)

	b.WriteString("## Environment\n\n")
	fmt.Fprintf(&b, "- start %s, end %s (%s)\n", rep.Start.UTC().Format(time.RFC3339), rep.End.UTC().Format(time.RFC3339), rep.End.Sub(rep.Start).Round(time.Second))
	fmt.Fprintf(&b, "- machine: %d CPUs, %s; load average at start %s, at end %s\n", rep.CPUs, rep.MemTotal, rep.LoadStart, rep.LoadEnd)
	fmt.Fprintf(&b, "- cluster: %s, %d nodes; %s\n", rep.ServerVersion, rep.Nodes, o.Cluster)
	fmt.Fprintf(&b, "- recommender: %s\n", o.Recommender)
	fmt.Fprintf(&b, "- pods: %d in %d Deployments, created with requests %s CPU / %s memory; usage annotation `%s`, after the step `%s`\n",
		o.Pods, o.Deployments, o.CPURequest, o.MemoryRequest, o.usageAnnotation(o.Usage), o.usageAnnotation(o.StepUsage))
	fmt.Fprintf(&b, "- window %s; convergence: quiet %s, timeout %s; step timeout %s; threshold %.2f\n",
		o.Window, o.ConvergeQuiet, o.ConvergeTimeout, o.StepTimeout, o.Threshold)
	for _, r := range rep.Results {
		fmt.Fprintf(&b, "\n### %s\n\n", r.Spec.Name)
		fmt.Fprintf(&b, "- build: %s\n", r.Spec.Version)
		fmt.Fprintf(&b, "- credentials: %s\n", r.Spec.Identity)
		fmt.Fprintf(&b, "- command: `%s %s`\n", shortBinary(r.Spec.Binary), strings.Join(r.Args, " "))
		fmt.Fprintf(&b, "- namespace %s; window %s to %s\n", r.Namespace, r.WindowStart.UTC().Format("15:04:05"), r.WindowEnd.UTC().Format("15:04:05"))
		fmt.Fprintf(&b, "- writes in the window: %s\n", r.Writes)
		names := make([]string, 0, len(r.Resizes))
		for n := range r.Resizes {
			names = append(names, n)
		}
		slices.Sort(names)
		parts := make([]string, 0, len(names))
		for _, n := range names {
			parts = append(parts, fmt.Sprintf("%s %d", n, r.Resizes[n]))
		}
		fmt.Fprintf(&b, "- resizes per pod in the window: %s\n", strings.Join(parts, ", "))
		if r.Replaced > 0 {
			fmt.Fprintf(&b, "- **%d pods replaced in the window**\n", r.Replaced)
		}
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- note: %s\n", n)
		}
	}
	return b.String()
}
