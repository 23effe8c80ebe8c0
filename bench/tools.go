//go:build tools

// Package tools pins the upstream VPA updater and recommender so that
// `go build` can build them from this module at the version in go.mod:
//
//	go build -o vpa-updater k8s.io/autoscaler/vertical-pod-autoscaler/pkg/updater
//	go build -o vpa-recommender k8s.io/autoscaler/vertical-pod-autoscaler/pkg/recommender
//
// The local cluster (hack/cluster/build.sh, set recommender) builds the
// recommender from here.
package tools

import (
	_ "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/recommender"
	_ "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/updater"
)
