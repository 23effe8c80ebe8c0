// Package quantity bounds resource quantities written by users before they
// are parsed. resource.ParseQuantity is exact: a decimal exponent of a few
// million digits ("1e-99999999", 11 bytes) costs seconds to minutes of CPU.
// Nothing in a pod or a VPA needs more than a few dozen digits or an
// exponent beyond the largest SI suffix, so anything larger is refused on the
// string, before any arithmetic.
package quantity

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
)

const (
	// MaxLength is the longest quantity string accepted.
	MaxLength = 64
	// MaxDigits is the most digits accepted in the number (before the
	// suffix): 1Ei in bytes has 19.
	MaxDigits = 30
	// MaxExponent bounds a decimal exponent ("e" or "E" suffix), either
	// sign: 1e18 is an "E", 1e-9 an "n".
	MaxExponent = 30
)

// Check reports whether s is small enough to be parsed. It does not say
// whether s is a valid quantity: resource.ParseQuantity does, in bounded time
// once Check has passed.
func Check(s string) error {
	if len(s) > MaxLength {
		return fmt.Errorf("quantity is %d bytes long, more than %d", len(s), MaxLength)
	}
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for ; i < len(s) && (isDigit(s[i]) || s[i] == '.'); i++ {
		if s[i] != '.' {
			digits++
		}
	}
	if digits > MaxDigits {
		return fmt.Errorf("quantity %q has %d digits, more than %d", s, digits, MaxDigits)
	}
	suffix := s[i:]
	if len(suffix) < 2 || (suffix[0] != 'e' && suffix[0] != 'E') {
		return nil // a binary or SI suffix (or none), bounded by the grammar
	}
	exp, err := strconv.ParseInt(suffix[1:], 10, 32)
	if err != nil {
		// Not a number: ParseQuantity refuses it cheaply, or it is too
		// large for an int32 and refused here.
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return fmt.Errorf("quantity %q has an exponent beyond ±%d", s, MaxExponent)
		}
		return nil
	}
	if exp > MaxExponent || exp < -MaxExponent {
		return fmt.Errorf("quantity %q has an exponent beyond ±%d", s, MaxExponent)
	}
	return nil
}

// Parse checks s with Check, then parses it.
func Parse(s string) (resource.Quantity, error) {
	if err := Check(s); err != nil {
		return resource.Quantity{}, err
	}
	return resource.ParseQuantity(s)
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }
