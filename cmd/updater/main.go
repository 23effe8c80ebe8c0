// Command updater resizes the pods of VPAs in InPlace mode through the
// pods/resize subresource and never evicts them.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
	// --logging-format=json: component-base's JSON logger, as
	// kube-scheduler and kube-controller-manager offer it.
	_ "k8s.io/component-base/logs/json/register"

	"github.com/vpa-inplace/vpa-inplace/cmd/updater/app"
	"github.com/vpa-inplace/vpa-inplace/pkg/features"
)

func main() {
	os.Exit(run())
}

func run() int {
	opts := app.NewOptions(features.NewFeatureGate())
	logOpts := logs.NewOptions()
	fs := pflag.NewFlagSet("updater", pflag.ContinueOnError)
	fs.SetNormalizeFunc(flag.WordSepNormalizeFunc)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage of updater:\n\nResizes the pods of VerticalPodAutoscalers in InPlace mode through the pods/resize subresource; never evicts.\n\n%s", fs.FlagUsages())
	}
	opts.AddFlags(fs)
	logsapi.AddFlags(logOpts, fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == pflag.ErrHelp {
			return 0
		}
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := logsapi.ValidateAndApply(logOpts, opts.FeatureGate); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer logs.FlushLogs()
	if errs := opts.Validate(); len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(os.Stderr, err)
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background().WithName("updater"))
	if err := app.Run(ctx, opts); err != nil {
		klog.FromContext(ctx).Error(err, "Updater failed")
		return 1
	}
	return 0
}
