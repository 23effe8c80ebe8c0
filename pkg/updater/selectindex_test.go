package updater

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

func podIndexer(t testing.TB, pods ...*corev1.Pod) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
		labelIndex:           indexByLabel,
	})
	for _, p := range pods {
		require.NoError(t, idx.Add(p))
	}
	return idx
}

func names(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	slices.Sort(out)
	return out
}

func TestSelectPodsMatchesEveryPodTheSelectorDoes(t *testing.T) {
	pods := []*corev1.Pod{
		testpod.New("web-1").Labels(map[string]string{"app": "web", "tier": "front"}).Obj(),
		testpod.New("web-2").Labels(map[string]string{"app": "web", "tier": "back"}).Obj(),
		testpod.New("db-1").Labels(map[string]string{"app": "db", "tier": "back"}).Obj(),
		testpod.New("bare").Labels(nil).Obj(),
		testpod.New("web-x").Namespace("other").Labels(map[string]string{"app": "web", "tier": "front"}).Obj(),
	}
	idx := podIndexer(t, pods...)
	selectors := []string{
		"app=web",
		"app==web,tier=front",
		"app in (web,db)",
		"app in (web,db),tier!=front",
		"tier notin (front)",
		"app",
		"!app",
		"app=web,tier",
		"app=nothing",
		"",
	}
	for _, s := range selectors {
		t.Run(s, func(t *testing.T) {
			sel, err := labels.Parse(s)
			require.NoError(t, err)
			for _, ns := range []string{"default", "other", "empty"} {
				var want []*corev1.Pod
				for _, p := range pods {
					if p.Namespace == ns && sel.Matches(labels.Set(p.Labels)) {
						want = append(want, p)
					}
				}
				got, err := selectPods(idx, ns, sel)
				require.NoError(t, err)
				assert.Equal(t, names(want), names(got), "namespace %s", ns)
			}
		})
	}
	t.Run("Nothing selects nothing", func(t *testing.T) {
		got, err := selectPods(idx, "default", labels.Nothing())
		require.NoError(t, err)
		assert.Empty(t, got)
	})
	t.Run("a pod whose labels change moves in the index", func(t *testing.T) {
		moved := pods[0].DeepCopy()
		moved.Labels = map[string]string{"app": "db"}
		require.NoError(t, idx.Update(moved))
		got, err := selectPods(idx, "default", labels.SelectorFromSet(labels.Set{"app": "db"}))
		require.NoError(t, err)
		assert.Equal(t, []string{"default/db-1", "default/web-1"}, names(got))
		got, err = selectPods(idx, "default", labels.SelectorFromSet(labels.Set{"app": "web"}))
		require.NoError(t, err)
		assert.Equal(t, []string{"default/web-2"}, names(got))
	})
}

func TestSelectPodsNeedsItsIndexes(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_, err := selectPods(idx, "default", labels.SelectorFromSet(labels.Set{"app": "web"}))
	assert.ErrorContains(t, err, "looking up pods by label")
	_, err = selectPods(idx, "default", labels.Everything())
	assert.ErrorContains(t, err, "listing the pods of namespace")
}

// BenchmarkSelectPods: the pods of one Deployment (10 pods, selector
// app=<name>) in a namespace of n pods, through the label index and by
// matching every pod of the namespace (what a lister's List does).
func BenchmarkSelectPods(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		pods := make([]*corev1.Pod, n)
		for i := range pods {
			pods[i] = testpod.New(fmt.Sprintf("p-%d", i)).Labels(map[string]string{
				"app": fmt.Sprintf("app-%d", i/10), "pod-template-hash": fmt.Sprintf("h%d", i/10), "bench": "true",
			}).Obj()
		}
		idx := podIndexer(b, pods...)
		sel := labels.SelectorFromSet(labels.Set{"app": fmt.Sprintf("app-%d", n/20)})
		b.Run(fmt.Sprintf("pods=%d/index", n), func(b *testing.B) {
			for b.Loop() {
				if got, err := selectPods(idx, "default", sel); err != nil || len(got) != 10 {
					b.Fatalf("selectPods = %d pods, %v", len(got), err)
				}
			}
		})
		b.Run(fmt.Sprintf("pods=%d/namespace-scan", n), func(b *testing.B) {
			for b.Loop() {
				var got int
				err := cache.ListAllByNamespace(idx, "default", sel, func(any) { got++ })
				if err != nil || got != 10 {
					b.Fatalf("ListAllByNamespace = %d pods, %v", got, err)
				}
			}
		})
	}
}
