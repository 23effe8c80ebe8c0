package window

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
	"github.com/vpa-inplace/vpa-inplace/pkg/window"
)

func namespaces(t testing.TB, nss ...*corev1.Namespace) corelisters.NamespaceLister {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, ns := range nss {
		require.NoError(t, idx.Add(ns))
	}
	return corelisters.NewNamespaceLister(idx)
}

func namespace(annotations map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Annotations: annotations}}
}

func TestGateFor(t *testing.T) {
	// Thursday 2026-11-26 14:00 UTC.
	now := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	nightly := "Mon-Fri 01:00-05:00 UTC"
	tests := []struct {
		name     string
		vpa, ns  map[string]string
		frozen   bool
		invalid  bool
		until    time.Time // FrozenUntil
		decrease time.Time // zero: not held
		all      time.Time // zero: not held
		why      string
	}{
		{name: "no annotation: nothing held"},
		{name: "a window on the VPA, closed: decreases wait until it opens",
			vpa:      map[string]string{window.WindowAnnotation: nightly},
			decrease: time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)},
		{name: "a window on the VPA, open: nothing held",
			vpa: map[string]string{window.WindowAnnotation: "* 13:00-15:00 UTC"}},
		{name: "scope all: every resize waits",
			vpa:      map[string]string{window.WindowAnnotation: nightly, window.ScopeAnnotation: "all"},
			decrease: time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC), all: time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)},
		{name: "a window on the namespace only",
			ns:       map[string]string{window.WindowAnnotation: nightly},
			decrease: time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC), why: "on namespace default"},
		{name: "the VPA's and the namespace's windows: both must be open",
			vpa:      map[string]string{window.WindowAnnotation: "* 04:00-06:00 UTC"},
			ns:       map[string]string{window.WindowAnnotation: nightly},
			decrease: time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)},
		{name: "the VPA cannot widen its namespace's window",
			vpa:      map[string]string{window.WindowAnnotation: "* 00:00-24:00 UTC"},
			ns:       map[string]string{window.WindowAnnotation: nightly},
			decrease: time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)},
		{name: "scope all on the namespace holds increases whatever the VPA says",
			vpa:      map[string]string{window.WindowAnnotation: "* 00:00-24:00 UTC"},
			ns:       map[string]string{window.WindowAnnotation: nightly, window.ScopeAnnotation: "all"},
			decrease: time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC), all: time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)},
		{name: "windows that never meet: held, no opening",
			vpa:      map[string]string{window.WindowAnnotation: "Sat 00:00-24:00 UTC"},
			ns:       map[string]string{window.WindowAnnotation: nightly},
			decrease: time.Unix(0, 0)},
		{name: "a freeze on the VPA",
			vpa:    map[string]string{window.FreezeAnnotation: "2026-12-01T00:00:00Z"},
			frozen: true, until: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), why: "frozen until 2026-12-01T00:00:00Z by vpa-inplace.dev/freeze-until on the VPA"},
		{name: "a freeze on the namespace and a longer one on the VPA: the longer",
			vpa:    map[string]string{window.FreezeAnnotation: "2026-12-03T00:00:00Z"},
			ns:     map[string]string{window.FreezeAnnotation: "2026-12-01T00:00:00Z"},
			frozen: true, until: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)},
		{name: "a freeze that is over",
			vpa: map[string]string{window.FreezeAnnotation: "2026-11-26T13:59:59Z"}},
		{name: "a freeze beyond the bound: invalid, frozen until corrected",
			vpa:    map[string]string{window.FreezeAnnotation: "2027-06-01T00:00:00Z"},
			frozen: true, invalid: true, why: "more than 720h0m0s ahead"},
		{name: "an invalid window on the namespace: frozen until corrected",
			ns:     map[string]string{window.WindowAnnotation: "weekdays at night"},
			frozen: true, invalid: true, why: "(on namespace default)"},
		{name: "an invalid scope: frozen until corrected",
			vpa:    map[string]string{window.WindowAnnotation: nightly, window.ScopeAnnotation: "increases"},
			frozen: true, invalid: true, why: "resize-window-scope"},
		{name: "a scope without a window: nothing held",
			vpa: map[string]string{window.ScopeAnnotation: "all"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := New(Config{}, namespaces(t, namespace(tt.ns)))
			vpa := testvpa.New("v").Obj()
			vpa.Annotations = tt.vpa
			v := g.For(vpa, now)
			assert.Equal(t, tt.frozen, v.Frozen, v.Why)
			assert.Equal(t, tt.invalid, v.Invalid, v.Why)
			assert.Equal(t, tt.until, v.FrozenUntil)
			assert.Equal(t, !tt.decrease.IsZero(), v.Windows.Decreases.Held)
			assert.Equal(t, !tt.all.IsZero(), v.Windows.All.Held)
			if !tt.decrease.IsZero() && tt.decrease.Unix() != 0 {
				assert.Equal(t, tt.decrease, v.Windows.Decreases.Until.UTC())
			}
			if tt.decrease.Unix() == 0 {
				assert.True(t, v.Windows.Decreases.Until.IsZero())
			}
			if !tt.all.IsZero() {
				assert.Equal(t, tt.all, v.Windows.All.Until.UTC())
			}
			if tt.why != "" {
				assert.Contains(t, v.Why+v.Windows.Decreases.Why, tt.why)
			}
		})
	}
}

func TestGateWithoutNamespaces(t *testing.T) {
	g := New(Config{}, nil)
	vpa := testvpa.New("v").Obj()
	vpa.Annotations = map[string]string{window.FreezeAnnotation: "2026-12-01T00:00:00Z"}
	v := g.For(vpa, time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	assert.True(t, v.Frozen)
}

func TestGateMaxFreeze(t *testing.T) {
	g := New(Config{MaxFreeze: time.Hour}, nil)
	vpa := testvpa.New("v").Obj()
	vpa.Annotations = map[string]string{window.FreezeAnnotation: "2026-11-26T02:00:00Z"}
	v := g.For(vpa, time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC))
	assert.True(t, v.Invalid, "two hours ahead, with a bound of one")
}

func TestGateFirstReport(t *testing.T) {
	g := New(Config{}, nil)
	assert.True(t, g.FirstReport("u", "bad"))
	assert.False(t, g.FirstReport("u", "bad"))
	assert.True(t, g.FirstReport("u", "worse"))
	g.FirstReport("u", "")
	assert.True(t, g.FirstReport("u", "worse"), "invalid again after being valid: reported again")
	g.Forget("u")
	assert.True(t, g.FirstReport("u", "worse"))
}

func TestGateParsedValuesAreBounded(t *testing.T) {
	g := New(Config{}, nil)
	for i := range maxParsed + 10 {
		_, _ = g.parse(fmt.Sprintf("* 01:%02d-02:00 UTC; Mon 0%d:00-09:00 UTC", i%60, i%8))
		_, _ = g.parse(fmt.Sprintf("bad %d", i))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	assert.LessOrEqual(t, len(g.parsed), maxParsed)
}

func TestChanged(t *testing.T) {
	assert.False(t, Changed(nil, map[string]string{"other": "x"}))
	assert.True(t, Changed(nil, map[string]string{window.FreezeAnnotation: ""}))
	assert.True(t, Changed(map[string]string{window.WindowAnnotation: "a"}, map[string]string{window.WindowAnnotation: "b"}))
	assert.True(t, Changed(map[string]string{window.ScopeAnnotation: "all"}, nil))
	assert.False(t, Changed(map[string]string{window.ScopeAnnotation: "all"}, map[string]string{window.ScopeAnnotation: "all"}))
}

// Many workers report the same invalid annotation of one VPA at once: one
// event, whatever the count (the check and the mark are one step).
func TestGateFirstReportOnceAcrossWorkers(t *testing.T) {
	for round := range 50 {
		g := New(Config{}, nil)
		var wg sync.WaitGroup
		var firsts atomic.Int32
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if g.FirstReport("uid", "bad value") {
					firsts.Add(1)
				}
			}()
		}
		wg.Wait()
		require.Equal(t, int32(1), firsts.Load(), "round %d", round)
	}
}
