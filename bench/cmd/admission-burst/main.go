// Command admission-burst measures our admission controller and upstream
// VPA's, one after the other, on a burst of pod creations on a cluster
// (package admissionburst). hack/bench-admission-burst.sh brings up the
// local cluster and calls it; see bench/README.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"

	"github.com/vpa-inplace/vpa-inplace/bench/internal/admissionburst"
	"github.com/vpa-inplace/vpa-inplace/bench/internal/bench"
)

func main() { os.Exit(run()) }

func run() int {
	fs := pflag.NewFlagSet("admission-burst", pflag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "Cluster admin's kubeconfig (the driver's, and upstream's).")
	deployments := fs.Int("deployments", 30, "Deployments (each under its InPlace VPA) created at once.")
	replicas := fs.Int("replicas", 10, "Pods of each Deployment.")
	workDir := fs.String("work-dir", ".", "Where the controllers' logs go.")
	results := fs.String("results", "", "Markdown file to write. Empty: print only.")
	reproduce := fs.String("reproduce", "make bench-admission-burst", "Command that reproduces the run, quoted in the report.")
	cluster := fs.String("cluster", "", "Description of the cluster, quoted in the report.")
	var ours, upstream admissionburst.Side
	ours.Name, upstream.Name = "ours", "upstream"
	for _, s := range []*admissionburst.Side{&ours, &upstream} {
		fs.StringVar(&s.Binary, s.Name+"-binary", "", "The "+s.Name+" admission controller's binary.")
		fs.StringVar(&s.Version, s.Name+"-version", "", "Its version, quoted in the report.")
		fs.StringSliceVar(&s.Args, s.Name+"-args", nil, "Its flags.")
		fs.StringVar(&s.Webhook, s.Name+"-webhook", "", "The name of its pod webhook.")
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == pflag.ErrHelp {
			return 0
		}
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if *deployments < 1 || *replicas < 1 || ours.Binary == "" || upstream.Binary == "" {
		fmt.Fprintln(os.Stderr, "--deployments, --replicas, --ours-binary and --upstream-binary are required")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The driver's own writes are not what is measured: no client-side
	// throttling.
	config.QPS, config.Burst = 1000, 2000
	kube := kubernetes.NewForConfigOrDie(config)
	vpas := vpaclientset.NewForConfigOrDie(config)
	reg := kube.AdmissionregistrationV1()
	// Ours: the webhooks of deploy/overlays/local, applied before the run;
	// upstream's own registration removed. Upstream registers itself at
	// start (--register-webhook); ours are removed.
	ours.Register = func(ctx context.Context) error {
		return ignoreNotFound(reg.MutatingWebhookConfigurations().Delete(ctx, "vpa-webhook-config", metav1.DeleteOptions{}))
	}
	upstream.Register = func(ctx context.Context) error {
		if err := ignoreNotFound(reg.MutatingWebhookConfigurations().Delete(ctx, "vpa-inplace-pods", metav1.DeleteOptions{})); err != nil {
			return err
		}
		return ignoreNotFound(reg.ValidatingWebhookConfigurations().Delete(ctx, "vpa-inplace-vpas", metav1.DeleteOptions{}))
	}
	opts := admissionburst.Options{Kube: kube, VPAs: vpas, Deployments: *deployments, Replicas: *replicas, WorkDir: *workDir,
		Log: func(format string, args ...any) {
			fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
		}}
	load := bench.LoadAverage()
	var rs []*admissionburst.Result
	for _, side := range []*admissionburst.Side{&ours, &upstream} {
		r, err := admissionburst.Run(ctx, opts, side)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", side.Name, err)
			return 1
		}
		rs = append(rs, r)
	}
	out := markdown(rs, *deployments, *replicas, *cluster, load, *reproduce)
	fmt.Print(out)
	if *results != "" {
		if err := os.WriteFile(*results, []byte(out), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func markdown(rs []*admissionburst.Result, deployments, replicas int, cluster, load, reproduce string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Admission burst: our admission controller and upstream VPA's, on a cluster\n\n")
	fmt.Fprintf(&b, "%s, load average %s at start; reproduce with `%s`.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), load, reproduce)
	fmt.Fprintf(&b, "%d Deployments of %d pods (%d pods), each under an InPlace VPA with a recommendation, created at once; "+
		"the ReplicaSet controller creates the pods. One admission controller registered at a time, running as a process on "+
		"this machine. Cluster: %s.\n\n", deployments, replicas, deployments*replicas, cluster)
	for _, r := range rs {
		fmt.Fprintf(&b, "- %s: %s\n", r.Side.Name, r.Side.Version)
	}
	fmt.Fprintf(&b, "\n| | pods created | patched | burst (first create to last pod) | webhook calls | p50 | p99 | peak RSS | RSS before the burst | CPU during the burst |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %d | %d | %.1f s | %d | %.1f ms | %.1f ms | %.1f MiB | %.1f MiB | %.2f s |\n", r.Side.Name, r.Pods, r.Patched,
			r.Wall.Seconds(), r.Calls, r.P50*1000, r.P99*1000, float64(r.PeakRSS)/(1<<20), float64(r.RSSBefore)/(1<<20), r.CPU.Seconds())
	}
	fmt.Fprintf(&b, "\np50 and p99 are the API server's `apiserver_admission_webhook_admission_duration_seconds` (pod CREATE, "+
		"this webhook), interpolated inside its buckets as `histogram_quantile` does; the buckets are coarse:\n\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "- %s: %s\n", r.Side.Name, r.Buckets)
	}
	return b.String()
}
