// Kubelet v1.34 specifics of hollow-node. hollow.go and usage.go are symlinks to the shared
// files in hack/cluster/cmd/hollow-node; the v1.37 and v1.35 counterparts of this file are
// hack/cluster/cmd/hollow-node/compat.go and hack/cluster/kubelet-v1.35/cmd/hollow-node/compat.go.
package main

import (
	"context"
	"math"
	"time"

	cadvisorapi "github.com/google/cadvisor/info/v1"
	cadvisorapiv2 "github.com/google/cadvisor/info/v2"
	noopoteltrace "go.opentelemetry.io/otel/trace/noop"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clientset "k8s.io/client-go/kubernetes"
	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	"k8s.io/kubernetes/pkg/kubelet"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubemark"
)

const kubeletVersion = "kubelet v1.34"

// resourceConfigForPod: the pod cgroup values the kubelet would write at pod start
// (CPU limits enforced, 100ms CFS period, no memory QoS).
func resourceConfigForPod(pod *v1.Pod) *cm.ResourceConfig {
	return cm.ResourceConfigForPod(pod, true, 100000, false)
}

func newRuntimeService(ctx context.Context, endpoint string) (internalapi.RuntimeService, error) {
	logger := klog.FromContext(ctx)
	return remote.NewRemoteRuntimeService(endpoint, 15*time.Second, noopoteltrace.NewTracerProvider(), &logger)
}

// pcmV134 adapts fakePCM to the v1.34 PodContainerManager, whose EnsureExists and
// SetPodCgroupConfig take no logger (they gained one in v1.35).
type pcmV134 struct{ *fakePCM }

func (p pcmV134) EnsureExists(pod *v1.Pod) error {
	return p.fakePCM.EnsureExists(klog.Background(), pod)
}

func (p pcmV134) SetPodCgroupConfig(pod *v1.Pod, rc *cm.ResourceConfig) error {
	return p.fakePCM.SetPodCgroupConfig(klog.Background(), pod, rc)
}

func podContainerManager(f *fakePCM) cm.PodContainerManager { return pcmV134{f} }

func (c *fakeCadvisor) MachineInfo() (*cadvisorapi.MachineInfo, error) {
	mi, err := c.Fake.MachineInfo()
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
func (c *fakeCadvisor) ContainerInfoV2(name string, options cadvisorapiv2.RequestOptions) (map[string]cadvisorapiv2.ContainerInfo, error) {
	s, ok := c.cgroupSample(name)
	if !ok {
		return c.Fake.ContainerInfoV2(name, options)
	}
	now := time.Now()
	st := &cadvisorapiv2.ContainerStats{Timestamp: now,
		Memory: &cadvisorapi.MemoryStats{Usage: s.MemoryBytes, WorkingSet: s.MemoryBytes, RSS: s.MemoryBytes}}
	if name == "/" {
		st.Cpu = &cadvisorapi.CpuStats{Usage: cadvisorapi.CpuUsage{Total: s.CPUNanos}}
	}
	return map[string]cadvisorapiv2.ContainerInfo{name: {
		Spec: cadvisorapiv2.ContainerSpec{CreationTime: now.Add(-time.Minute), HasCpu: true, HasMemory: true,
			Memory: cadvisorapiv2.MemorySpec{Limit: math.MaxUint64}},
		Stats: []*cadvisorapiv2.ContainerStats{st},
	}}, nil
}

// newHollowKubelet: kubemark's hollow kubelet (fake OS, mounter, prober, OOM adjuster and
// volume plugins around the given runtime, cadvisor and container manager): its dependencies,
// which the caller may still change, and the function that runs it.
func newHollowKubelet(f *options.KubeletFlags, c *kubeletconfig.KubeletConfiguration, client, heartbeat *clientset.Clientset,
	cadv cadvisor.Interface, images internalapi.ImageManagerService, runtime internalapi.RuntimeService,
	containers cm.ContainerManager) (*kubelet.Dependencies, func(context.Context)) {
	hk := kubemark.NewHollowKubelet(f, c, client, heartbeat, cadv, images, runtime, containers)
	return hk.KubeletDeps, hk.Run
}

// probeManager is readyProber with this kubelet's prober.Manager method set (ready.go).
type probeManager struct{ *readyProber }

func (probeManager) AddPod(*v1.Pod)                                 {}
func (probeManager) StopLivenessAndStartup(*v1.Pod)                 {}
func (m probeManager) RemovePod(pod *v1.Pod)                        { m.forget(pod) }
func (m probeManager) CleanupPods(desired map[types.UID]sets.Empty) { m.keepOnly(desired) }
func (m probeManager) UpdatePodStatus(pod *v1.Pod, s *v1.PodStatus) { m.update(pod, s) }
