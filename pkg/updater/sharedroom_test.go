package updater

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/vpa-inplace/vpa-inplace/pkg/updater/noderoom"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/noderoom/buckets"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
)

// bucketsAPI is an API server holding the node room buckets (4 of them)
// that refuses a write over a stale resourceVersion.
func bucketsAPI(t *testing.T) *kubefake.Clientset {
	t.Helper()
	var objs []runtime.Object
	for b := range 4 {
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: buckets.Name("vpa-inplace-updater", b), ResourceVersion: "1"}})
	}
	kube := kubefake.NewClientset(objs...)
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	var mu sync.Mutex
	version := 1
	kube.PrependReactor("update", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		cm := a.(clienttesting.UpdateAction).GetObject().(*corev1.ConfigMap).DeepCopy()
		cur, err := kube.Tracker().Get(gvr, cm.Namespace, cm.Name)
		if err != nil {
			return true, nil, err
		}
		if cm.ResourceVersion != "" && cm.ResourceVersion != cur.(*corev1.ConfigMap).ResourceVersion {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), cm.Name, nil)
		}
		version++
		cm.ResourceVersion = strconv.Itoa(version)
		return true, cm.DeepCopy(), kube.Tracker().Update(gvr, cm, cm.Namespace)
	})
	return kube
}

// sharedRoom is one replica's reservations on api, watching the buckets,
// its worker running until the test ends.
func sharedRoom(t *testing.T, api *kubefake.Clientset, identity string) *buckets.Reservations {
	t.Helper()
	inf := buckets.NewInformers(api, systemNamespace, buckets.Names("vpa-inplace-updater", 4))
	r, err := buckets.New(buckets.Config{API: api.CoreV1().ConfigMaps(systemNamespace), Cache: inf, Namespace: systemNamespace,
		Prefix: "vpa-inplace-updater", Buckets: 4, Identity: identity, TTL: noderoom.MaxHold})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, inf.OnChange(r.Changed))
	inf.Run(ctx)
	go r.Run(ctx)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
	return r
}

// TestReplicasReserveNodeRoomThroughTheAPI: with shards, two replicas each
// decide on a broker of one node (brokersFixture: each resize fits alone,
// not both). The second replica's caches do not show the first's resize,
// and its ledger holds only its own resizes: the reservation the first
// wrote into the node's bucket before sending its resize makes the second
// wait, counting it. The first's resize is refused: its reservation goes,
// and the second replica looks at its broker again at once and sends it.
func TestReplicasReserveNodeRoomThroughTheAPI(t *testing.T) {
	api := bucketsAPI(t)
	a := brokersFixture(t, fixtureOpts{nodeRoom: sharedRoom(t, api, "replica-a")})
	b := brokersFixture(t, fixtureOpts{nodeRoom: sharedRoom(t, api, "replica-b")})
	// The first replica's resize is in flight while the second decides,
	// and then refused.
	inFlight, decided := make(chan struct{}), make(chan struct{})
	a.kube.PrependReactor("patch", "pods", func(act clienttesting.Action) (bool, runtime.Object, error) {
		if act.GetSubresource() != "resize" {
			return false, nil, nil
		}
		close(inFlight)
		<-decided
		return true, nil, apierrors.NewBadRequest("refused")
	})
	done := make(chan error, 1)
	go func() { done <- a.sync("kafka-0") }()
	<-inFlight
	assert.Len(t, bucketData(t, api), 1, "reserved before the resize is sent")

	require.NoError(t, b.sync("kafka-1"))
	assert.Empty(t, b.resizePatches(), "the first replica's reservation is counted")
	events := b.events()
	require.Len(t, events, 1)
	assert.True(t, strings.HasPrefix(events[0], "Pod/kafka-1 Normal "+report.EventResizeWaitingForNodeCapacity), events[0])
	assert.Contains(t, events[0], "counted: resizes reserved on the node by the updater's replicas and not seen yet")
	b.queued()

	close(decided)
	require.ErrorContains(t, <-done, "refused", "retried with backoff")
	require.Eventually(t, func() bool { return contains(b.queued(), "default/kafka-1") }, waitFor, every,
		"the waiting broker is queued when the node's reservation goes")
	require.NoError(t, b.sync("kafka-1"))
	assert.Len(t, b.resizePatches(), 1)
}

// TestAReservationGoesOnceTheNodeViewShowsItsResize: the replica's view of
// the pods bound to nodes shows the resize sent: its reservation is removed
// from the bucket (after buckets.Linger), and the pod counts through its
// own requests.
func TestAReservationGoesOnceTheNodeViewShowsItsResize(t *testing.T) {
	api := bucketsAPI(t)
	room := sharedRoom(t, api, "replica-a")
	f := brokersFixture(t, fixtureOpts{nodeRoom: room, podNamespace: "default"})
	require.NoError(t, f.sync("kafka-0"))
	require.Len(t, f.resizePatches(), 1)
	require.Len(t, bucketData(t, api), 1)
	require.Eventually(t, func() bool { return len(bucketData(t, api)) == 0 && room.Len() == 0 }, waitFor+2*buckets.Linger, every,
		"removed once the node view shows the resize")
}

// bucketData returns the entries of every bucket of api.
func bucketData(t *testing.T, api *kubefake.Clientset) map[string]string {
	t.Helper()
	out := map[string]string{}
	for b := range 4 {
		cm, err := api.CoreV1().ConfigMaps(systemNamespace).Get(context.Background(), buckets.Name("vpa-inplace-updater", b), metav1.GetOptions{})
		require.NoError(t, err)
		for k, v := range cm.Data {
			out[k] = v
		}
	}
	return out
}
