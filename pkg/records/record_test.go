package records

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

var (
	web = Owner{Namespace: "default", Name: "web", UID: "uid-web"}
	db  = Owner{Namespace: "default", Name: "db", UID: "uid-db"}
)

func res(cpu, mem, limCPU, limMem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: testpod.List(cpu, mem), Limits: testpod.List(limCPU, limMem)}
}

func TestCompare(t *testing.T) {
	attempted := resources.Resources{"c": res("2", "2Gi", "2", "2Gi"), "sidecar": res("100m", "", "", "")}
	tests := []struct {
		name   string
		kind   Kind
		target resources.Resources
		want   Verdict
	}{
		{"same values are skipped", KindNodeCapacity, resources.Resources{"c": res("2", "2Gi", "2", "2Gi"), "sidecar": res("100m", "", "", "")}, Same},
		{"same values written differently are the same", KindNodeCapacity, resources.Resources{"c": res("2000m", "2048Mi", "2", "2Gi"), "sidecar": res("0.1", "", "", "")}, Same},
		{"one request lower is retried", KindNodeCapacity, resources.Resources{"c": res("1500m", "2Gi", "2", "2Gi"), "sidecar": res("100m", "", "", "")}, Lower},
		{"one limit lower is retried", KindInfeasible, resources.Resources{"c": res("2", "2Gi", "2", "1Gi"), "sidecar": res("100m", "", "", "")}, Lower},
		{"lower in one container, higher in another is retried", KindNodeCapacity, resources.Resources{"c": res("3", "3Gi", "3", "3Gi"), "sidecar": res("50m", "", "", "")}, Lower},
		{"all greater or equal is skipped", KindNodeCapacity, resources.Resources{"c": res("3", "2Gi", "3", "2Gi"), "sidecar": res("100m", "", "", "")}, NotLower},
		{"all greater is skipped", KindInfeasible, resources.Resources{"c": res("3", "3Gi", "3", "3Gi"), "sidecar": res("200m", "", "", "")}, NotLower},
		{"a value no longer asked for counts as lower", KindNodeCapacity, resources.Resources{"c": res("2", "2Gi", "2", "2Gi")}, Lower},
		{"a new value asked for counts as greater", KindNodeCapacity, resources.Resources{"c": res("2", "2Gi", "2", "2Gi"), "sidecar": res("100m", "10Mi", "", "")}, NotLower},
		{"invalid: any different target is retried", KindInvalid, resources.Resources{"c": res("3", "3Gi", "3", "3Gi"), "sidecar": res("100m", "", "", "")}, Lower},
		{"invalid: same target is skipped", KindInvalid, resources.Resources{"c": res("2", "2Gi", "2", "2Gi"), "sidecar": res("100m", "", "", "")}, Same},
		{"job rejected: a higher target is retried", KindJobRejected, resources.Resources{"c": res("3", "3Gi", "3", "3Gi"), "sidecar": res("100m", "", "", "")}, Lower},
		{"job rejected: same target is skipped", KindJobRejected, resources.Resources{"c": res("2", "2Gi", "2", "2Gi"), "sidecar": res("100m", "", "", "")}, Same},
		{"job unsupported: a higher target is retried", KindJobUnsupported, resources.Resources{"c": res("3", "3Gi", "3", "3Gi"), "sidecar": res("100m", "", "", "")}, Lower},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Record{Kind: tc.kind, Attempted: attempted}
			assert.Equal(t, tc.want, r.Compare(tc.target))
		})
	}
}

func TestMemoryStore(t *testing.T) {
	s := NewInMemoryStore()
	_, ok := s.Get("a")
	assert.False(t, ok)

	s.Put(web, "a", &Record{Kind: KindInfeasible})
	s.Put(web, "b", &Record{Kind: KindNodeCapacity})
	s.Put(db, "c", &Record{Kind: KindInvalid})
	r, ok := s.Get("b")
	require.True(t, ok)
	assert.Equal(t, KindNodeCapacity, r.Kind)
	assert.Equal(t, 3, s.Len())

	assert.True(t, s.Delete("a"))
	assert.False(t, s.Delete("a"))

	forgotten := s.Retain(func(uid types.UID) bool { return uid == "b" })
	assert.Equal(t, []types.UID{"c"}, forgotten)
	assert.Equal(t, 1, s.Len())

	s.Put(db, "d", &Record{Kind: KindInvalid})
	assert.Equal(t, 1, s.ForgetOwner(web), "only the records of the VPA that is gone")
	_, ok = s.Get("d")
	assert.True(t, ok)
	assert.NoError(t, s.Load(context.Background()), "nothing durable to load")
}

// GetFor runs in every decision, for every pod: a lookup, held or not,
// allocates nothing.
func TestMemoryStoreGetForAllocatesNothing(t *testing.T) {
	s := NewInMemoryStore()
	s.Put(web, "a", &Record{Kind: KindInfeasible})
	held := 0
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := s.GetFor(web, "a"); ok {
			held++
		}
		if _, ok := s.GetFor(web, "b"); ok {
			held++
		}
	})
	assert.Zero(t, allocs)
	assert.Equal(t, 101, held, "a is held on every run and the warm-up, b never")
}

func TestMemoryStoreConcurrentUse(t *testing.T) {
	s := NewInMemoryStore()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				uid := types.UID(fmt.Sprintf("%d-%d", i, j))
				s.Put(web, uid, &Record{})
				s.Get(uid)
				if j%2 == 0 {
					s.Delete(uid)
				}
			}
			s.Retain(func(types.UID) bool { return true })
		}()
	}
	wg.Wait()
	assert.Equal(t, 8*100, s.Len())
}
