// Command admission-controller serves the webhooks of vpa-inplace: the
// InPlace feature gate on VPA objects, and recommendations applied to new
// pods of InPlace VPAs.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	// --logging-format=json: component-base's JSON logger, as
	// kube-scheduler and kube-controller-manager offer it.
	_ "k8s.io/component-base/logs/json/register"

	"github.com/vpa-inplace/vpa-inplace/cmd/admission-controller/app"
)

func main() {
	opts := app.NewOptions()
	fs := pflag.NewFlagSet("admission-controller", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: admission-controller [flags]\n\n"+
			"Serves the vpa-inplace webhooks over HTTPS: /validate-vpas (the InPlace feature gate and VPA validation)\n"+
			"and /mutate-pods (recommendations applied to new pods of InPlace VPAs). Webhook configurations are\n"+
			"not registered by this binary; with --cert-mode=self-managed it patches their caBundle only.\n\nFlags:\n%s", fs.FlagUsages())
	}
	opts.AddFlags(fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			os.Exit(0)
		}
		// With ContinueOnError pflag prints nothing itself.
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	if errs := opts.Validate(); len(errs) > 0 {
		for _, err := range errs {
			fmt.Fprintln(os.Stderr, "error:", err)
		}
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, opts); err != nil {
		klog.ErrorS(err, "Admission controller failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}
