package updater

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/usage"
)

const kubeletRefusal = "cannot decrease memory limits: attempting to set pod memory limit (104857600) below current usage (157286400)"

// fakeUsage answers memory usage from a map, or with err.
type fakeUsage struct {
	mu    sync.Mutex
	mem   map[string]string
	err   error
	calls int
}

func (u *fakeUsage) MemoryUsage(context.Context, *corev1.Pod) (map[string]resource.Quantity, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls++
	if u.err != nil {
		return nil, u.err
	}
	out := map[string]resource.Quantity{}
	for c, m := range u.mem {
		out[c] = resource.MustParse(m)
	}
	return out, nil
}

func (u *fakeUsage) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls
}

func (u *fakeUsage) Available() bool { return true }

var _ usage.Source = (*fakeUsage)(nil)

// limitedPod runs c with requests 100m/100Mi and a 200Mi memory limit.
func limitedPod() *corev1.Pod {
	return webPod("p").Limits("c", "", "200Mi").Running().Obj()
}

// kubelet changes the pod's status through the API, as the kubelet would,
// and waits until the controller's cache has it.
func (f *fixture) kubelet(change func(*corev1.Pod)) {
	f.t.Helper()
	p, err := f.kube.CoreV1().Pods("default").Get(f.ctx, "p", metav1.GetOptions{})
	require.NoError(f.t, err)
	change(p)
	written, err := f.kube.CoreV1().Pods("default").UpdateStatus(f.ctx, p, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	require.Eventually(f.t, func() bool {
		c, err := f.ctrl.pods.Pods("default").Get("p")
		return err == nil && c.ResourceVersion == written.ResourceVersion
	}, waitFor, 10*time.Millisecond)
}

// waitSpecCached waits until the cached pod's memory limit is lim.
func (f *fixture) waitSpecCached(lim string) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		c, err := f.ctrl.pods.Pods("default").Get("p")
		return err == nil && c.Spec.Containers[0].Resources.Limits.Memory().String() == lim
	}, waitFor, 10*time.Millisecond)
}

// refuse is the kubelet refusing the resize of generation 2.
func refuse(p *corev1.Pod) {
	p.Generation, p.Status.ObservedGeneration = 2, 2
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizeInProgress,
		Status: corev1.ConditionTrue, Reason: corev1.PodReasonError, Message: kubeletRefusal, ObservedGeneration: 2})
}

// actuate is the kubelet applying the spec: no resize condition, the status
// reports the spec.
func actuate(p *corev1.Pod) {
	var conditions []corev1.PodCondition
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.PodResizeInProgress && c.Type != corev1.PodResizePending {
			conditions = append(conditions, c)
		}
	}
	p.Status.Conditions = conditions
	p.Status.ObservedGeneration = p.Generation
	p.Status.ContainerStatuses[0].Resources = p.Spec.Containers[0].Resources.DeepCopy()
	p.Status.ContainerStatuses[0].AllocatedResources = p.Spec.Containers[0].Resources.Requests.DeepCopy()
}

func TestKubeletMemoryRefusalIsRecordedReportedAndNeverRepeated(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{limitedPod()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("200m", "50Mi")}, fixtureOpts{durable: true})
	// Decisions are driven by hand, one sync at a time; the stores write.
	require.NoError(t, f.ctrl.loadRecords(f.ctx))
	storeCtx, stopStores := context.WithCancel(f.ctx)
	var stores sync.WaitGroup
	stores.Go(func() { f.store.Run(storeCtx) })
	stores.Go(func() { f.memStore.Run(storeCtx) })
	defer func() { stopStores(); stores.Wait() }()

	// No usage known: the limit is lowered as recommended.
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1)
	assert.JSONEq(t, `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"50Mi"},"limits":{"memory":"100Mi"}}}]}}`, f.resizePatches()[0])
	f.waitSpecCached("100Mi")
	require.Len(t, f.events(), 1)

	// The kubelet refuses: recorded, reported, and the resize sent once
	// more with the running limit kept.
	f.kubelet(refuse)
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 2)
	assert.JSONEq(t, `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"50Mi"},"limits":{"memory":"200Mi"}}}]}}`, f.resizePatches()[1])
	r, ok := f.memStore.Get("uid-p")
	require.True(t, ok)
	assert.Equal(t, records.KindMemoryLimitRefused, r.Kind)
	assert.Equal(t, "c: limits memory=100Mi", r.Attempted.String())
	assert.Equal(t, kubeletRefusal, r.Message)
	assert.Equal(t, t0, r.RecordedAt)
	events := f.events()
	require.Len(t, events, 2)
	assert.Equal(t, "Pod/p Warning "+report.EventMemoryLimitRefused+" The kubelet refused to lower memory limits to c: limits memory=100Mi ("+kubeletRefusal+
		"); these limits and lower ones are not sent again, and the resize is sent once more with the running memory limits kept", events[0])
	assert.Contains(t, events[1], "Normal "+report.EventResizeSent+" Resizing in place to c: requests cpu=200m memory=50Mi limits memory=200Mi; container c: memory limit kept at 200Mi instead of 100Mi (lowering it to 100Mi or less was refused before)")
	vpaEvents := f.vpaEvents()
	require.Len(t, vpaEvents, 1)
	assert.Contains(t, vpaEvents[0], "VerticalPodAutoscaler/web Warning "+report.EventMemoryLimitRefused+" Pod p: the kubelet refused to lower memory limits")
	assert.InDelta(t, 1, counter(t, f, report.MetricResizeFailures, "reason", "KubeletMemoryLimitRefused"), 0)
	assert.InDelta(t, 1, counter(t, f, report.MetricMemoryLimitsHeld, "source", "KubeletRefusal"), 0)
	assert.InDelta(t, 1, counter(t, f, report.MetricDecisions, "action", "Patch", "reason", "MemoryLimitRefused"), 0)
	require.Eventually(t, func() bool { return f.getVPA("web").Annotations[records.MemoryAnnotationKey] != "" }, waitFor, 10*time.Millisecond,
		"the memory record is durable")

	// The kubelet has not yet taken up the resize sent again; its Error,
	// about generation 2, stays. (The fake API server does not bump the
	// generation of a resized pod; the real one does.)
	f.waitSpecCached("200Mi")
	f.kubelet(func(p *corev1.Pod) { p.Generation = 3 })
	require.NoError(t, f.sync("p"))
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 2, "never sent twice")
	assert.InDelta(t, 1, counter(t, f, report.MetricResizeFailures, "reason", "KubeletMemoryLimitRefused"), 0, "one refusal counted once")

	// The kubelet applies it; the pod runs with the CPU change and its limit.
	f.kubelet(actuate)
	for range 3 {
		require.NoError(t, f.sync("p"))
	}
	assert.Len(t, f.resizePatches(), 2)
	assert.Empty(t, f.events(), "reported once")
	assert.Empty(t, f.vpaEvents())
	require.NoError(t, f.syncStatus("web"))
	c := f.condition("web")
	require.NotNil(t, c)
	assert.Equal(t, corev1.ConditionTrue, c.Status)
	assert.Equal(t, condition.ReasonMemoryLimitKept, c.Reason)
	assert.Contains(t, c.Message, "Memory limit kept: p runs with higher memory limits than recommended; c: limits memory=100Mi or lower is not sent (MemoryLimitRefused: "+kubeletRefusal+")")

	t.Run("a restarted updater does not send the refused limit again", func(t *testing.T) {
		stopStores()
		stores.Wait()
		second := newFixtureOn(t, f.kube, f.vpa, fixtureOpts{durable: true})
		second.run()
		// The pod now runs with 50Mi for a 200Mi limit: limits follow requests
		// in that ratio, so 25Mi asks for the refused 100Mi limit again.
		vpa := inPlaceVPA("300m", "25Mi")
		vpa.ResourceVersion = f.getVPA("web").ResourceVersion
		vpa.Annotations = f.getVPA("web").Annotations
		_, err := f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").Update(f.ctx, vpa, metav1.UpdateOptions{})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return len(second.resizePatches()) == 3 }, waitFor, 10*time.Millisecond)
		assert.JSONEq(t, `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"300m","memory":"25Mi"},"limits":{"memory":"200Mi"}}}]}}`,
			second.resizePatches()[2], "the refused limit is not sent, the rest is")
	})
}

func TestUnsafeMemoryDecreaseKeepsTheLimitAndResizesTheRest(t *testing.T) {
	u := &fakeUsage{mem: map[string]string{"c": "150Mi"}}
	f := newFixture(t, []*corev1.Pod{limitedPod()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("200m", "50Mi")},
		fixtureOpts{usage: u, memoryMargin: 0.2})
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1)
	assert.JSONEq(t, `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"200m","memory":"50Mi"},"limits":{"memory":"200Mi"}}}]}}`, f.resizePatches()[0])
	events := f.events()
	require.Len(t, events, 2)
	assert.Equal(t, "Pod/p Warning "+report.EventMemoryLimitKept+" Memory limits not lowered below the memory in use plus the margin: container c: memory limit kept at 200Mi instead of 100Mi (usage 150Mi plus the 20% margin is 180Mi); the rest of the resize is sent", events[0])
	assert.Contains(t, events[1], "Normal "+report.EventResizeSent+" Resizing in place to c: requests cpu=200m memory=50Mi limits memory=200Mi; container c: memory limit kept at 200Mi")
	vpaEvents := f.vpaEvents()
	require.Len(t, vpaEvents, 1)
	assert.Contains(t, vpaEvents[0], "VerticalPodAutoscaler/web Warning "+report.EventMemoryLimitKept+" Pod p: memory limits not lowered")
	r, ok := f.memStore.Get("uid-p")
	require.True(t, ok)
	assert.Equal(t, records.KindMemoryLimitUnsafe, r.Kind)
	assert.InDelta(t, 1, counter(t, f, report.MetricMemoryLimitsHeld, "source", "MemoryUsage"), 0)
	assert.InDelta(t, 1, counter(t, f, report.MetricDecisions, "action", "Patch", "reason", "MemoryLimitKept"), 0)
	n, err := testutil.GatherAndCount(f.registry, report.MetricMemoryRecords)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

func TestUnsafeMemoryDecreaseAloneSendsNothing(t *testing.T) {
	u := &fakeUsage{mem: map[string]string{"c": "150Mi"}}
	pod := testpod.New("p").Guaranteed("c", "100m", "200Mi").OwnedBy("apps/v1", "ReplicaSet", "web-rs").Running().Obj()
	f := newFixture(t, []*corev1.Pod{pod}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "100Mi")},
		fixtureOpts{usage: u, memoryMargin: 0.2})
	for range 3 {
		require.NoError(t, f.sync("p"))
	}
	assert.Empty(t, f.writes(), "no patch at all")
	events := f.events()
	require.Len(t, events, 1, "reported once")
	assert.Contains(t, events[0], "Warning "+report.EventMemoryLimitKept)
	assert.Contains(t, events[0], "nothing else to resize")
	assert.InDelta(t, 3, counter(t, f, report.MetricDecisions, "action", "Skip", "reason", "MemoryLimitUnsafe"), 0)
	require.NoError(t, f.syncStatus("web"))
	c := f.condition("web")
	require.NotNil(t, c)
	assert.Equal(t, condition.ReasonMemoryLimitKept, c.Reason)
	assert.Contains(t, c.Message, "1 pod: 1 with memory limits kept.")
	assert.Contains(t, c.Message, "usage 150Mi plus the 20% margin is 180Mi")
}

func TestMemoryUsageIsOnlyAskedForWhenALimitIsLowered(t *testing.T) {
	tests := []struct {
		name  string
		vpa   *vpatypes.VerticalPodAutoscaler
		minor int
		calls int
	}{
		{"limit lowered", inPlaceVPA("200m", "50Mi"), 37, 1},
		{"limit raised", inPlaceVPA("200m", "150Mi"), 37, 0},
		{"1.33 forbids lowering it", inPlaceVPA("200m", "50Mi"), 33, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := &fakeUsage{mem: map[string]string{"c": "10Mi"}}
			f := newFixture(t, []*corev1.Pod{limitedPod()}, []*vpatypes.VerticalPodAutoscaler{tc.vpa}, fixtureOpts{usage: u, serverMinor: tc.minor})
			require.NoError(t, f.sync("p"))
			assert.Equal(t, tc.calls, u.count())
		})
	}
}

func TestMetricsAPIDownDoesNotBlockResizes(t *testing.T) {
	u := &fakeUsage{err: usage.ErrUnavailable}
	f := newFixture(t, []*corev1.Pod{limitedPod()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("200m", "50Mi")},
		fixtureOpts{usage: u, memoryMargin: 0.2})
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1)
	assert.Contains(t, f.resizePatches()[0], `"limits":{"memory":"100Mi"}`, "lowered as recommended; the kubelet checks")
	assert.Equal(t, 0, f.memStore.Len())

	t.Run("any other error alike", func(t *testing.T) {
		u := &fakeUsage{err: errors.New("timeout")}
		f := newFixture(t, []*corev1.Pod{limitedPod()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("200m", "50Mi")}, fixtureOpts{usage: u})
		require.NoError(t, f.sync("p"))
		assert.Len(t, f.resizePatches(), 1)
	})
}

func TestMemoryRecordsAreForgottenWithTheirPod(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{limitedPod()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "100Mi")}, fixtureOpts{})
	f.memStore.Put(webOwner, "uid-p", &records.Record{Kind: records.KindMemoryLimitRefused})
	f.memStore.Put(webOwner, "uid-gone", &records.Record{Kind: records.KindMemoryLimitRefused})
	f.ctrl.CleanupRecords()
	assert.Equal(t, 1, f.memStore.Len())
	require.NoError(t, f.kube.CoreV1().Pods("default").Delete(f.ctx, "p", metav1.DeleteOptions{}))
	assert.Eventually(t, func() bool { return f.memStore.Len() == 0 }, waitFor, 10*time.Millisecond)
}
