#!/usr/bin/env bash
# Copies the VerticalPodAutoscaler CRDs, verbatim, from the version of
# k8s.io/autoscaler/vertical-pod-autoscaler that go.mod requires into
# deploy/base/crd/ (and, through hack/deploy/update-chart.sh, into the chart's
# crds/). The CRD is upstream's API: we never edit it, we only follow
# the version we build against.
#
# Usage: hack/deploy/update-crd.sh           # copy
#        hack/deploy/update-crd.sh --verify  # fail if the committed copy differs
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/../.."

readonly module=k8s.io/autoscaler/vertical-pod-autoscaler
readonly dest=deploy/base/crd/vpa-v1-crd-gen.yaml

mode=copy
case "${1:-}" in
  "") ;;
  --verify) mode=verify ;;
  *) echo "usage: $0 [--verify]" >&2; exit 2 ;;
esac

dir=$(go list -m -f '{{.Dir}}' "${module}")
version=$(go list -m -f '{{.Version}}' "${module}")
if [[ -z ${dir} ]]; then
  # Not in the module cache yet.
  go mod download "${module}"
  dir=$(go list -m -f '{{.Dir}}' "${module}")
fi
src="${dir}/deploy/vpa-v1-crd-gen.yaml"
[[ -f ${src} ]] || { echo "FAIL: ${src} not found in ${module}@${version}" >&2; exit 1; }

if [[ ${mode} == verify ]]; then
  if cmp -s "${src}" "${dest}"; then
    echo "OK: ${dest} matches ${module}@${version}"
  else
    echo "FAIL: ${dest} differs from ${module}@${version} deploy/vpa-v1-crd-gen.yaml; run hack/deploy/update-crd.sh" >&2
    diff -u "${src}" "${dest}" | head -n 40 >&2 || true
    exit 1
  fi
  exit 0
fi

cp "${src}" "${dest}"
chmod 0644 "${dest}"
echo "copied ${module}@${version} deploy/vpa-v1-crd-gen.yaml to ${dest}"
# The chart's crds/ holds the same copy.
hack/deploy/update-chart.sh
