package bench

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
)

// RecOptions configure the recommender-driven benchmark: the cluster runs
// metrics-server and upstream's recommender, the pods' usage is set on the
// hollow kubelets, and each updater in turn follows the recommendations.
type RecOptions struct {
	Kubeconfig string
	// Namespace is the prefix of the namespaces: one per updater, so that
	// each starts with a fresh recommender history.
	Namespace   string
	Pods        int
	Deployments int
	// Requests are the pods' requests at creation, below the first
	// recommendation so that every pod is resized once to converge.
	CPURequest, MemoryRequest string
	// Usage is what every pod uses, StepUsage what it uses after the step;
	// Noise is the ±percentage of the hollow kubelet's seeded noise.
	Usage, StepUsage string
	Noise            int
	// RecommenderName is the name the VPAs give in spec.recommenders; empty
	// or "default": none.
	RecommenderName string
	// Recommender describes the recommender in the report (version, flags).
	Recommender string
	// Threshold is the relative change both updaters act on (ours:
	// --pod-update-threshold; upstream's MinChangePriority).
	Threshold float64

	// ConvergeQuiet: converged once every pod has been resized and none
	// has been for this long; ConvergeTimeout: the window starts then anyway.
	ConvergeQuiet   time.Duration
	ConvergeTimeout time.Duration
	// Window is the steady window churn is counted over.
	Window time.Duration
	// StepTimeout bounds the wait for every pod's resize after the step.
	StepTimeout time.Duration

	QPS     float32
	Burst   int
	Cluster string

	Ours     UpdaterSpec
	Upstream UpdaterSpec
	Only     string

	WorkDir string
	Results string
}

// NewRecOptions returns the defaults: 20 pods in 20 Deployments, a 10-minute
// window.
func NewRecOptions() *RecOptions {
	return &RecOptions{
		Namespace:       "recbench",
		Pods:            20,
		Deployments:     20,
		CPURequest:      "20m",
		MemoryRequest:   "32Mi",
		Usage:           "cpu:100m,memory:100Mi",
		StepUsage:       "cpu:300m,memory:300Mi",
		Noise:           10,
		Threshold:       0.1,
		ConvergeQuiet:   time.Minute,
		ConvergeTimeout: 6 * time.Minute,
		Window:          10 * time.Minute,
		StepTimeout:     5 * time.Minute,
		QPS:             50,
		Burst:           100,
		Ours:            UpdaterSpec{Name: "ours", ReadyPath: "/readyz"},
		Upstream:        UpdaterSpec{Name: "upstream"},
		WorkDir:         "_output/bench/recommender",
	}
}

// AddFlags registers the options on fs.
func (o *RecOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Cluster admin kubeconfig for the driver.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Prefix of the workload namespaces (<prefix>-<updater>).")
	fs.IntVar(&o.Pods, "pods", o.Pods, "Pods under InPlace VPAs.")
	fs.IntVar(&o.Deployments, "deployments", o.Deployments, "Deployments (one VPA each).")
	fs.StringVar(&o.CPURequest, "cpu-request", o.CPURequest, "CPU request of the pods at creation.")
	fs.StringVar(&o.MemoryRequest, "memory-request", o.MemoryRequest, "Memory request of the pods at creation.")
	fs.StringVar(&o.Usage, "usage", o.Usage, "Usage of every pod (hollow-node usage annotation fields, without noise).")
	fs.StringVar(&o.StepUsage, "step-usage", o.StepUsage, "Usage of every pod after the step.")
	fs.IntVar(&o.Noise, "noise", o.Noise, "± percentage of seeded noise on the usage.")
	fs.StringVar(&o.RecommenderName, "recommender-name", o.RecommenderName, "Recommender the VPAs name in spec.recommenders; empty or default: none.")
	fs.StringVar(&o.Recommender, "recommender", o.Recommender, "How the cluster's recommender runs, quoted in the report.")
	fs.Float64Var(&o.Threshold, "threshold", o.Threshold, "Relative change the updaters act on (for the step's bar and the target changes counted).")
	fs.DurationVar(&o.ConvergeQuiet, "converge-quiet", o.ConvergeQuiet, "Converged once every pod has been resized and none for this long.")
	fs.DurationVar(&o.ConvergeTimeout, "converge-timeout", o.ConvergeTimeout, "The window starts after this long even if not converged.")
	fs.DurationVar(&o.Window, "window", o.Window, "Steady window over which resizes are counted.")
	fs.DurationVar(&o.StepTimeout, "step-timeout", o.StepTimeout, "How long to wait for the resizes after the usage step.")
	fs.Float32Var(&o.QPS, "qps", o.QPS, "Client QPS given to each updater (--kube-api-qps).")
	fs.IntVar(&o.Burst, "burst", o.Burst, "Client burst given to each updater (--kube-api-burst).")
	fs.StringVar(&o.Cluster, "cluster", o.Cluster, "How the cluster was set up, quoted in the report.")
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
	fs.StringVar(&o.WorkDir, "work-dir", o.WorkDir, "Directory for updater logs, proxy kubeconfigs and per-pod CSVs.")
	fs.StringVar(&o.Results, "results", o.Results, "Markdown report to write; empty: print only.")
}

// Validate returns every problem with the options.
func (o *RecOptions) Validate() []error {
	var errs []error
	if o.Kubeconfig == "" {
		errs = append(errs, fmt.Errorf("--kubeconfig is required"))
	}
	if o.Deployments < 1 || o.Pods < o.Deployments || o.Pods > 1000 {
		errs = append(errs, fmt.Errorf("need 1 to 1000 pods and at least one pod per Deployment (--pods %d, --deployments %d)", o.Pods, o.Deployments))
	}
	for _, q := range []string{o.CPURequest, o.MemoryRequest} {
		if _, err := resource.ParseQuantity(q); err != nil {
			errs = append(errs, fmt.Errorf("request %q: %w", q, err))
		}
	}
	if o.Usage == "" || o.StepUsage == "" {
		errs = append(errs, fmt.Errorf("--usage and --step-usage are required"))
	}
	if o.Noise < 0 || o.Noise > 100 {
		errs = append(errs, fmt.Errorf("--noise must be within 0..100"))
	}
	if o.Threshold <= 0 || o.Threshold >= 1 {
		errs = append(errs, fmt.Errorf("--threshold must be within (0, 1)"))
	}
	if o.Window <= 0 || o.ConvergeQuiet <= 0 || o.ConvergeTimeout <= 0 || o.StepTimeout <= 0 {
		errs = append(errs, fmt.Errorf("durations must be positive"))
	}
	if o.QPS <= 0 || o.Burst <= 0 {
		errs = append(errs, fmt.Errorf("QPS and burst must be positive"))
	}
	for _, u := range o.Updaters() {
		if u.Binary == "" || u.Kubeconfig == "" {
			errs = append(errs, fmt.Errorf("--%s-binary and --%s-kubeconfig are required", u.Name, u.Name))
		}
	}
	if o.Only != "" && o.Only != o.Ours.Name && o.Only != o.Upstream.Name {
		errs = append(errs, fmt.Errorf("--only must be %s or %s", o.Ours.Name, o.Upstream.Name))
	}
	return errs
}

// Updaters returns the updaters to run, in order.
func (o *RecOptions) Updaters() []UpdaterSpec {
	var out []UpdaterSpec
	for _, u := range []UpdaterSpec{o.Ours, o.Upstream} {
		if o.Only == "" || o.Only == u.Name {
			out = append(out, u)
		}
	}
	return out
}

// usageAnnotation is the hollow-node usage annotation for the container.
func (o *RecOptions) usageAnnotation(usage string) string {
	s := containerName + "=" + usage
	if o.Noise > 0 {
		s += fmt.Sprintf(",noise:%d%%", o.Noise)
	}
	return s
}
