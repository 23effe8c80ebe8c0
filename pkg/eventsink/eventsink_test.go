package eventsink

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// TestRecorderNamesEveryKindEventsAreRecordedOn: the recorder's scheme
// knows pods, Jobs and VPAs, so each event names its object's kind and
// version; an object of another kind is not recorded.
func TestRecorderNamesEveryKindEventsAreRecordedOn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := fake.NewClientset()
	recorder, stop, err := New(ctx, kube, "test")
	require.NoError(t, err)
	defer stop()
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}
	}
	for _, obj := range []runtime.Object{
		&corev1.Pod{ObjectMeta: meta("pod")},
		&batchv1.Job{ObjectMeta: meta("job")},
		&vpatypes.VerticalPodAutoscaler{ObjectMeta: meta("vpa")},
		&appsv1.Deployment{ObjectMeta: meta("deployment")},
	} {
		recorder.Event(obj, corev1.EventTypeNormal, "Test", "recorded")
	}
	want := map[string]string{"Pod/pod": "v1", "Job/job": "batch/v1", "VerticalPodAutoscaler/vpa": "autoscaling.k8s.io/v1"}
	got := map[string]string{}
	require.Eventually(t, func() bool {
		events, err := kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, e := range events.Items {
			got[e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name] = e.InvolvedObject.APIVersion
			assert.Equal(t, "test", e.Source.Component)
		}
		return len(got) >= len(want)
	}, time.Minute, 10*time.Millisecond)
	assert.Equal(t, want, got, "a Deployment is not a kind events are recorded on")
}
