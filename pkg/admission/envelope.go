package admission

import (
	"bytes"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	sigsjson "sigs.k8s.io/json"
)

// rawValue is a JSON value as received, "null" and absent alike empty. It
// refers to the decoded input, which must outlive it: sigsjson's Unmarshal,
// like encoding/json's, hands UnmarshalJSON a slice of its input, so keeping
// it copies nothing.
type rawValue []byte

func (v *rawValue) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*v = nil
		return nil
	}
	*v = b
	return nil
}

func (v rawValue) present() bool { return len(v) > 0 }

// reviewEnvelope is an admission.k8s.io/v1 AdmissionReview decoded as
// strictly as admissionv1.AdmissionReview, except that the objects are not
// copied.
type reviewEnvelope struct {
	metav1.TypeMeta `json:",inline"`
	Request         *reviewRequest                 `json:"request"`
	Response        *admissionv1.AdmissionResponse `json:"response"`
}

// reviewRequest shadows the objects of admissionv1.AdmissionRequest: the
// shallower field wins in Go's JSON decoding.
type reviewRequest struct {
	admissionv1.AdmissionRequest `json:",inline"`
	Object                       rawValue `json:"object"`
	OldObject                    rawValue `json:"oldObject"`
}

// decodeReview decodes an admission.k8s.io/v1 AdmissionReview with a
// request, once. The request's objects refer to body, not to copies. Of the
// request, the fields the endpoints read are kept: uid, resource,
// subresources, name, namespace, operation, dry run and the objects; the
// others (kinds, user info, options) are checked to be of their types,
// as admissionv1.AdmissionReview would decode them, and dropped.
func decodeReview(body []byte) (*admissionv1.AdmissionRequest, error) {
	if req, ok := decodeReviewFast(body); ok {
		return req, nil
	}
	return decodeReviewReference(body)
}

// decodeReviewReference is decodeReview through sigsjson.
func decodeReviewReference(body []byte) (*admissionv1.AdmissionRequest, error) {
	if len(body) == 0 {
		return nil, badRequest("empty request body: expected an AdmissionReview")
	}
	var review reviewEnvelope
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &review); err != nil {
		return nil, badRequest("decoding the AdmissionReview: %v", err)
	}
	if review.APIVersion != reviewGV || review.Kind != "AdmissionReview" {
		return nil, badRequest("expected kind AdmissionReview of apiVersion %s, got kind %q of apiVersion %q",
			reviewGV, review.Kind, review.APIVersion)
	}
	if review.Request == nil {
		return nil, badRequest("the AdmissionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, badRequest("the AdmissionReview's request has no uid")
	}
	req := &review.Request.AdmissionRequest
	req.Object.Raw, req.OldObject.Raw = review.Request.Object, review.Request.OldObject
	return req, nil
}

// decodeReviewFast is decodeReview of a well-formed review in one pass; ok
// false leaves the answer to decodeReviewReference.
func decodeReviewFast(body []byte) (req *admissionv1.AdmissionRequest, ok bool) {
	r := newJSONReader(body)
	defer r.release()
	if !r.open('{') {
		return nil, false
	}
	var apiVersion, kind string
	var seen names
	for {
		more, ok := r.more()
		if !ok {
			return nil, false
		}
		if !more {
			break
		}
		name, ok := r.name()
		if !ok {
			return nil, false
		}
		switch string(name) {
		case "apiVersion":
			ok = seen.once(0) && r.str(&apiVersion)
		case "kind":
			ok = seen.once(1) && r.str(&kind)
		case "request":
			if ok = seen.once(2); ok {
				req, ok = readRequest(r)
			}
		case "response":
			// Never sent to a webhook; its types are left to the reference.
			ok = seen.once(3) && r.kind() == 'n' && r.skip()
		default:
			ok = r.skip()
		}
		if !ok {
			return nil, false
		}
	}
	if !r.end() || apiVersion != reviewGV || kind != "AdmissionReview" || req == nil || req.UID == "" {
		return nil, false
	}
	return req, true
}

// readRequest reads an AdmissionRequest object (not null).
func readRequest(r *jsonReader) (*admissionv1.AdmissionRequest, bool) {
	if !r.open('{') {
		return nil, false
	}
	req := &admissionv1.AdmissionRequest{}
	var seen names
	for {
		more, ok := r.more()
		if !ok {
			return nil, false
		}
		if !more {
			return req, true
		}
		name, ok := r.name()
		if !ok {
			return nil, false
		}
		switch string(name) {
		case "uid":
			ok = seen.once(0) && r.str((*string)(&req.UID))
		case "resource":
			ok = seen.once(1) && readGVR(r, &req.Resource)
		case "subResource":
			ok = seen.once(2) && r.str(&req.SubResource)
		case "requestSubResource":
			ok = seen.once(3) && r.str(&req.RequestSubResource)
		case "name":
			ok = seen.once(4) && r.str(&req.Name)
		case "namespace":
			ok = seen.once(5) && r.str(&req.Namespace)
		case "operation":
			ok = seen.once(6) && r.str((*string)(&req.Operation))
		case "object":
			if ok = seen.once(10); ok {
				req.Object.Raw, ok = readRaw(r)
			}
		case "oldObject":
			if ok = seen.once(11); ok {
				req.OldObject.Raw, ok = readRaw(r)
			}
		// Checked, not kept: each time they are given, as encoding/json
		// decodes each.
		case "kind", "requestKind":
			ok = checkFields(r, "group", "version", "kind")
		case "requestResource":
			ok = checkFields(r, "group", "version", "resource")
		case "userInfo":
			ok = checkUserInfo(r)
		case "dryRun":
			ok = seen.once(12) && r.boolPtr(&req.DryRun)
		default: // options (any value, as runtime.RawExtension takes it) and unknown fields
			ok = r.skip()
		}
		if !ok {
			return nil, false
		}
	}
}

// readRaw reads any value as it is, nil for null.
func readRaw(r *jsonReader) ([]byte, bool) {
	v, ok := r.value()
	if !ok || v.Kind() == 'n' {
		return nil, ok
	}
	return v, true
}

// readGVR reads a GroupVersionResource object, or null.
func readGVR(r *jsonReader, gvr *metav1.GroupVersionResource) bool {
	isNull, ok := r.objectOrNull()
	if !ok || isNull {
		return ok
	}
	var seen names
	for {
		more, ok := r.more()
		if !ok || !more {
			return ok
		}
		name, ok := r.name()
		if !ok {
			return false
		}
		switch string(name) {
		case "group":
			ok = seen.once(0) && r.str(&gvr.Group)
		case "version":
			ok = seen.once(1) && r.str(&gvr.Version)
		case "resource":
			ok = seen.once(2) && r.str(&gvr.Resource)
		default:
			ok = r.skip()
		}
		if !ok {
			return false
		}
	}
}

// checkFields reads an object whose named fields are strings, or null,
// without keeping it.
func checkFields(r *jsonReader, names ...string) bool {
	isNull, ok := r.objectOrNull()
	if !ok || isNull {
		return ok
	}
	for {
		more, ok := r.more()
		if !ok || !more {
			return ok
		}
		name, ok := r.name()
		if !ok {
			return false
		}
		known := false
		for _, n := range names {
			if string(name) == n {
				known = true
				break
			}
		}
		if known {
			ok = r.checkString()
		} else {
			ok = r.skip()
		}
		if !ok {
			return false
		}
	}
}

// checkUserInfo reads an authentication/v1 UserInfo, or null, without
// keeping it.
func checkUserInfo(r *jsonReader) bool {
	isNull, ok := r.objectOrNull()
	if !ok || isNull {
		return ok
	}
	for {
		more, ok := r.more()
		if !ok || !more {
			return ok
		}
		name, ok := r.name()
		if !ok {
			return false
		}
		switch string(name) {
		case "username", "uid":
			ok = r.checkString()
		case "groups":
			ok = r.checkStrings()
		case "extra":
			ok = checkExtra(r)
		default:
			ok = r.skip()
		}
		if !ok {
			return false
		}
	}
}

// checkExtra reads a map of string lists, or null, without keeping it.
func checkExtra(r *jsonReader) bool {
	isNull, ok := r.objectOrNull()
	if !ok || isNull {
		return ok
	}
	for {
		more, ok := r.more()
		if !ok || !more {
			return ok
		}
		// Any name is a key of the map, escaped or not.
		if _, err := r.dec.ReadValue(); err != nil || !r.checkStrings() {
			return false
		}
	}
}
