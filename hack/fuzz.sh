#!/usr/bin/env bash
# Longer fuzz run of the admission webhook's request decoding and handling.
# A failing input is written to pkg/admission/testdata/fuzz/ and replayed by
# every later `go test` of the package.
#   FUZZTIME  how long the fuzz target runs (default 5m)
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."

go test -run '^$' -fuzz '^FuzzHandleAdmissionReview$' -fuzztime "${FUZZTIME:-5m}" ./pkg/admission/
