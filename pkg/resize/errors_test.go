package resize

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	neturl "net/url"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NodeCapacityError is the error the API server's PodResizeValidator returns
// (Kubernetes 1.36+), as seen on the wire.
func NodeCapacityError(pod string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    403,
		Reason:  metav1.StatusReasonForbidden,
		Message: fmt.Sprintf("pods %q is forbidden: node didn't have enough allocatable resources: cpu, requested: 5000, allocatable: 4000", pod),
		Details: &metav1.StatusDetails{Name: pod, Kind: "pods", Causes: []metav1.StatusCause{{Type: CauseNodeCapacity}}},
	}}
}

func TestClassifyPatchError(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	tests := []struct {
		name string
		err  error
		want Outcome
	}{
		{"nil: accepted", nil, OutcomeAccepted},
		{"403 with NodeCapacity cause", NodeCapacityError("p"), OutcomeNodeCapacity},
		{"403 with NodeCapacity cause, wrapped", fmt.Errorf("resizing: %w", NodeCapacityError("p")), OutcomeNodeCapacity},
		{"403 with UnsupportedPlatform cause", &apierrors.StatusError{ErrStatus: metav1.Status{Code: 403, Reason: metav1.StatusReasonForbidden,
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: CauseUnsupportedPlatform}}}}}, OutcomeInvalid},
		{"403 node lacks a declared feature", apierrors.NewForbidden(pods, "p", errors.New(`pod update requires features X which are not available on node "n"`)), OutcomeInvalid},
		// LimitRanger checks pods/resize since 1.33: the same values are
		// refused until the LimitRange changes, and then the recommendation
		// does (it is kept within the LimitRanges).
		{"403 LimitRanger max", apierrors.NewForbidden(pods, "p", errors.New("maximum cpu usage per Container is 400m, but limit is 600m")), OutcomeInvalid},
		{"403 LimitRanger min", apierrors.NewForbidden(pods, "p", errors.New("minimum memory usage per Pod is 64Mi, but request is 32Mi")), OutcomeInvalid},
		{"403 LimitRanger ratio", apierrors.NewForbidden(pods, "p", errors.New("cpu max limit to request ratio per Container is 4, but provided ratio is 20.000000")), OutcomeInvalid},
		{"403 exceeded quota", apierrors.NewForbidden(pods, "p", errors.New("exceeded quota: q")), OutcomeTransient},
		{"403 admission not ready", apierrors.NewForbidden(pods, "p", errors.New("not yet ready to handle request")), OutcomeTransient},
		{"422 QoS change", apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", field.ErrorList{field.Invalid(field.NewPath("spec"), "Guaranteed", "Pod QOS Class may not change as a result of resizing")}), OutcomeInvalid},
		{"404", apierrors.NewNotFound(pods, "p"), OutcomeGone},
		{"409", apierrors.NewConflict(pods, "p", errors.New("changed")), OutcomeConflict},
		{"500", apierrors.NewInternalError(errors.New("boom")), OutcomeTransient},
		{"429", apierrors.NewTooManyRequests("slow down", 1), OutcomeTransient},
		{"504 server timeout", apierrors.NewTimeoutError("timeout", 1), OutcomeTransient},
		{"client timeout", context.DeadlineExceeded, OutcomeTransient},
		{"connection refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, OutcomeTransient},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, ClassifyPatchError(tc.err))
		})
	}
}

// A patch whose answer was lost, or answered with a server error, may have
// been applied: the places it holds are kept until the pod shows it.
func TestMayHaveApplied(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	url := "https://127.0.0.1:6443/api/v1/namespaces/default/pods/p/resize"
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"client timeout", &neturl.Error{Op: "Patch", URL: url, Err: context.DeadlineExceeded}, true},
		{"connection reset", &neturl.Error{Op: "Patch", URL: url, Err: &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}, true},
		{"unexpected EOF", &neturl.Error{Op: "Patch", URL: url, Err: io.ErrUnexpectedEOF}, true},
		{"cancelled", fmt.Errorf("patch: %w", context.Canceled), true},
		{"504 server timeout", apierrors.NewTimeoutError("timeout", 1), true},
		{"500 server timeout", apierrors.NewServerTimeout(pods, "patch", 1), true},
		{"500", apierrors.NewInternalError(errors.New("etcdserver: request timed out")), true},
		{"503", apierrors.NewServiceUnavailable("unavailable"), true},
		{"connection refused", &neturl.Error{Op: "Patch", URL: url, Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}, false},
		{"no route (dial)", &neturl.Error{Op: "Patch", URL: url, Err: &net.OpError{Op: "dial", Err: errors.New("no route to host")}}, false},
		{"429", apierrors.NewTooManyRequests("slow down", 1), false},
		{"409", apierrors.NewConflict(pods, "p", errors.New("changed")), false},
		{"404", apierrors.NewNotFound(pods, "p"), false},
		{"403 NodeCapacity", NodeCapacityError("p"), false},
		{"422", apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, MayHaveApplied(tc.err))
		})
	}
}
