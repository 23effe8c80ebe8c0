// Package eventsink builds the event recorder both binaries use: events on
// pods, Jobs and VPAs, queued and sent in the background, so that recording
// one never blocks and drops it when the queue is full.
package eventsink

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// CacheSize is the size of each of the event correlator's caches. It
// dedups and aggregates repeated events per object in caches of 4,096
// entries by default (about 2 KB each), sized for components that repeat
// themselves; ours send one event per object and change (the updater) or
// per boosted container of a new pod (the admission controller), so a
// quarter of that keeps what they can use.
const CacheSize = 1024

// New returns a recorder whose events name component as their source, and
// the function that stops it.
func New(ctx context.Context, kube kubernetes.Interface, component string) (record.EventRecorder, func(), error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, nil, err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx),
		record.WithCorrelatorOptions(record.CorrelatorOptions{LRUCacheSize: CacheSize}))
	broadcaster.StartStructuredLogging(4)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return broadcaster.NewRecorder(scheme, corev1.EventSource{Component: component}), broadcaster.Shutdown, nil
}

// newScheme returns the kinds events are recorded on, which the recorder
// names in each event: pods, Jobs and VPAs. Every built-in kind, as in the
// clientset's scheme, would keep about 160 KB more for nothing.
func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, batchv1.AddToScheme, vpatypes.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("building the event scheme: %w", err)
		}
	}
	return scheme, nil
}
