// Package eventsink builds the event recorder both binaries use: events on
// pods, Jobs and VPAs, queued and sent in the background, so that recording
// one never blocks and drops it when the queue is full.
package eventsink

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	vpascheme "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/scheme"
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
	scheme := runtime.NewScheme()
	if err := kubescheme.AddToScheme(scheme); err != nil {
		return nil, nil, fmt.Errorf("building the event scheme: %w", err)
	}
	if err := vpascheme.AddToScheme(scheme); err != nil {
		return nil, nil, fmt.Errorf("building the event scheme: %w", err)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx),
		record.WithCorrelatorOptions(record.CorrelatorOptions{LRUCacheSize: CacheSize}))
	broadcaster.StartStructuredLogging(4)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return broadcaster.NewRecorder(scheme, corev1.EventSource{Component: component}), broadcaster.Shutdown, nil
}
