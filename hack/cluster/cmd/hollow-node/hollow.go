// hollow-node: a kubemark-style hollow kubelet (real kubelet code from k8s.io/kubernetes,
// fake CRI runtime, fake cadvisor, stub container manager) that can complete in-place
// pod resizes.
//
// This file is shared, unchanged, by the three hollow-node builds of the cluster harness:
// hack/cluster/cmd/hollow-node (kubelet v1.37), hack/cluster/kubelet-v1.35/cmd/hollow-node
// (kubelet v1.35) and hack/cluster/control-plane-v1.34/cmd/hollow-node (kubelet v1.34); in the
// last two this file is a symlink. Code that depends on kubelet APIs that differ between the
// versions lives in compat.go next to it; the flag set is identical.
//
// Differences from k8s.io/kubernetes/cmd/kubemark --morph=kubelet:
//   - fake pod "cgroups" (fakePCM): the stub PodContainerManager returns "not implemented"
//     from Get/SetPodCgroupConfig, so with stock kubemark every resize stays
//     PodResizeInProgress reason=Error "unable to get pod cgroup memory config for pod ...".
//   - container CPU and memory usage (usage.go): set per pod by the annotation
//     hollow-node.vpa-inplace.dev/usage ("app=cpu:300m,memory:200Mi,noise:10%"), followed
//     as it changes (a pod informer of the node's own), reported through the CRI container
//     stats and the fake cadvisor (node and pod cgroups), so that the kubelet's
//     /metrics/resource and summary API carry them (metrics-server scrapes the former); CPU
//     is a cumulative counter growing at the set rate.
//   - pod memory usage (fakeCadvisor.ContainerInfoV2 for pod cgroups): without it every
//     memory limit decrease fails with "cannot decrease memory limits: missing pod memory
//     usage". The containers' sum, or the annotation hollow-node.vpa-inplace.dev/memory-usage
//     (the pod cgroup only), or --pod-memory-usage.
//   - readiness that comes late (ready.go): a container whose readiness probe is the exec
//     command "hollow-node-ready-after 90s" is not Ready until it has run that long (kubemark's
//     prober marks every container Ready and runs no probe)
//   - container kills (kill.go): the annotation hollow-node.vpa-inplace.dev/kill makes the
//     fake runtime end a running container as OOMKilled or Error (once, in a loop, or when
//     its memory limit is lowered below what it needs); the kubelet restarts it with its
//     back-off (--max-container-restart-period).
//   - --cores/--memory set node capacity (kubemark hard-codes 1 core / 3840Mi)
//   - --reserved-cpu/--reserved-memory make allocatable < capacity
//   - --fake-static-cpu-manager: the node reports CPUManagerPolicy=static, so the kubelet
//     marks CPU resizes of Guaranteed pods PodResizePending/Infeasible
//   - --register-with-taints: taints set at node registration
//   - real event recorder (--events): ResizeStarted/Completed/Deferred/Infeasible events
//   - everything (root dir, CRI socket) lives under --root-dir instead of /tmp
//   - kubelet server binds --address (default 127.0.0.1), port --kubelet-port
//   - no host image service (fake image service always)
//   - --report-runtime-resources: fake CRI reports the LinuxContainerResources
//     last applied (Create/UpdateContainerResources) in ContainerStatus, like a
//     real runtime would; without it the kubelet falls back to its actuated
//     checkpoint (values are then exactly the allocated ones).
package main

import (
	"context"
	goflag "flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	kubeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeremote "k8s.io/cri-client/pkg/fake"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	cadvisortest "k8s.io/kubernetes/pkg/kubelet/cadvisor/testing"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	"k8s.io/kubernetes/pkg/util/taints"
)

// fakeCadvisor reports the configured machine size, the node's usage and per-pod memory
// usage; its version-specific methods (MachineInfo, ContainerInfoV2) are in compat.go.
type fakeCadvisor struct {
	cadvisortest.Fake
	cores int
	mem   uint64
	usage *usageTracker
}

// cgroupSample is what the fake cadvisor reports for a cgroup name: the root ("/") is the
// node, podCgroupPrefix+UID a pod (memory only: what the kubelet's limit check reads).
func (c *fakeCadvisor) cgroupSample(name string) (containerSample, bool) {
	switch {
	case name == "/":
		return c.usage.sampleNode(time.Now()), true
	case strings.HasPrefix(name, podCgroupPrefix):
		return containerSample{MemoryBytes: c.usage.podMemory(types.UID(strings.TrimPrefix(name, podCgroupPrefix)))}, true
	}
	return containerSample{}, false
}

// hollowCM wraps the stub container manager:
//   - allocatable = capacity - reserved
//   - NewPodContainerManager returns fakePCM, whose pod "cgroups" live in memory.
//     The stub returns "not implemented" from Get/SetPodCgroupConfig, which makes every
//     in-place resize fail with PodResizeInProgress reason=Error
//     "unable to get pod cgroup memory config for pod ..." (stock kubemark behaviour).
type hollowCM struct {
	cm.ContainerManager
	capacity        v1.ResourceList // cpu and memory, as reported by fakeCadvisor
	reserved        v1.ResourceList
	cgroups         *podCgroups
	staticCPUPolicy bool
}

func (r *hollowCM) GetNodeAllocatableReservation() v1.ResourceList { return r.reserved }

// GetNodeAllocatableAbsolute is capacity - reserved (the stub returns nil). Kubelets up to
// 1.35 compare resize requests with it and mark a resize that exceeds it Infeasible ("Node
// didn't have enough capacity"); with nil every resize would be Infeasible.
func (r *hollowCM) GetNodeAllocatableAbsolute() v1.ResourceList {
	out := v1.ResourceList{}
	for n, q := range r.capacity {
		q = q.DeepCopy()
		if rq, ok := r.reserved[n]; ok {
			q.Sub(rq)
		}
		out[n] = q
	}
	return out
}

// GetNodeConfig can pretend the static CPU manager policy is active: the kubelet then marks
// CPU resizes of Guaranteed pods PodResizePending/Infeasible (the only easy way to get a
// kubelet-side Infeasible in 1.36+, where "exceeds allocatable" is rejected by the apiserver's
// PodResizeValidator admission plugin, and reported as Deferred by the kubelet if that plugin
// is disabled).
func (r *hollowCM) GetNodeConfig() cm.NodeConfig {
	nc := r.ContainerManager.GetNodeConfig()
	if r.staticCPUPolicy {
		nc.CPUManagerPolicy = "static"
	}
	return nc
}

func (r *hollowCM) NewPodContainerManager() cm.PodContainerManager {
	return podContainerManager(&fakePCM{PodContainerManager: r.ContainerManager.NewPodContainerManager(), cg: r.cgroups})
}

const podCgroupPrefix = "/kubepods/pod"

// podCgroups holds the fake pod cgroups of the node. Entries are never removed (the kubelet
// only cleans up pod cgroups with cgroupsPerQOS, which hollow nodes run without); an entry is a
// few hundred bytes, so even long benchmarks with heavy pod churn stay small.
type podCgroups struct {
	sync.Mutex
	m     map[types.UID]*cm.ResourceConfig
	usage *usageTracker
}

type fakePCM struct {
	cm.PodContainerManager
	cg *podCgroups
}

func i64(v int64) *int64   { return &v }
func u64(v uint64) *uint64 { return &v }

// initial pod cgroup values, as the real kubelet would have written them at pod start
// (unset limits read back as "unlimited", like real cgroups).
func (f *fakePCM) initial(pod *v1.Pod) *cm.ResourceConfig {
	rc := resourceConfigForPod(pod)
	if rc.Memory == nil {
		rc.Memory = i64(math.MaxInt64)
	}
	if rc.CPUShares == nil {
		rc.CPUShares = u64(2)
	}
	if rc.CPUQuota == nil {
		rc.CPUQuota = i64(-1)
	}
	if rc.CPUPeriod == nil {
		rc.CPUPeriod = u64(100000)
	}
	return rc
}

func (f *fakePCM) GetPodContainerName(pod *v1.Pod) (cm.CgroupName, string) {
	f.cg.usage.observeIfNew(pod) // the pod informer follows later changes
	return cm.CgroupName{"kubepods", "pod" + string(pod.UID)}, podCgroupPrefix + string(pod.UID)
}

// Exists reports whether the pod's fake cgroup was created. The stub always answers true, so
// the kubelet would never call EnsureExists, and the fake cgroup would only be seeded at the
// first resize, from the already-resized spec: a memory-limit decrease would then look like no
// change and skip the kubelet's "limit below usage" check.
func (f *fakePCM) Exists(pod *v1.Pod) bool {
	f.cg.Lock()
	defer f.cg.Unlock()
	_, ok := f.cg.m[pod.UID]
	return ok
}

func (f *fakePCM) EnsureExists(logger klog.Logger, pod *v1.Pod) error {
	f.cg.Lock()
	defer f.cg.Unlock()
	if _, ok := f.cg.m[pod.UID]; !ok {
		f.cg.m[pod.UID] = f.initial(pod)
	}
	return nil
}

func (f *fakePCM) GetPodCgroupConfig(pod *v1.Pod, res v1.ResourceName) (*cm.ResourceConfig, error) {
	f.cg.Lock()
	defer f.cg.Unlock()
	cur, ok := f.cg.m[pod.UID]
	if !ok {
		cur = f.initial(pod)
		f.cg.m[pod.UID] = cur
	}
	switch res {
	case v1.ResourceMemory:
		return &cm.ResourceConfig{Memory: i64(*cur.Memory)}, nil
	case v1.ResourceCPU:
		return &cm.ResourceConfig{CPUShares: u64(*cur.CPUShares), CPUQuota: i64(*cur.CPUQuota), CPUPeriod: u64(*cur.CPUPeriod)}, nil
	}
	return nil, fmt.Errorf("unsupported resource %v", res)
}

func (f *fakePCM) SetPodCgroupConfig(logger klog.Logger, pod *v1.Pod, rc *cm.ResourceConfig) error {
	f.cg.Lock()
	defer f.cg.Unlock()
	cur, ok := f.cg.m[pod.UID]
	if !ok {
		cur = f.initial(pod)
		f.cg.m[pod.UID] = cur
	}
	if rc.Memory != nil {
		cur.Memory = i64(*rc.Memory)
	}
	if rc.CPUShares != nil {
		cur.CPUShares = u64(*rc.CPUShares)
	}
	if rc.CPUQuota != nil {
		cur.CPUQuota = i64(*rc.CPUQuota)
	}
	if rc.CPUPeriod != nil {
		cur.CPUPeriod = u64(*rc.CPUPeriod)
	}
	return nil
}

// resourcesRuntime keeps, for each container, the LinuxContainerResources the kubelet last
// applied: the fake records them at creation but drops those of UpdateContainerResources (a
// resize). The killer (kill.go) compares the memory limit with the kill annotation's
// memory-limit-below; reportingRuntime reports them.
type resourcesRuntime struct {
	*fakeremote.RemoteRuntime
}

func (r *resourcesRuntime) UpdateContainerResources(ctx context.Context, req *kubeapi.UpdateContainerResourcesRequest) (*kubeapi.UpdateContainerResourcesResponse, error) {
	resp, err := r.RemoteRuntime.UpdateContainerResources(ctx, req)
	if err != nil {
		return resp, err
	}
	fs := r.RemoteRuntime.RuntimeService
	fs.Lock()
	if c, ok := fs.Containers[req.ContainerId]; ok && req.Linux != nil {
		c.LinuxResources = req.Linux
	}
	fs.Unlock()
	return resp, nil
}

// reportingRuntime makes the fake CRI runtime report container resources.
type reportingRuntime struct {
	*resourcesRuntime
}

func (r *reportingRuntime) ContainerStatus(ctx context.Context, req *kubeapi.ContainerStatusRequest) (*kubeapi.ContainerStatusResponse, error) {
	resp, err := r.RemoteRuntime.ContainerStatus(ctx, req)
	if err != nil || resp == nil || resp.Status == nil {
		return resp, err
	}
	fs := r.RemoteRuntime.RuntimeService
	fs.Lock()
	if c, ok := fs.Containers[req.ContainerId]; ok && c.LinuxResources != nil {
		resp.Status.Resources = &kubeapi.ContainerResources{Linux: c.LinuxResources}
	}
	fs.Unlock()
	return resp, nil
}

// killContainers ends the running containers the kill annotations ask for (kill.go), every
// interval while any pod has one: the container is left EXITED with the rule's reason and exit
// code, as a runtime reports a process the kernel killed or that crashed. The kubelet sees it
// at its next relist (PLEG, every second) and restarts it, with its back-off.
func killContainers(ctx context.Context, rt *fakeremote.RemoteRuntime, kills *killTracker, jvms *jvmTracker, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if kills.empty() && jvms.empty() {
			continue
		}
		now := time.Now()
		fs := rt.RuntimeService
		fs.Lock()
		var cs []runningContainer
		for id, c := range fs.Containers {
			if c.State != kubeapi.ContainerState_CONTAINER_RUNNING || c.Metadata == nil {
				continue
			}
			rc := runningContainer{ID: id, Pod: types.UID(c.Labels["io.kubernetes.pod.uid"]), Name: c.Metadata.Name,
				Restart: int64(c.Metadata.Attempt)}
			if c.StartedAt > 0 {
				rc.StartedAt = time.Unix(0, c.StartedAt)
			}
			if c.LinuxResources != nil {
				rc.MemoryLimit = c.LinuxResources.MemoryLimitInBytes
			}
			cs = append(cs, rc)
		}
		due := jvms.decide(cs, kills.decide(cs, now))
		type killed struct{ id, pod, reason string }
		var done []killed
		for id, r := range due {
			c := fs.Containers[id]
			c.State = kubeapi.ContainerState_CONTAINER_EXITED
			c.FinishedAt = now.UnixNano()
			c.ExitCode = r.ExitCode
			c.Reason = r.Reason
			done = append(done, killed{id: id, pod: c.Labels["io.kubernetes.pod.namespace"] + "/" + c.Labels["io.kubernetes.pod.name"], reason: r.Reason})
		}
		fs.Unlock()
		for _, k := range done {
			klog.InfoS("Killed container as its pod's kill annotation asks", "pod", k.pod, "containerID", k.id, "reason", k.reason)
		}
	}
}

// statsRuntime answers the CRI container stats queries with the usage of usage.go (the fake
// answers only what a test stored in it beforehand).
type statsRuntime struct {
	kubeapi.RuntimeServiceServer
	fs    *fakeremote.RemoteRuntime
	usage *usageTracker
	jvms  *jvmTracker
}

func (r *statsRuntime) stats(ids map[string]bool, filter *kubeapi.ContainerStatsFilter) []*kubeapi.ContainerStats {
	now := time.Now()
	fs := r.fs.RuntimeService
	fs.Lock()
	type ctr struct {
		id, pod, name string
		attrs         *kubeapi.ContainerAttributes
	}
	var ctrs []ctr
	for id, c := range fs.Containers {
		if c.State != kubeapi.ContainerState_CONTAINER_RUNNING || c.Metadata == nil {
			continue
		}
		if filter != nil && (filter.Id != "" && filter.Id != id || filter.PodSandboxId != "" && filter.PodSandboxId != c.SandboxID) {
			continue
		}
		ctrs = append(ctrs, ctr{id: id, pod: c.Labels["io.kubernetes.pod.uid"], name: c.Metadata.Name,
			attrs: &kubeapi.ContainerAttributes{Id: id, Metadata: c.Metadata, Labels: c.Labels, Annotations: c.Annotations}})
	}
	fs.Unlock()
	out := make([]*kubeapi.ContainerStats, 0, len(ctrs))
	for _, c := range ctrs {
		if ids != nil {
			ids[c.id] = true
		}
		s := r.usage.sample(c.id, types.UID(c.pod), c.name, now)
		if m, ok := r.jvms.memory(c.id, types.UID(c.pod), c.name); ok {
			s.MemoryBytes = m // a JVM uses its heap + overhead (jvm.go)
		}
		ts := now.UnixNano()
		out = append(out, &kubeapi.ContainerStats{
			Attributes: c.attrs,
			Cpu:        &kubeapi.CpuUsage{Timestamp: ts, UsageCoreNanoSeconds: &kubeapi.UInt64Value{Value: s.CPUNanos}},
			Memory: &kubeapi.MemoryUsage{Timestamp: ts, WorkingSetBytes: &kubeapi.UInt64Value{Value: s.MemoryBytes},
				UsageBytes: &kubeapi.UInt64Value{Value: s.MemoryBytes}, RssBytes: &kubeapi.UInt64Value{Value: s.MemoryBytes}},
		})
	}
	return out
}

func (r *statsRuntime) ListContainerStats(ctx context.Context, req *kubeapi.ListContainerStatsRequest) (*kubeapi.ListContainerStatsResponse, error) {
	full := req.Filter == nil || req.Filter.Id == "" && req.Filter.PodSandboxId == "" && req.Filter.LabelSelector == nil
	var live map[string]bool
	if full {
		live = map[string]bool{}
	}
	resp := &kubeapi.ListContainerStatsResponse{Stats: r.stats(live, req.Filter)}
	if full {
		r.usage.prune(live)
	}
	return resp, nil
}

func (r *statsRuntime) ContainerStats(ctx context.Context, req *kubeapi.ContainerStatsRequest) (*kubeapi.ContainerStatsResponse, error) {
	st := r.stats(nil, &kubeapi.ContainerStatsFilter{Id: req.ContainerId})
	if len(st) == 0 {
		return r.RuntimeServiceServer.ContainerStats(ctx, req)
	}
	return &kubeapi.ContainerStatsResponse{Stats: st[0]}, nil
}

func startFakeRuntime(sock string, report bool, usage *usageTracker, jvms *jvmTracker) (*fakeremote.RemoteRuntime, func(), error) {
	rt := fakeremote.NewFakeRemoteRuntime()
	rt.RuntimeService.FakeStatus = &kubeapi.RuntimeStatus{Conditions: []*kubeapi.RuntimeCondition{
		{Type: kubeapi.RuntimeReady, Status: true},
		{Type: kubeapi.NetworkReady, Status: true},
	}}
	// The fake records every call in Called/ImageService.Called; trim it so long runs don't leak.
	go func() {
		for range time.Tick(time.Minute) {
			rt.RuntimeService.Lock()
			rt.RuntimeService.Called = nil
			rt.RuntimeService.Unlock()
			rt.ImageService.Lock()
			rt.ImageService.Called = nil
			rt.ImageService.Unlock()
		}
	}()
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, nil, err
	}
	srv := grpc.NewServer()
	res := &resourcesRuntime{rt}
	var rs kubeapi.RuntimeServiceServer = res
	if report {
		rs = &reportingRuntime{res}
	}
	rs = &statsRuntime{RuntimeServiceServer: rs, fs: rt, usage: usage, jvms: jvms}
	kubeapi.RegisterRuntimeServiceServer(srv, rs)
	kubeapi.RegisterImageServiceServer(srv, rt)
	go func() { _ = srv.Serve(l) }()
	return rt, srv.Stop, nil
}

// watchPods follows the usage and kill annotations of the pods bound to the node (a watch of
// its own, as the kubelet's: the Node authorizer lets a node read the pods bound to it).
func watchPods(ctx context.Context, client clientset.Interface, node string, usage *usageTracker, kills *killTracker, jvms *jvmTracker) {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	}))
	observe := func(obj any) {
		if pod, ok := obj.(*v1.Pod); ok {
			usage.observe(pod)
			kills.observe(pod)
			jvms.observe(pod)
		}
	}
	_, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*v1.Pod); ok {
				usage.forget(pod.UID)
				kills.forget(pod.UID)
				jvms.forget(pod.UID)
			}
		},
	})
	if err != nil {
		klog.Fatalf("pod informer: %v", err)
	}
	f.Start(ctx.Done())
}

func mkdir(p string) string {
	if err := os.MkdirAll(p, 0o750); err != nil {
		klog.Fatalf("mkdir %s: %v", p, err)
	}
	return p
}

func main() {
	var (
		kubeconfig, name, rootDir, address, memory, reservedCPU, reservedMem, podMemUsage, ctrUsage string
		cores, port, maxPods                                                                        int
		qps                                                                                         float64
		report, events, staticCPU                                                                   bool
		taintSpecs                                                                                  []string
		syncFrequency, maxRestartPeriod                                                             time.Duration
		usageSeed                                                                                   uint64
		labels                                                                                      = map[string]string{}
		gates                                                                                       = map[string]bool{}
	)
	fs := pflag.CommandLine
	klog.InitFlags(nil)
	fs.AddGoFlagSet(goflag.CommandLine)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the node identity (system:node:<name>)")
	fs.StringVar(&name, "name", "hollow-node", "node name")
	fs.StringVar(&rootDir, "root-dir", "", "kubelet root dir (default ./run/<name>)")
	fs.StringVar(&address, "address", "127.0.0.1", "kubelet server bind address")
	fs.IntVar(&port, "kubelet-port", 10250, "kubelet server port")
	fs.IntVar(&cores, "cores", 4, "node CPU capacity in whole cores (cadvisor NumCores)")
	fs.StringVar(&memory, "memory", "8Gi", "node memory capacity")
	fs.StringVar(&reservedCPU, "reserved-cpu", "0", "cpu subtracted from capacity to form allocatable")
	fs.StringVar(&reservedMem, "reserved-memory", "0", "memory subtracted from capacity to form allocatable")
	fs.IntVar(&maxPods, "max-pods", 110, "max pods")
	fs.Float64Var(&qps, "kube-api-qps", 50, "client QPS")
	fs.StringVar(&podMemUsage, "pod-memory-usage", "1Mi", "memory usage of the cgroup of a pod without usage annotations (per pod: annotation "+MemoryUsageAnnotation+", or the sum of annotation "+UsageAnnotation+")")
	fs.StringVar(&ctrUsage, "container-usage", "cpu:1m,memory:1Mi", "usage of a container the annotation "+UsageAnnotation+" does not set (cpu:Q,memory:Q[,noise:N%])")
	fs.Uint64Var(&usageSeed, "usage-seed", 1, "seed of the usage noise (with the pod UID and container name)")
	fs.BoolVar(&staticCPU, "fake-static-cpu-manager", false, "report CPUManagerPolicy=static (CPU resizes of Guaranteed pods become Infeasible)")
	fs.BoolVar(&events, "events", true, "send kubelet events to the API server (needs readable /dev/kmsg for the OOM watcher)")
	fs.BoolVar(&report, "report-runtime-resources", false, "fake CRI reports container resources in ContainerStatus")
	fs.StringSliceVar(&taintSpecs, "register-with-taints", nil, "taints the node registers with, key=value:Effect,...")
	fs.DurationVar(&syncFrequency, "sync-frequency", 10*time.Second, "how often every running pod is synced again (the kubelet's syncFrequency); longer: less CPU per pod")
	fs.DurationVar(&maxRestartPeriod, "max-container-restart-period", 0, "longest crash-loop back-off between restarts of a container, 1s to 300s (the kubelet's crashLoopBackOff.maxContainerRestartPeriod; also its first back-off when below 10s); 0: the kubelet's default, 300s")
	nl := cliflag.ConfigurationMap(labels)
	fs.Var(&nl, "node-labels", "extra node labels k=v,...")
	fs.Var(cliflag.NewMapStringBool(&gates), "feature-gates", "kubelet feature gates, Gate=true|false,...")
	pflag.Parse()
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(gates); err != nil {
		klog.Fatalf("--feature-gates: %v", err)
	}

	registerTaints, _, err := taints.ParseTaints(taintSpecs)
	if err != nil {
		klog.Fatalf("--register-with-taints: %v", err)
	}
	if rootDir == "" {
		rootDir = filepath.Join("run", name)
	}
	rootDir, _ = filepath.Abs(rootDir)
	mkdir(rootDir)

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()

	raw, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		klog.Fatalf("load kubeconfig: %v", err)
	}
	restCfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		klog.Fatalf("kubeconfig: %v", err)
	}
	restCfg.ContentType = "application/vnd.kubernetes.protobuf"
	restCfg.QPS, restCfg.Burst = float32(qps), int(qps*2)
	restCfg.UserAgent = "hollow-kubelet"
	client := clientset.NewForConfigOrDie(restCfg)

	// ---- kubelet flags + config (adapted from pkg/kubemark.GetHollowKubeletConfig) ----
	f := options.NewKubeletFlags()
	f.RootDirectory = rootDir
	f.HostnameOverride = name
	f.MinimumGCAge = metav1.Duration{Duration: time.Minute}
	f.MaxContainerCount = 100
	f.MaxPerPodContainerCount = 2
	f.NodeLabels = labels
	c, err := options.NewKubeletConfiguration()
	if err != nil {
		klog.Fatal(err)
	}
	c.StaticPodURL = ""
	c.EnableServer = true
	c.Address = address
	c.Port = int32(port)
	c.ReadOnlyPort = 0
	c.HealthzPort = 0
	c.StaticPodPath = mkdir(filepath.Join(rootDir, "static-pods"))
	c.PodLogsDir = mkdir(filepath.Join(rootDir, "pod-logs"))
	c.FileCheckFrequency.Duration = 20 * time.Second
	c.HTTPCheckFrequency.Duration = 20 * time.Second
	c.NodeStatusUpdateFrequency.Duration = 10 * time.Second
	c.NodeStatusReportFrequency.Duration = 5 * time.Minute
	c.SyncFrequency.Duration = syncFrequency
	if maxRestartPeriod > 0 {
		c.CrashLoopBackOff.MaxContainerRestartPeriod = &metav1.Duration{Duration: maxRestartPeriod}
	}
	// The fake runtime writes no container logs: each rotation check fails
	// (and logs an error) for every container. Once an hour, not every 10s.
	c.ContainerLogMonitorInterval.Duration = time.Hour
	c.EvictionPressureTransitionPeriod.Duration = 5 * time.Minute
	c.MaxPods = int32(maxPods)
	c.PodsPerCore = 0
	c.ClusterDNS = []string{"10.0.0.10"} // avoids a MissingClusterDNS warning event per pod
	c.ImageGCHighThresholdPercent = 90
	c.ImageGCLowThresholdPercent = 80
	c.ProviderID = fmt.Sprintf("kubemark://%v", name)
	c.VolumeStatsAggPeriod.Duration = time.Minute
	c.CgroupRoot = ""
	c.CPUCFSQuota = true
	c.EnableControllerAttachDetach = false
	c.EnableDebuggingHandlers = true
	c.CgroupsPerQOS = false
	c.HairpinMode = kubeletconfig.HairpinVeth
	c.MaxOpenFiles = 1024
	c.RegistryBurst = 10
	c.RegistryPullQPS = 5.0
	c.ResolverConfig = kubetypes.ResolvConfDefault
	c.KubeletCgroups = "/kubelet"
	c.SerializeImagePulls = true
	c.SystemCgroups = ""
	c.ProtectKernelDefaults = false
	c.RegisterNode = true
	c.RegisterWithTaints = registerTaints
	c.LocalStorageCapacityIsolation = true
	c.FeatureGates = gates

	heartbeatCfg := *restCfg
	heartbeatCfg.Timeout = c.NodeStatusUpdateFrequency.Duration
	if lt := time.Duration(c.NodeLeaseDurationSeconds) * time.Second; heartbeatCfg.Timeout > lt {
		heartbeatCfg.Timeout = lt
	}
	heartbeatCfg.QPS = -1
	heartbeatClient := clientset.NewForConfigOrDie(&heartbeatCfg)

	mem := resource.MustParse(memory)
	pmu, err := parseMemory(podMemUsage)
	if err != nil {
		klog.Fatalf("--pod-memory-usage: %v", err)
	}
	defUsage, err := parseDefaultUsage(ctrUsage)
	if err != nil {
		klog.Fatalf("--container-usage: %v", err)
	}
	usage := newUsageTracker(usageSeed, defUsage, pmu)
	cgroups := &podCgroups{m: map[types.UID]*cm.ResourceConfig{}, usage: usage}
	cadv := &fakeCadvisor{Fake: cadvisortest.Fake{NodeName: name}, cores: cores, mem: uint64(mem.Value()), usage: usage}
	var containerManager cm.ContainerManager = cm.NewStubContainerManagerWithDevicePluginResource(v1.ResourceList{})
	containerManager = &hollowCM{ContainerManager: containerManager, cgroups: cgroups, staticCPUPolicy: staticCPU, capacity: v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(cores), resource.DecimalSI),
		v1.ResourceMemory: mem,
	}, reserved: v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse(reservedCPU),
		v1.ResourceMemory: resource.MustParse(reservedMem),
	}}

	sock := filepath.Join(rootDir, "cri.sock")
	jvms := newJVMTracker()
	rt, stop, err := startFakeRuntime(sock, report, usage, jvms)
	if err != nil {
		klog.Fatalf("fake runtime: %v", err)
	}
	defer stop()
	runtimeService, err := newRuntimeService(ctx, "unix://"+sock)
	if err != nil {
		klog.Fatalf("runtime service: %v", err)
	}
	klog.Infof("hollow-node %s (%s): cores=%d memory=%s reserved cpu=%s mem=%s static-cpu-manager=%v taints=%v root=%s report-runtime-resources=%v",
		name, kubeletVersion, cores, memory, reservedCPU, reservedMem, staticCPU, taintSpecs, rootDir, report)
	deps, run := newHollowKubelet(f, c, client, heartbeatClient, cadv, rt.ImageService, runtimeService, containerManager)
	// Readiness: kubemark's stub marks every container Ready; ready.go delays the containers
	// whose readiness probe asks for it.
	deps.ProbeManager = probeManager{newReadyProber(time.Now)}
	if events {
		// The hollow kubelet's dependencies use record.FakeRecorder (no kubelet events in the
		// API, and it also disables the /dev/kmsg OOM watcher). Let RunKubelet build the real
		// recorder instead so that ResizeStarted/ResizeCompleted/ResizeDeferred/ResizeInfeasible
		// events are visible.
		deps.Recorder = nil
		deps.EventClient = client.CoreV1()
	}
	kills := newKillTracker()
	watchPods(ctx, client, name, usage, kills, jvms)
	go killContainers(ctx, rt, kills, jvms, 200*time.Millisecond)
	go run(ctx)
	<-ctx.Done()
	klog.Info("shutting down")
}
