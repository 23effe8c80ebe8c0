// Package jvm reads, from a container's spec alone, the bound of its JVM's
// heap, and gives the least memory limit such a container may be lowered to
// in place. It is pure: no client, no clock, no logger.
//
// A JVM sizes its heap once, when it starts: an explicit -Xmx, or a share
// of the memory limit in force then (25% by default). Lowering the limit in
// place below heap + non-heap leaves the heap where it was, and the JVM is
// OOM-killed later, under load. So Inspect reads, in the order the JVM
// reads them, JAVA_TOOL_OPTIONS, JDK_JAVA_OPTIONS, the java command line
// (exec form, or a shell's -c script) or else the launch scripts' variables
// (JAVA_OPTS; Kafka's KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS,
// KAFKA_OPTS; Strimzi's dynamic heap), then _JAVA_OPTIONS; the last -Xmx
// wins; without one, the percentages decide. What it cannot read (valueFrom,
// envFrom, option files, what a shell computes) makes the heap unknown,
// never guessed. docs/jvm.md is the reader's guide.
//
// # The floor and its default
//
// Floor is heap + overhead: the memory a JVM uses besides its heap. The
// overhead has a fixed part and a share of the heap; DefaultOverhead is
// 512 MiB + 15% of the heap, chosen for a Kafka broker on a current JDK
// with G1 (Strimzi's images):
//
//   - metaspace and compressed class space: a broker loads some ten
//     thousand classes (Kafka, Scala, Jackson, metrics, the agents Strimzi
//     adds): 70 to 100 MiB;
//   - code cache: 240 MiB reserved, 50 to 100 MiB used by a broker that
//     has run for a while;
//   - thread stacks: 150 to 300 threads (network, I/O, replica fetchers,
//     log cleaner, purgatories, the controller), 1 MiB reserved each, a few
//     hundred KiB touched: 50 to 100 MiB;
//   - the allocator's arenas, compression codecs' native buffers, the JIT
//     compilers' memory: about 100 MiB;
//   - a base of direct buffers: the JDK keeps a temporary direct buffer per
//     thread for socket I/O of heap buffers: about 100 MiB.
//
// That is about 500 MiB whatever the heap: 512 MiB. What grows with the
// heap: G1's mark bitmap (1/64 of the heap), card table and block offset
// table (1/512 each) and remembered sets, 3 to 8% of the heap; and direct
// buffers beyond the base, which follow the broker's load (request sizes,
// connections), for which its heap was sized (MaxDirectMemorySize defaults
// to the heap size, so the JDK does not bound them sooner): 15% in all.
// So a broker with -Xmx1g has a floor of 1690 MiB (1.65 GiB), one with
// Strimzi's largest dynamic heap (5 GiB) 6400 MiB (6.25 GiB).
//
// Page cache is not in the floor: the kernel reclaims it before it
// OOM-kills, and a broker lowered to its floor loses cache, not its life.
// The overhead is overridable per VPA and container (Annotation), for
// smaller JVMs (a service with a 256 MiB heap needs far less) or for ones
// known to use more (Connect with many plugins, large
// -XX:MaxDirectMemorySize).
package jvm
