package target

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

// Strimzi's shapes, in the tests of the walk and of the resolver.
const (
	kafkaGroup = "kafka.strimzi.io"
	coreGroup  = "core.strimzi.io"
)

// object is what fakeOwners knows of one object.
type object struct {
	uid  types.UID
	refs []metav1.OwnerReference
}

// fakeOwners serves the ownerReferences of the objects it holds, by
// Owner.Key; an object it does not hold is missing. It counts reads.
type fakeOwners struct {
	objects map[string]object
	errs    map[string]error
	reads   []string
}

func (f *fakeOwners) OwnersOf(_ context.Context, o Owner, uid types.UID) ([]metav1.OwnerReference, bool, error) {
	f.reads = append(f.reads, o.Name)
	if err := f.errs[o.Key()]; err != nil {
		return nil, false, err
	}
	obj, ok := f.objects[o.Key()]
	if !ok || (uid != "" && uid != obj.uid) {
		return nil, false, nil
	}
	return obj.refs, true, nil
}

func ref(group, kind, name string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: group + "/v1", Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(controller)}
}

func own(group, kind, name string) Owner {
	return Owner{Namespace: "default", Group: group, Kind: kind, Name: name}
}

func key(group, kind, name string) string { return own(group, kind, name).Key() }

func TestReachableOwners(t *testing.T) {
	pool := ref(kafkaGroup, "KafkaNodePool", "brokers", false)
	kafka := ref(kafkaGroup, "Kafka", "my-cluster", false)
	podSet := ref(coreGroup, "StrimziPodSet", "my-cluster-brokers", true)
	chain := func(n int) (map[string]object, []metav1.OwnerReference) {
		objs := map[string]object{}
		for i := 1; i < n; i++ {
			objs[key(testGroup, "Link", fmt.Sprintf("l%d", i))] = object{uid: types.UID(fmt.Sprintf("uid-l%d", i)),
				refs: []metav1.OwnerReference{ref(testGroup, "Link", fmt.Sprintf("l%d", i+1), false)}}
		}
		return objs, []metav1.OwnerReference{ref(testGroup, "Link", "l1", true)}
	}
	longChain, longChainPod := chain(MaxOwnerDepth + 3)
	manyRefs := make([]metav1.OwnerReference, 3*MaxOwnerObjects)
	var firstRefs, firstReads []string // the names of the first MaxOwnerObjects, MaxOwnerReads
	for i := range manyRefs {
		manyRefs[i] = ref(testGroup, "Link", fmt.Sprintf("m%d", i), false)
		if i < MaxOwnerObjects {
			firstRefs = append(firstRefs, manyRefs[i].Name)
		}
		if i < MaxOwnerReads {
			firstReads = append(firstReads, manyRefs[i].Name)
		}
	}

	tests := []struct {
		name        string
		podRefs     []metav1.OwnerReference
		objects     map[string]object
		errs        map[string]error
		want        []string // wanted targets (keys)
		wantReached []string // names, in order
		wantReads   []string // names, in order
		wantErr     string
	}{
		{
			name:    "pool, pod set, pod: the pool is reached through the pod set (controller: false)",
			podRefs: []metav1.OwnerReference{podSet},
			objects: map[string]object{
				key(coreGroup, "StrimziPodSet", "my-cluster-brokers"): {uid: "uid-my-cluster-brokers", refs: []metav1.OwnerReference{pool}},
			},
			want:        []string{key(kafkaGroup, "KafkaNodePool", "brokers")},
			wantReached: []string{"my-cluster-brokers", "brokers"},
			wantReads:   []string{"my-cluster-brokers"},
		},
		{
			name:    "Kafka without pools: the pod set's owner is the Kafka (controller: false)",
			podRefs: []metav1.OwnerReference{podSet},
			objects: map[string]object{
				key(coreGroup, "StrimziPodSet", "my-cluster-brokers"): {uid: "uid-my-cluster-brokers", refs: []metav1.OwnerReference{kafka}},
				key(kafkaGroup, "Kafka", "my-cluster"):                {uid: "uid-my-cluster"},
			},
			want:        []string{key(kafkaGroup, "KafkaNodePool", "elsewhere")},
			wantReached: []string{"my-cluster-brokers", "my-cluster"},
			wantReads:   []string{"my-cluster-brokers", "my-cluster"},
		},
		{
			name:    "a cycle ends the walk: each object is read once",
			podRefs: []metav1.OwnerReference{podSet},
			objects: map[string]object{
				key(coreGroup, "StrimziPodSet", "my-cluster-brokers"): {uid: "uid-my-cluster-brokers", refs: []metav1.OwnerReference{pool}},
				key(kafkaGroup, "KafkaNodePool", "brokers"):           {uid: "uid-brokers", refs: []metav1.OwnerReference{podSet}},
			},
			want:        []string{key(kafkaGroup, "KafkaNodePool", "never")},
			wantReached: []string{"my-cluster-brokers", "brokers"},
			wantReads:   []string{"my-cluster-brokers", "brokers"},
		},
		{
			name:        "a missing owner ends its branch, without error",
			podRefs:     []metav1.OwnerReference{podSet},
			want:        []string{key(kafkaGroup, "KafkaNodePool", "brokers")},
			wantReached: []string{"my-cluster-brokers"},
			wantReads:   []string{"my-cluster-brokers"},
		},
		{
			name:    "an owner recreated under the same name (another UID) is not the owner",
			podRefs: []metav1.OwnerReference{podSet},
			objects: map[string]object{
				key(coreGroup, "StrimziPodSet", "my-cluster-brokers"): {uid: "uid-new", refs: []metav1.OwnerReference{pool}},
			},
			want:        []string{key(kafkaGroup, "KafkaNodePool", "brokers")},
			wantReached: []string{"my-cluster-brokers"},
			wantReads:   []string{"my-cluster-brokers"},
		},
		{
			name:        "the depth is bounded",
			podRefs:     longChainPod,
			objects:     longChain,
			want:        []string{key(testGroup, "Link", fmt.Sprintf("l%d", MaxOwnerDepth+3))},
			wantReached: []string{"l1", "l2", "l3", "l4"},
			wantReads:   []string{"l1", "l2", "l3"},
		},
		{
			name:        "the objects reached, and those read, are bounded",
			podRefs:     manyRefs,
			want:        []string{key(testGroup, "Link", "unreached")},
			wantReached: firstRefs,
			wantReads:   firstReads,
		},
		{
			name: "a well-known controller in the middle is not walked through",
			podRefs: []metav1.OwnerReference{
				ref("apps", "ReplicaSet", "web-1", true),
				ref(coreGroup, "StrimziPodSet", "my-cluster-brokers", false),
			},
			objects: map[string]object{
				key(coreGroup, "StrimziPodSet", "my-cluster-brokers"): {uid: "uid-my-cluster-brokers", refs: []metav1.OwnerReference{ref("apps", "Deployment", "web", false)}},
			},
			want:        []string{key(kafkaGroup, "KafkaNodePool", "brokers")},
			wantReached: []string{"my-cluster-brokers"},
			wantReads:   []string{"my-cluster-brokers"},
		},
		{
			name:        "nor an object of the core API group",
			podRefs:     []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "node-1", Controller: ptr.To(true)}},
			want:        []string{key(kafkaGroup, "KafkaNodePool", "brokers")},
			wantReached: nil,
			wantReads:   nil,
		},
		{
			name:    "nothing is read once every target is reached",
			podRefs: []metav1.OwnerReference{podSet, pool},
			objects: map[string]object{
				key(coreGroup, "StrimziPodSet", "my-cluster-brokers"): {uid: "uid-my-cluster-brokers", refs: []metav1.OwnerReference{pool}},
			},
			want:        []string{key(kafkaGroup, "KafkaNodePool", "brokers")},
			wantReached: []string{"my-cluster-brokers", "brokers"},
			wantReads:   nil,
		},
		{
			name:    "a failed read is returned with what was reached; other branches go on",
			podRefs: []metav1.OwnerReference{podSet, ref(coreGroup, "StrimziPodSet", "other", false)},
			objects: map[string]object{
				key(coreGroup, "StrimziPodSet", "other"): {uid: "uid-other", refs: []metav1.OwnerReference{pool}},
			},
			errs:        map[string]error{key(coreGroup, "StrimziPodSet", "my-cluster-brokers"): errors.New("connection refused")},
			want:        []string{key(kafkaGroup, "KafkaNodePool", "never")},
			wantReached: []string{"my-cluster-brokers", "other", "brokers"},
			wantReads:   []string{"my-cluster-brokers", "other", "brokers"},
			wantErr:     "connection refused",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := testpod.New("broker-0").Obj()
			pod.OwnerReferences = tc.podRefs
			read := &fakeOwners{objects: tc.objects, errs: tc.errs}
			want := map[string]bool{}
			for _, k := range tc.want {
				want[k] = true
			}
			got, err := reachableOwners(context.Background(), read, pod, want)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			var names []string
			for _, o := range got {
				names = append(names, o.Name)
			}
			assert.Equal(t, tc.wantReached, names, "objects reached")
			assert.Equal(t, tc.wantReads, read.reads, "objects read")
		})
	}
}

// cancellingOwners is fakeOwners that ends the walk's context, or reports
// the namespace busy, at the read of the object named at.
type cancellingOwners struct {
	fakeOwners
	at     string
	cancel context.CancelFunc
	busy   bool
}

func (c *cancellingOwners) OwnersOf(ctx context.Context, o Owner, uid types.UID) ([]metav1.OwnerReference, bool, error) {
	if o.Name == c.at {
		c.reads = append(c.reads, o.Name)
		if c.busy {
			return nil, false, fmt.Errorf("reading: %w", ErrNamespaceBusy)
		}
		c.cancel()
		return nil, false, ctx.Err()
	}
	return c.fakeOwners.OwnersOf(ctx, o, uid)
}

// Issue #32, item 1: the walk stops at its caller's deadline, and when
// the namespace's share of reads is in use, instead of reading on.
func TestReachableOwnersStops(t *testing.T) {
	refs := []metav1.OwnerReference{
		ref(testGroup, "Link", "a", false), ref(testGroup, "Link", "b", false), ref(testGroup, "Link", "c", false),
	}
	want := map[string]bool{key(kafkaGroup, "KafkaNodePool", "never"): true}
	for _, tc := range []struct {
		name    string
		busy    bool
		wantErr error
	}{
		{"the caller's context ends", false, context.Canceled},
		{"the namespace's share is in use", true, ErrNamespaceBusy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			read := &cancellingOwners{at: "b", cancel: cancel, busy: tc.busy}
			pod := testpod.New("p").Obj()
			pod.OwnerReferences = refs
			_, err := reachableOwners(ctx, read, pod, want)
			require.ErrorIs(t, err, tc.wantErr)
			assert.Equal(t, []string{"a", "b"}, read.reads, "nothing is read after b")
		})
	}
}

// A pod's controller is read first, whatever its place among the
// ownerReferences: junk before it does not spend the walk's reads.
func TestReachableOwnersReadsTheControllerFirst(t *testing.T) {
	var refs []metav1.OwnerReference
	for i := range MaxOwnerReads {
		refs = append(refs, ref(testGroup, "Link", fmt.Sprintf("junk-%d", i), false))
	}
	refs = append(refs, ref(coreGroup, "StrimziPodSet", "my-cluster-brokers", true))
	read := &fakeOwners{objects: map[string]object{
		key(coreGroup, "StrimziPodSet", "my-cluster-brokers"): {uid: "uid-my-cluster-brokers",
			refs: []metav1.OwnerReference{ref(kafkaGroup, "KafkaNodePool", "brokers", false)}},
	}}
	pod := testpod.New("broker-0").Obj()
	pod.OwnerReferences = refs
	got, err := reachableOwners(context.Background(), read, pod, map[string]bool{key(kafkaGroup, "KafkaNodePool", "brokers"): true})
	require.NoError(t, err)
	assert.Equal(t, []string{"my-cluster-brokers"}, read.reads)
	assert.Contains(t, got, own(kafkaGroup, "KafkaNodePool", "brokers"))
}
