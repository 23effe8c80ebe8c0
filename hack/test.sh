#!/usr/bin/env bash
# Unit tests of the product module and of the local cluster's hollow node.
# Prints go test's own summary lines.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."

go test -race -count=1 ./cmd/... ./pkg/... ./hack/demo/
# The hollow node's own models (readiness, kills, usage): a module of its own,
# hack/cluster, built with the v1.37 kubelet code the local cluster runs.
(cd hack/cluster && go test -count=1 ./cmd/hollow-node/)
# A short fuzz run of the admission webhook's request handling.
go test -run '^$' -fuzz '^FuzzHandleAdmissionReview$' -fuzztime 10000x -parallel 2 ./pkg/admission/
# Its fast decoders against the reference, and its patch writer against
# encoding/json.
go test -run '^$' -fuzz '^FuzzFastDecoders$' -fuzztime 10000x -parallel 2 ./pkg/admission/
go test -run '^$' -fuzz '^FuzzPatchJSON$' -fuzztime 10000x -parallel 2 ./pkg/admission/
# And of the records decoder, over random and adversarial annotations.
go test -run '^$' -fuzz '^FuzzDecodeAnnotation$' -fuzztime 10000x -parallel 2 ./pkg/records/
go test -run '^$' -fuzz '^FuzzDecodeCompact$' -fuzztime 10000x -parallel 2 ./pkg/records/
# And of the resize-window parser (VPA and namespace annotations).
go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 10000x -parallel 2 ./pkg/window/
# And of the JVM heap reading (pod specs) and the VPA's jvm annotation.
go test -run '^$' -fuzz '^FuzzParseOptions$' -fuzztime 10000x -parallel 2 ./pkg/jvm/
go test -run '^$' -fuzz '^FuzzParseAnnotation$' -fuzztime 10000x -parallel 2 ./pkg/jvm/
# And of the node room buckets, ConfigMaps every sharded updater replica writes.
go test -run '^$' -fuzz '^FuzzBucket$' -fuzztime 10000x -parallel 2 ./pkg/updater/noderoom/buckets/
