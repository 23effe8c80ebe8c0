package records

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// loadedCM returns a loaded safety store over the fixture's clientset whose
// writer has not started: what it puts is on its way, and lands when run is
// called (a deposed leader's last write).
func (f *cmFixture) loadedCM(now time.Time) (s *ConfigMapStore, run func()) {
	f.t.Helper()
	s, err := NewConfigMapStore(f.kube.CoreV1(), f.client.AutoscalingV1(), f.lister, ConfigMapStoreConfig{
		Namespace: recordsNamespace, Store: StoreSafety, NoAnnotation: true, Now: func() time.Time { return now },
	})
	require.NoError(f.t, err)
	require.NoError(f.t, s.Load(f.ctx))
	return s, func() {
		ctx, cancel := context.WithCancel(f.ctx)
		done := make(chan struct{})
		go func() { defer close(done); s.Run(ctx) }()
		f.t.Cleanup(func() { cancel(); <-done })
	}
}

// mergedLog gathers what a store's OnMerged function is told.
type mergedLog struct {
	mu    sync.Mutex
	taken map[types.UID]*Record
}

func (l *mergedLog) record(_ Owner, taken map[types.UID]*Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.taken == nil {
		l.taken = map[types.UID]*Record{}
	}
	for uid, r := range taken {
		l.taken[uid] = r
	}
}

func (l *mergedLog) has(uid types.UID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.taken[uid]
	return ok
}

func holdRecord(mem string, at time.Time) *Record {
	return &Record{Kind: KindHarmHold, Attempted: resources.Resources{"app": res("", mem, "", "")},
		From: resources.Resources{"app": res("", "2Gi", "", "")}, Message: "pod-1: OOMKilled", RecordedAt: at,
		Until: at.Add(24 * time.Hour), Holds: 1}
}

// Two leaders write one VPA's safety records at once: the deposed one's
// last write (a canary it sent just before it lost the lease, made before
// the new leader loaded) lands after the new leader loaded. Each record
// carries the time it was made, and the merge keeps both leaders' records:
// the canary is not dropped, and the new leader's gate is told of it.
func TestConfigMapStoreMergeKeepsBothLeadersSafetyRecords(t *testing.T) {
	f := newCMFixture(t, nil, vpa("web"))
	deposed, runDeposed := f.loadedCM(t0)
	// Sent, its watch not begun: the record carries the time it was made.
	canary := canaryRecord(t0.Add(30 * time.Second))
	deposed.Put(webVPA, "pod-1", canary)

	leader, runLeader := f.loadedCM(t0.Add(time.Minute))
	var merged mergedLog
	leader.OnMerged(merged.record)
	runLeader()
	leader.Put(webVPA, "pod-2", canaryRecord(t0.Add(2*time.Minute)))
	require.Eventually(t, func() bool { return len(f.cmRecordsOf(StoreSafety, webVPA.UID)) == 1 }, wait, tick)

	// The deposed leader's write lands now: refused, it merges and writes
	// both canaries.
	runDeposed()
	require.Eventually(t, func() bool { return len(f.cmRecordsOf(StoreSafety, webVPA.UID)) == 2 }, wait, tick)

	// The new leader's next write is refused in turn: it merges too.
	leader.Put(webVPA, "pod-3", canaryRecord(t0.Add(3*time.Minute)))
	require.Eventually(t, func() bool { return len(f.cmRecordsOf(StoreSafety, webVPA.UID)) == 3 }, wait, tick,
		"the ConfigMap holds both leaders' canaries")
	got, held := leader.GetFor(webVPA, "pod-1")
	require.True(t, held, "the new leader holds the deposed leader's canary")
	assert.True(t, got.RecordedAt.Equal(canary.RecordedAt.Truncate(time.Second)))
	assert.True(t, merged.has("pod-1"), "and tells its gate")
}

// Of one pod's (or VPA's) records, the newest wins the merge, whichever
// leader holds it: a hold the deposed leader raised after the new leader
// loaded is not lost to the older one the new leader loaded.
func TestConfigMapStoreMergeKeepsTheNewestRecordOfAPod(t *testing.T) {
	f := newCMFixture(t, nil, vpa("web"))
	first, runFirst := f.loadedCM(t0)
	first.Put(webVPA, webVPA.UID, holdRecord("1Gi", t0))
	runFirst()
	require.Eventually(t, func() bool { return len(f.cmRecordsOf(StoreSafety, webVPA.UID)) == 1 }, wait, tick)

	// The deposed leader raises its hold after harm at higher values; the
	// write is on its way while the new leader loads the older hold.
	deposed, runDeposed := f.loadedCM(t0.Add(time.Minute))
	leader, runLeader := f.loadedCM(t0.Add(time.Minute))
	raised := holdRecord("1536Mi", t0.Add(90*time.Second))
	deposed.Put(webVPA, webVPA.UID, raised)
	runDeposed()
	require.Eventually(t, func() bool {
		r, ok := f.cmRecordsOf(StoreSafety, webVPA.UID)[webVPA.UID]
		return ok && r.RecordedAt.Equal(raised.RecordedAt)
	}, wait, tick)

	var merged mergedLog
	leader.OnMerged(merged.record)
	runLeader()
	leader.Put(webVPA, "pod-2", canaryRecord(t0.Add(2*time.Minute)))
	require.Eventually(t, func() bool { return merged.has(webVPA.UID) }, wait, tick, "the new leader takes the newer hold")
	got, _ := leader.GetFor(webVPA, webVPA.UID)
	require.NotNil(t, got)
	assert.True(t, resources.Equal(raised.Attempted, got.Attempted), "held: %s", got.Attempted)
	require.Eventually(t, func() bool {
		cm := f.cmRecordsOf(StoreSafety, webVPA.UID)
		h, ok := cm[webVPA.UID]
		_, canary := cm["pod-2"]
		return ok && canary && resources.Equal(raised.Attempted, h.Attempted)
	}, wait, tick, "and writes it with its own canary")
}

// A record the new leader forgot on purpose (a canary whose pod went)
// stays forgotten: the merge does not bring back what the other writer
// still holds of what this store last read.
func TestConfigMapStoreMergeDoesNotBringBackWhatThisStoreForgot(t *testing.T) {
	f := newCMFixture(t, nil, vpa("web"))
	first, runFirst := f.loadedCM(t0)
	first.Put(webVPA, "pod-1", canaryRecord(t0))
	runFirst()
	require.Eventually(t, func() bool { return len(f.cmRecordsOf(StoreSafety, webVPA.UID)) == 1 }, wait, tick)

	deposed, runDeposed := f.loadedCM(t0.Add(time.Minute))
	leader, runLeader := f.loadedCM(t0.Add(time.Minute))
	deposed.Put(webVPA, "pod-2", canaryRecord(t0.Add(90*time.Second)))
	runDeposed()
	require.Eventually(t, func() bool { return len(f.cmRecordsOf(StoreSafety, webVPA.UID)) == 2 }, wait, tick)

	require.True(t, leader.Delete("pod-1"))
	runLeader()
	require.Eventually(t, func() bool {
		cm := f.cmRecordsOf(StoreSafety, webVPA.UID)
		_, forgotten := cm["pod-1"]
		_, theirs := cm["pod-2"]
		return !forgotten && theirs
	}, wait, tick, "pod-1 stays forgotten, the deposed leader's pod-2 is kept")
	_, held := leader.GetFor(webVPA, "pod-1")
	assert.False(t, held)
}

// Two leaders write one VPA's ConfigMap: a deposed one whose last write is
// still on its way, and the new one, which loaded before it landed.
// Neither overwrites the records of the other (issue #32, item 6: the
// updates were unconditional, the last one won and the other's newest
// records were lost). A write carries the resourceVersion it was based on;
// refused (409), the store reads the ConfigMap again, takes the records it
// does not hold that were made after it loaded, and writes again.
func TestConfigMapStoreLeadersWritingAtOnceLoseNoRecord(t *testing.T) {
	at := func(d time.Duration) func() time.Time { return func() time.Time { return t0.Add(d) } }
	for _, tc := range []struct {
		name string
		// oldLast: the deposed leader's last write lands after the new
		// leader's first one; otherwise between the new leader's Load and
		// its first write.
		oldLast bool
	}{
		{"the deposed leader's last write lands after the new leader's", true},
		{"the deposed leader's last write lands before the new leader's", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newCMFixture(t, nil, vpa("web"))
			deposed, _ := f.startCM(ConfigMapStoreConfig{Now: at(0)})
			deposed.Put(webVPA, "pod-1", rec(KindNodeCapacity, "8", "no room", t0))
			require.Eventually(t, func() bool { return len(f.cmRecords(webVPA.UID)) == 1 }, wait, tick)

			leader, _ := f.startCM(ConfigMapStoreConfig{Now: at(time.Minute)})
			require.Equal(t, 1, leader.Len())
			if tc.oldLast {
				leader.Put(webVPA, "pod-3", rec(KindNodeCapacity, "8", "no room", t0.Add(2*time.Minute)))
				require.Eventually(t, func() bool { return len(f.cmRecords(webVPA.UID)) == 2 }, wait, tick)
				deposed.Put(webVPA, "pod-2", rec(KindNodeCapacity, "8", "no room", t0.Add(90*time.Second)))
			} else {
				deposed.Put(webVPA, "pod-2", rec(KindNodeCapacity, "8", "no room", t0.Add(90*time.Second)))
				require.Eventually(t, func() bool { return len(f.cmRecords(webVPA.UID)) == 2 }, wait, tick)
				leader.Put(webVPA, "pod-3", rec(KindNodeCapacity, "8", "no room", t0.Add(2*time.Minute)))
			}
			require.Eventually(t, func() bool {
				got := f.cmRecords(webVPA.UID)
				return len(got) == 3
			}, wait, tick, "the ConfigMap holds the records of both leaders")
			waitWritten(t, &deposed.durable, webVPA)
			waitWritten(t, &leader.durable, webVPA)
			assert.Len(t, f.cmRecords(webVPA.UID), 3, "and goes on holding them")

			next, _ := f.startCM(ConfigMapStoreConfig{Now: at(time.Hour)})
			for _, uid := range []types.UID{"pod-1", "pod-2", "pod-3"} {
				_, held := next.GetFor(webVPA, uid)
				assert.True(t, held, "%s after the next restart", uid)
			}
		})
	}
}
