//go:build tools

// Package cluster pins the upstream binaries of the v1.38 profile (built by ../build.sh, set
// control-plane-v1.38) so that `go mod tidy` keeps their dependencies in this module's
// go.mod/go.sum.
package cluster

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
