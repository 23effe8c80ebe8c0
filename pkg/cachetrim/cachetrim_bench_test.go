package cachetrim

import (
	"encoding/json"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testheap"
)

// BenchmarkCachedPod reports the heap one cached pod holds (B/pod), decoded
// from protobuf as the informers receive it: whole, without managed fields
// (what upstream VPA's updater caches) and trimmed as Transform trims it:
// heavy is a pod with every field a real workload's pod tends to carry, bench
// a running pod of make bench's hollow cluster (testdata/bench-pod.json, as
// the API server served it); trimmed-not-interned is trimmed with each pod
// keeping its own resource lists. trim-alloc-B/pod is what trimming
// allocates per pod. The copies are alike, as the pods of one
// workload are, so the shared resource lists count once: the trimmed figure
// is what a pod costs among pods asking for the same resources.
func BenchmarkCachedPod(b *testing.B) {
	bench := &corev1.Pod{}
	raw, err := os.ReadFile("testdata/bench-pod.json")
	if err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(raw, bench); err != nil {
		b.Fatal(err)
	}
	for _, pod := range []struct {
		name string
		pod  *corev1.Pod
	}{{"heavy", heavyPod()}, {"bench", bench}} {
		data, err := pod.pod.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		for _, keep := range []struct {
			name string
			trim func(*corev1.Pod) error
		}{
			{"whole", func(*corev1.Pod) error { return nil }},
			{"no-managed-fields", func(p *corev1.Pod) error { p.ManagedFields = nil; return nil }},
			{"trimmed", func(p *corev1.Pod) error { _, err := Transform(p); return err }},
			{"trimmed-not-interned", func(p *corev1.Pod) error { trimPod(p, notInterned); p.ManagedFields = nil; return nil }},
		} {
			b.Run(pod.name+"/"+keep.name, func(b *testing.B) {
				const n = 1000
				var perPod, allocated float64
				for b.Loop() {
					perPod = heldPerPod(b, data, n, keep.trim)
					allocated = allocatedPerPod(b, data, n, keep.trim)
				}
				b.ReportMetric(perPod, "B/pod")
				b.ReportMetric(allocated, "trim-alloc-B/pod")
			})
		}
	}
}

// notInterned keeps each list as decoded: what Transform would hold without
// interning.
func notInterned(l corev1.ResourceList) corev1.ResourceList { return l }

// allocatedPerPod returns what trimming allocates per pod (decoding aside).
func allocatedPerPod(b *testing.B, data []byte, n int, trim func(*corev1.Pod) error) float64 {
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = &corev1.Pod{}
		if err := pods[i].Unmarshal(data); err != nil {
			b.Fatal(err)
		}
	}
	return float64(testheap.Allocated(func() {
		for _, p := range pods {
			if err := trim(p); err != nil {
				b.Fatal(err)
			}
		}
	})) / float64(n)
}

// heldPerPod decodes n copies of a pod and returns the live heap they hold,
// per pod, after a collection.
func heldPerPod(b *testing.B, data []byte, n int, trim func(*corev1.Pod) error) float64 {
	return float64(testheap.Held(func() any {
		held := make([]*corev1.Pod, n)
		for i := range held {
			p := &corev1.Pod{}
			if err := p.Unmarshal(data); err != nil {
				b.Fatal(err)
			}
			if err := trim(p); err != nil {
				b.Fatal(err)
			}
			held[i] = p
		}
		return held
	})) / float64(n)
}
