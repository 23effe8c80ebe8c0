package jvm

import (
	"errors"
	"fmt"
	"strings"
)

// kind is what an option says about the heap.
type kind uint8

const (
	kMaxHeap          kind = iota + 1 // -Xmx, -XX:MaxHeapSize=
	kInitialHeap                      // -Xms, -XX:InitialHeapSize=, -XX:MinHeapSize=
	kMaxRAMPercentage                 // -XX:MaxRAMPercentage=
	kMinRAMPercentage                 // -XX:MinRAMPercentage=
	kMaxRAMFraction                   // -XX:MaxRAMFraction= (deprecated, still read)
	kMinRAMFraction                   // -XX:MinRAMFraction=
	kMaxRAM                           // -XX:MaxRAM=
	kContainerSupport                 // -XX:+UseContainerSupport, -XX:-UseContainerSupport
	kScripted                         // an -Xmx a launch script computes at start (Strimzi)
	kFlagsFile                        // -XX:Flags=: read before everything else, not by us
	kOpaque                           // something not read that may hold any option, here
	kInvalid                          // a heap option the JVM refuses: it does not start
)

// item is one option bearing on the heap, at its place among the options
// the JVM reads, or something there that cannot be read.
type item struct {
	kind kind
	size int64   // kMaxHeap, kInitialHeap, kMaxRAM
	pct  float64 // kMaxRAMPercentage, kMinRAMPercentage
	frac uint64  // kMaxRAMFraction, kMinRAMFraction
	on   bool    // kContainerSupport
	heap Heap    // kScripted
	// origin says where the option was: "JAVA_TOOL_OPTIONS", "the
	// command line", ...
	origin string
	// text is the option as written, shortened, or for kOpaque and
	// kInvalid what could not be read and why.
	text   string
	reason Reason // kOpaque, kInvalid
}

// maxText bounds an option's text kept for messages.
const maxText = 64

func shorten(s string) string {
	if len(s) > maxText {
		return s[:maxText] + "..."
	}
	return s
}

func opaque(reason Reason, origin, text string) item {
	return item{kind: kOpaque, reason: reason, origin: origin, text: text}
}

// optionsFile is an option that reads options from a file.
func optionsFile(origin, tok string) item {
	return opaque(ReasonOptionsFile, origin, shorten(tok)+" reads options from a file, which is not read")
}

func invalid(origin, tok string, err error) item {
	return item{kind: kInvalid, reason: ReasonInvalid, origin: origin,
		text: fmt.Sprintf("%s: %v", quote(tok), err)}
}

// classify reads one JVM option as the JVM does (names are case-sensitive:
// -XMX1g is no heap option, and the JVM refuses it). ok is false for an
// option that does not bear on the heap.
func classify(tok, origin string) (it item, ok bool) {
	it = item{origin: origin, text: shorten(tok)}
	switch {
	case strings.HasPrefix(tok, "-Xmx"):
		return sizeItem(it, kMaxHeap, tok, tok[len("-Xmx"):], false), true
	case strings.HasPrefix(tok, "-Xms"):
		return sizeItem(it, kInitialHeap, tok, tok[len("-Xms"):], true), true
	case strings.HasPrefix(tok, "-XX:"):
	default:
		return item{}, false
	}
	rest := tok[len("-XX:"):]
	if rest == "+UseContainerSupport" || rest == "-UseContainerSupport" {
		it.kind, it.on = kContainerSupport, rest[0] == '+'
		return it, true
	}
	name, value, hasValue := strings.Cut(rest, "=")
	var k kind
	switch name {
	case "MaxHeapSize":
		k = kMaxHeap
	case "InitialHeapSize", "MinHeapSize":
		k = kInitialHeap
	case "MaxRAM":
		k = kMaxRAM
	case "MaxRAMPercentage":
		k = kMaxRAMPercentage
	case "MinRAMPercentage":
		k = kMinRAMPercentage
	case "MaxRAMFraction":
		k = kMaxRAMFraction
	case "MinRAMFraction":
		k = kMinRAMFraction
	case "Flags":
		k = kFlagsFile
	case "VMOptionsFile":
		return optionsFile(origin, tok), true
	default:
		return item{}, false
	}
	if !hasValue {
		return invalid(origin, tok, errors.New("no value")), true
	}
	switch k {
	case kMaxHeap, kMaxRAM:
		return sizeItem(it, k, tok, value, false), true
	case kInitialHeap:
		return sizeItem(it, k, tok, value, true), true
	case kMaxRAMPercentage, kMinRAMPercentage:
		p, err := parsePercent(value)
		if err != nil {
			return invalid(origin, tok, err), true
		}
		it.kind, it.pct = k, p
	case kMaxRAMFraction, kMinRAMFraction:
		f, err := parseFraction(value)
		if err != nil {
			return invalid(origin, tok, err), true
		}
		it.kind, it.frac = k, f
	case kFlagsFile:
		it = optionsFile(origin, tok)
		it.kind = kFlagsFile
	}
	return it, true
}

func sizeItem(it item, k kind, tok, value string, zeroOK bool) item {
	v, err := parseSize(value)
	if err == nil && v == 0 && !zeroOK {
		err = errors.New("zero")
	}
	if err != nil {
		return invalid(it.origin, tok, err)
	}
	it.kind, it.size = k, v
	return it
}

// Errors of splitOptions.
var (
	errUnmatchedQuote = errors.New("unmatched quote")
	errTooManyOptions = fmt.Errorf("more than %d options", MaxTokens)
)

// splitOptions splits an options variable as the JVM splits
// JAVA_TOOL_OPTIONS and the launcher JDK_JAVA_OPTIONS: on white space,
// single or double quotes keeping white space inside a token and removed.
// An unmatched quote is an error (both refuse to start). At most MaxTokens.
func splitOptions(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in := false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			if in {
				if len(out) == MaxTokens {
					return nil, errTooManyOptions
				}
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
			i++
		case c == '\'' || c == '"':
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				return nil, errUnmatchedQuote
			}
			cur.WriteString(s[i+1 : i+1+end])
			in = true
			i += end + 2
		default:
			cur.WriteByte(c)
			in = true
			i++
		}
	}
	if in {
		if len(out) == MaxTokens {
			return nil, errTooManyOptions
		}
		out = append(out, cur.String())
	}
	return out, nil
}

// verdict is what the options, in the order the JVM reads them, say of the
// heap: a heap and the item that decided it (nil for the JVM's default), or
// the item that makes it unknown.
type verdict struct {
	heap    Heap
	decided *item
	unknown *item
}

// evaluate reads items as the JVM does: the last -Xmx or -XX:MaxHeapSize
// wins and makes every percentage irrelevant; without one the heap is the
// JVM's share of the memory. Something unread after the last -Xmx (or
// anywhere, without one) may hold any option: the heap is then unknown. A
// heap option the JVM refuses makes it unknown too (the JVM does not start).
func evaluate(items []item) verdict {
	var (
		maxHeap, pctItem, fracItem, minPct, minFrac, maxRAM, flagsFile, unread *item
		noContainerSupport                                                     *item
		initial                                                                int64
	)
	for i := range items {
		it := &items[i]
		switch it.kind {
		case kInvalid:
			return verdict{unknown: it}
		case kMaxHeap, kScripted:
			maxHeap, unread = it, nil
		case kOpaque:
			if unread == nil {
				unread = it
			}
		case kFlagsFile:
			if flagsFile == nil {
				flagsFile = it
			}
		case kInitialHeap:
			// The JVM keeps the last -Xms, and MinHeapSize apart; the
			// largest is never less than what it uses.
			initial = max(initial, it.size)
		case kMaxRAMPercentage:
			pctItem = it
		case kMinRAMPercentage:
			minPct = it
		case kMaxRAMFraction:
			fracItem = it
		case kMinRAMFraction:
			minFrac = it
		case kMaxRAM:
			maxRAM = it
		case kContainerSupport:
			noContainerSupport = nil
			if !it.on {
				noContainerSupport = it
			}
		}
	}
	if unread != nil {
		return verdict{unknown: unread}
	}
	if maxHeap != nil {
		if maxHeap.kind == kScripted {
			return verdict{heap: maxHeap.heap, decided: maxHeap}
		}
		return verdict{heap: FixedHeap(maxHeap.size), decided: maxHeap}
	}
	if flagsFile != nil {
		return verdict{unknown: flagsFile}
	}
	h := Heap{kind: heapErgonomic, maxPct: DefaultMaxRAMPercentage, minPct: defaultMinRAMPercentage, initial: initial}
	var decided *item
	switch {
	case pctItem != nil:
		h.maxPct, decided = pctItem.pct, pctItem
	case fracItem != nil:
		h.maxPct, decided = 100/float64(fracItem.frac), fracItem
	}
	switch {
	case minPct != nil:
		h.minPct = minPct.pct
	case minFrac != nil:
		h.minPct = 100 / float64(minFrac.frac)
	}
	if maxRAM != nil {
		h.maxRAM = maxRAM.size
		if decided == nil {
			decided = maxRAM
		}
	} else if noContainerSupport != nil {
		return verdict{unknown: &item{kind: kOpaque, reason: ReasonNoContainerSupport, origin: noContainerSupport.origin,
			text: "-XX:-UseContainerSupport: the JVM sizes its heap from the node's memory"}}
	}
	return verdict{heap: h, decided: decided}
}
