// Container CPU and memory usage of hollow-node, set per pod by annotation.
//
// Shared, unchanged, by both hollow-node builds (a symlink in kubelet-v1.35/cmd/hollow-node).
// It depends on nothing version-specific: the annotation is parsed here, the cumulative CPU
// counters are kept here, and compat.go / hollow.go turn the figures into cadvisor and CRI
// stats.
//
//	hollow-node.vpa-inplace.dev/usage: "app=cpu:300m,memory:200Mi,noise:10%;sidecar=memory:20Mi"
//
// Entries are separated by ";", each "CONTAINER=FIELD[,FIELD...]" with FIELD one of
// "cpu:QUANTITY" (cores in use), "memory:QUANTITY" (working set) and "noise:N%" (each sample
// is the set value times a factor drawn uniformly in [1-N%, 1+N%], from a generator seeded
// with --usage-seed, the pod UID and the container name). CONTAINER "*" stands for every
// container no entry names. A field left out keeps the node's default (--container-usage).
//
// The annotation is written by whoever can edit the pod, so it is bounded before it is
// parsed: at most maxUsageBytes bytes, maxUsageEntries entries, quantities of at most
// maxQuantityChars characters with a plain decimal mantissa and a known suffix (no free
// exponent), values up to maxCPUMilli and maxMemoryBytes. An annotation that breaks a rule
// is ignored as a whole (the defaults apply) and logged once per value.
package main

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
)

const (
	// UsageAnnotation sets the CPU and memory usage the node reports for a pod's containers.
	UsageAnnotation = "hollow-node.vpa-inplace.dev/usage"
	// MemoryUsageAnnotation sets the memory usage of the pod's cgroup, the figure the kubelet
	// compares a lowered memory limit with; the containers' usage (UsageAnnotation, the metrics
	// endpoints) is left as it is, so the two can disagree, as when metrics are stale.
	MemoryUsageAnnotation = "hollow-node.vpa-inplace.dev/memory-usage"

	maxUsageBytes    = 1024
	maxUsageEntries  = 16
	maxQuantityChars = 16
	maxCPUMilli      = 1024 * 1000     // 1,024 cores
	maxMemoryBytes   = 1 << 40         // 1Ti
	maxNoisePercent  = 100             // a factor in [0, 2]
	noiseResample    = 5 * time.Second // a sample holds this long, so close queries agree
)

// containerUsage is what one container reports, before noise.
type containerUsage struct {
	CPUMilli    int64
	MemoryBytes int64
	NoisePct    int64
}

// usageField is one container's entry as written: which fields it sets.
type usageField struct {
	cpu, memory, noise *int64
}

// parseUsage parses the value of UsageAnnotation into its entries by container name ("*"
// for every other container). Any rule broken is an error and nothing is returned.
func parseUsage(s string) (map[string]usageField, error) {
	return parseContainerEntries(s, maxUsageBytes, maxUsageEntries, usageOf)
}

// usageOf parses the fields of one container's usage entry.
func usageOf(name, fields string) (usageField, error) {
	var u usageField
	for _, f := range strings.Split(fields, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(f), ":")
		if !ok {
			return usageField{}, fmt.Errorf("container %q: field %q: want KEY:VALUE", name, f)
		}
		val = strings.TrimSpace(val)
		var err error
		switch key {
		case "cpu":
			u.cpu, err = setOnce(u.cpu, val, parseCPU)
		case "memory":
			u.memory, err = setOnce(u.memory, val, parseMemory)
		case "noise":
			u.noise, err = setOnce(u.noise, val, parseNoise)
		default:
			err = errors.New("unknown key (want cpu, memory or noise)")
		}
		if err != nil {
			return usageField{}, fmt.Errorf("container %q: %s: %w", name, key, err)
		}
	}
	return u, nil
}

// parseContainerEntries splits an annotation value of the form
// "CONTAINER=FIELD,...;CONTAINER=FIELD,..." into its entries by container name ("*" for
// every other container), bounded before it is split, and parses each entry's fields
// with parseEntry. Any rule broken is an error and nothing is returned.
func parseContainerEntries[T any](s string, maxBytes, maxEntries int, parseEntry func(name, fields string) (T, error)) (map[string]T, error) {
	if len(s) > maxBytes {
		return nil, fmt.Errorf("longer than %d bytes", maxBytes)
	}
	if strings.Count(s, ";") >= maxEntries {
		return nil, fmt.Errorf("more than %d entries", maxEntries)
	}
	out := map[string]T{}
	for _, entry := range strings.Split(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		name, fields, ok := strings.Cut(entry, "=")
		name = strings.TrimSpace(name)
		if !ok {
			return nil, fmt.Errorf("entry %q: want CONTAINER=FIELD,...", entry)
		}
		if name != "*" && len(validation.IsDNS1123Label(name)) > 0 {
			return nil, fmt.Errorf("entry %q: %q is not a container name", entry, name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("container %q named twice", name)
		}
		v, err := parseEntry(name, fields)
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	return out, nil
}

func setOnce(cur *int64, val string, parse func(string) (int64, error)) (*int64, error) {
	if cur != nil {
		return nil, errors.New("set twice")
	}
	v, err := parse(val)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// boundedQuantity parses a quantity after checking its shape: at most maxQuantityChars
// characters, digits with at most one decimal point, then one of the suffixes below. Free
// exponents ("1e9") are refused so that no input can ask for a huge scale.
func boundedQuantity(s string) (resource.Quantity, error) {
	if s == "" || len(s) > maxQuantityChars {
		return resource.Quantity{}, fmt.Errorf("%q: want 1 to %d characters", s, maxQuantityChars)
	}
	end := 0
	dots := 0
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.') {
		if s[end] == '.' {
			dots++
		}
		end++
	}
	if end == 0 || dots > 1 || s[0] == '.' || s[end-1] == '.' {
		return resource.Quantity{}, fmt.Errorf("%q: want a plain decimal number", s)
	}
	switch s[end:] {
	case "", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti":
	default:
		return resource.Quantity{}, fmt.Errorf("%q: unknown suffix %q", s, s[end:])
	}
	return resource.ParseQuantity(s)
}

func parseCPU(s string) (int64, error) {
	q, err := boundedQuantity(s)
	if err != nil {
		return 0, err
	}
	if q.Cmp(*resource.NewMilliQuantity(maxCPUMilli, resource.DecimalSI)) > 0 {
		return 0, fmt.Errorf("%q: above %d cores", s, maxCPUMilli/1000)
	}
	return q.MilliValue(), nil
}

func parseMemory(s string) (int64, error) {
	q, err := boundedQuantity(s)
	if err != nil {
		return 0, err
	}
	if q.Cmp(*resource.NewQuantity(maxMemoryBytes, resource.BinarySI)) > 0 {
		return 0, fmt.Errorf("%q: above 1Ti", s)
	}
	return q.Value(), nil
}

func parseNoise(s string) (int64, error) {
	num, ok := strings.CutSuffix(s, "%")
	if !ok || num == "" || len(num) > 3 {
		return 0, fmt.Errorf("%q: want N%% with N from 0 to %d", s, maxNoisePercent)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > maxNoisePercent {
		return 0, fmt.Errorf("%q: want N%% with N from 0 to %d", s, maxNoisePercent)
	}
	return n, nil
}

// resolve gives each of the pod's containers its usage: its own entry, else the "*" entry,
// field by field over the defaults.
func resolve(entries map[string]usageField, def containerUsage, names []string) map[string]containerUsage {
	out := make(map[string]containerUsage, len(names))
	for _, n := range names {
		u := def
		for _, e := range []usageField{entries["*"], entries[n]} {
			if e.cpu != nil {
				u.CPUMilli = *e.cpu
			}
			if e.memory != nil {
				u.MemoryBytes = *e.memory
			}
			if e.noise != nil {
				u.NoisePct = *e.noise
			}
		}
		out[n] = u
	}
	return out
}

// podUsage is what the node knows of one pod.
type podUsage struct {
	rawUsage, rawMemory string // annotation values it was made from
	containers          map[string]containerUsage
	podMemory           int64 // pod cgroup memory: MemoryUsageAnnotation, else the containers' sum
}

// containerState is the running state of one container's figures.
type containerState struct {
	rng          *rand.Rand
	factor       float64 // current noise factor
	sampledAt    time.Time
	updatedAt    time.Time
	cpuNanos     uint64 // cumulative CPU time, core-nanoseconds
	memoryBytes  uint64
	cpuRateMilli float64
}

// usageTracker keeps each pod's usage (from its annotations) and each container's
// cumulative CPU counter. Safe for concurrent use.
type usageTracker struct {
	mu         sync.Mutex
	seed       uint64
	def        containerUsage
	defaultPod int64 // pod cgroup memory of pods without annotations (--pod-memory-usage)
	pods       map[types.UID]*podUsage
	containers map[string]*containerState // by container ID
	rejected   map[string]bool            // annotation values logged as invalid
	node       struct {
		updatedAt time.Time
		cpuNanos  uint64
		rateMilli float64
	}
}

func newUsageTracker(seed uint64, def containerUsage, defaultPodMemory int64) *usageTracker {
	return &usageTracker{seed: seed, def: def, defaultPod: defaultPodMemory,
		pods: map[types.UID]*podUsage{}, containers: map[string]*containerState{}, rejected: map[string]bool{}}
}

// observe records a pod's annotations (from the node's pod informer or a kubelet call).
func (t *usageTracker) observe(pod *v1.Pod) {
	rawUsage, rawMemory := pod.Annotations[UsageAnnotation], pod.Annotations[MemoryUsageAnnotation]
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.pods[pod.UID]; ok && p.rawUsage == rawUsage && p.rawMemory == rawMemory && len(p.containers) == len(pod.Spec.Containers) {
		return
	}
	entries := map[string]usageField{}
	if rawUsage != "" {
		var err error
		if entries, err = parseUsage(rawUsage); err != nil {
			t.reject(pod, UsageAnnotation, rawUsage, err)
			entries = map[string]usageField{}
		}
	}
	names := make([]string, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	p := &podUsage{rawUsage: rawUsage, rawMemory: rawMemory, containers: resolve(entries, t.def, names), podMemory: t.defaultPod}
	if rawUsage != "" && len(entries) > 0 {
		p.podMemory = 0
		for _, c := range p.containers {
			p.podMemory += c.MemoryBytes
		}
	}
	if rawMemory != "" {
		if m, err := parseMemory(rawMemory); err != nil {
			t.reject(pod, MemoryUsageAnnotation, rawMemory, err)
		} else {
			p.podMemory = m
		}
	}
	t.pods[pod.UID] = p
}

// observeIfNew records a pod the tracker does not know yet (the kubelet's copy of a pod can
// be older than the informer's).
func (t *usageTracker) observeIfNew(pod *v1.Pod) {
	t.mu.Lock()
	_, known := t.pods[pod.UID]
	t.mu.Unlock()
	if !known {
		t.observe(pod)
	}
}

func (t *usageTracker) reject(pod *v1.Pod, key, val string, err error) {
	if len(t.rejected) > 1000 {
		t.rejected = map[string]bool{}
	}
	if !t.rejected[val] {
		t.rejected[val] = true
		klog.InfoS("Ignoring invalid usage annotation", "pod", klog.KObj(pod), "annotation", key, "err", err)
	}
}

func (t *usageTracker) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pods, uid)
}

// podMemory is the memory usage of the pod's cgroup.
func (t *usageTracker) podMemory(uid types.UID) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.pods[uid]; ok {
		return uint64(p.podMemory)
	}
	return uint64(t.defaultPod)
}

// containerSample is one container's figures at a point in time.
type containerSample struct {
	CPUNanos    uint64 // cumulative
	MemoryBytes uint64
}

// sample advances the container's counter to now and returns its figures. live is the set of
// container IDs sampled in this round (for sampleNode and pruning), nil outside a full round.
func (t *usageTracker) sample(id string, pod types.UID, name string, now time.Time) containerSample {
	t.mu.Lock()
	defer t.mu.Unlock()
	u := t.def
	if p, ok := t.pods[pod]; ok {
		if cu, ok := p.containers[name]; ok {
			u = cu
		}
	}
	s, ok := t.containers[id]
	if !ok {
		h := fnv.New64a()
		_, _ = h.Write([]byte(string(pod) + "/" + name))
		s = &containerState{rng: rand.New(rand.NewPCG(t.seed, h.Sum64())), updatedAt: now}
		t.containers[id] = s
	}
	if s.sampledAt.IsZero() || now.Sub(s.sampledAt) >= noiseResample {
		s.factor = 1
		if u.NoisePct > 0 {
			s.factor = 1 + (2*s.rng.Float64()-1)*float64(u.NoisePct)/100
		}
		s.sampledAt = now
	}
	if dt := now.Sub(s.updatedAt); dt > 0 {
		s.cpuNanos += uint64(s.cpuRateMilli * 1e6 * dt.Seconds())
		s.updatedAt = now
	}
	s.cpuRateMilli = float64(u.CPUMilli) * s.factor
	s.memoryBytes = uint64(float64(u.MemoryBytes) * s.factor)
	return containerSample{CPUNanos: s.cpuNanos, MemoryBytes: s.memoryBytes}
}

// prune forgets the counters of containers not in live.
func (t *usageTracker) prune(live map[string]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.containers {
		if !live[id] {
			delete(t.containers, id)
		}
	}
}

// sampleNode returns the node's figures: a cumulative CPU counter growing at the sum of its
// containers' last rates, and their memory.
func (t *usageTracker) sampleNode(now time.Time) containerSample {
	t.mu.Lock()
	defer t.mu.Unlock()
	if dt := now.Sub(t.node.updatedAt); dt > 0 && !t.node.updatedAt.IsZero() {
		t.node.cpuNanos += uint64(t.node.rateMilli * 1e6 * dt.Seconds())
	}
	t.node.updatedAt = now
	var rate float64
	var mem uint64
	for _, s := range t.containers {
		rate += s.cpuRateMilli
		mem += s.memoryBytes
	}
	t.node.rateMilli = rate
	return containerSample{CPUNanos: t.node.cpuNanos, MemoryBytes: mem}
}

// parseDefaultUsage parses --container-usage ("cpu:Q,memory:Q[,noise:N%]").
func parseDefaultUsage(s string) (containerUsage, error) {
	e, err := parseUsage("*=" + s)
	if err != nil {
		return containerUsage{}, err
	}
	return resolve(e, containerUsage{}, []string{"c"})["c"], nil
}
