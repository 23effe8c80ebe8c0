#!/usr/bin/env bash
# Validates the Kubernetes objects of YAML files against the OpenAPI v3
# schemas of every Kubernetes minor version vpa-inplace supports, 1.33 to
# 1.38: unknown fields, required fields, types, enums, formats and list keys
# (hack/openapi, a module of its own). The schemas are those the API server
# serves, as published in the k8s.io/kubernetes module
# (api/openapi-spec/v3/*.json): each pinned version's module zip is fetched
# once through the Go module proxy (`go mod download`) and read from the
# module cache afterwards, with no other network access.
#
# Usage: hack/openapi/check.sh [-v] FILE.yaml...
#        (-v prints every object checked or skipped)
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

# One patch release per supported minor version (1.38: its newest
# pre-release the Go module proxy serves). Changing one downloads its module
# zip (about 20 MB) once.
readonly versions=(v1.33.13 v1.34.4 v1.35.4 v1.36.3 v1.37.1 v1.38.0-beta.0)

# toolchain VERSION: the Go toolchain that may download the module: 1.38's
# go.mod says `go 1.27.0`, which the Go in PATH (1.26) refuses; the go
# command fetches go1.27.3 from the Go module proxy once (as
# hack/cluster/build.sh does for the v1.38 cluster).
toolchain() {
  case $1 in
    v1.38.*) echo go1.27.3 ;;
    *) echo local ;;
  esac
}

verbose=()
if [[ ${1:-} == -v ]]; then
  verbose=(-v)
  shift
fi
if [[ $# -eq 0 ]]; then
  echo "usage: $0 [-v] FILE.yaml..." >&2
  exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT

specs=()
for v in "${versions[@]}"; do
  # Outside any module, so that nothing is added to a go.mod.
  if ! zip=$(cd "${work}" && GOTOOLCHAIN=$(toolchain "${v}") GOWORK=off GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@${v}" \
    | sed -n 's/^[[:space:]]*"Zip": "\(.*\)",\{0,1\}$/\1/p'); then
    echo "FAIL: cannot get the k8s.io/kubernetes ${v} module (its OpenAPI) through the Go module proxy" >&2
    exit 1
  fi
  [[ -f ${zip} ]] || { echo "FAIL: no module zip for k8s.io/kubernetes ${v}" >&2; exit 1; }
  specs+=(-spec "${v}=${zip}")
done

(cd hack/openapi && GOWORK=off go build -o "${work}/openapi-check" .) || {
  echo "FAIL: cannot build hack/openapi" >&2
  exit 1
}
files=()
for f in "$@"; do
  case ${f} in /*) files+=("${f}") ;; *) files+=("${root}/${f}") ;; esac
done
"${work}/openapi-check" "${specs[@]}" "${verbose[@]}" "${files[@]}"
