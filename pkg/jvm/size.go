package jvm

import (
	"fmt"
	"math"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Binary units, in bytes.
const (
	KiB int64 = 1 << 10
	MiB int64 = 1 << 20
	GiB int64 = 1 << 30
	TiB int64 = 1 << 40
)

// MaxSize bounds every size this package reads or computes (a heap, a
// memory limit, an overhead): 1 PiB, more than any node holds. A larger value
// is an error, never a wrap; below it, heap + overhead cannot overflow.
const MaxSize int64 = 1 << 50

// errTooLarge is returned for a size beyond MaxSize.
var errTooLarge = fmt.Errorf("larger than %s", formatBytes(MaxSize))

// parseSize reads a size as the JVM reads -Xmx, -Xms and the size flags of
// -XX (MaxHeapSize, MaxRAM): decimal digits, or hexadecimal after 0x, then
// at most one unit, k/K, m/M, g/G or t/T (binary), and nothing after; no
// unit is bytes. "1gb", "1.5g", " 1g" and "-1g" are refused, as the JVM
// refuses them.
func parseSize(s string) (int64, error) {
	digits, base := s, uint64(10)
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		digits, base = s[2:], 16
	}
	var v uint64
	i := 0
	for ; i < len(digits); i++ {
		d, ok := digitValue(digits[i], base)
		if !ok {
			break
		}
		v = v*base + d
		if v > uint64(MaxSize) {
			return 0, errTooLarge
		}
	}
	if i == 0 {
		return 0, fmt.Errorf("size %s has no digits", quote(s))
	}
	unit := uint64(1)
	switch digits[i:] {
	case "":
	case "k", "K":
		unit = uint64(KiB)
	case "m", "M":
		unit = uint64(MiB)
	case "g", "G":
		unit = uint64(GiB)
	case "t", "T":
		unit = uint64(TiB)
	default:
		return 0, fmt.Errorf("size %s: want digits and one of k, m, g, t", quote(s))
	}
	if v > uint64(MaxSize)/unit {
		return 0, errTooLarge
	}
	return int64(v * unit), nil
}

func digitValue(c byte, base uint64) (uint64, bool) {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0'), true
	case base == 16 && c >= 'a' && c <= 'f':
		return uint64(c-'a') + 10, true
	case base == 16 && c >= 'A' && c <= 'F':
		return uint64(c-'A') + 10, true
	}
	return 0, false
}

// maxNumberLength bounds a decimal number's text (a percentage, a fraction).
const maxNumberLength = 32

// parsePercent reads a percentage flag's value (-XX:MaxRAMPercentage=) as
// the JVM reads a floating-point flag: "50", "62.5", ".5", "5e1"; then its
// range, 0 to 100, outside which the JVM does not start. Hexadecimal
// floating point, which the JVM also takes, is refused here: the heap is
// then unknown, never wrong.
func parsePercent(s string) (float64, error) {
	if !decimalNumber(s) {
		return 0, fmt.Errorf("percentage %s is not a number", quote(s))
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || v < 0 || v > 100 {
		return 0, fmt.Errorf("percentage %s is not between 0 and 100", quote(s))
	}
	return v, nil
}

// decimalNumber tells whether s is [+]digits[.digits][e[+-]digits] (or
// starts with the point), short enough to be parsed at no cost.
func decimalNumber(s string) bool {
	if len(s) == 0 || len(s) > maxNumberLength {
		return false
	}
	i := 0
	if s[i] == '+' {
		i++
	}
	n := 0
	for ; i < len(s) && isDigit(s[i]); i++ {
		n++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for ; i < len(s) && isDigit(s[i]); i++ {
			n++
		}
	}
	if n == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		e := 0
		for ; i < len(s) && isDigit(s[i]); i++ {
			e++
		}
		if e == 0 || e > 3 {
			return false
		}
	}
	return i == len(s)
}

// parseFraction reads -XX:MaxRAMFraction= and -XX:MinRAMFraction=: a whole
// number of at least 1 (the heap is 1/n of the memory).
func parseFraction(s string) (uint64, error) {
	if len(s) == 0 || len(s) > 20 {
		return 0, fmt.Errorf("fraction %s is not a whole number", quote(s))
	}
	for i := range len(s) {
		if !isDigit(s[i]) {
			return 0, fmt.Errorf("fraction %s is not a whole number", quote(s))
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("fraction %s is not a whole number of at least 1", quote(s))
	}
	return v, nil
}

// parseScriptSize reads STRIMZI_DYNAMIC_HEAP_MAX as Strimzi's image
// converts it to bytes: a decimal number, perhaps with a fraction, then at
// most one binary unit (k, m, g, t, either case), truncated to whole bytes.
// The operator writes plain bytes; anything else is refused.
func parseScriptSize(s string) (int64, error) {
	i := 0
	for i < len(s) && (isDigit(s[i]) || s[i] == '.') {
		i++
	}
	num, unit := s[:i], s[i:]
	if num == "" || len(num) > maxNumberLength {
		return 0, fmt.Errorf("size %s: want a number of bytes", quote(s))
	}
	mult := int64(1)
	switch unit {
	case "":
	case "k", "K":
		mult = KiB
	case "m", "M":
		mult = MiB
	case "g", "G":
		mult = GiB
	case "t", "T":
		mult = TiB
	default:
		return 0, fmt.Errorf("size %s: want a number of bytes", quote(s))
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %s: want a number of bytes", quote(s))
	}
	b := v * float64(mult)
	if b >= float64(MaxSize) {
		return 0, errTooLarge
	}
	return int64(b), nil
}

// printedHeap is the size Strimzi's image reads back from the JVM's
// "-XshowSettings:vm" line: the JVM prints v in K, M, G or T (whichever
// keeps the number under 1024) rounded half-even to two decimals, and the
// script multiplies that number back, truncating to whole bytes. The result
// may be a little more than v (at most half a hundredth of the unit).
func printedHeap(v int64) int64 {
	unit := KiB
	switch {
	case v >= TiB:
		unit = TiB
	case v >= GiB:
		unit = GiB
	case v >= MiB:
		unit = MiB
	}
	// hundredths = v*100/unit, rounded half to even.
	q, r := (v*100)/unit, (v*100)%unit
	if 2*r > unit || (2*r == unit && q%2 == 1) {
		q++
	}
	return int64(float64(q) / 100 * float64(unit))
}

// heapAlignment is a power of two at least as large as the alignment the
// JVM rounds a maximum heap of size v up to: G1's region size, which its
// ergonomics choose between 1 and 32 MiB (about 1/2048 of the heap), and
// large pages of 2 MiB. Rounding up to it never gives less than the JVM
// reserves.
func heapAlignment(v int64) int64 {
	a := 2 * MiB
	for a < 32*MiB && a < v/2048 {
		a *= 2
	}
	return a
}

// alignHeap rounds v up to heapAlignment(v). v is at most MaxSize.
func alignHeap(v int64) int64 {
	a := heapAlignment(v)
	return (v + a - 1) / a * a
}

// formatBytes writes v as a Kubernetes quantity ("1Gi", "1536Mi").
func formatBytes(v int64) string {
	return resource.NewQuantity(v, resource.BinarySI).String()
}

// formatPercent writes a percentage without trailing zeros ("25", "62.5").
func formatPercent(p float64) string {
	return strconv.FormatFloat(p, 'f', -1, 64)
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// maxQuoted bounds what a message repeats of a value.
const maxQuoted = 48

// quote writes s for a message, shortened.
func quote(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "..."
	}
	return strconv.Quote(s)
}
