package resize

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CauseNodeCapacity and CauseUnsupportedPlatform are the StatusCause types of
// the API server's PodResizeValidator admission plugin (Kubernetes 1.36+).
// They are defined only in k8s.io/kubernetes, so they are spelled out here.
const (
	CauseNodeCapacity        metav1.CauseType = "NodeCapacity"
	CauseUnsupportedPlatform metav1.CauseType = "UnsupportedPlatform"
)

// Outcome classifies the result of a resize patch.
type Outcome string

const (
	// OutcomeAccepted: the patch was accepted.
	OutcomeAccepted Outcome = "Accepted"
	// OutcomeNodeCapacity: refused at admission because the pod would not
	// fit the node's allocatable resources. Record, do not retry.
	OutcomeNodeCapacity Outcome = "NodeCapacity"
	// OutcomeInvalid: refused for good (422 Invalid, an unsupported
	// platform, a change validation forbids). Record, do not retry.
	OutcomeInvalid Outcome = "Invalid"
	// OutcomeConflict: the pod changed under us; retry soon.
	OutcomeConflict Outcome = "Conflict"
	// OutcomeGone: the pod no longer exists; nothing to do.
	OutcomeGone Outcome = "Gone"
	// OutcomeTransient: anything else (5xx, 429, timeouts, a quota being
	// exceeded, an admission plugin not ready, connection errors); retry
	// with backoff.
	OutcomeTransient Outcome = "Transient"
	// OutcomeRejected: a Job update refused for good (422 Invalid, 403
	// Forbidden, 400 Bad Request): record, do not retry.
	OutcomeRejected Outcome = "Rejected"
)

// ClassifyPatchError tells what a resize patch error means.
func ClassifyPatchError(err error) Outcome {
	if err == nil {
		return OutcomeAccepted
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		// Not an answer from the API server: a timeout, a refused or reset
		// connection, a cancelled request.
		return OutcomeTransient
	}
	switch {
	case HasCause(err, CauseNodeCapacity):
		return OutcomeNodeCapacity
	case HasCause(err, CauseUnsupportedPlatform):
		return OutcomeInvalid
	case apierrors.IsInvalid(err):
		return OutcomeInvalid
	case apierrors.IsNotFound(err):
		return OutcomeGone
	case apierrors.IsConflict(err):
		return OutcomeConflict
	case apierrors.IsForbidden(err) && isPermanentForbidden(err):
		return OutcomeInvalid
	default:
		return OutcomeTransient
	}
}

// MayHaveApplied tells whether a failed patch may have been applied all the
// same: no answer came (a timeout, a reset connection, a cancelled request)
// or the API server answered with a server error (5xx: a timeout, an
// internal error after the request was sent). An answer of 4xx, and a
// connection that could not be made (nothing was sent), mean it was not.
func MayHaveApplied(err error) bool {
	if err == nil {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Code >= http.StatusInternalServerError || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	return !errors.Is(err, syscall.ECONNREFUSED)
}

// ClassifyJobPatchError tells what the error of a patch of a suspended Job's
// pod template means. A Job's template is refused with 422 Invalid ("field is
// immutable") where the API server cannot or may not change it (gate
// MutablePodResourcesForSuspendedJobs off, Kubernetes 1.34 and earlier), and
// admission policies refuse with 403 or 422: all of them are permanent for
// the values sent.
func ClassifyJobPatchError(err error) Outcome {
	if err == nil {
		return OutcomeAccepted
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return OutcomeTransient
	}
	switch {
	case apierrors.IsNotFound(err):
		return OutcomeGone
	case apierrors.IsConflict(err):
		return OutcomeConflict
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsBadRequest(err):
		return OutcomeRejected
	default:
		return OutcomeTransient
	}
}

// HasCause reports whether err is an API status error carrying a cause of
// the given type.
func HasCause(err error, cause metav1.CauseType) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	details := status.Status().Details
	if details == nil {
		return false
	}
	for _, c := range details.Causes {
		if c.Type == cause {
			return true
		}
	}
	return false
}

// isPermanentForbidden recognizes 403s that no retry can fix: the node lacks
// a feature the resize needs, resize is not supported for the pod, the
// namespace's LimitRanges refuse the values (LimitRanger checks pods/resize
// since Kubernetes 1.33; the values sent change when the LimitRanges do).
// Other 403s (RBAC, a quota, an admission plugin not ready yet) may clear
// up.
func isPermanentForbidden(err error) bool {
	msg := err.Error()
	for _, s := range []string{
		"which are not available on node",
		"cannot be resized",
		"resize is only supported on linux nodes",
		// LimitRanger: "maximum cpu usage per Container is 400m, ...",
		// "minimum memory usage per Pod is ...", "cpu max limit to request
		// ratio per Container is 4, ...".
		" usage per Container is ",
		" usage per Pod is ",
		" max limit to request ratio per ",
	} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
