package buckets

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// versioned makes the fake clientset refuse an update of a ConfigMap over
// a stale resourceVersion, as the API server does (its object tracker
// does not look at it), and give every write a new one.
func versioned(kube *fake.Clientset) {
	var mu sync.Mutex
	version := 100
	kube.PrependReactor("update", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		cm := a.(clienttesting.UpdateAction).GetObject().(*corev1.ConfigMap).DeepCopy()
		cur, err := kube.Tracker().Get(configMaps.WithVersion("v1"), cm.Namespace, cm.Name)
		if err != nil {
			return true, nil, err
		}
		if cm.ResourceVersion != "" && cm.ResourceVersion != cur.(*corev1.ConfigMap).ResourceVersion {
			return true, nil, apierrors.NewConflict(configMaps, cm.Name, nil)
		}
		version++
		cm.ResourceVersion = strconv.Itoa(version)
		if err := kube.Tracker().Update(configMaps.WithVersion("v1"), cm, cm.Namespace); err != nil {
			return true, nil, err
		}
		return true, cm.DeepCopy(), nil
	})
}

// TestReplicasWatchTheBuckets: replicas on the API server (client-go's
// fake clientset, refusing stale writes), each watching the buckets by
// name: one's reservation reaches the other's watch and is counted; its
// removal tells the other which node has room again. The records'
// ConfigMaps beside the buckets are not cached.
func TestReplicasWatchTheBuckets(t *testing.T) {
	n, a, b, filler := twoBrokers()
	objs := []runtime.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "vpa-inplace-records-infeasible-x", ResourceVersion: "1"}}}
	for i := range 4 {
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: Name(prefix, i), ResourceVersion: "1"}})
	}
	kube := fake.NewClientset(objs...)
	versioned(kube)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	start := func(id string) (*Reservations, *Informers) {
		inf := NewInformers(kube, namespace, Names(prefix, 4))
		r, err := New(Config{API: kube.CoreV1().ConfigMaps(namespace), Cache: inf, Namespace: namespace, Prefix: prefix, Buckets: 4,
			Identity: id, TTL: ttl, Clock: clock.RealClock{}})
		require.NoError(t, err)
		require.NoError(t, inf.OnChange(r.Changed))
		inf.Run(ctx)
		go r.Run(ctx)
		require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
		return r, inf
	}
	ra, infA := start("replica-a")
	rb, _ := start("replica-b")
	for _, inf := range infA.informers {
		assert.Len(t, inf.GetStore().ListKeys(), 1, "one bucket per informer")
	}
	freed := make(chan string, 10)
	defer rb.Subscribe(func(node string) { freed <- node })()

	require.True(t, ra.Reserve(ctx, request(a, "1500m", n, a, b, filler)).Fits)
	bucket := Name(prefix, bucketOfNode(n.Name))
	require.Eventually(t, func() bool {
		cm, ok := rb.cache.Get(bucket)
		return ok && len(cm.Data) == 1
	}, 10*time.Second, 10*time.Millisecond, "the other replica's watch shows the reservation")
	got := rb.Reserve(ctx, request(b, "1500m", n, a, b, filler))
	assert.False(t, got.Fits)
	assert.Equal(t, RefusedNoRoom, got.Reason)

	ra.Release(a)
	select {
	case node := <-freed:
		assert.Equal(t, n.Name, node)
	case <-time.After(10 * time.Second):
		t.Fatal("the other replica was not told that the node's reservation went")
	}
	require.True(t, rb.Reserve(ctx, request(b, "1500m", n, a, b, filler)).Fits)
}
