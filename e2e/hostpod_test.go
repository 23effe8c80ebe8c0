//go:build e2e

package e2e

// Running a Deployment's container as a process on this machine, as the
// kubelet would run it: the container's args, with $(VAR) references
// expanded, its env resolved from the downward API, and a token of the pod's
// ServiceAccount. The local cluster's nodes are hollow (they run no
// process), and its API server reaches only 127.0.0.1, so the install tests
// (install_test.go) run the binaries this way, with the args, env and
// ServiceAccount of the Deployments the chart or the kustomize overlay
// installed, never written again by the test. The adaptations a process
// outside the cluster needs are explicit and listed in hostAdaptations.

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// hostPod is one container of a Deployment run as a process.
type hostPod struct {
	t    *testing.T
	name string // the pod whose identity the process takes
	// binary, args and env are what the process runs with.
	binary string
	args   []string
	env    []string
	// resolved are the container's args after $(VAR) expansion, before the
	// adaptations: what the kubelet would have run.
	resolved []string
	// health is the loopback port of /healthz, /readyz and /metrics.
	health int
	log    string
	cmd    *exec.Cmd
	done   chan struct{}
}

// hostAdaptations are the changes a process on this machine needs, and
// nothing else: flag name to its new value ("" keeps the flag's resolved
// value and appends what extra says). Every other arg is the container's.
type hostAdaptations struct {
	// set replaces the value of a flag the container passes (it must pass
	// it: an adaptation of a flag that is not there is a test bug).
	set map[string]string
	// add appends flags the container does not pass.
	add []string
}

// newHostPod prepares the container named container of dep to run as the
// process binary, with the identity of the Deployment's pod podName (the
// pods of the hollow nodes run nothing) and a token of its ServiceAccount.
func newHostPod(t *testing.T, dep *appsv1.Deployment, container, podName, binary string, adapt hostAdaptations) *hostPod {
	t.Helper()
	spec := dep.Spec.Template.Spec
	i := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == container })
	require.GreaterOrEqual(t, i, 0, "Deployment %s/%s has no container %s", dep.Namespace, dep.Name, container)
	c := spec.Containers[i]
	require.Empty(t, c.Command, "the container runs its image's entrypoint, which is the binary")

	vars := map[string]string{}
	var envList []string
	for _, e := range c.Env {
		v := resolveEnv(t, e, dep, c, podName, vars)
		vars[e.Name] = v
		envList = append(envList, e.Name+"="+v)
	}
	require.Empty(t, c.EnvFrom, "envFrom is not emulated")
	resolved := make([]string, len(c.Args))
	for j, a := range c.Args {
		resolved[j] = expandVars(a, vars)
	}

	args := slices.Clone(resolved)
	for flag, value := range adapt.set {
		j := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, flag+"=") })
		require.GreaterOrEqual(t, j, 0, "the container passes no %s to adapt: %v", flag, resolved)
		args[j] = flag + "=" + value
	}
	args = append(args, adapt.add...)

	kubeconfig := serviceAccountKubeconfig(t, dep.Namespace, spec.ServiceAccountName)
	args = append(args, "--kubeconfig="+kubeconfig)
	health := 0
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--address="); ok {
			_, err := fmt.Sscanf(v[strings.LastIndex(v, ":")+1:], "%d", &health)
			require.NoError(t, err)
		}
	}
	require.NotZero(t, health, "no --address: no health port")
	// Only the container's env, with the PATH and HOME any process needs.
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	logDir := env("E2E_LOG_DIR", t.TempDir())
	return &hostPod{t: t, name: podName, binary: binary, args: args, env: append(base, envList...), resolved: resolved,
		health: health, log: filepath.Join(logDir, dep.Namespace+"-"+dep.Name+".log")}
}

// resolveEnv is the value the kubelet gives one env var of container c of a
// pod podName of dep.
func resolveEnv(t *testing.T, e corev1.EnvVar, dep *appsv1.Deployment, c corev1.Container, podName string, defined map[string]string) string {
	t.Helper()
	if e.ValueFrom == nil {
		return expandVars(e.Value, defined)
	}
	if f := e.ValueFrom.FieldRef; f != nil {
		switch f.FieldPath {
		case "metadata.name":
			return podName
		case "metadata.namespace":
			return dep.Namespace
		case "spec.serviceAccountName":
			return dep.Spec.Template.Spec.ServiceAccountName
		case "status.podIP", "status.hostIP":
			return "127.0.0.1"
		}
		t.Fatalf("env %s: fieldRef %s is not emulated", e.Name, f.FieldPath)
	}
	if r := e.ValueFrom.ResourceFieldRef; r != nil {
		require.True(t, r.ContainerName == "" || r.ContainerName == c.Name, "env %s refers to another container", e.Name)
		var q resource.Quantity
		var ok bool
		switch r.Resource {
		case "limits.memory":
			q, ok = c.Resources.Limits[corev1.ResourceMemory]
		case "requests.memory":
			q, ok = c.Resources.Requests[corev1.ResourceMemory]
		case "limits.cpu":
			q, ok = c.Resources.Limits[corev1.ResourceCPU]
		case "requests.cpu":
			q, ok = c.Resources.Requests[corev1.ResourceCPU]
		default:
			t.Fatalf("env %s: resourceFieldRef %s is not emulated", e.Name, r.Resource)
		}
		require.True(t, ok, "env %s: the container sets no %s (the node's allocatable would be used)", e.Name, r.Resource)
		divisor := resource.MustParse("1")
		if !r.Divisor.IsZero() {
			divisor = r.Divisor
		}
		// The downward API rounds up to a whole number of divisors.
		return fmt.Sprint(int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue()))))
	}
	t.Fatalf("env %s: only fieldRef and resourceFieldRef are emulated", e.Name)
	return ""
}

// expandVars expands $(VAR) of the defined variables as the kubelet does:
// $$ is a literal $, an undefined $(VAR) is left as it is.
func expandVars(s string, defined map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+end]
			if v, ok := defined[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+end+1])
			}
			i += end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// serviceAccountKubeconfig writes a kubeconfig authenticated by a token of
// the ServiceAccount ns/sa (TokenRequest), as the pod's projected token
// would be, and returns its path.
func serviceAccountKubeconfig(t *testing.T, ns, sa string) string {
	t.Helper()
	ctx := ctxFor(t)
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "a token of ServiceAccount %s/%s", ns, sa)
	admin, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	require.NoError(t, err)
	ca := admin.CAData
	if len(ca) == 0 && admin.CAFile != "" {
		ca, err = os.ReadFile(admin.CAFile)
		require.NoError(t, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[sa] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: sa, Namespace: ns}
	cfg.CurrentContext = sa
	path := filepath.Join(t.TempDir(), ns+"-"+sa+".kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// start runs the process until stop or the end of the test, and waits for
// its /readyz.
func (p *hostPod) start() {
	t := p.t
	t.Helper()
	logFile, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	p.cmd = exec.Command(p.binary, p.args...)
	p.cmd.Env = p.env
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	require.NoError(t, p.cmd.Start())
	p.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); _ = logFile.Close(); close(done) }(p.cmd, p.done)
	t.Logf("%s: pid %d, log %s, args %v", p.name, p.cmd.Process.Pid, p.log, p.args)
	t.Cleanup(p.stop)
	waitFor(t, eventually, p.name+" ready", func(context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("%s exited: %s", p.name, tail(p.log))
		default:
		}
		return readyz(p.health), nil
	})
}

// stop sends SIGTERM, as the kubelet does, and waits for the process.
func (p *hostPod) stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
}

// metric sums a metric's series (those whose line contains match) on the
// process's /metrics.
func (p *hostPod) metric(name, match string) float64 {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", p.health))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	return sumSeries(resp, name, match)
}

func tail(path string) string {
	data, _ := os.ReadFile(path)
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return string(bytes.TrimSpace(data))
}

// deploymentPod is the name of a running pod of dep.
func deploymentPod(t *testing.T, dep *appsv1.Deployment) string {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	require.NoError(t, err)
	var name string
	waitFor(t, eventually, "a running pod of "+dep.Name, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Pods(dep.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
		if err != nil {
			return false, err
		}
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				name = p.Name
				return true, nil
			}
		}
		return false, nil
	})
	return name
}

// deploymentsOf lists the Deployments of ns whose labels match set.
func deploymentsOf(t *testing.T, ns string, set labels.Set) map[string]*appsv1.Deployment {
	t.Helper()
	list, err := kube.AppsV1().Deployments(ns).List(ctxFor(t), metav1.ListOptions{LabelSelector: set.String()})
	require.NoError(t, err)
	out := map[string]*appsv1.Deployment{}
	for i := range list.Items {
		d := &list.Items[i]
		out[d.Spec.Template.Spec.Containers[0].Name] = d
	}
	return out
}
