package admission

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// appendReview appends the AdmissionReview that answers with resp, byte for
// byte as json.Marshal writes it (reviewOf). The answers of the pod webhook
// (a uid, allowed, a patch) are written directly; any other goes through
// json.Marshal. TestAppendReviewIsEncodingJSON checks the two agree.
func appendReview(dst []byte, resp *admissionv1.AdmissionResponse) ([]byte, error) {
	if resp.Result != nil || len(resp.AuditAnnotations) > 0 || len(resp.Warnings) > 0 {
		b, err := json.Marshal(reviewOf(resp))
		if err != nil {
			return dst, fmt.Errorf("encoding the admission response: %w", err)
		}
		return append(dst, b...), nil
	}
	dst = append(append(append(dst, `{"kind":"AdmissionReview","apiVersion":"`...), reviewGV...), `","response":{"uid":`...)
	dst = appendJSONString(dst, string(resp.UID))
	dst = strconv.AppendBool(append(dst, `,"allowed":`...), resp.Allowed)
	if len(resp.Patch) > 0 {
		// encoding/json writes a []byte in standard base64.
		dst = append(base64.StdEncoding.AppendEncode(append(dst, `,"patch":"`...), resp.Patch), '"')
	}
	if resp.PatchType != nil {
		dst = appendJSONString(append(dst, `,"patchType":`...), string(*resp.PatchType))
	}
	return append(dst, "}}"...), nil
}

// reviewOf is the AdmissionReview that answers with resp.
func reviewOf(resp *admissionv1.AdmissionResponse) *admissionv1.AdmissionReview {
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: reviewGV, Kind: "AdmissionReview"},
		Response: resp,
	}
}

// appendJSONString appends s as a JSON string, as encoding/json writes it.
// Printable ASCII other than the characters encoding/json escapes (quote,
// backslash, and <, > and & for HTML) is written as it is; a string with
// any other byte goes through encoding/json.
func appendJSONString[S ~string | ~[]byte](dst []byte, s S) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(string(s)) // a string always encodes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// Buffers of the answers and patches, reused across requests. A buffer that
// grew past maxPooledBytes (a pod with hundreds of containers) is left to
// the collector rather than kept.
const maxPooledBytes = 64 << 10

var bodyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func getBody() *[]byte { return bodyBuffers.Get().(*[]byte) }

func putBody(b *[]byte) {
	if cap(*b) > maxPooledBytes {
		return
	}
	*b = (*b)[:0]
	bodyBuffers.Put(b)
}

var patchBuilders = sync.Pool{New: func() any {
	return &patchBuilder{toJSON: true, buf: make([]byte, 0, 512), note: make([]byte, 0, 128), path: make([]byte, 0, 64)}
}}

func getPatchBuilder() *patchBuilder { return patchBuilders.Get().(*patchBuilder) }

func putPatchBuilder(b *patchBuilder) {
	if cap(b.buf) > maxPooledBytes || cap(b.note) > maxPooledBytes || cap(b.path) > maxPooledBytes {
		return
	}
	b.buf, b.note, b.n = b.buf[:0], b.note[:0], 0
	patchBuilders.Put(b)
}
