package buckets

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The bounds of a bucket, checked before anything in it is parsed: its
// ConfigMap is written by every replica, and by anyone else allowed to, so
// what it holds is untrusted.
const (
	// MaxEntries is how many live reservations a bucket holds: a bucket
	// that holds as many refuses new ones (the resize waits) until some
	// end. A reservation lasts from its resize's decision until the node
	// view shows it, usually under a second.
	MaxEntries = 256
	// maxStoredKeys is how many keys a bucket's ConfigMap may hold for its
	// entries to be parsed at all: the replicas keep only live entries,
	// MaxEntries at most, and remove the rest at each write.
	maxStoredKeys = 2 * MaxEntries
	// maxBucketBytes bounds the keys and values of a bucket's ConfigMap
	// for its entries to be parsed at all.
	maxBucketBytes = 256 << 10
	// maxKeyBytes and maxValueBytes bound one entry: a key is a pod's UID,
	// a value a few names and two quantities.
	maxKeyBytes   = 128
	maxValueBytes = 1 << 10
	// maxQuantityBytes bounds a quantity's text before it is parsed.
	maxQuantityBytes = 64
)

// record is an entry of a bucket as written: the reservation of the room a
// pod, once resized, requests of its node. Its key is the pod's UID.
type record struct {
	// Node is the node the pod is bound to.
	Node string `json:"node"`
	// Pod is the pod's namespace/name, for people reading the bucket.
	Pod string `json:"pod,omitempty"`
	// CPU and Memory are what the pod requests of the node once resized
	// (resize.ResizedRequests), as FitsNode counts them.
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
	// Holder is the identity of the replica that reserved.
	Holder string `json:"holder"`
}

// entry is a parsed, valid entry of a bucket.
type entry struct {
	node     string
	holder   string
	requests corev1.ResourceList
	// value is the entry's text, as stored: an entry is the same while its
	// text is.
	value string
}

// encode returns the text of a reservation.
func encode(node, pod, holder string, requests corev1.ResourceList) (string, error) {
	r := record{Node: node, Pod: pod, Holder: holder}
	if q, ok := requests[corev1.ResourceCPU]; ok {
		r.CPU = q.String()
	}
	if q, ok := requests[corev1.ResourceMemory]; ok {
		r.Memory = q.String()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encoding a node room reservation: %w", err)
	}
	if len(b) > maxValueBytes {
		return "", fmt.Errorf("a node room reservation of %d bytes is over the %d bytes an entry may hold", len(b), maxValueBytes)
	}
	return string(b), nil
}

// parse reads one entry of a bucket, checking its size first; an entry
// that is not one this package writes is an error.
func parse(key, value string) (entry, error) {
	if len(key) > maxKeyBytes || len(validation.IsConfigMapKey(key)) > 0 {
		return entry{}, fmt.Errorf("key is not a pod UID")
	}
	if len(value) > maxValueBytes {
		return entry{}, fmt.Errorf("%d bytes, over the %d an entry may hold", len(value), maxValueBytes)
	}
	var r record
	// Fields it does not know are ignored: a newer replica's, during a
	// rolling upgrade, still reserve.
	dec := json.NewDecoder(strings.NewReader(value))
	if err := dec.Decode(&r); err != nil {
		return entry{}, fmt.Errorf("not a reservation: %w", err)
	}
	if dec.More() {
		return entry{}, fmt.Errorf("not a reservation: trailing data")
	}
	if r.Node == "" || len(validation.IsDNS1123Subdomain(r.Node)) > 0 {
		return entry{}, fmt.Errorf("no node name: %q", r.Node)
	}
	if r.Holder == "" {
		return entry{}, fmt.Errorf("no holder")
	}
	e := entry{node: r.Node, holder: r.Holder, requests: corev1.ResourceList{}, value: value}
	for name, text := range map[corev1.ResourceName]string{corev1.ResourceCPU: r.CPU, corev1.ResourceMemory: r.Memory} {
		if text == "" {
			continue
		}
		q, err := quantity(text)
		if err != nil {
			return entry{}, fmt.Errorf("%s: %w", name, err)
		}
		e.requests[name] = q
	}
	if len(e.requests) == 0 {
		return entry{}, fmt.Errorf("no requests")
	}
	return e, nil
}

// quantity parses a non-negative quantity of bounded text.
func quantity(text string) (resource.Quantity, error) {
	if len(text) > maxQuantityBytes {
		return resource.Quantity{}, fmt.Errorf("quantity of %d bytes", len(text))
	}
	q, err := resource.ParseQuantity(text)
	if err != nil {
		return resource.Quantity{}, err
	}
	if q.Sign() < 0 {
		return resource.Quantity{}, fmt.Errorf("negative quantity %s", text)
	}
	return q, nil
}

// within tells whether a bucket's ConfigMap is within the bounds for its
// entries to be parsed, and says why not.
func within(data map[string]string, binary map[string][]byte) (bool, string) {
	if n := len(data) + len(binary); n > maxStoredKeys {
		return false, fmt.Sprintf("it holds %d keys, over the %d a bucket may", n, maxStoredKeys)
	}
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	for k, v := range binary {
		size += len(k) + len(v)
	}
	if size > maxBucketBytes {
		return false, fmt.Sprintf("it holds %d bytes, over the %d a bucket may", size, maxBucketBytes)
	}
	return true, ""
}

// covers tells whether requests hold at least what an entry reserves, for
// cpu and memory: the node view shows the reservation.
func covers(requests, reserved corev1.ResourceList) bool {
	for name, q := range reserved {
		have, ok := requests[name]
		if !ok || have.Cmp(q) < 0 {
			return false
		}
	}
	return true
}

// roomOf keeps of requests the cpu and memory, what FitsNode compares.
func roomOf(requests corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, 2)
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := requests[name]; ok {
			out[name] = q
		}
	}
	return out
}
