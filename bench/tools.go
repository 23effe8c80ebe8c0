//go:build tools

// Package tools pins the upstream VPA updater so that `go build` can build it
// from this module at the version in go.mod:
//
//	go build -o vpa-updater k8s.io/autoscaler/vertical-pod-autoscaler/pkg/updater
package tools

import (
	_ "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/updater"
)
