package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vpa-inplace/vpa-inplace/pkg/quantity"
)

// vpaQuantityPaths are where a VPA holds resource quantities: keys from the
// object's root, "[]" for any element of an array, "*" for any key of an
// object. Status is included: an update carries the stored status, and
// decoding it costs the same as decoding the spec.
var vpaQuantityPaths = [][]string{
	{"spec", "resourcePolicy", "containerPolicies", "[]", "minAllowed", "*"},
	{"spec", "resourcePolicy", "containerPolicies", "[]", "maxAllowed", "*"},
	{"spec", "resourcePolicy", "containerPolicies", "[]", "oomBumpUpRatio"},
	{"spec", "resourcePolicy", "containerPolicies", "[]", "oomMinBumpUp"},
	{"spec", "resourcePolicy", "containerPolicies", "[]", "startupBoost", "cpu", "quantity"},
	{"spec", "startupBoost", "cpu", "quantity"},
	{"status", "recommendation", "containerRecommendations", "[]", "target", "*"},
	{"status", "recommendation", "containerRecommendations", "[]", "lowerBound", "*"},
	{"status", "recommendation", "containerRecommendations", "[]", "upperBound", "*"},
	{"status", "recommendation", "containerRecommendations", "[]", "uncappedTarget", "*"},
}

// maxShownQuantity is how much of a refused quantity an error message
// repeats.
const maxShownQuantity = 40

// oversizedQuantity is a quantity of a VPA's JSON beyond pkg/quantity's
// bound.
type oversizedQuantity struct {
	path  *field.Path
	value string
	err   error
	// start and end are the offsets of the value's JSON in the object.
	start, end int64
}

// key identifies the value at its place, for comparison with the stored
// object.
func (q oversizedQuantity) key() string { return q.path.String() + "=" + q.value }

func (q oversizedQuantity) fieldError() *field.Error {
	shown := q.value
	if len(shown) > maxShownQuantity {
		shown = shown[:maxShownQuantity] + "..."
	}
	return field.Invalid(q.path, shown, fmt.Sprintf("%v: a resource quantity must have at most %d characters, %d digits and an exponent within ±%d",
		q.err, quantity.MaxLength, quantity.MaxDigits, quantity.MaxExponent))
}

// frame is one open object or array of the JSON being scanned.
type frame struct {
	array   bool
	index   int
	key     string
	wantKey bool
}

// scanVPAQuantities returns the quantities of a VPA's JSON that exceed
// pkg/quantity's bound, reading the JSON as written: nothing is parsed as a
// quantity. Every occurrence is checked, duplicate keys included, and keys
// are compared without regard to case, so that no decoder can meet a value
// this scan did not. Empty or null raw has none. An error means raw is not
// JSON.
func scanVPAQuantities(raw []byte) ([]oversizedQuantity, error) {
	var found []oversizedQuantity
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var stack []frame
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return found, nil
		}
		if err != nil {
			return found, err
		}
		if n := len(stack); n > 0 && !stack[n-1].array && stack[n-1].wantKey {
			if key, ok := tok.(string); ok {
				stack[n-1].key, stack[n-1].wantKey = key, false
				continue
			}
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			valueDone(stack)
			continue
		}
		// The start of a value.
		if n := len(stack); n > 0 && stack[n-1].array {
			stack[n-1].index++
		}
		switch t := tok.(type) {
		case json.Delim:
			stack = append(stack, frame{array: t == '[', index: -1, wantKey: t == '{'})
			continue
		case string:
			found = checkQuantityAt(found, stack, raw, before, dec.InputOffset(), t)
		case json.Number:
			found = checkQuantityAt(found, stack, raw, before, dec.InputOffset(), string(t))
		}
		valueDone(stack)
	}
}

// valueDone marks the value of the innermost object read: a key comes next.
func valueDone(stack []frame) {
	if n := len(stack); n > 0 && !stack[n-1].array {
		stack[n-1].wantKey = true
	}
}

func checkQuantityAt(found []oversizedQuantity, stack []frame, raw []byte, before, end int64, value string) []oversizedQuantity {
	path := quantityPath(stack)
	if path == nil {
		return found
	}
	err := quantity.Check(strings.TrimSpace(value))
	if err == nil {
		return found
	}
	start := before
	for start < end && (raw[start] == ':' || raw[start] == ',' || raw[start] == ' ' || raw[start] == '\t' || raw[start] == '\n' || raw[start] == '\r') {
		start++
	}
	return append(found, oversizedQuantity{path: path, value: value, err: err, start: start, end: end})
}

// quantityPath returns the field path of the value at stack when it is one
// of vpaQuantityPaths, nil otherwise.
func quantityPath(stack []frame) *field.Path {
	for _, pattern := range vpaQuantityPaths {
		if !matches(pattern, stack) {
			continue
		}
		var path *field.Path
		for i, f := range stack {
			switch {
			case f.array:
				path = path.Index(f.index)
			case i == 0:
				path = field.NewPath(f.key)
			case pattern[i] == "*":
				path = path.Key(f.key)
			default:
				path = path.Child(f.key)
			}
		}
		return path
	}
	return nil
}

func matches(pattern []string, stack []frame) bool {
	if len(pattern) != len(stack) {
		return false
	}
	for i, f := range stack {
		switch p := pattern[i]; {
		case p == "[]":
			if !f.array {
				return false
			}
		case f.array:
			return false
		case p != "*" && !strings.EqualFold(p, f.key):
			return false
		}
	}
	return true
}

// sanitizeQuantities returns a copy of raw with each of found replaced by
// "0", so that it can be decoded.
func sanitizeQuantities(raw []byte, found []oversizedQuantity) []byte {
	if len(found) == 0 {
		return raw
	}
	out := make([]byte, 0, len(raw))
	var last int64
	for _, q := range found {
		out = append(out, raw[last:q.start]...)
		out = append(out, `"0"`...)
		last = q.end
	}
	return append(out, raw[last:]...)
}

// checkVPAQuantities applies the quantity bound to a VPA being created
// (oldRaw empty) or updated. A quantity over the bound is refused unless the
// stored object holds the same value at the same place (stored before the
// bound existed): that one is only warned about. It returns the errors,
// the warnings, and the objects with every quantity over the bound replaced,
// safe to decode.
func checkVPAQuantities(raw, oldRaw []byte) (field.ErrorList, []string, []byte, []byte, error) {
	found, err := scanVPAQuantities(raw)
	if err != nil {
		return nil, nil, nil, nil, badRequest("object: decoding a VerticalPodAutoscaler: %v", err)
	}
	oldFound, err := scanVPAQuantities(oldRaw)
	if err != nil {
		return nil, nil, nil, nil, badRequest("oldObject: decoding a VerticalPodAutoscaler: %v", err)
	}
	stored := make(map[string]bool, len(oldFound))
	for _, q := range oldFound {
		stored[q.key()] = true
	}
	var errs field.ErrorList
	var warnings []string
	for _, q := range found {
		if stored[q.key()] {
			warnings = append(warnings, fmt.Sprintf("%s: accepted only because it is unchanged; change it: VPA controllers can stall on it", q.fieldError().Error()))
			continue
		}
		errs = append(errs, q.fieldError())
	}
	return errs, warnings, sanitizeQuantities(raw, found), sanitizeQuantities(oldRaw, oldFound), nil
}
