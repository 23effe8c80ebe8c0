// Kubelet v1.38 specifics of hollow-node. hollow.go, usage.go and kill.go are symlinks to the
// shared files in hack/cluster/cmd/hollow-node; the v1.37 counterpart of this file is
// hack/cluster/cmd/hollow-node/compat.go.
package main

import (
	"context"
	"math"
	"time"

	cadvisorapi "github.com/google/cadvisor/lib/model"
	noopoteltrace "go.opentelemetry.io/otel/trace/noop"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
	kubeletapp "k8s.io/kubernetes/cmd/kubelet/app"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	"k8s.io/kubernetes/pkg/kubelet"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	containertest "k8s.io/kubernetes/pkg/kubelet/container/testing"
	probetest "k8s.io/kubernetes/pkg/kubelet/prober/testing"
	kubeletutil "k8s.io/kubernetes/pkg/kubelet/util"
	"k8s.io/kubernetes/pkg/util/oom"
	"k8s.io/kubernetes/pkg/volume"
	"k8s.io/kubernetes/pkg/volume/configmap"
	"k8s.io/kubernetes/pkg/volume/csi"
	"k8s.io/kubernetes/pkg/volume/downwardapi"
	"k8s.io/kubernetes/pkg/volume/emptydir"
	"k8s.io/kubernetes/pkg/volume/hostpath"
	"k8s.io/kubernetes/pkg/volume/local"
	"k8s.io/kubernetes/pkg/volume/projected"
	"k8s.io/kubernetes/pkg/volume/secret"
	"k8s.io/kubernetes/pkg/volume/util/hostutil"
	"k8s.io/kubernetes/pkg/volume/util/subpath"
	"k8s.io/mount-utils"
)

const kubeletVersion = "kubelet v1.38"

// resourceConfigForPod: the pod cgroup values the kubelet would write at pod start
// (CPU limits enforced, 100ms CFS period, no memory QoS).
func resourceConfigForPod(pod *v1.Pod) *cm.ResourceConfig {
	return cm.ResourceConfigForPod(pod, true, 100000, false, kubeletconfig.NoneMemoryReservationPolicy)
}

func newRuntimeService(ctx context.Context, endpoint string) (internalapi.RuntimeService, error) {
	return remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(endpoint).
		WithConnectionTimeout(15 * time.Second).Build(ctx)
}

func (c *fakeCadvisor) MachineInfo(logger klog.Logger) (*cadvisorapi.MachineInfo, error) {
	mi, err := c.Fake.MachineInfo(logger)
	if err != nil {
		return nil, err
	}
	mi.NumCores = c.cores
	mi.MemoryCapacity = c.mem
	return mi, nil
}

// ContainerInfoV2 answers the kubelet's stats queries for the node ("/": its CPU counter and
// memory, which /metrics/resource and the summary API need) and for the pod "cgroup" names
// handed out by fakePCM (memory: without it the kubelet refuses every memory-limit decrease
// with "cannot decrease memory limits: missing pod memory usage").
func (c *fakeCadvisor) ContainerInfoV2(name string, options cadvisorapi.RequestOptions) (map[string]cadvisorapi.ContainerInfo, error) {
	s, ok := c.cgroupSample(name)
	if !ok {
		return c.Fake.ContainerInfoV2(name, options)
	}
	now := time.Now()
	st := &cadvisorapi.ContainerStats{Timestamp: now,
		Memory: &cadvisorapi.MemoryStats{Usage: s.MemoryBytes, WorkingSet: s.MemoryBytes, RSS: s.MemoryBytes}}
	if name == "/" {
		st.Cpu = &cadvisorapi.CpuStats{Usage: cadvisorapi.CpuUsage{Total: s.CPUNanos}}
	}
	return map[string]cadvisorapi.ContainerInfo{name: {
		ContainerReference: cadvisorapi.ContainerReference{Name: name},
		Spec: cadvisorapi.ContainerSpec{CreationTime: now.Add(-time.Minute), HasCpu: true, HasMemory: true,
			Memory: cadvisorapi.MemorySpec{Limit: math.MaxUint64}},
		Stats: []*cadvisorapi.ContainerStats{st},
	}}, nil
}

// podContainerManager: fakePCM has this kubelet's PodContainerManager method set as it is.
func podContainerManager(f *fakePCM) cm.PodContainerManager { return f }

// newHollowKubelet: the kubelet's dependencies around the given runtime, cadvisor and
// container manager, with fakes for everything that would touch the host (OS, mounts,
// subpaths, OOM scores, probes), and the function that runs it. Kubernetes 1.38 no longer
// ships kubemark, whose constructor the older builds call; the caller may still change the
// dependencies (the event recorder).
func newHollowKubelet(f *options.KubeletFlags, c *kubeletconfig.KubeletConfiguration, client, heartbeat *clientset.Clientset,
	cadv cadvisor.Interface, images internalapi.ImageManagerService, runtime internalapi.RuntimeService,
	containers cm.ContainerManager) (*kubelet.Dependencies, func(context.Context)) {
	var plugins []volume.VolumePlugin
	for _, p := range [][]volume.VolumePlugin{
		emptydir.ProbeVolumePlugins(),
		hostpath.FakeProbeVolumePlugins(volume.VolumeConfig{}),
		secret.ProbeVolumePlugins(),
		configmap.ProbeVolumePlugins(),
		downwardapi.ProbeVolumePlugins(),
		projected.ProbeVolumePlugins(),
		local.ProbeVolumePlugins(),
		csi.ProbeVolumePlugins(),
	} {
		plugins = append(plugins, p...)
	}
	deps := &kubelet.Dependencies{
		KubeClient:                client,
		HeartbeatClient:           heartbeat,
		ProbeManager:              probetest.FakeManager{},
		RemoteRuntimeService:      runtime,
		RemoteImageService:        images,
		CAdvisorInterface:         cadv,
		OSInterface:               &containertest.FakeOS{},
		ContainerManager:          containers,
		VolumePlugins:             plugins,
		OOMAdjuster:               oom.NewFakeOOMAdjuster(),
		Mounter:                   &mount.FakeMounter{},
		Subpather:                 &subpath.FakeSubpath{},
		HostUtil:                  hostutil.NewFakeHostUtil(nil),
		PodStartupLatencyTracker:  kubeletutil.NewPodStartupLatencyTracker(),
		NodeStartupLatencyTracker: kubeletutil.NewNodeStartupLatencyTracker(klog.Background()),
		TracerProvider:            noopoteltrace.NewTracerProvider(),
		// The real recorder would read /dev/kmsg; hollow.go swaps it in when --events is on.
		Recorder: &record.FakeRecorder{},
	}
	run := func(ctx context.Context) {
		if err := kubeletapp.RunKubelet(ctx, &options.KubeletServer{KubeletFlags: *f, KubeletConfiguration: *c}, deps); err != nil {
			klog.Fatalf("run the hollow kubelet: %v", err)
		}
	}
	return deps, run
}

// probeManager is readyProber with this kubelet's prober.Manager method set (ready.go).
type probeManager struct{ *readyProber }

func (probeManager) AddPod(context.Context, *v1.Pod)                {}
func (probeManager) StopLivenessAndStartup(*v1.Pod)                 {}
func (m probeManager) RemovePod(pod *v1.Pod)                        { m.forget(pod) }
func (m probeManager) CleanupPods(desired map[types.UID]sets.Empty) { m.keepOnly(desired) }
func (m probeManager) UpdatePodStatus(_ context.Context, pod *v1.Pod, s *v1.PodStatus) {
	m.update(pod, s)
}

// AllocationMode: the 1.38 kubelet asks its container manager whether a resource is allocated
// exclusively (1.37 read the CPU manager policy from GetNodeConfig) before it lets a Guaranteed
// pod's CPU be resized; with --fake-static-cpu-manager, CPU is, as under the static policy.
func (r *hollowCM) AllocationMode(res v1.ResourceName) cm.ResourceAllocationMode {
	if r.staticCPUPolicy && res == v1.ResourceCPU {
		return cm.ResourceAllocationModeExclusive
	}
	return r.ContainerManager.AllocationMode(res)
}
