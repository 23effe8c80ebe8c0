// Package bench drives the side-by-side benchmark of VPA updaters in InPlace
// mode: it creates the workload (Deployments under InPlace VPAs, a node held
// full by a filler pod), then runs the same scenarios against each updater in
// turn, each behind its own counting proxy, and writes a markdown report.
package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// UpdaterSpec says how to run one updater.
type UpdaterSpec struct {
	// Name is how the report calls it: "ours", "upstream".
	Name string
	// Binary is the updater executable.
	Binary string
	// Kubeconfig holds the credentials the updater uses; its proxy
	// authenticates with them.
	Kubeconfig string
	// Args are the updater's flags besides --kubeconfig, --kube-api-qps,
	// --kube-api-burst and --address, which the driver sets.
	Args []string
	// ReadyPath, when set, is polled on --address until it answers 200.
	ReadyPath string
	// Identity describes the credentials in the report.
	Identity string
	// Version describes the build in the report.
	Version string
}

// Options configure a benchmark run.
type Options struct {
	Kubeconfig string
	Namespace  string
	// Namespaces spreads the Deployments over this many namespaces: 1, the
	// workload lives in Namespace; more, in 000-Namespace, 001-Namespace...
	// (Deployment i in namespace i modulo Namespaces).
	Namespaces  int
	Pods        int
	Deployments int

	IsolatedChanges  int
	IsolatedInterval time.Duration
	SteadyDuration   time.Duration
	Settle           time.Duration

	DeferredPods  int
	DeferredNode  string
	DeferredTaint string

	// TokenVolume keeps the service-account token volume in the bench pods
	// (the Kubernetes default). Without it, each hollow kubelet starts a pod
	// with no TokenRequest, no projected volume to mount and refresh.
	TokenVolume bool
	// Cluster describes the nodes in the report (layout, kubelet flags).
	Cluster string

	// QPS and Burst are the client rate limits given to every updater.
	QPS   float32
	Burst int
	// DriverQPS and DriverBurst are the driver's own (admin) limits.
	DriverQPS   float32
	DriverBurst int

	Ours     UpdaterSpec
	Upstream UpdaterSpec
	// Only runs a single updater by name (for debugging).
	Only string
	// Sharded, when its Replicas are set, runs ours alone as one replica,
	// then as several sharing the shards (sharded.go).
	Sharded ShardedOptions
	// CheckUpdaterArgs starts nothing on a cluster: it runs our updater
	// with the flags each of its replicas would get and a kubeconfig that
	// does not exist, to see them parsed and validated (check.go).
	CheckUpdaterArgs bool
	// Pprof fetches a CPU profile during the burst and a heap profile at the
	// end from <address>/debug/pprof of updaters that serve it.
	Pprof bool

	Profile  string
	WorkDir  string
	Results  string
	Teardown bool
}

// NewOptions returns the defaults: 1,000 pods in 100 Deployments.
func NewOptions() *Options {
	return &Options{
		Namespace:        "resize-bench",
		Namespaces:       1,
		Pods:             1000,
		IsolatedChanges:  100,
		IsolatedInterval: 3 * time.Second,
		SteadyDuration:   5 * time.Minute,
		Settle:           15 * time.Second,
		DeferredPods:     5,
		DeferredNode:     "hollow-deferred",
		DeferredTaint:    "vpa-inplace.dev/bench=deferred",
		TokenVolume:      true,
		QPS:              50,
		Burst:            100,
		DriverQPS:        500,
		DriverBurst:      1000,
		Ours:             UpdaterSpec{Name: "ours", ReadyPath: "/readyz"},
		Upstream:         UpdaterSpec{Name: "upstream"},
		Sharded:          defaultShardedOptions(),
		WorkDir:          "_output/bench/run",
	}
}

// AddFlags registers the options on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Cluster admin kubeconfig for the driver (workload setup, recommendations, watches).")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Namespace of the workload, or with --namespaces above 1 the end of its namespaces' names (000-<namespace>, ...).")
	fs.IntVar(&o.Namespaces, "namespaces", o.Namespaces, "Namespaces the Deployments are spread over, round robin (the deferred VPA and the filler pod are in the first).")
	fs.IntVar(&o.Pods, "pods", o.Pods, "Pods under InPlace VPAs.")
	fs.IntVar(&o.Deployments, "deployments", o.Deployments, "Deployments (one VPA each); 0: pods/10.")
	fs.IntVar(&o.IsolatedChanges, "isolated-changes", o.IsolatedChanges, "VPAs changed one at a time in the isolated scenario.")
	fs.DurationVar(&o.IsolatedInterval, "isolated-interval", o.IsolatedInterval, "Time between two isolated changes.")
	fs.DurationVar(&o.SteadyDuration, "steady-duration", o.SteadyDuration, "Length of the steady-state window.")
	fs.DurationVar(&o.Settle, "settle", o.Settle, "Wait after an updater is ready before the first scenario.")
	fs.IntVar(&o.DeferredPods, "deferred-pods", o.DeferredPods, "Pods of the VPA whose resize the filler pod holds Deferred.")
	fs.StringVar(&o.DeferredNode, "deferred-node", o.DeferredNode, "Node of the deferred pods and the filler pod.")
	fs.StringVar(&o.DeferredTaint, "deferred-taint", o.DeferredTaint, "key=value of the NoSchedule taint of the deferred node.")
	fs.BoolVar(&o.TokenVolume, "token-volume", o.TokenVolume, "Mount the service-account token in the bench pods (false: automountServiceAccountToken: false, less work per pod for the kubelets).")
	fs.StringVar(&o.Cluster, "cluster", o.Cluster, "How the cluster's nodes were set up, quoted in the report.")
	fs.Float32Var(&o.QPS, "qps", o.QPS, "Client QPS given to each updater (--kube-api-qps).")
	fs.IntVar(&o.Burst, "burst", o.Burst, "Client burst given to each updater (--kube-api-burst).")
	fs.Float32Var(&o.DriverQPS, "driver-qps", o.DriverQPS, "The driver's client QPS.")
	fs.IntVar(&o.DriverBurst, "driver-burst", o.DriverBurst, "The driver's client burst.")
	for _, u := range []*UpdaterSpec{&o.Ours, &o.Upstream} {
		p := u.Name + "-"
		fs.StringVar(&u.Binary, p+"binary", u.Binary, "Executable of the "+u.Name+" updater.")
		fs.StringVar(&u.Kubeconfig, p+"kubeconfig", u.Kubeconfig, "Credentials of the "+u.Name+" updater (its proxy uses them).")
		fs.Var(argsValue{&u.Args}, p+"args", "Flags of the "+u.Name+" updater, space separated (the driver adds --kubeconfig, --kube-api-qps, --kube-api-burst, --address).")
		fs.StringVar(&u.ReadyPath, p+"ready-path", u.ReadyPath, "Readiness path on the "+u.Name+" updater's --address; empty: none.")
		fs.StringVar(&u.Identity, p+"identity", u.Identity, "How the "+u.Name+" updater's credentials are described in the report.")
		fs.StringVar(&u.Version, p+"version", u.Version, "How the "+u.Name+" updater's build is described in the report.")
	}
	fs.StringVar(&o.Only, "only", o.Only, "Run only this updater (ours or upstream).")
	o.Sharded.addFlags(fs)
	fs.BoolVar(&o.CheckUpdaterArgs, "check-updater-args", o.CheckUpdaterArgs, "Start nothing: run our updater with the flags each of its replicas would get (every configuration of --sharded-replicas) and a kubeconfig that does not exist, and check that it parses and validates them (it stops at loading its client configuration).")
	fs.BoolVar(&o.Pprof, "pprof", o.Pprof, "Fetch CPU (burst) and heap (end) profiles from updaters serving /debug/pprof.")
	fs.StringVar(&o.Profile, "profile", o.Profile, "Name of the profile in the report; empty: <pods>pods.")
	fs.StringVar(&o.WorkDir, "work-dir", o.WorkDir, "Directory for updater logs, proxy kubeconfigs and profiles.")
	fs.StringVar(&o.Results, "results", o.Results, "Markdown report to write; empty: print only.")
	fs.BoolVar(&o.Teardown, "teardown", o.Teardown, "Delete the workload namespace at the end.")
}

// Validate returns every problem with the options and fills in defaults
// that depend on other options.
func (o *Options) Validate() []error {
	var errs []error
	if o.Kubeconfig == "" && !o.CheckUpdaterArgs {
		errs = append(errs, fmt.Errorf("--kubeconfig is required"))
	}
	if o.Deployments == 0 {
		o.Deployments = max(1, o.Pods/10)
	}
	if o.Pods < o.Deployments || o.Deployments < 1 {
		errs = append(errs, fmt.Errorf("need at least one pod per Deployment (--pods %d, --deployments %d)", o.Pods, o.Deployments))
	}
	if o.Deployments > 10000 {
		errs = append(errs, fmt.Errorf("--deployments must be at most 10000"))
	}
	if o.Namespaces < 1 || o.Namespaces > MaxNamespaces || o.Namespaces > max(1, o.Deployments) {
		errs = append(errs, fmt.Errorf("--namespaces must be from 1 to %d and at most --deployments, got %d", MaxNamespaces, o.Namespaces))
	}
	o.IsolatedChanges = min(o.IsolatedChanges, o.Deployments)
	if o.IsolatedChanges < 1 {
		errs = append(errs, fmt.Errorf("--isolated-changes must be positive"))
	}
	if o.DeferredPods < 1 {
		errs = append(errs, fmt.Errorf("--deferred-pods must be positive"))
	}
	if _, _, ok := strings.Cut(o.DeferredTaint, "="); !ok {
		errs = append(errs, fmt.Errorf("--deferred-taint must be key=value"))
	}
	if o.QPS <= 0 || o.Burst <= 0 || o.DriverQPS <= 0 || o.DriverBurst <= 0 {
		errs = append(errs, fmt.Errorf("QPS and burst values must be positive"))
	}
	for _, u := range o.Updaters() {
		if u.Binary == "" || u.Kubeconfig == "" {
			errs = append(errs, fmt.Errorf("--%s-binary and --%s-kubeconfig are required", u.Name, u.Name))
		}
	}
	if o.Only != "" && o.Only != o.Ours.Name && o.Only != o.Upstream.Name {
		errs = append(errs, fmt.Errorf("--only must be %s or %s", o.Ours.Name, o.Upstream.Name))
	}
	errs = append(errs, o.validateSharded()...)
	if o.Profile == "" {
		o.Profile = fmt.Sprintf("%dpods", o.Pods)
		if o.Sharded.Replicas > 0 {
			o.Profile += fmt.Sprintf("-sharded%d", o.Sharded.Replicas)
		}
	}
	return errs
}

// MaxNamespaces bounds --namespaces: three digits in their names.
const MaxNamespaces = 1000

// NamespaceNames returns the workload's namespaces, the first holding the
// deferred VPA and the filler pod. Their number comes first: the shards
// cut the namespaces by the FNV-1a hash of their names, whose highest bits
// (the shard) barely move with the last characters: "<namespace>-000" to
// "<namespace>-099" all fall into one shard of 12.
func (o *Options) NamespaceNames() []string {
	if o.Namespaces <= 1 {
		return []string{o.Namespace}
	}
	out := make([]string, o.Namespaces)
	for i := range out {
		out[i] = fmt.Sprintf("%03d-%s", i, o.Namespace)
	}
	return out
}

// Updaters returns the updaters to run, in order: ours alone in the
// sharded mode.
func (o *Options) Updaters() []UpdaterSpec {
	if o.Sharded.Replicas > 0 {
		return []UpdaterSpec{o.Ours}
	}
	var out []UpdaterSpec
	for _, u := range []UpdaterSpec{o.Ours, o.Upstream} {
		if o.Only == "" || o.Only == u.Name {
			out = append(out, u)
		}
	}
	return out
}

// argsValue is a pflag.Value holding space-separated arguments.
type argsValue struct{ args *[]string }

func (a argsValue) String() string { return strings.Join(*a.args, " ") }
func (a argsValue) Set(s string) error {
	*a.args = strings.Fields(s)
	return nil
}
func (a argsValue) Type() string { return "string" }
