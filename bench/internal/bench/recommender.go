package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpaclientset "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned"

	"github.com/vpa-inplace/vpa-inplace/bench/internal/proc"
	"github.com/vpa-inplace/vpa-inplace/bench/internal/proxy"
)

// UsageAnnotation is the hollow kubelet's per-pod usage annotation.
const UsageAnnotation = "hollow-node.vpa-inplace.dev/usage"

// resizeKey is the request of an in-place resize, as the proxy counts it.
var resizeKey = proxy.Key{Verb: "patch", Resource: "pods", Subresource: "resize"}

// RecResult is what one updater did under the recommender.
type RecResult struct {
	Spec UpdaterSpec
	Args []string
	// Namespace holds this updater's workload.
	Namespace string
	// Converged is how long after the pods ran the window started;
	// ConvergedQuietly says whether the pods had been quiet for
	// ConvergeQuiet by then (false: ConvergeTimeout passed).
	Converged        time.Duration
	ConvergedQuietly bool
	WindowStart      time.Time
	WindowEnd        time.Time
	// Resizes per pod in the window (generation steps); Replaced counts
	// pods replaced in the window (none expected).
	Resizes  map[string]int
	Replaced int
	// ResizeWrites counts the updater's patches of pods/resize in the
	// window (through its proxy), Writes all its writes there.
	ResizeWrites int
	Writes       proxy.Counts
	// TargetChanges per VPA in the window, larger than the threshold.
	TargetChanges map[string]int
	// ConvergeResizes and ConvergeTargetChanges are the same counts,
	// in all, from the workload's creation to the window.
	ConvergeResizes       int
	ConvergeTargetChanges int
	// WindowCPU is the updater's CPU time in the window.
	WindowCPU time.Duration
	// Step is what followed the usage step, per pod.
	Step map[string]stepTiming
	// StepAt is when each pod's usage was raised.
	StepAt  map[string]time.Time
	PeakRSS int64
	Notes   []string
}

// RecReport is the outcome of a recommender-driven run.
type RecReport struct {
	Options       *RecOptions
	Start, End    time.Time
	CPUs          int
	MemTotal      string
	LoadStart     string
	LoadEnd       string
	ServerVersion string
	Nodes         int
	Results       []*RecResult
}

// RunRecommender runs every updater in turn against the recommender's
// recommendations, each on a fresh workload of its own.
func RunRecommender(ctx context.Context, o *RecOptions, log func(string, ...any)) (*RecReport, error) {
	config, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading --kubeconfig: %w", err)
	}
	config.UserAgent = "recommender-bench"
	config.QPS, config.Burst = 100, 200
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	vpas, err := vpaclientset.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.WorkDir, 0o755); err != nil {
		return nil, err
	}
	rep := &RecReport{Options: o, Start: time.Now(), CPUs: runtime.NumCPU(), MemTotal: memTotal(), LoadStart: LoadAverage()}
	v, err := kube.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the server version: %w", err)
	}
	rep.ServerVersion = v.GitVersion
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	rep.Nodes = len(nodes.Items)
	for _, spec := range o.Updaters() {
		r := &recRun{o: o, kube: kube, vpas: vpas, spec: spec, log: log,
			res: &RecResult{Spec: spec, Namespace: o.Namespace + "-" + spec.Name}}
		log("== %s: %s", spec.Name, spec.Binary)
		err := r.run(ctx)
		rep.Results = append(rep.Results, r.res)
		if err == nil {
			// The next updater would act on these pods too, and they hold
			// the node's CPU after the step.
			err = r.deleteNamespace(ctx)
		}
		if err != nil {
			return rep, fmt.Errorf("%s: %w", spec.Name, err)
		}
	}
	return rep, nil
}

type recRun struct {
	o    *RecOptions
	kube kubernetes.Interface
	vpas vpaclientset.Interface
	spec UpdaterSpec
	log  func(string, ...any)
	res  *RecResult
	rec  *recRecorder
}

func (r *recRun) run(ctx context.Context) error {
	o, ns := r.o, r.res.Namespace
	if err := r.freshNamespace(ctx); err != nil {
		return err
	}
	rec, err := newRecRecorder(r.kube, r.vpas, ns)
	if err != nil {
		return err
	}
	r.rec = rec
	recCtx, stopRec := context.WithCancel(ctx)
	defer func() { stopRec(); rec.shutdown() }()
	if err := rec.start(recCtx); err != nil {
		return err
	}

	u, err := startUpdater(ctx, r.spec, o.WorkDir, o.QPS, o.Burst, r.log)
	if err != nil {
		return err
	}
	defer u.stop()
	r.res.Args = u.args
	if err := u.waitReady(ctx); err != nil {
		return err
	}

	if err := r.createWorkload(ctx); err != nil {
		return err
	}
	started := time.Now()
	if !waitUntil(ctx, 3*time.Minute, func() bool { return r.running() == o.Pods }) {
		return fmt.Errorf("%d of %d pods running after 3m", r.running(), o.Pods)
	}
	running := time.Now()
	r.log("%s: %d pods running after %.0fs; waiting for convergence", r.spec.Name, o.Pods, running.Sub(started).Seconds())

	quietly := r.converge(ctx)
	if err := u.alive(); err != nil {
		return err
	}
	r.res.Converged, r.res.ConvergedQuietly = time.Since(running), quietly
	if !quietly {
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("not converged within %s (a pod not yet resized, or resized within the last %s): the window started anyway",
			o.ConvergeTimeout, o.ConvergeQuiet))
	}

	r.log("%s: converged after %.0fs (quiet: %v); steady window of %s", r.spec.Name, r.res.Converged.Seconds(), quietly, o.Window)
	counts0, cpu0 := u.proxy.Snapshot(), u.cpu()
	r.res.WindowStart = time.Now()
	sleep(ctx, o.Window)
	r.res.WindowEnd = time.Now()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.res.Writes = writesOnly(u.proxy.Snapshot().Sub(counts0))
	r.res.ResizeWrites = r.res.Writes[resizeKey]
	r.res.WindowCPU = u.cpu() - cpu0
	pods, _, targets := rec.snapshot()
	r.res.Resizes, r.res.TargetChanges = map[string]int{}, map[string]int{}
	total := 0
	for name, tl := range pods {
		n, replaced := resizesBetween(tl, r.res.WindowStart, r.res.WindowEnd)
		r.res.Resizes[name] = n
		r.res.Replaced += replaced
		total += n
	}
	for name, tl := range targets {
		r.res.TargetChanges[name] = targetChangesBetween(tl, r.res.WindowStart, r.res.WindowEnd, o.Threshold)
		r.res.ConvergeTargetChanges += targetChangesBetween(tl, time.Time{}, r.res.WindowStart, o.Threshold)
	}
	for _, tl := range pods {
		n, _ := resizesBetween(tl, time.Time{}, r.res.WindowStart)
		r.res.ConvergeResizes += n
	}
	r.log("%s: window: %d resizes of %d pods (%d pods/resize patches), updater CPU %.1fs", r.spec.Name, total, len(pods), r.res.ResizeWrites, r.res.WindowCPU.Seconds())
	if err := u.alive(); err != nil {
		return err
	}

	if err := r.step(ctx); err != nil {
		return err
	}
	if s, err := proc.Read(u.pid); err == nil {
		r.res.PeakRSS = s.PeakRSS
	}
	if err := r.writeCSV(filepath.Join(o.WorkDir, r.spec.Name+"-pods.csv")); err != nil {
		r.log("%s: writing the per-pod CSV: %v", r.spec.Name, err)
	}
	return u.alive()
}

// deleteNamespace deletes the run's namespace and waits until it is gone.
func (r *recRun) deleteNamespace(ctx context.Context) error {
	ns := r.res.Namespace
	err := r.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting namespace %s: %w", ns, err)
	}
	if !waitUntil(ctx, 3*time.Minute, func() bool {
		_, err := r.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}) {
		return fmt.Errorf("namespace %s still there after 3m", ns)
	}
	return nil
}

// freshNamespace deletes the namespace left by an earlier run and creates
// it again, so that the recommender starts this run with no history.
func (r *recRun) freshNamespace(ctx context.Context) error {
	ns := r.res.Namespace
	if err := r.deleteNamespace(ctx); err != nil {
		return err
	}
	if _, err := r.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	return waitForServiceAccount(ctx, r.kube, ns)
}

func (r *recRun) createWorkload(ctx context.Context) error {
	o, ns := r.o, r.res.Namespace
	requests := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(o.CPURequest),
		corev1.ResourceMemory: resource.MustParse(o.MemoryRequest),
	}
	mode := vpatypes.UpdateModeInPlace
	var selectors []*vpatypes.VerticalPodAutoscalerRecommenderSelector
	if o.RecommenderName != "" && o.RecommenderName != "default" {
		selectors = []*vpatypes.VerticalPodAutoscalerRecommenderSelector{{Name: o.RecommenderName}}
	}
	for i := range o.Deployments {
		app := appName(i)
		replicas := int32(o.Pods / o.Deployments)
		if i < o.Pods%o.Deployments {
			replicas++
		}
		labels := map[string]string{labelApp: app}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(replicas),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{UsageAnnotation: o.usageAnnotation(o.Usage)}},
					Spec: corev1.PodSpec{
						TerminationGracePeriodSeconds: ptr.To[int64](1),
						Containers: []corev1.Container{{
							Name:      containerName,
							Image:     "registry.invalid/app:1",
							Resources: corev1.ResourceRequirements{Requests: requests.DeepCopy()},
						}},
					},
				},
			},
		}
		if _, err := r.kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Deployment %s: %w", app, err)
		}
		v := &vpatypes.VerticalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns, Labels: labels},
			Spec: vpatypes.VerticalPodAutoscalerSpec{
				TargetRef:    &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: app},
				UpdatePolicy: &vpatypes.PodUpdatePolicy{UpdateMode: &mode},
				Recommenders: selectors,
			},
		}
		if _, err := r.vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Create(ctx, v, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating VPA %s: %w", app, err)
		}
	}
	return nil
}

func (r *recRun) running() int {
	n := 0
	for _, p := range r.rec.podList() {
		if p.DeletionTimestamp == nil && ready(p) {
			n++
		}
	}
	return n
}

// converge waits until every pod has been resized at least once and no pod
// has been resized for ConvergeQuiet (true), or ConvergeTimeout (false).
func (r *recRun) converge(ctx context.Context) bool {
	return waitUntil(ctx, r.o.ConvergeTimeout, func() bool {
		pods, _, _ := r.rec.snapshot()
		if len(pods) < r.o.Pods {
			return false
		}
		quietSince := time.Now().Add(-r.o.ConvergeQuiet)
		for _, tl := range pods {
			last := tl[len(tl)-1]
			if last.Generation < 2 {
				return false
			}
			// the last sample with a new generation
			for i := len(tl) - 1; i > 0 && tl[i-1].Generation == last.Generation; i-- {
				last = tl[i-1]
			}
			if last.At.After(quietSince) {
				return false
			}
		}
		return true
	})
}

// step raises every pod's usage to StepUsage (the pods, not the template: no
// rollout) and waits until each pod's requests pass the bar, at most
// StepTimeout.
func (r *recRun) step(ctx context.Context) error {
	o, ns := r.o, r.res.Namespace
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, UsageAnnotation, o.usageAnnotation(o.StepUsage))
	r.res.StepAt = map[string]time.Time{}
	r.log("%s: usage step to %s", r.spec.Name, o.StepUsage)
	for _, p := range r.rec.podList() {
		at := time.Now()
		if _, err := r.kube.CoreV1().Pods(ns).Patch(ctx, p.Name, k8stypes.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("raising the usage of %s: %w", p.Name, err)
		}
		r.res.StepAt[p.Name] = at
	}
	timings := func() map[string]stepTiming {
		pods, apps, targets := r.rec.snapshot()
		out := map[string]stepTiming{}
		for name, at := range r.res.StepAt {
			out[name] = stepLatency(pods[name], targets[apps[name]], at, o.Threshold)
		}
		return out
	}
	waitUntil(ctx, o.StepTimeout, func() bool {
		for _, t := range timings() {
			if t.ResizedCPU.IsZero() || t.ResizedMemory.IsZero() {
				return false
			}
		}
		return true
	})
	r.res.Step = timings()
	done := r.res.stepResized()
	r.log("%s: step: %d/%d pods resized (cpu and memory)", r.spec.Name, done, len(r.res.Step))
	if done < len(r.res.Step) {
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("after the usage step, %d of %d pods did not have both CPU and memory resized within %s", len(r.res.Step)-done, len(r.res.Step), o.StepTimeout))
	}
	return ctx.Err()
}

// writeCSV writes each pod's history: time, generation, requests.
func (r *recRun) writeCSV(path string) error {
	pods, _, targets := r.rec.snapshot()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintln(f, "time,object,uid,generation,cpu_m,memory_bytes")
	for name, tl := range pods {
		for _, s := range tl {
			fmt.Fprintf(f, "%s,pod/%s,%s,%d,%d,%d\n", s.At.Format(time.RFC3339Nano), name, s.UID, s.Generation, s.Requests.CPU, s.Requests.Memory)
		}
	}
	for name, tl := range targets {
		for _, s := range tl {
			fmt.Fprintf(f, "%s,vpa/%s,,,%d,%d\n", s.At.Format(time.RFC3339Nano), name, s.Target.CPU, s.Target.Memory)
		}
	}
	return f.Close()
}

// runningUpdater is an updater process behind its counting proxy.
type runningUpdater struct {
	spec    UpdaterSpec
	args    []string
	addr    string
	proxy   *proxy.Proxy
	cmd     *exec.Cmd
	pid     int
	exited  chan error
	logFile *os.File
}

func startUpdater(ctx context.Context, spec UpdaterSpec, workDir string, qps float32, burst int, log func(string, ...any)) (*runningUpdater, error) {
	creds, err := clientcmd.BuildConfigFromFlags("", spec.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading --%s-kubeconfig: %w", spec.Name, err)
	}
	p, err := proxy.Start(ctx, creds)
	if err != nil {
		return nil, err
	}
	u := &runningUpdater{spec: spec, proxy: p, exited: make(chan error, 1)}
	fail := func(err error) (*runningUpdater, error) {
		_ = p.Close()
		return nil, err
	}
	kubeconfig := filepath.Join(workDir, spec.Name+"-proxy.kubeconfig")
	if err := writeProxyKubeconfig(kubeconfig, p.URL()); err != nil {
		return fail(err)
	}
	port, err := freePort(ctx)
	if err != nil {
		return fail(err)
	}
	u.addr = "127.0.0.1:" + strconv.Itoa(port)
	u.args = append([]string{
		"--kubeconfig=" + kubeconfig,
		"--kube-api-qps=" + strconv.FormatFloat(float64(qps), 'f', -1, 32),
		"--kube-api-burst=" + strconv.Itoa(burst),
		"--address=" + u.addr,
	}, spec.Args...)
	u.logFile, err = os.Create(filepath.Join(workDir, spec.Name+".log"))
	if err != nil {
		return fail(err)
	}
	u.cmd = exec.Command(spec.Binary, u.args...)
	u.cmd.Stdout, u.cmd.Stderr = u.logFile, u.logFile
	// The updater dies with the driver, whatever happens to the driver.
	u.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := u.cmd.Start(); err != nil {
		u.logFile.Close()
		return fail(fmt.Errorf("starting %s: %w", spec.Binary, err))
	}
	go func() { u.exited <- u.cmd.Wait() }()
	u.pid = u.cmd.Process.Pid
	log("%s: pid %d, address %s, proxy %s, log %s", spec.Name, u.pid, u.addr, p.URL(), u.logFile.Name())
	return u, nil
}

func (u *runningUpdater) alive() error {
	select {
	case err := <-u.exited:
		u.exited <- err
		return fmt.Errorf("the updater exited: %v (log %s)", err, u.logFile.Name())
	default:
		return nil
	}
}

// waitReady waits for its readiness path (if any) and its pod and VPA
// watches.
func (u *runningUpdater) waitReady(ctx context.Context) error {
	readyURL := ""
	if u.spec.ReadyPath != "" {
		readyURL = "http://" + u.addr + u.spec.ReadyPath
	}
	ok := waitUntil(ctx, 3*time.Minute, func() bool {
		return u.alive() == nil &&
			u.proxy.Seen(proxy.Key{Verb: "watch", Resource: "pods"}) &&
			u.proxy.Seen(proxy.Key{Verb: "watch", Resource: "verticalpodautoscalers"}) &&
			(readyURL == "" || httpOK(ctx, readyURL))
	})
	if err := u.alive(); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("not ready after 3m")
	}
	return nil
}

func (u *runningUpdater) cpu() time.Duration {
	s, err := proc.Read(u.pid)
	if err != nil {
		return 0
	}
	return s.CPU
}

func (u *runningUpdater) stop() {
	stopProcess(u.cmd, u.exited)
	u.logFile.Close()
	_ = u.proxy.Close()
}
