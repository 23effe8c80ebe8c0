package records

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Two releases of the chart in one namespace: each names its records after
// itself and owns them by its own Lease.
var (
	teamA = install{prefix: "team-a-vpa-inplace-records-", lease: lease("team-a-vpa-inplace-updater", "lease-a")}
	teamB = install{prefix: "team-b-vpa-inplace-records-", lease: lease("team-b-vpa-inplace-updater", "lease-b")}
)

type install struct {
	prefix string
	lease  *metav1.OwnerReference
}

func lease(name string, uid types.UID) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: name, UID: uid}
}

func (i install) config() ConfigMapStoreConfig {
	return ConfigMapStoreConfig{Prefix: i.prefix, Owner: i.lease}
}

// get returns the ConfigMap of that name, nil when there is none.
func (f *cmFixture) get(name string) *corev1.ConfigMap {
	f.t.Helper()
	list, err := f.kube.CoreV1().ConfigMaps(recordsNamespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(f.t, err)
	for i := range list.Items {
		if list.Items[i].Name == name {
			return &list.Items[i]
		}
	}
	return nil
}

// recordsIn decodes the ConfigMap of that name; nil when there is none.
func (f *cmFixture) recordsIn(name string) map[types.UID]*Record {
	f.t.Helper()
	cm := f.get(name)
	if cm == nil {
		return nil
	}
	d, err := DecodeCompact(cm.Data[ConfigMapDataKey], DecodeOptions{})
	require.NoError(f.t, err)
	return d.Records
}

func owned(cm *corev1.ConfigMap, by *metav1.OwnerReference) *corev1.ConfigMap {
	if by != nil {
		cm.OwnerReferences = []metav1.OwnerReference{*by}
	}
	return cm
}

func named(cm *corev1.ConfigMap, name string) *corev1.ConfigMap {
	cm.Name = name
	return cm
}

// Two updaters in one namespace, both serving the VPA web (issue: the
// records ConfigMaps were named vpa-inplace-records-<store>-<VPA UID>
// whatever the release, so the two read and overwrote each other's records,
// and --records-owner handed them from one Lease to the other). Named by
// their prefix, each keeps its own, owned by its own Lease, through a
// restart of both.
func TestConfigMapStoresOfTwoInstallsInOneNamespaceKeepTheirRecordsApart(t *testing.T) {
	f := newCMFixture(t, nil, vpa("web"))
	a, stopA := f.startCM(teamA.config())
	b, stopB := f.startCM(teamB.config())
	a.Put(webVPA, "pod-a", rec(KindNodeCapacity, "8", "team a's", t0))
	b.Put(webVPA, "pod-b", rec(KindNodeCapacity, "4", "team b's", t0))
	nameA := ConfigMapNameWithPrefix(teamA.prefix, StoreInfeasible, webVPA.UID)
	nameB := ConfigMapNameWithPrefix(teamB.prefix, StoreInfeasible, webVPA.UID)
	require.Eventually(t, func() bool { return len(f.recordsIn(nameA)) == 1 && len(f.recordsIn(nameB)) == 1 }, wait, tick)
	stopA()
	stopB()

	// Both restart: each loads its own records, and only them.
	a, _ = f.startCM(teamA.config())
	b, _ = f.startCM(teamB.config())
	_, held := a.Get("pod-a")
	assert.True(t, held, "team a's record is back in team a's updater")
	_, held = a.Get("pod-b")
	assert.False(t, held, "team b's record is not team a's")
	_, held = b.Get("pod-b")
	assert.True(t, held, "team b's record is back in team b's updater")
	_, held = b.Get("pod-a")
	assert.False(t, held, "team a's record is not team b's")

	// A write of each after the restart leaves the other's ConfigMap as it
	// was, owned by the other's Lease.
	a.Put(webVPA, "pod-c", rec(KindNodeCapacity, "8", "team a's", t0))
	b.Put(webVPA, "pod-d", rec(KindNodeCapacity, "4", "team b's", t0))
	require.Eventually(t, func() bool { return len(f.recordsIn(nameA)) == 2 && len(f.recordsIn(nameB)) == 2 }, wait, tick)
	assert.ElementsMatch(t, []string{nameA, nameB}, f.configMaps())
	assert.Contains(t, f.recordsIn(nameA), types.UID("pod-a"))
	assert.Contains(t, f.recordsIn(nameA), types.UID("pod-c"))
	assert.Contains(t, f.recordsIn(nameB), types.UID("pod-b"))
	assert.Contains(t, f.recordsIn(nameB), types.UID("pod-d"))
	assert.Equal(t, []metav1.OwnerReference{*teamA.lease}, f.get(nameA).OwnerReferences)
	assert.Equal(t, []metav1.OwnerReference{*teamB.lease}, f.get(nameB).OwnerReferences)
}

// An install of the default prefix (release vpa-inplace, or an updater run
// without --records-prefix) serving every namespace leaves alone the
// records of another install in its namespace: it neither reads them nor
// deletes them as a gone VPA's (issue: a ConfigMap of the store's label
// whose name was not the VPA's was deleted at Load).
func TestConfigMapStoreOfTheDefaultPrefixLeavesAnotherInstallsRecordsAlone(t *testing.T) {
	gone := Owner{Namespace: "default", Name: "gone", UID: "uid-gone"}
	theirs := map[types.UID]*Record{"pod-b": rec(KindNodeCapacity, "4", "", t0)}
	f := newCMFixture(t, []runtime.Object{
		named(recordsConfigMap(StoreInfeasible, webVPA, theirs), ConfigMapNameWithPrefix(teamB.prefix, StoreInfeasible, webVPA.UID)),
		named(recordsConfigMap(StoreInfeasible, gone, theirs), ConfigMapNameWithPrefix(teamB.prefix, StoreInfeasible, gone.UID)),
	}, vpa("web"))
	s, _ := f.startCM(ConfigMapStoreConfig{})
	assert.Zero(t, s.Len(), "another install's records are not this one's")
	assert.ElementsMatch(t, []string{
		ConfigMapNameWithPrefix(teamB.prefix, StoreInfeasible, webVPA.UID),
		ConfigMapNameWithPrefix(teamB.prefix, StoreInfeasible, gone.UID),
	}, f.configMaps(), "and none of its ConfigMaps is deleted")
}

// Records of the default name, written before the install's prefix was
// set (an install upgraded to a chart that sets it), are moved on read, as
// the records annotations of the VPAs were: held at Load, written under
// the install's name, then deleted. Those of another install (owned by
// another Lease) are left alone; those of a VPA that is gone deleted.
func TestConfigMapStoreMovesTheRecordsOfTheEarlierName(t *testing.T) {
	db := Owner{Namespace: "default", Name: "db", UID: "uid-db"}
	gone := Owner{Namespace: "default", Name: "gone", UID: "uid-gone"}
	ours := map[types.UID]*Record{"pod-a": rec(KindNodeCapacity, "8", "no room", t0), "pod-b": rec(KindInfeasible, "4", "", t0)}
	theirs := map[types.UID]*Record{"pod-d": rec(KindNodeCapacity, "8", "", t0)}
	f := newCMFixture(t, []runtime.Object{
		owned(recordsConfigMap(StoreInfeasible, webVPA, ours), teamA.lease),
		owned(recordsConfigMap(StoreInfeasible, db, theirs), teamB.lease),
		owned(recordsConfigMap(StoreInfeasible, gone, theirs), teamA.lease),
		// The earlier name of another store: that store moves it.
		owned(recordsConfigMap(StoreMemory, webVPA, ours), teamA.lease),
	}, vpa("web"), vpa("db"))
	s, stop := f.startCM(teamA.config())
	assert.Equal(t, 2, s.Len(), "the records of the earlier name are held at once")
	_, held := s.Get("pod-d")
	assert.False(t, held, "another install's records are not read")

	moved := ConfigMapNameWithPrefix(teamA.prefix, StoreInfeasible, webVPA.UID)
	require.Eventually(t, func() bool { return f.get(ConfigMapName(StoreInfeasible, webVPA.UID)) == nil }, wait, tick,
		"the ConfigMap of the earlier name is deleted")
	assert.Len(t, f.recordsIn(moved), 2, "after its records are written under the install's name")
	assert.Equal(t, []metav1.OwnerReference{*teamA.lease}, f.get(moved).OwnerReferences, "owned by the install's Lease")
	assert.ElementsMatch(t, []string{
		moved,
		ConfigMapName(StoreInfeasible, db.UID), // another install's
		ConfigMapName(StoreMemory, webVPA.UID), // another store's
	}, f.configMaps(), "the earlier ConfigMap of a VPA that is gone is deleted")
	stop()

	again, _ := f.startCM(teamA.config())
	assert.Equal(t, 2, again.Len(), "read back from the install's own ConfigMap after a restart")
	memory, _ := f.startCM(ConfigMapStoreConfig{Store: StoreMemory, Prefix: teamA.prefix, Owner: teamA.lease})
	assert.Equal(t, 2, memory.Len(), "the memory store moves its own")
	require.Eventually(t, func() bool { return f.get(ConfigMapName(StoreMemory, webVPA.UID)) == nil }, wait, tick)
	assert.Len(t, f.recordsIn(ConfigMapNameWithPrefix(teamA.prefix, StoreMemory, webVPA.UID)), 2)
}

// Records of the earlier name a worker changes before they are moved are
// moved with the change, and those of a VPA deleted before they are moved
// go with it.
func TestConfigMapStoreMovesTheEarlierNameWithLaterChanges(t *testing.T) {
	ours := map[types.UID]*Record{"pod-a": rec(KindNodeCapacity, "8", "", t0)}
	t.Run("a record added", func(t *testing.T) {
		f := newCMFixture(t, []runtime.Object{recordsConfigMap(StoreInfeasible, webVPA, ours)}, vpa("web"))
		s, _ := f.startCM(teamA.config())
		s.Put(webVPA, "pod-b", rec(KindNodeCapacity, "8", "", t0))
		moved := ConfigMapNameWithPrefix(teamA.prefix, StoreInfeasible, webVPA.UID)
		require.Eventually(t, func() bool { return len(f.recordsIn(moved)) == 2 }, wait, tick)
		require.Eventually(t, func() bool { return len(f.configMaps()) == 1 }, wait, tick, "written before it has no owner: moved too")
	})
	t.Run("the VPA deleted", func(t *testing.T) {
		f := newCMFixture(t, []runtime.Object{recordsConfigMap(StoreInfeasible, webVPA, ours)}, vpa("web"))
		s, _ := f.startCM(teamA.config())
		f.deleteVPA("web")
		s.ForgetOwner(webVPA)
		require.Eventually(t, func() bool { return len(f.configMaps()) == 0 }, wait, tick)
	})
}

func TestValidatePrefix(t *testing.T) {
	for _, ok := range []string{DefaultConfigMapPrefix, "platform-vpa-inplace-records-", "a", "team.a-"} {
		assert.NoError(t, ValidatePrefix(ok), ok)
	}
	for _, bad := range []string{"", "Records-", "-records-", "records_", "records/", strings.Repeat("a", 220)} {
		assert.Error(t, ValidatePrefix(bad), bad)
	}
	_, err := NewConfigMapStore(nil, nil, nil, ConfigMapStoreConfig{Namespace: "ns", Store: StoreInfeasible, Prefix: "Bad_"})
	assert.ErrorContains(t, err, "prefix")
}
