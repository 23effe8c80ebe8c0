package target

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// strimziKinds serves Strimzi's kinds as discovery would: the node pool and
// Connect have /scale, the pod set and the Kafka do not.
var strimziKinds = fakeKinds{kinds: map[schema.GroupKind]KindInfo{
	{Group: kafkaGroup, Kind: "KafkaNodePool"}: {Served: true, Scalable: true},
	{Group: kafkaGroup, Kind: "KafkaConnect"}:  {Served: true, Scalable: true},
	{Group: kafkaGroup, Kind: "Kafka"}:         {Served: true},
	{Group: coreGroup, Kind: "StrimziPodSet"}:  {Served: true},
}}

// strimziOwners is the object graph: pod sets owned (controller: false) by
// the brokers and controllers pools, by a KafkaConnect, by a Kafka without
// pools; and a pod set owned by nothing.
func strimziOwners() *fakeOwners {
	return &fakeOwners{objects: map[string]object{
		key(coreGroup, "StrimziPodSet", "my-cluster-brokers"):     {uid: "uid-my-cluster-brokers", refs: []metav1.OwnerReference{ref(kafkaGroup, "KafkaNodePool", "brokers", false)}},
		key(coreGroup, "StrimziPodSet", "my-cluster-controllers"): {uid: "uid-my-cluster-controllers", refs: []metav1.OwnerReference{ref(kafkaGroup, "KafkaNodePool", "controllers", false)}},
		key(coreGroup, "StrimziPodSet", "my-connect-connect"):     {uid: "uid-my-connect-connect", refs: []metav1.OwnerReference{ref(kafkaGroup, "KafkaConnect", "my-connect", false)}},
		key(coreGroup, "StrimziPodSet", "old-cluster-kafka"):      {uid: "uid-old-cluster-kafka", refs: []metav1.OwnerReference{ref(kafkaGroup, "Kafka", "old-cluster", false)}},
		key(coreGroup, "StrimziPodSet", "stray"):                  {uid: "uid-stray"},
		key(kafkaGroup, "KafkaNodePool", "brokers"):               {uid: "uid-brokers"},
		key(kafkaGroup, "KafkaNodePool", "controllers"):           {uid: "uid-controllers"},
		key(kafkaGroup, "KafkaConnect", "my-connect"):             {uid: "uid-my-connect"},
		key(kafkaGroup, "Kafka", "old-cluster"):                   {uid: "uid-old-cluster"},
	}}
}

func brokerLabels(pool string) map[string]string {
	return map[string]string{"strimzi.io/cluster": "my-cluster", "strimzi.io/kind": "Kafka", "strimzi.io/pool-name": pool}
}

func TestVPAForPodThroughOwners(t *testing.T) {
	brokers := testvpa.New("brokers").Target(kafkaGroup+"/v1", "KafkaNodePool", "brokers").InPlace().Obj()
	connect := testvpa.New("connect").Target(kafkaGroup+"/v1", "KafkaConnect", "my-connect").InPlace().Obj()
	oldCluster := testvpa.New("old-cluster").Target(kafkaGroup+"/v1", "Kafka", "old-cluster").InPlace().Obj()
	// Same kind and name as the pool, another group: not the pool.
	namesake := testvpa.New("namesake").Target("other.example.com/v1", "KafkaNodePool", "controllers").InPlace().Obj()
	fetcher := &countingFetcher{selectors: map[string]labels.Selector{
		"brokers":  labels.SelectorFromSet(labels.Set{"strimzi.io/cluster": "my-cluster", "strimzi.io/pool-name": "brokers"}),
		"connect":  labels.SelectorFromSet(labels.Set{"strimzi.io/cluster": "my-connect"}),
		"namesake": labels.Everything(),
	}}
	owners := strimziOwners()
	r := newResolver(t, []*vpatypes.VerticalPodAutoscaler{brokers, connect, oldCluster, namesake}, fetcher, upstreamWalk{}, strimziKinds, time.Now, WithOwners(owners))

	tests := []struct {
		name string
		pod  *testpod.Builder
		want string // "" for no VPA
	}{
		{"a broker of the pool: the pool's VPA",
			testpod.New("my-cluster-brokers-0").Labels(brokerLabels("brokers")).OwnedBy(coreGroup+"/v1", "StrimziPodSet", "my-cluster-brokers"), "brokers"},
		{"a pod of the pool's pod set that the pool's selector does not match",
			testpod.New("my-cluster-brokers-1").Labels(brokerLabels("other")).OwnedBy(coreGroup+"/v1", "StrimziPodSet", "my-cluster-brokers"), ""},
		{"a pod the selector matches that does not reach the pool",
			testpod.New("stray-0").Labels(brokerLabels("brokers")).OwnedBy(coreGroup+"/v1", "StrimziPodSet", "stray"), ""},
		{"a pod of another pool, without VPA",
			testpod.New("my-cluster-controllers-0").Labels(brokerLabels("controllers")).OwnedBy(coreGroup+"/v1", "StrimziPodSet", "my-cluster-controllers"), ""},
		{"a Connect pod: the KafkaConnect's VPA",
			testpod.New("my-connect-connect-0").Labels(map[string]string{"strimzi.io/cluster": "my-connect"}).OwnedBy(coreGroup+"/v1", "StrimziPodSet", "my-connect-connect"), "connect"},
		{"a broker of a Kafka without pools: a Kafka has no /scale, its VPA reaches no pod",
			testpod.New("old-cluster-kafka-0").Labels(map[string]string{"strimzi.io/cluster": "old-cluster"}).OwnedBy(coreGroup+"/v1", "StrimziPodSet", "old-cluster-kafka"), ""},
		{"the same pod set in another namespace",
			testpod.New("my-cluster-brokers-0").Namespace("elsewhere").Labels(brokerLabels("brokers")).OwnedBy(coreGroup+"/v1", "StrimziPodSet", "my-cluster-brokers"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.VPAForPod(context.Background(), tc.pod.Obj())
			require.NoError(t, err)
			if tc.want == "" {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, tc.want, got.Name)
		})
	}

	t.Run("without an owner reader, the pool's VPA reaches nothing", func(t *testing.T) {
		plain := newResolver(t, []*vpatypes.VerticalPodAutoscaler{brokers}, fetcher, upstreamWalk{}, strimziKinds, time.Now)
		got, err := plain.VPAForPod(context.Background(),
			testpod.New("my-cluster-brokers-0").Labels(brokerLabels("brokers")).OwnedBy(coreGroup+"/v1", "StrimziPodSet", "my-cluster-brokers").Obj())
		require.NoError(t, err)
		assert.Nil(t, got)
	})
}

func TestVPAForPodThroughOwnersPrecedence(t *testing.T) {
	pod := testpod.New("my-cluster-brokers-0").Labels(brokerLabels("brokers")).OwnedBy(coreGroup+"/v1", "StrimziPodSet", "my-cluster-brokers").Obj()
	selectors := map[string]labels.Selector{"pool": labels.SelectorFromSet(labels.Set{"strimzi.io/pool-name": "brokers"})}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	vpas := func(poolFirst bool) []*vpatypes.VerticalPodAutoscaler {
		pool := testvpa.New("pool").Target(kafkaGroup+"/v1", "KafkaNodePool", "brokers").InPlace().Obj()
		podSet := testvpa.New("pod-set").Target(coreGroup+"/v1", "StrimziPodSet", "my-cluster-brokers").InPlace().Obj()
		pool.CreationTimestamp = metav1.NewTime(base)
		podSet.CreationTimestamp = metav1.NewTime(base.Add(time.Minute))
		if !poolFirst {
			podSet.CreationTimestamp = metav1.NewTime(base.Add(-time.Minute))
		}
		return []*vpatypes.VerticalPodAutoscaler{pool, podSet}
	}
	for _, tc := range []struct {
		name      string
		poolFirst bool
		want      string
	}{
		{"the pool's VPA is older: it wins over the pod set's", true, "pool"},
		{"the pod set's VPA is older: it wins over the pool's", false, "pod-set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newResolver(t, vpas(tc.poolFirst), &countingFetcher{selectors: selectors}, upstreamWalk{}, strimziKinds, time.Now, WithOwners(strimziOwners()))
			got, err := r.VPAForPod(context.Background(), pod)
			require.NoError(t, err)
			require.NotNil(t, got)
			assert.Equal(t, tc.want, got.Name)
		})
	}
}

func TestVPAForPodThroughOwnersReads(t *testing.T) {
	broker := testpod.New("my-cluster-brokers-0").Labels(brokerLabels("brokers")).OwnedBy(coreGroup+"/v1", "StrimziPodSet", "my-cluster-brokers").Obj()
	pool := testvpa.New("pool").Target(kafkaGroup+"/v1", "KafkaNodePool", "brokers").InPlace().Obj()
	selectors := map[string]labels.Selector{"pool": labels.SelectorFromSet(labels.Set{"strimzi.io/pool-name": "brokers"}), "web": labels.Everything()}

	t.Run("a namespace whose VPAs target no custom resource with /scale: nothing is read", func(t *testing.T) {
		web := testvpa.New("web").Target("apps/v1", "Deployment", "web").InPlace().Obj()
		podSet := testvpa.New("pod-set").Target(coreGroup+"/v1", "StrimziPodSet", "other").InPlace().Obj()
		owners := strimziOwners()
		r := newResolver(t, []*vpatypes.VerticalPodAutoscaler{web, podSet}, &countingFetcher{selectors: selectors}, upstreamWalk{}, strimziKinds, time.Now, WithOwners(owners))
		got, err := r.VPAForPod(context.Background(), broker)
		require.NoError(t, err)
		assert.Nil(t, got)
		assert.Empty(t, owners.reads)
	})
	t.Run("a broker reads its pod set only", func(t *testing.T) {
		owners := strimziOwners()
		r := newResolver(t, []*vpatypes.VerticalPodAutoscaler{pool}, &countingFetcher{selectors: selectors}, upstreamWalk{}, strimziKinds, time.Now, WithOwners(owners))
		got, err := r.VPAForPod(context.Background(), broker)
		require.NoError(t, err)
		require.NotNil(t, got)
		assert.Equal(t, []string{"my-cluster-brokers"}, owners.reads, "the pool is reached: nothing above it is read")
	})
	t.Run("a pod the target's selector does not match reads nothing", func(t *testing.T) {
		owners := strimziOwners()
		r := newResolver(t, []*vpatypes.VerticalPodAutoscaler{pool}, &countingFetcher{selectors: selectors}, upstreamWalk{}, strimziKinds, time.Now, WithOwners(owners))
		got, err := r.VPAForPod(context.Background(),
			testpod.New("my-cluster-brokers-0").Labels(brokerLabels("other")).OwnedBy(coreGroup+"/v1", "StrimziPodSet", "my-cluster-brokers").Obj())
		require.NoError(t, err)
		assert.Nil(t, got)
		assert.Empty(t, owners.reads, "the pool could not be the pod's VPA's target, whatever the pod reaches")
	})
	t.Run("a namespace whose share of reads is in use: an error to retry later, nothing remembered", func(t *testing.T) {
		owners := strimziOwners()
		owners.errs = map[string]error{key(coreGroup, "StrimziPodSet", "my-cluster-brokers"): fmt.Errorf("reading: %w", ErrNamespaceBusy)}
		r := newResolver(t, []*vpatypes.VerticalPodAutoscaler{pool}, &countingFetcher{selectors: selectors}, upstreamWalk{}, strimziKinds, time.Now, WithOwners(owners))
		ctx := context.Background()
		_, err := r.VPAForPod(ctx, broker)
		require.ErrorIs(t, err, ErrNamespaceBusy)
		assert.True(t, RetryLater(ctx, err))
		owners.errs = nil
		got, err := r.VPAForPod(ctx, broker)
		require.NoError(t, err)
		require.NotNil(t, got)
		assert.Equal(t, "pool", got.Name)
	})
	t.Run("a failed read is an error, to be retried", func(t *testing.T) {
		owners := strimziOwners()
		owners.errs = map[string]error{key(coreGroup, "StrimziPodSet", "my-cluster-brokers"): errors.New("connection refused")}
		r := newResolver(t, []*vpatypes.VerticalPodAutoscaler{pool}, &countingFetcher{selectors: selectors}, upstreamWalk{}, strimziKinds, time.Now, WithOwners(owners))
		_, err := r.VPAForPod(context.Background(), broker)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "connection refused")
	})
	t.Run("a Deployment's pod walks nothing", func(t *testing.T) {
		owners := strimziOwners()
		r := newResolver(t, []*vpatypes.VerticalPodAutoscaler{pool}, &countingFetcher{selectors: selectors}, upstreamWalk{}, strimziKinds, time.Now, WithOwners(owners))
		_, err := r.VPAForPod(context.Background(), testpod.New("web-0").Labels(brokerLabels("brokers")).OwnedBy("apps/v1", "ReplicaSet", "web-1").Obj())
		require.NoError(t, err)
		assert.Empty(t, owners.reads)
	})
}
