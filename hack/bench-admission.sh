#!/usr/bin/env bash
# Benchmarks our pod admission handler against upstream VPA's (the version
# bench/go.mod pins) in one process (make bench-admission): both wired as
# their mains wire them, over fake clientsets with synced informers, at
# BENCH_ADMISSION_VPAS VPAs in the namespace (1,100,1000), plus the heap each
# holds after sync at 1,000 VPAs, Deployments and ReplicaSets. Prints the
# tables and writes bench/results/<date>-admission.md (BENCH_RESULTS).
# No cluster is needed. See bench/README.md.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."

vpas=${BENCH_ADMISSION_VPAS:-1,100,1000}
rounds=${BENCH_ADMISSION_ROUNDS:-5}
results=${BENCH_RESULTS:-bench/results/$(date -u +%Y-%m-%d)-admission.md}

cd bench
go build -o ../_output/bin/admission-bench ./cmd/admission-bench
cd ..
nice -n 10 _output/bin/admission-bench --vpas="${vpas}" --rounds="${rounds}" --results="${results}" \
  --reproduce="make bench-admission"
