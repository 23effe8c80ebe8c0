// Package testheap measures, for benchmarks, the heap that values hold.
package testheap

import "runtime"

// Held returns the bytes of live heap held by what build returns: the heap
// after a collection, with the value alive, less the heap before build ran.
func Held(build func() any) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// Allocated returns the bytes allocated on the heap while run runs, freed or
// not: what a request costs the process, whatever the collector does after.
// Allocations of other goroutines running meanwhile count too.
func Allocated(run func()) int64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	run()
	runtime.ReadMemStats(&after)
	return int64(after.TotalAlloc) - int64(before.TotalAlloc)
}
