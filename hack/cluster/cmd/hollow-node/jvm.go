// JVMs of hollow-node: a container that runs a JVM sizes its heap once, when it starts, from
// its options and the memory limit applied then; it uses heap + overhead, and the kernel
// OOM-kills it when its memory limit is lowered below that.
//
// Shared, unchanged, by every hollow-node build (a symlink in kubelet-v1.35/cmd/hollow-node,
// control-plane-v1.34/cmd/hollow-node and control-plane-v1.38/cmd/hollow-node).
//
// A container is a JVM when its env sets a variable a JVM or its launch scripts read
// (JAVA_TOOL_OPTIONS, JDK_JAVA_OPTIONS, JAVA_OPTS, KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS,
// KAFKA_OPTS, _JAVA_OPTIONS, STRIMZI_DYNAMIC_HEAP_PERCENTAGE), or when the pod annotation
// below names it. The annotation stands for what an image carries and the pod spec does not
// show (a JAVA_TOOL_OPTIONS baked into the image, its entry point's options):
//
//	hollow-node.vpa-inplace.dev/jvm: "kafka=-Xms1g -Xmx1g;connect=-XX:MaxRAMPercentage=75"
//
// Entries are separated by ";", each "CONTAINER=OPTIONS" ("*": every container no entry
// names). The options are read first (the image's), then the env variables above in that
// order, _JAVA_OPTIONS last; the last -Xmx (or -XX:MaxHeapSize=) wins; without one, the last
// -XX:MaxRAMPercentage= is a share of the memory limit at start; without one, Strimzi's
// STRIMZI_DYNAMIC_HEAP_PERCENTAGE (when KAFKA_HEAP_OPTS is empty), capped at
// STRIMZI_DYNAMIC_HEAP_MAX; without any, the JVM's 25%. Sizes take k, m, g or t (binary), as
// the JVM reads them. A container that started without a memory limit is not modelled (its
// JVM would size itself from the node's memory).
//
// The model is the JVM's, not the updater's reading of it (pkg/jvm): what the node does, so
// that a test sees the updater's floor hold or not. A JVM uses heap + 512Mi + 15% of the heap
// (jvmOverhead), the memory its container reports (the working set of usage.go) unless the
// usage annotation sets the container's memory (a JVM at rest, its heap not yet touched); and
// the node OOM-kills it (OOMKilled, exit code 137, as kill.go ends containers) when the memory
// limit applied to it falls below heap + overhead: the load then reaches the limit.
//
// The annotation is bounded as the others: at most maxJVMBytes bytes and maxJVMEntries entries;
// option values are read as the JVM reads them, and any size above maxMemoryBytes is refused.
// An annotation that breaks a rule is ignored as a whole (its containers are no JVMs) and
// logged once per value.
package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

const (
	// JVMAnnotation names the containers that run a JVM, with the options their images carry.
	JVMAnnotation = "hollow-node.vpa-inplace.dev/jvm"

	maxJVMBytes   = 1024
	maxJVMEntries = 16
	// maxJVMValue bounds what is read of one env variable.
	maxJVMValue = 4096

	// jvmOverheadFixed and jvmOverheadPercent: what a JVM uses besides its heap.
	jvmOverheadFixed   = 512 << 20
	jvmOverheadPercent = 15
	// jvmDefaultPercent: the JVM's share of the limit when nothing sets it.
	jvmDefaultPercent = 25.0
)

// jvmEnv lists the variables a JVM or its launch scripts read, in the order their options
// reach the JVM (KAFKA_HEAP_OPTS among them; _JAVA_OPTIONS last).
var jvmEnv = []string{"JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "JAVA_OPTS", "KAFKA_HEAP_OPTS",
	"KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_OPTS", "_JAVA_OPTIONS"}

// jvmSpec is how a container's JVM sizes its heap.
type jvmSpec struct {
	// maxHeap is the last -Xmx; 0: none.
	maxHeap int64
	// percent is the last MaxRAMPercentage, or Strimzi's, or the JVM's default; capBytes caps
	// it (Strimzi's maximum; 0: none).
	percent  float64
	capBytes int64
}

// heap is the heap the JVM sizes at a start with limit (0: none); ok false when it cannot
// (no limit: the node's memory).
func (s jvmSpec) heap(limit int64) (int64, bool) {
	if s.maxHeap > 0 {
		return s.maxHeap, true
	}
	if limit <= 0 {
		return 0, false
	}
	h := int64(float64(limit) * s.percent / 100)
	if s.capBytes > 0 && h > s.capBytes {
		h = s.capBytes
	}
	return h, true
}

// jvmNeed is what a JVM with heap uses: heap + overhead.
func jvmNeed(heap int64) int64 {
	return heap + jvmOverheadFixed + heap*jvmOverheadPercent/100
}

// parseJVMAnnotation parses the value of JVMAnnotation into the options of each container
// ("*" for every other). Any rule broken is an error and nothing is returned.
func parseJVMAnnotation(s string) (map[string]string, error) {
	return parseContainerEntries(s, maxJVMBytes, maxJVMEntries, func(name, opts string) (string, error) {
		if _, err := jvmOptions(opts, jvmSpec{percent: jvmDefaultPercent}); err != nil {
			return "", fmt.Errorf("container %q: %w", name, err)
		}
		return opts, nil
	})
}

// jvmOptions reads the heap options of opts over s: the last -Xmx (or -XX:MaxHeapSize=) and
// the last -XX:MaxRAMPercentage= win.
func jvmOptions(opts string, s jvmSpec) (jvmSpec, error) {
	if len(opts) > maxJVMValue {
		return jvmSpec{}, fmt.Errorf("options longer than %d bytes", maxJVMValue)
	}
	for _, o := range strings.Fields(opts) {
		var err error
		switch {
		case strings.HasPrefix(o, "-Xmx"):
			s.maxHeap, err = parseJVMSize(strings.TrimPrefix(o, "-Xmx"))
		case strings.HasPrefix(o, "-XX:MaxHeapSize="):
			s.maxHeap, err = parseJVMSize(strings.TrimPrefix(o, "-XX:MaxHeapSize="))
		case strings.HasPrefix(o, "-XX:MaxRAMPercentage="):
			s.percent, err = parseJVMPercent(strings.TrimPrefix(o, "-XX:MaxRAMPercentage="))
		}
		if err != nil {
			return jvmSpec{}, fmt.Errorf("%q: %w", o, err)
		}
	}
	return s, nil
}

// parseJVMSize reads a size as the JVM reads -Xmx: digits, then at most one of k, m, g, t
// (either case, binary).
func parseJVMSize(s string) (int64, error) {
	digits, unit := s, int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			unit = 1 << 10
		case 'm', 'M':
			unit = 1 << 20
		case 'g', 'G':
			unit = 1 << 30
		case 't', 'T':
			unit = 1 << 40
		}
		if unit > 1 {
			digits = s[:n-1]
		}
	}
	if digits == "" || len(digits) > 13 || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, errors.New("want digits and one of k, m, g, t")
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || v == 0 || v > maxMemoryBytes/unit {
		return 0, fmt.Errorf("want a size from 1 byte to %d bytes", int64(maxMemoryBytes))
	}
	return v * unit, nil
}

func parseJVMPercent(s string) (float64, error) {
	if len(s) > 8 {
		return 0, errors.New("want a percentage")
	}
	p, err := strconv.ParseFloat(s, 64)
	if err != nil || !(p > 0 && p <= 100) {
		return 0, errors.New("want a percentage above 0 and at most 100")
	}
	return p, nil
}

// containerJVM returns how container c's JVM sizes its heap, given the options its image
// carries (imageOpts, from the annotation; ok: named there); false when it is no JVM.
func containerJVM(c *v1.Container, imageOpts string, named bool) (jvmSpec, bool) {
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil && len(e.Value) <= maxJVMValue {
			env[e.Name] = e.Value
		} else {
			env[e.Name] = ""
		}
	}
	isJVM := named
	for _, name := range append(append([]string{}, jvmEnv...), "STRIMZI_DYNAMIC_HEAP_PERCENTAGE") {
		if _, ok := env[name]; ok {
			isJVM = true
		}
	}
	if !isJVM {
		return jvmSpec{}, false
	}
	s := jvmSpec{percent: jvmDefaultPercent}
	var err error
	if s, err = jvmOptions(imageOpts, s); err != nil {
		return jvmSpec{}, false
	}
	for _, name := range jvmEnv {
		if name == "KAFKA_HEAP_OPTS" && strings.TrimSpace(env[name]) == "" {
			// Strimzi's image sizes the heap itself when KAFKA_HEAP_OPTS is empty.
			if p, err := parseJVMPercent(env["STRIMZI_DYNAMIC_HEAP_PERCENTAGE"]); err == nil && s.maxHeap == 0 {
				s.percent = p
				if m, err := parseJVMSize(env["STRIMZI_DYNAMIC_HEAP_MAX"]); err == nil {
					s.capBytes = m
				}
			}
			continue
		}
		if next, err := jvmOptions(env[name], s); err == nil {
			s = next
		}
	}
	return s, true
}

// jvmTracker keeps the JVMs of each pod (from its spec and annotation) and the need of each
// running JVM container, sized at its start. Safe for concurrent use.
type jvmTracker struct {
	mu   sync.Mutex
	pods map[types.UID]podJVMs
	// started holds, by container ID, the need of each JVM container seen running: sized from
	// the memory limit applied when it was first seen started.
	started  map[string]int64
	rejected map[string]bool
}

// podJVMs is what the node knows of one pod's JVMs.
type podJVMs struct {
	raw, rawUsage string // annotation values they were made from
	containers    map[string]jvmSpec
	// atRest: the usage annotation sets the container's memory (a JVM at rest).
	atRest map[string]bool
}

func newJVMTracker() *jvmTracker {
	return &jvmTracker{pods: map[types.UID]podJVMs{}, started: map[string]int64{}, rejected: map[string]bool{}}
}

// observe records a pod's JVMs (from the node's pod informer).
func (t *jvmTracker) observe(pod *v1.Pod) {
	raw, rawUsage := pod.Annotations[JVMAnnotation], pod.Annotations[UsageAnnotation]
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.pods[pod.UID]; ok && p.raw == raw && p.rawUsage == rawUsage {
		return
	}
	image := map[string]string{}
	if raw != "" {
		var err error
		if image, err = parseJVMAnnotation(raw); err != nil {
			if len(t.rejected) > 1000 {
				t.rejected = map[string]bool{}
			}
			if !t.rejected[raw] {
				t.rejected[raw] = true
				klog.InfoS("Ignoring invalid JVM annotation", "pod", klog.KObj(pod), "annotation", JVMAnnotation, "err", err)
			}
			image = map[string]string{}
		}
	}
	usage, err := parseUsage(rawUsage)
	if err != nil {
		usage = nil
	}
	p := podJVMs{raw: raw, rawUsage: rawUsage, containers: map[string]jvmSpec{}, atRest: map[string]bool{}}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		opts, named := image[c.Name]
		if !named {
			opts, named = image["*"]
		}
		if s, ok := containerJVM(c, opts, named); ok {
			p.containers[c.Name] = s
			for _, e := range []usageField{usage["*"], usage[c.Name]} {
				if e.memory != nil {
					p.atRest[c.Name] = true
				}
			}
		}
	}
	if len(p.containers) == 0 {
		delete(t.pods, pod.UID)
		return
	}
	t.pods[pod.UID] = p
}

func (t *jvmTracker) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pods, uid)
}

// empty reports whether no pod of the node runs a JVM.
func (t *jvmTracker) empty() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pods) == 0
}

// decide sizes the heaps of the JVM containers among cs seen started for the first time, and
// adds to due (allocated when nil) the kills of those whose memory limit is below their need.
// It forgets the containers not in cs.
func (t *jvmTracker) decide(cs []runningContainer, due map[string]killRule) map[string]killRule {
	t.mu.Lock()
	defer t.mu.Unlock()
	live := make(map[string]bool, len(cs))
	for _, c := range cs {
		live[c.ID] = true
		p, ok := t.pods[c.Pod]
		if !ok {
			continue
		}
		s, ok := p.containers[c.Name]
		if !ok || c.StartedAt.IsZero() {
			continue
		}
		need, sized := t.started[c.ID]
		if !sized {
			heap, ok := s.heap(c.MemoryLimit)
			if !ok {
				continue
			}
			need = jvmNeed(heap)
			t.started[c.ID] = need
			klog.V(2).InfoS("JVM started", "pod", c.Pod, "container", c.Name, "memoryLimit", c.MemoryLimit, "heap", heap, "need", need)
		}
		if c.MemoryLimit > 0 && c.MemoryLimit < need {
			if due == nil {
				due = map[string]killRule{}
			}
			due[c.ID] = killRule{Reason: reasonOOMKilled, ExitCode: 137, Restart: -1}
		}
	}
	for id := range t.started {
		if !live[id] {
			delete(t.started, id)
		}
	}
	return due
}

// memory is the memory a running JVM container reports: its need, unless the usage
// annotation sets its memory (a JVM at rest). ok is false for other containers.
func (t *jvmTracker) memory(id string, pod types.UID, name string) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	need, ok := t.started[id]
	if !ok || t.pods[pod].atRest[name] {
		return 0, false
	}
	return uint64(need), true
}
