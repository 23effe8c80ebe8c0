#!/usr/bin/env bash
# Longer fuzz runs of the admission webhook's request decoding and handling,
# of the records decoder (annotations on VPAs, untrusted input), of the
# resize-window parser (VPA and namespace annotations) and of the JVM heap
# reading (pod specs) and jvm annotation parser, and of the node room buckets
# (ConfigMaps every updater replica writes). A
# failing input is written to the package's testdata/fuzz/ and replayed by
# every later `go test` of the package.
#   FUZZTIME  how long each fuzz target runs (default 5m)
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."

go test -run '^$' -fuzz '^FuzzHandleAdmissionReview$' -fuzztime "${FUZZTIME:-5m}" ./pkg/admission/
go test -run '^$' -fuzz '^FuzzFastDecoders$' -fuzztime "${FUZZTIME:-5m}" ./pkg/admission/
go test -run '^$' -fuzz '^FuzzPatchJSON$' -fuzztime "${FUZZTIME:-5m}" ./pkg/admission/
go test -run '^$' -fuzz '^FuzzAppendReview$' -fuzztime "${FUZZTIME:-5m}" ./pkg/admission/
go test -run '^$' -fuzz '^FuzzDecodeAnnotation$' -fuzztime "${FUZZTIME:-5m}" ./pkg/records/
go test -run '^$' -fuzz '^FuzzDecodeCompact$' -fuzztime "${FUZZTIME:-5m}" ./pkg/records/
go test -run '^$' -fuzz '^FuzzParse$' -fuzztime "${FUZZTIME:-5m}" ./pkg/window/
go test -run '^$' -fuzz '^FuzzParseOptions$' -fuzztime "${FUZZTIME:-5m}" ./pkg/jvm/
go test -run '^$' -fuzz '^FuzzParseAnnotation$' -fuzztime "${FUZZTIME:-5m}" ./pkg/jvm/
go test -run '^$' -fuzz '^FuzzBucket$' -fuzztime "${FUZZTIME:-5m}" ./pkg/updater/noderoom/buckets/
