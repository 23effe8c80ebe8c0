package buckets

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

var t0 = time.Unix(1_800_000_000, 0)

const (
	namespace = "vpa-inplace-system"
	prefix    = "vpa-inplace-updater"
	ttl       = 5 * time.Minute
)

var configMaps = schema.GroupResource{Resource: "configmaps"}

// fakeAPI holds ConfigMaps as the API server does, as far as the buckets
// use them: every accepted write gets a new resourceVersion, and a write
// that carries a resourceVersion other than the stored one is refused with
// 409 Conflict. A write without one is accepted whatever is stored, as the
// API server accepts an unconditional update.
type fakeAPI struct {
	mu      sync.Mutex
	version int
	objs    map[string]*corev1.ConfigMap
	// history holds every version of each ConfigMap written, oldest
	// first, for the stale caches.
	history map[string][]*corev1.ConfigMap
	// conflicts counts the writes refused.
	conflicts int
	// failWith, when set, answers every write.
	failWith error
}

var _ API = (*fakeAPI)(nil)

// newFakeAPI returns an API holding the empty buckets of n.
func newFakeAPI(n int) *fakeAPI {
	a := &fakeAPI{objs: map[string]*corev1.ConfigMap{}, history: map[string][]*corev1.ConfigMap{}}
	for b := range n {
		a.put(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: Name(prefix, b)}})
	}
	return a
}

// put stores cm as a new version, whatever was stored. Callers hold a.mu
// or own a.
func (a *fakeAPI) put(cm *corev1.ConfigMap) *corev1.ConfigMap {
	a.version++
	stored := cm.DeepCopy()
	stored.ResourceVersion = strconv.Itoa(a.version)
	a.objs[cm.Name] = stored
	a.history[cm.Name] = append(a.history[cm.Name], stored)
	return stored.DeepCopy()
}

func (a *fakeAPI) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.ConfigMap, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cm, ok := a.objs[name]
	if !ok {
		return nil, apierrors.NewNotFound(configMaps, name)
	}
	return cm.DeepCopy(), nil
}

func (a *fakeAPI) Update(_ context.Context, cm *corev1.ConfigMap, _ metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failWith != nil {
		return nil, a.failWith
	}
	cur, ok := a.objs[cm.Name]
	if !ok {
		return nil, apierrors.NewNotFound(configMaps, cm.Name)
	}
	if cm.ResourceVersion != "" && cm.ResourceVersion != cur.ResourceVersion {
		a.conflicts++
		return nil, apierrors.NewConflict(configMaps, cm.Name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	return a.put(cm), nil
}

// set replaces a bucket's data, as someone else writing it would.
func (a *fakeAPI) set(t *testing.T, b int, data map[string]string, binary map[string][]byte) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	cm := a.objs[Name(prefix, b)].DeepCopy()
	cm.Data, cm.BinaryData = data, binary
	a.put(cm)
}

// data returns a bucket's data as stored.
func (a *fakeAPI) data(b int) map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.objs[Name(prefix, b)].DeepCopy().Data
}

// staleCache is a replica's watch of the buckets lagging lag writes behind
// the API server (0: up to date).
type staleCache struct {
	api *fakeAPI
	lag int
}

func (c staleCache) Get(name string) (*corev1.ConfigMap, bool) {
	c.api.mu.Lock()
	defer c.api.mu.Unlock()
	h := c.api.history[name]
	if len(h) == 0 {
		return nil, false
	}
	return h[max(0, len(h)-1-c.lag)].DeepCopy(), true
}

// replica returns the reservations of one replica named id, on api,
// reading through cache (nil: the API) on clk.
func replica(t *testing.T, id string, api *fakeAPI, cache Cache, clk clock.WithTicker, m *Metrics) *Reservations {
	t.Helper()
	r, err := New(Config{API: api, Cache: cache, Namespace: namespace, Prefix: prefix, Buckets: 4, Identity: id, TTL: ttl, Clock: clk, Metrics: m})
	require.NoError(t, err)
	return r
}

// onNode is a node of cpu allocatable (and 64Gi of memory).
func onNode(name, cpu string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Allocatable: testpod.List(cpu, "64Gi")}}
}

// broker is a running pod of namespace ns on node-1 requesting cpu.
func broker(ns, name, cpu string) *corev1.Pod {
	return testpod.New(name).Namespace(ns).UID(ns+"-"+name).Container("kafka", cpu, "1Gi").Running().Obj()
}

func to(cpu string) resources.Resources {
	return resources.Resources{"kafka": {Requests: testpod.List(cpu, "1Gi")}}
}

// request is the reservation of p's resize to cpu on n, the node view
// holding pods.
func request(p *corev1.Pod, cpu string, n *corev1.Node, pods ...*corev1.Pod) Request {
	return Request{Pod: p, Target: to(cpu), Node: n, Pods: pods}
}

// shown is p as the node view shows it once its resize to cpu is applied.
func shown(p *corev1.Pod, cpu string) *corev1.Pod {
	out := p.DeepCopy()
	out.Generation++
	out.Spec.Containers[0].Resources.Requests = testpod.List(cpu, "1Gi")
	out.Status.ContainerStatuses[0].AllocatedResources = testpod.List(cpu, "1Gi")
	return out
}

// bucketOfNode is the bucket of node among the replicas' 4.
func bucketOfNode(node string) int { return Of(node, 4) }

// keys returns the pod UIDs of a bucket's data.
func keys(data map[string]string) []types.UID {
	var out []types.UID
	for k := range data {
		out = append(out, types.UID(k))
	}
	return out
}

func fakeClock() *clocktesting.FakeClock { return clocktesting.NewFakeClock(t0) }
