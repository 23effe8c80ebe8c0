package jvm

import corev1 "k8s.io/api/core/v1"

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
