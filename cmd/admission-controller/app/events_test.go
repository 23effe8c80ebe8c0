package app

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/vpa-inplace/vpa-inplace/pkg/admission"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// The recorder run wires sends events on VPAs, as the admission controller.
func TestRecorderSendsEventsOnVPAs(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	kube := kubefake.NewClientset()
	recorder, stop, err := newRecorder(ctx, kube)
	require.NoError(t, err)
	defer stop()
	vpa := testvpa.New("web").Obj()
	recorder.Eventf(vpa, corev1.EventTypeNormal, admission.ReasonStartupBoostApplied, "Boosted CPU of container %s", "app")

	var events *corev1.EventList
	require.Eventually(t, func() bool {
		events, err = kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		return err == nil && len(events.Items) == 1
	}, time.Minute, 10*time.Millisecond)
	e := events.Items[0]
	assert.Equal(t, admission.ReasonStartupBoostApplied, e.Reason)
	assert.Equal(t, "Boosted CPU of container app", e.Message)
	assert.Equal(t, UserAgent, e.Source.Component)
	assert.Equal(t, "VerticalPodAutoscaler", e.InvolvedObject.Kind)
	assert.Equal(t, "web", e.InvolvedObject.Name)
	assert.Equal(t, vpa.UID, e.InvolvedObject.UID)
}
