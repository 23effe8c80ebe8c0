package target

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
)

var podSetResource = schema.GroupVersionResource{Group: coreGroup, Version: "v1", Resource: "strimzipodsets"}

// fakeResources serves the pod set (namespaced) and a cluster-scoped kind.
type fakeResources struct{ err error }

func (f fakeResources) Resource(_ context.Context, gk schema.GroupKind) (KindResource, bool, error) {
	if f.err != nil {
		return KindResource{}, false, f.err
	}
	switch gk {
	case schema.GroupKind{Group: coreGroup, Kind: "StrimziPodSet"}:
		return KindResource{Resource: podSetResource, Namespaced: true}, true, nil
	case schema.GroupKind{Group: testGroup, Kind: "ClusterThing"}:
		return KindResource{Resource: schema.GroupVersionResource{Group: testGroup, Version: "v1", Resource: "clusterthings"}}, true, nil
	}
	return KindResource{}, false, nil
}

// metadataServer answers metadata GETs of pod sets: the object it holds,
// or err. It counts the GETs.
type metadataServer struct {
	mu    sync.Mutex
	obj   *metav1.PartialObjectMetadata
	err   error
	gets  atomic.Int32
	block chan struct{} // when set, GETs wait for it to close
}

func (s *metadataServer) client() *metadatafake.FakeMetadataClient {
	c := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	c.PrependReactor("get", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		s.gets.Add(1)
		if s.block != nil {
			<-s.block
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		get := action.(clienttesting.GetAction)
		if s.err != nil {
			return true, nil, s.err
		}
		if s.obj == nil || get.GetName() != s.obj.Name || get.GetNamespace() != s.obj.Namespace || get.GetResource() != podSetResource {
			return true, nil, apierrors.NewNotFound(podSetResource.GroupResource(), get.GetName())
		}
		return true, s.obj.DeepCopy(), nil
	})
	return c
}

func (s *metadataServer) set(obj *metav1.PartialObjectMetadata, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.obj, s.err = obj, err
}

func podSetMeta(uid types.UID, refs ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: coreGroup + "/v1", Kind: "StrimziPodSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "my-cluster-brokers", UID: uid, OwnerReferences: refs},
	}
}

func TestMetadataOwners(t *testing.T) {
	ctx := context.Background()
	podSet := own(coreGroup, "StrimziPodSet", "my-cluster-brokers")
	pool := ref(kafkaGroup, "KafkaNodePool", "brokers", false)

	t.Run("an object's owners are read once and reused for OwnerTTL", func(t *testing.T) {
		now := time.Unix(0, 0)
		srv := &metadataServer{obj: podSetMeta("uid-1", pool)}
		m := NewMetadataOwners(srv.client(), fakeResources{}, nil, func() time.Time { return now })
		for range 3 {
			refs, found, err := m.OwnersOf(ctx, podSet, "uid-1")
			require.NoError(t, err)
			require.True(t, found)
			assert.Equal(t, []metav1.OwnerReference{pool}, refs)
		}
		assert.EqualValues(t, 1, srv.gets.Load())
		now = now.Add(OwnerTTL)
		_, _, err := m.OwnersOf(ctx, podSet, "uid-1")
		require.NoError(t, err)
		assert.EqualValues(t, 2, srv.gets.Load())
	})

	t.Run("an object recreated under its name: read again, but no sooner than OwnerErrorTTL", func(t *testing.T) {
		now := time.Unix(0, 0)
		srv := &metadataServer{obj: podSetMeta("uid-old", pool)}
		m := NewMetadataOwners(srv.client(), fakeResources{}, nil, func() time.Time { return now })
		_, found, err := m.OwnersOf(ctx, podSet, "uid-old")
		require.NoError(t, err)
		require.True(t, found)

		srv.set(podSetMeta("uid-new", pool), nil)
		_, found, err = m.OwnersOf(ctx, podSet, "uid-new")
		require.NoError(t, err)
		assert.False(t, found, "read less than OwnerErrorTTL ago: another object than the one named")
		assert.EqualValues(t, 1, srv.gets.Load())
		now = now.Add(OwnerErrorTTL)
		_, found, err = m.OwnersOf(ctx, podSet, "uid-new")
		require.NoError(t, err)
		assert.True(t, found)
		assert.EqualValues(t, 2, srv.gets.Load())
		_, found, err = m.OwnersOf(ctx, podSet, "uid-old")
		require.NoError(t, err)
		assert.False(t, found, "the old object is gone")
		assert.EqualValues(t, 2, srv.gets.Load())
	})

	for _, tc := range []struct {
		name      string
		err       error
		resources Resources
		owner     Owner
		wantErr   bool
		wantGets  int32
	}{
		{name: "a missing object: not found, no error", owner: podSet, wantGets: 1},
		{name: "a forbidden read: not walked through, no error", owner: podSet, err: apierrors.NewForbidden(podSetResource.GroupResource(), "my-cluster-brokers", errors.New("no rule")), wantGets: 1},
		{name: "a failed read: an error", owner: podSet, err: apierrors.NewServiceUnavailable("try later"), wantErr: true, wantGets: 1},
		{name: "a kind discovery does not serve: not found, nothing read", owner: own(testGroup, "Gone", "x"), wantGets: 0},
		{name: "a cluster-scoped kind: not walked, nothing read", owner: own(testGroup, "ClusterThing", "x"), wantGets: 0},
		{name: "discovery fails: an error, nothing read", owner: podSet, resources: fakeResources{err: errors.New("discovery down")}, wantErr: true, wantGets: 0},
	} {
		t.Run(tc.name+", reused for OwnerErrorTTL", func(t *testing.T) {
			now := time.Unix(0, 0)
			srv := &metadataServer{err: tc.err}
			resources := tc.resources
			if resources == nil {
				resources = fakeResources{}
			}
			m := NewMetadataOwners(srv.client(), resources, nil, func() time.Time { return now })
			for range 3 {
				refs, found, err := m.OwnersOf(ctx, tc.owner, "")
				assert.False(t, found)
				assert.Empty(t, refs)
				if tc.wantErr {
					require.Error(t, err)
				} else {
					require.NoError(t, err)
				}
			}
			assert.Equal(t, tc.wantGets, srv.gets.Load())
			srv.set(podSetMeta("uid-1", pool), nil)
			now = now.Add(OwnerErrorTTL)
			_, _, _ = m.OwnersOf(ctx, tc.owner, "")
			if tc.resources == nil && tc.owner == podSet {
				assert.Equal(t, tc.wantGets+1, srv.gets.Load(), "read again after OwnerErrorTTL")
			}
		})
	}
}

// Workers syncing the pods of one pod set at the same moment read it once.
func TestMetadataOwnersConcurrentReadsAreOne(t *testing.T) {
	srv := &metadataServer{obj: podSetMeta("uid-1", ref(kafkaGroup, "KafkaNodePool", "brokers", false)), block: make(chan struct{})}
	m := NewMetadataOwners(srv.client(), fakeResources{}, nil, time.Now)
	podSet := own(coreGroup, "StrimziPodSet", "my-cluster-brokers")
	const workers = 32
	var wg sync.WaitGroup
	var found atomic.Int32
	for range workers {
		wg.Go(func() {
			_, ok, err := m.OwnersOf(context.Background(), podSet, "uid-1")
			if err == nil && ok {
				found.Add(1)
			}
		})
	}
	// Let the first read through only once it is in flight.
	require.Eventually(t, func() bool { return srv.gets.Load() == 1 }, waitFor, time.Millisecond)
	close(srv.block)
	wg.Wait()
	assert.EqualValues(t, workers, found.Load())
	assert.EqualValues(t, 1, srv.gets.Load(), "one GET for all workers")
}

// stallingServer is an API server that never answers a GET before the
// client gives it up (or the test ends). It counts GETs, and those in
// flight.
type stallingServer struct {
	url      string
	gets     atomic.Int32
	inflight atomic.Int32
}

func newStallingServer(t *testing.T) *stallingServer {
	t.Helper()
	s := &stallingServer{}
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.gets.Add(1)
		s.inflight.Add(1)
		defer s.inflight.Add(-1)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() {
		close(stop)
		srv.Close()
	})
	s.url = srv.URL
	return s
}

func (s *stallingServer) client(t *testing.T) metadata.Interface {
	t.Helper()
	c, err := metadata.NewForConfig(&rest.Config{Host: s.url, QPS: 1e6, Burst: 1e6})
	require.NoError(t, err)
	return c
}

// Issue #32, item 1: a read ends with the callers that wait for it. On
// 12d10ae it ran on context.WithoutCancel for up to 10 s whatever the
// caller's deadline, and its result (an error) was cached. Each caller here
// gives up once its GET has reached the server, not after a time: a GET
// slow to leave a busy machine would otherwise be given up before it was
// sent.
func TestMetadataOwnersEndWithTheirCallers(t *testing.T) {
	srv := newStallingServer(t)
	m := NewMetadataOwners(srv.client(t), fakeResources{}, nil, time.Now)
	podSet := own(coreGroup, "StrimziPodSet", "my-cluster-brokers")
	// read starts a caller and returns its cancel and its result.
	read := func() (context.CancelFunc, <-chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		done := make(chan error, 1)
		go func() {
			_, _, err := m.OwnersOf(ctx, podSet, "")
			done <- err
		}()
		return cancel, done
	}

	cancel, done := read()
	require.Eventually(t, func() bool { return srv.inflight.Load() == 1 }, waitFor, time.Millisecond, "the GET is sent")
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(waitFor):
		t.Fatal("the read outlived its caller")
	}
	require.Eventually(t, func() bool { return srv.inflight.Load() == 0 }, waitFor, time.Millisecond,
		"the GET is given up with its only caller")
	require.Eventually(t, func() bool { return m.budget.InFlight("default") == 0 }, waitFor, time.Millisecond,
		"its share of the budget is given back")

	cancel, done = read()
	require.Eventually(t, func() bool { return srv.gets.Load() == 2 }, waitFor, time.Millisecond,
		"a read given up is not remembered: the next caller reads")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

// A namespace whose share of reads is in use is refused at once, without a
// GET; another namespace reads.
func TestMetadataOwnersNamespaceShare(t *testing.T) {
	srv := newStallingServer(t)
	m := NewMetadataOwners(srv.client(t), fakeResources{}, NewReadBudget(DefaultProcessReads, 2), time.Now)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for i := range 2 {
		wg.Go(func() { _, _, _ = m.OwnersOf(ctx, own(coreGroup, "StrimziPodSet", fmt.Sprint("held-", i)), "") })
	}
	require.Eventually(t, func() bool { return srv.inflight.Load() == 2 }, waitFor, time.Millisecond)

	_, _, err := m.OwnersOf(context.Background(), own(coreGroup, "StrimziPodSet", "third"), "")
	require.ErrorIs(t, err, ErrNamespaceBusy)
	assert.EqualValues(t, 2, srv.gets.Load(), "refused without a GET")

	other := Owner{Namespace: "victim", Group: coreGroup, Kind: "StrimziPodSet", Name: "web"}
	wg.Go(func() { _, _, _ = m.OwnersOf(ctx, other, "") })
	require.Eventually(t, func() bool { return srv.inflight.Load() == 3 }, waitFor, time.Millisecond,
		"another namespace reads while the first one's share is in use")
}
