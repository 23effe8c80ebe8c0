package buckets

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

// reservationOf is the text a replica writes for a pod's reservation.
func reservationOf(t *testing.T, node, holder, cpu string) string {
	t.Helper()
	v, err := encode(node, "ns/pod", holder, testpod.List(cpu, "1Gi"))
	require.NoError(t, err)
	return v
}

// TestABucketsContentIsUntrusted: entries that are not reservations are
// neither counted nor kept: the next write removes them. None makes the
// replica fail.
func TestABucketsContentIsUntrusted(t *testing.T) {
	n, a, b, filler := twoBrokers()
	bucket := bucketOfNode(n.Name)
	garbled := map[string]string{
		"not-json":               "{",
		"trailing":               reservationOf(t, n.Name, "r", "2") + "{}",
		"array":                  "[1, 2]",
		"no-node":                `{"holder":"r","cpu":"2"}`,
		"bad-node":               `{"node":"Node_1!","holder":"r","cpu":"2"}`,
		"no-holder":              `{"node":"node-1","cpu":"2"}`,
		"no-requests":            `{"node":"node-1","holder":"r"}`,
		"negative":               `{"node":"node-1","holder":"r","cpu":"-2"}`,
		"not-a-quantity":         `{"node":"node-1","holder":"r","cpu":"two"}`,
		"long-quantity":          `{"node":"node-1","holder":"r","cpu":"` + strings.Repeat("9", 100) + `"}`,
		"huge":                   `{"node":"node-1","holder":"r","cpu":"2","pod":"` + strings.Repeat("x", 2000) + `"}`,
		strings.Repeat("k", 200): reservationOf(t, n.Name, "r", "2"),
	}
	api := newFakeAPI(4)
	api.set(t, bucket, garbled, map[string][]byte{"binary": []byte("2")})
	m := newMetrics(t)
	r := replica(t, "replica-b", api, staleCache{api: api}, fakeClock(), m)

	// Counted, any of them would leave no room for a resize to 1500m.
	require.True(t, r.Reserve(context.Background(), request(b, "1500m", n, a, b, filler)).Fits)
	assert.Equal(t, []types.UID{b.UID}, keys(api.data(bucket)), "removed with the write")
	assert.Equal(t, float64(len(garbled)+1), testutil.ToFloat64(m.removals.WithLabelValues(removedInvalid)))

	// A newer replica's fields are ignored, its reservation counted.
	api.set(t, bucket, map[string]string{string(a.UID): `{"node":"node-1","holder":"r","cpu":"1500m","since":"later"}`}, nil)
	got := r.Reserve(context.Background(), request(b, "1500m", n, a, b, filler))
	assert.False(t, got.Fits)
	assert.Equal(t, RefusedNoRoom, got.Reason)
}

// TestABucketOverItsBoundsIsNotRead: a bucket holding more keys or bytes
// than the replicas ever write is not parsed: its nodes' resizes wait
// (nothing in it can be counted), until nothing written before it went over
// can be live; it is then cleared.
func TestABucketOverItsBoundsIsNotRead(t *testing.T) {
	n, a, b, filler := twoBrokers()
	bucket := bucketOfNode(n.Name)
	many := map[string]string{}
	for i := range maxStoredKeys + 1 {
		many[fmt.Sprintf("k%d", i)] = "x"
	}
	for name, data := range map[string]map[string]string{
		"too many keys":  many,
		"too many bytes": {"big": strings.Repeat("x", maxBucketBytes)},
	} {
		t.Run(name, func(t *testing.T) {
			api := newFakeAPI(4)
			api.set(t, bucket, data, nil)
			clk := fakeClock()
			m := newMetrics(t)
			r := replica(t, "replica-b", api, staleCache{api: api}, clk, m)
			got := r.Reserve(context.Background(), request(b, "1500m", n, a, b, filler))
			assert.False(t, got.Fits)
			assert.Equal(t, RefusedBucketFull, got.Reason)
			assert.Contains(t, got.Why, "over the")
			assert.Equal(t, t0.Add(ttl), got.Until)
			assert.Equal(t, data, api.data(bucket), "left as it is")

			clk.Step(ttl)
			require.True(t, r.Reserve(context.Background(), request(b, "1500m", n, a, b, filler)).Fits)
			assert.Equal(t, []types.UID{b.UID}, keys(api.data(bucket)), "cleared")
			assert.Equal(t, float64(len(data)), testutil.ToFloat64(m.removals.WithLabelValues(removedInvalid)))
		})
	}
}

// TestAFullBucketRefusesNewReservations: a bucket holding MaxEntries live
// reservations (of other nodes of the bucket) refuses one more, and never
// grows; once one ends, the resize fits.
func TestAFullBucketRefusesNewReservations(t *testing.T) {
	n, a, b, filler := twoBrokers()
	n.Status.Allocatable = testpod.List("400", "64Gi")
	bucket := bucketOfNode(n.Name)
	full := map[string]string{}
	for i := range MaxEntries {
		full[fmt.Sprintf("uid-%d", i)] = reservationOf(t, "elsewhere", "replica-a", "1")
	}
	api := newFakeAPI(4)
	api.set(t, bucket, full, nil)
	clk := fakeClock()
	m := newMetrics(t)
	r := replica(t, "replica-b", api, staleCache{api: api}, clk, m)
	got := r.Reserve(context.Background(), request(b, "1500m", n, a, b, filler))
	assert.False(t, got.Fits)
	assert.Equal(t, RefusedBucketFull, got.Reason)
	assert.Contains(t, got.Why, fmt.Sprintf("holds %d reservations", MaxEntries))
	assert.Equal(t, t0.Add(ttl), got.Until, "decided again when the first expires")
	assert.Len(t, api.data(bucket), MaxEntries)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.refusals.WithLabelValues(RefusedBucketFull)))

	delete(full, "uid-0")
	api.set(t, bucket, full, nil)
	require.True(t, r.Reserve(context.Background(), request(b, "1500m", n, a, b, filler)).Fits)
	assert.Len(t, api.data(bucket), MaxEntries)
}

// TestAPodsReservationByAnotherReplicaCountsAtTheLarger: the replica that
// held the pod's shard before reserved for it; its resize may still be
// applied, so the new reservation holds the larger of both.
func TestAPodsReservationByAnotherReplicaCountsAtTheLarger(t *testing.T) {
	n, a, b, filler := twoBrokers()
	bucket := bucketOfNode(n.Name)
	api := newFakeAPI(4)
	api.set(t, bucket, map[string]string{string(a.UID): reservationOf(t, n.Name, "replica-old", "1500m")}, nil)
	r := replica(t, "replica-new", api, staleCache{api: api}, fakeClock(), nil)
	require.True(t, r.Reserve(context.Background(), request(a, "1", n, a, b, filler)).Fits)
	e, err := parse(string(a.UID), api.data(bucket)[string(a.UID)])
	require.NoError(t, err)
	assert.Equal(t, "replica-new", e.holder)
	assert.Equal(t, "1500m", e.requests.Cpu().String())

	// Its own earlier reservation is replaced.
	require.True(t, r.Reserve(context.Background(), request(a, "800m", n, a, b, filler)).Fits)
	e, err = parse(string(a.UID), api.data(bucket)[string(a.UID)])
	require.NoError(t, err)
	assert.Equal(t, "800m", e.requests.Cpu().String())
}

// FuzzBucket feeds a bucket's untrusted content to a reservation: it never
// panics, and what it writes holds only valid reservations.
func FuzzBucket(f *testing.F) {
	f.Add("uid-a", `{"node":"node-1","holder":"r","cpu":"1500m"}`, "k", "{")
	f.Add("uid-a", `{"node":"node-1","holder":"r","cpu":"1e9","memory":"1Ei"}`, "uid-b", `{"node":"node-1","holder":"r","cpu":"0.000001"}`)
	f.Add(".", `null`, "-", `{"node":"node-1","holder":"r","cpu":"9223372036854775807"}`)
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		n, a, b, filler := twoBrokers()
		api := newFakeAPI(4)
		api.set(t, bucketOfNode(n.Name), map[string]string{k1: v1, k2: v2}, nil)
		r := replica(t, "replica-b", api, staleCache{api: api}, fakeClock(), nil)
		got := r.Reserve(context.Background(), request(b, "1500m", n, a, b, filler))
		if !got.Fits {
			return
		}
		for k, v := range api.data(bucketOfNode(n.Name)) {
			_, err := parse(k, v)
			require.NoError(t, err, "written: %q: %q", k, v)
		}
	})
}
