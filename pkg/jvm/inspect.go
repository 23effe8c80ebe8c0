package jvm

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Bounds of what is read from a container's spec (tenant input). Beyond
// them the heap is unknown (ReasonTooLarge), never guessed from a part.
const (
	// MaxValueLength bounds one string read: a variable's value, an
	// argument, a shell script, after expansion.
	MaxValueLength = 16 << 10
	// MaxEnv bounds the container's env and envFrom entries.
	MaxEnv = 1024
	// MaxTokens bounds the command and args examined, the words of one
	// value or script, and the launcher's options.
	MaxTokens = 1024
	// MaxFlags bounds the options classified over every source.
	MaxFlags = 4096
)

// Reason says where a Result comes from. Each is a condition reason.
type Reason string

// Known heaps.
const (
	// ReasonExplicit: -Xmx or -XX:MaxHeapSize.
	ReasonExplicit Reason = "HeapExplicit"
	// ReasonPercentage: -XX:MaxRAMPercentage, -XX:MaxRAMFraction or
	// -XX:MaxRAM: a share of the memory limit at start.
	ReasonPercentage Reason = "HeapPercentage"
	// ReasonStrimziDynamic: Strimzi's image sized the heap from the
	// memory limit at start (STRIMZI_DYNAMIC_HEAP_PERCENTAGE).
	ReasonStrimziDynamic Reason = "HeapStrimziDynamic"
	// ReasonJVMDefault: no option sets the heap: the JVM takes 25% of
	// the memory limit at start.
	ReasonJVMDefault Reason = "HeapJVMDefault"
	// ReasonDeclared: the VPA's annotation states the heap, which the
	// spec does not.
	ReasonDeclared Reason = "HeapDeclared"
)

// Unknown heaps, and no JVM.
const (
	// ReasonNotJVM: nothing in the spec shows a JVM, and none is declared.
	ReasonNotJVM Reason = "NotJVM"
	// ReasonValueFrom: a variable the JVM reads is set from a ConfigMap,
	// a Secret or the downward API (valueFrom), which is not read.
	ReasonValueFrom Reason = "HeapFromValueFrom"
	// ReasonEnvFrom: a variable the JVM reads may be set by envFrom,
	// which is not read.
	ReasonEnvFrom Reason = "HeapFromEnvFrom"
	// ReasonOptionsFile: options are read from a file (@argfile,
	// -XX:VMOptionsFile, -XX:Flags).
	ReasonOptionsFile Reason = "HeapInOptionsFile"
	// ReasonShell: the shell script starting java computes its options,
	// or sets the variables it passes.
	ReasonShell Reason = "HeapFromShell"
	// ReasonLaunchScriptDefault: KAFKA_HEAP_OPTS is empty and Kafka's
	// start scripts choose the heap (1 GiB for a broker, 2 GiB for
	// Connect).
	ReasonLaunchScriptDefault Reason = "HeapFromLaunchScript"
	// ReasonNoContainerSupport: -XX:-UseContainerSupport sizes the heap
	// from the node's memory.
	ReasonNoContainerSupport Reason = "HeapFromNodeMemory"
	// ReasonInvalid: a heap option the JVM refuses (it does not start),
	// or a value Strimzi's image cannot use.
	ReasonInvalid Reason = "HeapOptionInvalid"
	// ReasonTooLarge: the spec is beyond this package's bounds.
	ReasonTooLarge Reason = "HeapSpecTooLarge"
)

// Result is what a container's spec says of its JVM's heap.
type Result struct {
	// JVM: the container runs a JVM: java on its command line, a
	// variable the JVM or its launch scripts read, or a declaration.
	JVM bool
	// Known: Heap is the heap's bound. Otherwise Reason and Message say
	// why it is unknown; such a container's memory must not be lowered
	// in place.
	Known bool
	Heap  Heap
	// Reason is one of the Reason constants.
	Reason Reason
	// Source is where the deciding option, or what could not be read,
	// is: "JAVA_TOOL_OPTIONS", "the command line", "KAFKA_HEAP_OPTS", ...;
	// empty for the JVM's default and a declaration.
	Source string
	// Flag is that option as written, shortened, or what could not be read.
	Flag string
	// Message says it in a sentence, for conditions and events.
	Message string
}

// reader holds the state of one Inspect: the environment and the budget of
// options.
type reader struct {
	env   environment
	flags int
}

// take counts one option read; false once MaxFlags are.
func (r *reader) take() bool {
	r.flags++
	return r.flags <= MaxFlags
}

// Inspect reads what c's spec states of its JVM's heap: the options in its
// command and args (java run directly or by a shell's -c script), and the
// variables the JVM and its launch scripts read, in the order the JVM reads
// them. d is the VPA's declaration for the container, nil for none: it
// makes the container a JVM and states its heap where the spec states none.
// Inspect never panics and reads at most the package's bounds.
func Inspect(c *corev1.Container, d *Declaration) Result {
	r := reader{}
	declared := d != nil
	env, err := readEnv(c)
	if err != nil {
		return unknownResult(true, item{reason: ReasonTooLarge, origin: "the environment", text: err.Error()})
	}
	r.env = env
	l := r.commandLine(c)
	isJVM := declared || l.direct
	for _, name := range readVariables {
		if _, ok := env.vars[name]; ok {
			isJVM = true
		}
	}
	if !isJVM {
		return Result{Reason: ReasonNotJVM, Message: "no JVM: java is not on the command line, no variable the JVM reads is set, and none is declared"}
	}
	items := r.sources(l)
	v := evaluate(items)
	var declaredHeap *Heap
	if declared && d.Heap != nil {
		declaredHeap = d.Heap
	}
	switch {
	case v.unknown != nil && v.unknown.reason == ReasonLaunchScriptDefault && declaredHeap != nil,
		v.unknown == nil && v.decided == nil && declaredHeap != nil:
		return Result{JVM: true, Known: true, Heap: *declaredHeap, Reason: ReasonDeclared,
			Message: fmt.Sprintf("heap %s, as the VPA's %s annotation declares", declaredHeap, Annotation)}
	case v.unknown != nil:
		return unknownResult(true, *v.unknown)
	case v.decided == nil:
		return Result{JVM: true, Known: true, Heap: v.heap, Reason: ReasonJVMDefault,
			Message: fmt.Sprintf("heap %s, the JVM's default: no option sets its maximum", v.heap)}
	}
	res := Result{JVM: true, Known: true, Heap: v.heap, Source: v.decided.origin, Flag: v.decided.text}
	switch v.decided.kind {
	case kMaxHeap:
		res.Reason = ReasonExplicit
	case kScripted:
		res.Reason = ReasonStrimziDynamic
	default:
		res.Reason = ReasonPercentage
	}
	res.Message = fmt.Sprintf("heap %s, from %s (%s)", v.heap, res.Flag, res.Source)
	if v.decided.kind == kScripted {
		res.Message = fmt.Sprintf("heap %s, Strimzi's dynamic heap (%s)", v.heap, res.Flag)
	}
	return res
}

func unknownResult(isJVM bool, it item) Result {
	return Result{JVM: isJVM, Reason: it.reason, Source: it.origin, Flag: it.text,
		Message: fmt.Sprintf("heap unknown (%s): %s", it.origin, it.text)}
}

// sources lists the options in the order the JVM reads them:
// JAVA_TOOL_OPTIONS; then the launcher's arguments: JDK_JAVA_OPTIONS, then
// the command line's (when the spec shows java run) or else the launch
// scripts' variables (JAVA_OPTS, then Kafka's); then _JAVA_OPTIONS.
func (r *reader) sources(l launch) []item {
	tool := r.variable(envToolOptions, false, l.sh)
	jdk := r.variable(envJDKOptions, true, l.sh)
	override := r.variable(envOverrideOptions, false, l.sh)
	items := append(append([]item{}, tool...), jdk...)
	if l.direct {
		items = append(items, l.items...)
	} else {
		items = append(items, r.variable(envJavaOpts, true, nil)...)
		items = append(items, r.kafka(tool, jdk, override)...)
	}
	return append(items, override...)
}

// kafka lists the options Kafka's launch scripts pass, when the container
// shows them (KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_OPTS or
// Strimzi's dynamic heap is set): KAFKA_HEAP_OPTS, or when it is empty
// Strimzi's dynamic heap, or else the scripts' own default; then
// KAFKA_JVM_PERFORMANCE_OPTS and KAFKA_OPTS.
func (r *reader) kafka(tool, jdk, override []item) []item {
	isKafka := false
	for _, name := range []string{envKafkaHeapOpts, envKafkaPerformanceOpts, envKafkaOpts, envStrimziHeapPercentage} {
		if _, ok := r.env.vars[name]; ok {
			isKafka = true
		}
	}
	if !isKafka {
		return nil
	}
	var items []item
	heapOpts, ok := r.env.lookup(envKafkaHeapOpts)
	switch {
	case ok && (heapOpts.unread != "" || heapOpts.value != ""):
		items = r.variable(envKafkaHeapOpts, true, nil)
	default:
		items = []item{r.strimzi(tool, jdk, override)}
	}
	items = append(items, r.variable(envKafkaPerformanceOpts, true, nil)...)
	return append(items, r.variable(envKafkaOpts, true, nil)...)
}

// variable lists the options of a variable: an unread item if its value is
// not read (or the script running java sets it), else each of its options.
// launcher: the launcher reads it as arguments (an @argfile is expanded).
func (r *reader) variable(name string, launcher bool, sh *script) []item {
	if sh != nil && sh.assigned[name] {
		return []item{opaque(ReasonShell, name, "the shell script sets "+name)}
	}
	if sh != nil && sh.sources {
		return []item{opaque(ReasonShell, name, "the shell script sources a file, which may set "+name)}
	}
	v, ok := r.env.lookup(name)
	switch {
	case !ok:
		return nil
	case v.unread != "":
		return []item{opaque(v.unread, name, v.note)}
	}
	toks, err := splitOptions(v.value)
	switch {
	case errors.Is(err, errUnmatchedQuote):
		return []item{{kind: kInvalid, reason: ReasonInvalid, origin: name, text: name + " has an unmatched quote"}}
	case err != nil:
		return []item{opaque(ReasonTooLarge, name, name+" has "+err.Error())}
	}
	var items []item
	for _, t := range toks {
		if !r.take() {
			return append(items, opaque(ReasonTooLarge, name, fmt.Sprintf("more than %d options", MaxFlags)))
		}
		if launcher && len(t) > 1 && t[0] == '@' {
			items = append(items, optionsFile(name, t))
			continue
		}
		if it, ok := classify(t, name); ok {
			items = append(items, it)
		}
	}
	return items
}

// strimzi is what Strimzi's image passes in KAFKA_HEAP_OPTS when it is
// empty. With STRIMZI_DYNAMIC_HEAP_PERCENTAGE set, the image runs java with
// -XX:MaxRAMPercentage at that percentage (and the container's own
// JAVA_TOOL_OPTIONS, JDK_JAVA_OPTIONS and _JAVA_OPTIONS), reads back the
// maximum heap it prints, caps it at STRIMZI_DYNAMIC_HEAP_MAX when that is
// set and smaller, and passes it as -Xms and -Xmx: a heap computed from the
// memory limit at start. Without the percentage, or when the image cannot
// compute it, Kafka's start scripts choose the heap, which is not known here.
func (r *reader) strimzi(tool, jdk, override []item) item {
	scriptDefault := opaque(ReasonLaunchScriptDefault, envKafkaHeapOpts,
		"KAFKA_HEAP_OPTS is empty: Kafka's start scripts choose the heap (1Gi for a broker, 2Gi for Connect)")
	pv, ok := r.env.lookup(envStrimziHeapPercentage)
	switch {
	case !ok || (pv.unread == "" && pv.value == ""):
		return scriptDefault
	case pv.unread != "":
		return opaque(pv.unread, envStrimziHeapPercentage, pv.note)
	}
	pct, err := parsePercent(pv.value)
	if err != nil {
		return opaque(ReasonInvalid, envStrimziHeapPercentage, envStrimziHeapPercentage+": "+err.Error())
	}
	text := envStrimziHeapPercentage + "=" + pv.value
	var capBytes int64
	if mv, ok := r.env.lookup(envStrimziHeapMax); ok {
		if mv.unread != "" {
			return opaque(mv.unread, envStrimziHeapMax, mv.note)
		}
		if mv.value != "" {
			if capBytes, err = parseScriptSize(mv.value); err != nil {
				return opaque(ReasonInvalid, envStrimziHeapMax, envStrimziHeapMax+": "+err.Error())
			}
			text += ", " + envStrimziHeapMax + "=" + mv.value
		}
	}
	for _, it := range jdk {
		// The launcher then prints the heap it was given, not the
		// estimate the image looks for, and the image sizes nothing.
		if it.kind == kMaxHeap && strings.HasPrefix(it.text, "-Xmx") {
			return scriptDefault
		}
	}
	estimate := append(append(append([]item{}, tool...), jdk...),
		item{kind: kMaxRAMPercentage, pct: pct, origin: envStrimziHeapPercentage})
	v := evaluate(append(estimate, override...))
	if v.unknown != nil {
		return *v.unknown
	}
	h := v.heap
	if h.kind == heapFixed {
		b := printedHeap(alignHeap(h.size))
		if capBytes > 0 && capBytes < b {
			b = capBytes
		}
		h = FixedHeap(b)
	} else {
		h.kind, h.size = heapStrimzi, capBytes
	}
	// Both values parsed: the text is short.
	return item{kind: kScripted, heap: h, origin: envStrimziHeapPercentage, text: text}
}
