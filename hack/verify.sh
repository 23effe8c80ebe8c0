#!/usr/bin/env bash
# Formatting, vet and module tidiness of the product module; the bench
# module builds; the e2e sharded phase's start script; make bench's start
# logic; the documentation's links and flag reference (hack/docs/verify.sh).
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l cmd pkg e2e hack/images hack/demo 2>/dev/null || true)
if [[ -n "${unformatted}" ]]; then
  echo "gofmt would change:" >&2
  echo "${unformatted}" >&2
  exit 1
fi
go vet ./...
# The end-to-end suite builds only with its tag.
go vet -tags e2e ./e2e/
before=$(cat go.mod go.sum | sha256sum)
go mod tidy
after=$(cat go.mod go.sum | sha256sum)
if [[ "${before}" != "${after}" ]]; then
  echo "go.mod/go.sum were not tidy (now fixed in the work tree; commit them)" >&2
  exit 1
fi
# bench/ is a module of its own that builds the product's packages: a new
# dependency of theirs must reach its go.sum too.
(cd bench && go build ./... && go vet ./...)
# The e2e suite's sharded phase without a cluster: the flags its replicas are
# started with against the updater's own parsing and validation.
hack/e2e-shards-check.sh
# make bench's start logic without a cluster: every updater replica its
# modes start (the sharded mode's too), with its flags, against the
# updater's own parsing and validation.
hack/bench-check.sh
hack/docs/verify.sh
echo "verify: ok"
