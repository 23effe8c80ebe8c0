// Command resize-bench runs the same resize scenarios against our updater and
// the upstream VPA updater, one after the other on the same cluster, and
// writes a markdown comparison. hack/bench.sh (make bench) brings up the
// cluster and calls it; see bench/README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/vpa-inplace/vpa-inplace/bench/internal/bench"
)

func main() {
	os.Exit(run())
}

func run() int {
	opts := bench.NewOptions()
	fs := pflag.NewFlagSet("resize-bench", pflag.ContinueOnError)
	opts.AddFlags(fs)
	reproduce := fs.String("reproduce", "", "Command that reproduces the run, quoted in the report.")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == pflag.ErrHelp {
			return 0
		}
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if errs := opts.Validate(); len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(os.Stderr, err)
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	if opts.CheckUpdaterArgs {
		if err := bench.CheckUpdaterArgs(ctx, opts, logf); err != nil {
			logf("error: %v", err)
			return 1
		}
		return 0
	}
	report, err := bench.Run(ctx, opts, logf)
	rc := 0
	if err != nil {
		logf("error: %v", err)
		rc = 1
	}
	if report == nil || len(report.Results) == 0 {
		return max(rc, 1)
	}
	report.End = time.Now()
	report.LoadEnd = bench.LoadAverage()
	md := report.Markdown(*reproduce)
	if rc != 0 {
		md += fmt.Sprintf("\n**Incomplete run**: %v\n", err)
	}
	fmt.Println(report.Table())
	if opts.Results != "" {
		if err := os.MkdirAll(filepath.Dir(opts.Results), 0o755); err != nil {
			logf("error: %v", err)
			return 1
		}
		if err := os.WriteFile(opts.Results, []byte(md), 0o644); err != nil {
			logf("error: %v", err)
			return 1
		}
		logf("wrote %s", opts.Results)
	}
	return rc
}
