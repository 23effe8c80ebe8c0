package jvm

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Needed says what of a container's command, args, env and envFrom Inspect
// reads, whether its VPA declares it or not: what a cache of pods must keep
// of it (pkg/cachetrim).
type Needed uint8

const (
	// NeedNothing: the container shows no JVM, and a declaration would
	// find the JVM's default heap without reading any of them.
	NeedNothing Needed = iota
	// NeedEnvFrom: the container shows no JVM; a declaration reads only
	// its envFrom (a variable the JVM reads may come from it).
	NeedEnvFrom
	// NeedAll: the container shows a JVM, or a declaration reads more.
	NeedAll
)

// SpecNeeded tells what Inspect reads of c's command, args, env and
// envFrom: Inspect of c without them (or with its envFrom only) says what
// it says of c, declared or not, unless it needs all of them.
func SpecNeeded(c *corev1.Container) Needed {
	if showsNothing(c) {
		return NeedNothing
	}
	return specNeeded(c)
}

// specNeeded is SpecNeeded by Inspect alone.
func specNeeded(c *corev1.Container) Needed {
	if Inspect(c, nil).JVM {
		return NeedAll
	}
	declared := Inspect(c, &Declaration{})
	bare := &corev1.Container{Name: c.Name}
	if Inspect(bare, &Declaration{}) == declared {
		return NeedNothing
	}
	bare.EnvFrom = c.EnvFrom
	if Inspect(bare, &Declaration{}) == declared {
		return NeedEnvFrom
	}
	return NeedAll
}

// showsNothing tells, cheaply, that Inspect reads nothing of c's command,
// args, env and envFrom, declared or not (most containers): its env is
// within bounds and sets no variable the JVM reads, it has no envFrom, and
// no argument names java or refers to a variable. A container it does not
// tell of is asked of Inspect.
func showsNothing(c *corev1.Container) bool {
	if len(c.EnvFrom) > 0 || len(c.Env) > MaxEnv {
		return false
	}
	for i := range c.Env {
		if slices.Contains(readVariables, c.Env[i].Name) {
			return false
		}
	}
	for _, list := range [][]string{c.Command, c.Args} {
		for _, a := range list {
			if strings.Contains(a, "java") || strings.Contains(a, "$(") {
				return false
			}
		}
	}
	return true
}
