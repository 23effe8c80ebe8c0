package admission

import (
	"bytes"
	"io"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// The decoders of this package have two paths. The fast one reads the
// JSON once, token by token with jsontext (strict on syntax and UTF-8),
// takes what the webhook needs and skips the rest without building it. It
// accepts only input whose meaning is plain: any error, a name it reads
// given twice in one object, an escaped name, a null where a value is
// expected, or a value of an unexpected type makes it give up, and the
// reference path
// (sigsjson into typed structs, as admissionv1 and corev1 would decode)
// decides instead, with its own result and error message. So the fast path
// only ever answers what the reference path answers, which
// TestFastDecodersAgreeWithTheReference and FuzzFastDecoders check.

// jsonReader is a pooled jsontext decoder over a byte slice, read in place
// (a bytes.Buffer input is not copied). The values it returns refer to the
// slice.
type jsonReader struct {
	dec jsontext.Decoder
	in  bytes.Buffer
	// sub reads a value already read by dec again, for the parts bounded
	// before they are decoded (labels, owner references).
	sub *jsonReader
}

var jsonReaders = sync.Pool{New: func() any { return new(jsonReader) }}

func newJSONReader(b []byte) *jsonReader {
	r := jsonReaders.Get().(*jsonReader)
	r.reset(b)
	return r
}

// Duplicate names are found by the readers themselves (once), among the
// names they read: jsontext's own check keeps every name of an object, a
// cost that grows with a hostile object's size.
var readerOptions = jsontext.AllowDuplicateNames(true)

func (r *jsonReader) reset(b []byte) {
	r.in = *bytes.NewBuffer(b)
	r.dec.Reset(&r.in, readerOptions)
}

// release returns r to the pool, holding nothing of its input.
func (r *jsonReader) release() {
	r.reset(nil)
	if r.sub != nil {
		r.sub.reset(nil)
	}
	jsonReaders.Put(r)
}

// subReader returns a reader over b, which must not be used after the next
// call of subReader.
func (r *jsonReader) subReader(b []byte) *jsonReader {
	if r.sub == nil {
		r.sub = new(jsonReader)
	}
	r.sub.reset(b)
	return r.sub
}

// names is the set of names read so far in one object, by their index in
// the reader's switch.
type names uint32

// once marks name i read, and tells whether it was the first time.
func (n *names) once(i uint) bool {
	if *n&(1<<i) != 0 {
		return false
	}
	*n |= 1 << i
	return true
}

// kind is the kind of the next token, 0 on a syntax error.
func (r *jsonReader) kind() jsontext.Kind { return r.dec.PeekKind() }

// value reads the next value whole, as it is in the input.
func (r *jsonReader) value() (jsontext.Value, bool) {
	v, err := r.dec.ReadValue()
	return v, err == nil
}

// skip reads past the next value.
func (r *jsonReader) skip() bool {
	_, ok := r.value()
	return ok
}

// end tells whether the input holds nothing after the value read.
func (r *jsonReader) end() bool {
	_, err := r.dec.ReadValue()
	return err == io.EOF
}

// open reads the start of an object ('{') or array ('[').
func (r *jsonReader) open(k jsontext.Kind) bool {
	t, err := r.dec.ReadToken()
	return err == nil && t.Kind() == k
}

// more tells whether the object or array being read has another member or
// element; at its end it reads the closing delimiter.
func (r *jsonReader) more() (more, ok bool) {
	switch r.dec.PeekKind() {
	case '}', ']':
		_, err := r.dec.ReadToken()
		return false, err == nil
	case 0:
		return false, false
	default:
		return true, true
	}
}

// name reads an object member's name, without its quotes. A name with an
// escape is refused: it could spell a known name differently.
func (r *jsonReader) name() ([]byte, bool) {
	v, err := r.dec.ReadValue()
	if err != nil || len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
		return nil, false
	}
	return v[1 : len(v)-1], true
}

// objectOrNull reads the start of an object, or a null (isNull true).
func (r *jsonReader) objectOrNull() (isNull, ok bool) {
	switch r.kind() {
	case 'n':
		return true, r.skip()
	case '{':
		return false, r.open('{')
	default:
		return false, false
	}
}

// arrayOrNull reads the start of an array, or a null (isNull true).
func (r *jsonReader) arrayOrNull() (isNull, ok bool) {
	switch r.kind() {
	case 'n':
		return true, r.skip()
	case '[':
		return false, r.open('[')
	default:
		return false, false
	}
}

// str reads a string; a null leaves s as it is. Values the webhook
// compares with constants are not copied (see intern).
func (r *jsonReader) str(s *string) bool {
	v, err := r.dec.ReadValue()
	if err != nil || len(v) == 0 {
		return false
	}
	switch v[0] {
	case 'n':
		return true
	case '"':
		*s = unquote(v)
		return true
	default:
		return false
	}
}

// checkString reads a string or null without keeping it.
func (r *jsonReader) checkString() bool {
	v, err := r.dec.ReadValue()
	return err == nil && len(v) > 0 && (v[0] == '"' || v[0] == 'n')
}

// boolPtr reads a boolean into a new *bool, or a null into nil.
func (r *jsonReader) boolPtr(p **bool) bool {
	v, err := r.dec.ReadValue()
	if err != nil || len(v) == 0 {
		return false
	}
	switch v[0] {
	case 'n':
		*p = nil
	case 't', 'f':
		b := v[0] == 't'
		*p = &b
	default:
		return false
	}
	return true
}

// checkStrings reads an array of strings (null elements included, as
// encoding/json takes them) or a null, without keeping it.
func (r *jsonReader) checkStrings() bool {
	isNull, ok := r.arrayOrNull()
	if !ok || isNull {
		return ok
	}
	for {
		more, ok := r.more()
		if !ok || !more {
			return ok
		}
		if !r.checkString() {
			return false
		}
	}
}

// unquote returns the string a valid JSON string v holds.
func unquote(v jsontext.Value) string {
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return intern(inner)
	}
	b, err := jsontext.AppendUnquote(nil, v)
	if err != nil { // not after jsontext validated it
		return string(inner)
	}
	return string(b)
}

// intern returns the constant for the values every review repeats, a copy
// of b for any other.
func intern(b []byte) string {
	switch string(b) {
	case "":
		return ""
	case "v1":
		return "v1"
	case "pods":
		return "pods"
	case "Pod":
		return "Pod"
	case "CREATE":
		return "CREATE"
	case "UPDATE":
		return "UPDATE"
	case "admission.k8s.io/v1":
		return "admission.k8s.io/v1"
	case "AdmissionReview":
		return "AdmissionReview"
	case "apps/v1":
		return "apps/v1"
	case "ReplicaSet":
		return "ReplicaSet"
	case "cpu":
		return "cpu"
	case "memory":
		return "memory"
	case "NotRequired":
		return "NotRequired"
	case "RestartContainer":
		return "RestartContainer"
	}
	return string(b)
}
