package shard

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

type observed struct {
	mu      sync.Mutex
	listed  []bool
	dropped int
}

func (o *observed) Listed(resource string, serverSide bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.listed = append(o.listed, serverSide)
}

func (o *observed) Dropped(resource string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.dropped += n
}

func (o *observed) get() ([]bool, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]bool(nil), o.listed...), o.dropped
}

// namespacesOf returns count namespaces of shard i of l.
func namespacesOf(l Layout, i, count int) []string {
	var out []string
	for j := 0; len(out) < count; j++ {
		if ns := fmt.Sprintf("ns-%d", j); l.Of(ns) == i {
			out = append(out, ns)
		}
	}
	return out
}

func pod(namespace, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

func podListWatch(s *Selection, kube *kubefake.Clientset) cache.ListerWatcher {
	return s.ListWatch("pods", kube,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return kube.CoreV1().Pods("").List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return kube.CoreV1().Pods("").Watch(ctx, o)
		})
}

func startInformer(t *testing.T, lw cache.ListerWatcher) cache.SharedIndexInformer {
	t.Helper()
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go inf.RunWithContext(ctx)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
	return inf
}

func cachedKeys(inf cache.SharedIndexInformer) []string {
	return inf.GetStore().ListKeys()
}

// A server that ignores the selector (no shardInfo, every object sent): only
// the objects of the selection's namespaces enter the cache, listed or
// watched, and the observer hears that the server did not filter.
func TestSelectionKeepsOnlyItsNamespacesWhenTheServerSendsEverything(t *testing.T) {
	l, err := NewLayout(4)
	require.NoError(t, err)
	mine := namespacesOf(l, 1, 2)
	mine = append(mine, namespacesOf(l, 2, 1)...)
	others := append(namespacesOf(l, 0, 2), namespacesOf(l, 3, 2)...)
	var objs []runtime.Object
	for _, ns := range append(append([]string(nil), mine...), others...) {
		objs = append(objs, pod(ns, "listed"))
	}
	kube := kubefake.NewClientset(objs...)
	obs := &observed{}
	sel, err := NewSelection(l, []Span{{1, 3}}, obs)
	require.NoError(t, err)
	inf := startInformer(t, podListWatch(sel, kube))

	want := []string{}
	for _, ns := range mine {
		want = append(want, ns+"/listed")
	}
	assert.ElementsMatch(t, want, cachedKeys(inf))
	listed, dropped := obs.get()
	assert.Equal(t, []bool{false}, listed)
	assert.Equal(t, len(others), dropped)

	// Watched: an object of another shard, then one of the selection; the
	// watch delivers them in order, so once the second is cached the first
	// was dropped.
	ctx := context.Background()
	_, err = kube.CoreV1().Pods(others[0]).Create(ctx, pod(others[0], "watched"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.CoreV1().Pods(mine[0]).Create(ctx, pod(mine[0], "watched"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, ok, _ := inf.GetStore().GetByKey(mine[0] + "/watched")
		return ok
	}, 30*time.Second, 10*time.Millisecond)
	_, ok, _ := inf.GetStore().GetByKey(others[0] + "/watched")
	assert.False(t, ok, "an object of another shard entered the cache")
	_, dropped = obs.get()
	assert.Equal(t, len(others)+1, dropped)
}

// A server that applies the selector echoes it in shardInfo: the list and
// the watch carry it, and the observer hears that the server filtered.
func TestSelectionSendsItsSelectorAndHearsTheServerApplyIt(t *testing.T) {
	l, err := NewLayout(4)
	require.NoError(t, err)
	mine := namespacesOf(l, 2, 1)[0]
	kube := kubefake.NewClientset(pod(mine, "a"))
	sel, err := NewSelection(l, []Span{{2, 3}}, nil)
	require.NoError(t, err)
	obs := &observed{}
	sel.observe = obs
	var mu sync.Mutex
	var sent []string
	kube.PrependReactor("list", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		opts := action.(clienttesting.ListActionImpl).GetListOptions()
		mu.Lock()
		sent = append(sent, opts.ShardSelector)
		mu.Unlock()
		return true, &corev1.PodList{
			ListMeta: metav1.ListMeta{ResourceVersion: "1", ShardInfo: &metav1.ShardInfo{Selector: opts.ShardSelector}},
			Items:    []corev1.Pod{*pod(mine, "a")},
		}, nil
	})
	kube.PrependWatchReactor("pods", func(action clienttesting.Action) (bool, watch.Interface, error) {
		mu.Lock()
		sent = append(sent, action.(clienttesting.WatchActionImpl).GetListOptions().ShardSelector)
		mu.Unlock()
		return false, nil, nil
	})
	inf := startInformer(t, podListWatch(sel, kube))
	assert.Equal(t, []string{mine + "/a"}, cachedKeys(inf))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(sent) >= 2
	}, 30*time.Second, 10*time.Millisecond)
	mu.Lock()
	for _, s := range sent {
		assert.Equal(t, "shardRange(object.metadata.namespace, '0x8000000000000000', '0xc000000000000000')", s)
	}
	mu.Unlock()
	listed, dropped := obs.get()
	assert.Equal(t, []bool{true}, listed)
	assert.Zero(t, dropped)
}

// A shardInfo echoing another selector is not taken for this one's: the
// items are filtered all the same.
func TestSelectionFiltersWhenTheEchoIsAnotherSelector(t *testing.T) {
	l, err := NewLayout(2)
	require.NoError(t, err)
	in, out := namespacesOf(l, 0, 1)[0], namespacesOf(l, 1, 1)[0]
	sel, err := NewSelection(l, []Span{{0, 1}}, nil)
	require.NoError(t, err)
	obs := &observed{}
	sel.observe = obs
	list := &corev1.PodList{
		ListMeta: metav1.ListMeta{ShardInfo: &metav1.ShardInfo{Selector: "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"}},
		Items:    []corev1.Pod{*pod(in, "a"), *pod(out, "b")},
	}
	got, err := sel.filterList("pods", list)
	require.NoError(t, err)
	assert.Len(t, got.(*corev1.PodList).Items, 1)
	assert.Equal(t, in, got.(*corev1.PodList).Items[0].Namespace)
	listed, dropped := obs.get()
	assert.Equal(t, []bool{false}, listed)
	assert.Equal(t, 1, dropped)
}

func TestNewSelectionRefusesBadSpans(t *testing.T) {
	l, err := NewLayout(4)
	require.NoError(t, err)
	for _, spans := range [][]Span{nil, {{0, 0}}, {{3, 5}}, {{-1, 1}}} {
		_, err := NewSelection(l, spans, nil)
		assert.Error(t, err, spans)
	}
	s, err := NewSelection(l, []Span{{0, 1}, {3, 4}}, nil)
	require.NoError(t, err)
	for _, ns := range namespacesOf(l, 3, 3) {
		assert.True(t, s.Has(ns))
	}
	for _, ns := range namespacesOf(l, 2, 3) {
		assert.False(t, s.Has(ns))
	}
}
