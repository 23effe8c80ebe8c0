// Package iptables stands in for sigs.k8s.io/iptables-wrappers/pkg/iptables,
// which the Go module proxy does not serve and which Kubernetes 1.38's kubelet
// imports for one thing: the KUBE-IPTABLES-HINT and KUBE-FIREWALL chains it
// sets up on the host for other components. A hollow node sets up nothing on
// its host: NewBestEffort finds no iptables, and the kubelet logs "No iptables
// support on this system" and goes on. Only the names the kubelet uses are
// here; nothing else links this module (go.mod replaces the real one with it
// for the hollow-node build of the v1.38 set).
package iptables

import (
	"context"
	"time"
)

// Table, Chain, RulePosition and Protocol name what the kubelet passes.
type (
	Table        string
	Chain        string
	RulePosition string
	Protocol     string
)

// The tables, chains and positions the kubelet names.
const (
	TableFilter Table = "filter"
	TableMangle Table = "mangle"
	TableNAT    Table = "nat"

	ChainInput  Chain = "INPUT"
	ChainOutput Chain = "OUTPUT"

	Prepend RulePosition = "-I"
	Append  RulePosition = "-A"
)

// Mode says which iptables binaries to use; there are none here.
type Mode int

// UseInstalledMode is the mode the kubelet asks for.
const UseInstalledMode Mode = 0

// Interface is the part of an iptables client the kubelet calls.
type Interface interface {
	EnsureChain(ctx context.Context, table Table, chain Chain) (bool, error)
	EnsureRule(ctx context.Context, position RulePosition, table Table, chain Chain, args ...string) (bool, error)
	IsIPv6() bool
	Protocol() Protocol
	Monitor(ctx context.Context, canary Chain, tables []Table, reloadFunc func(), interval time.Duration)
}

// NewBestEffort returns a client per IP family whose iptables works: none.
func NewBestEffort(context.Context, Mode) map[Protocol]Interface { return map[Protocol]Interface{} }
