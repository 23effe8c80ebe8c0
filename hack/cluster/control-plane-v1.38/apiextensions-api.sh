#!/usr/bin/env bash
# Lays out the module k8s.io/apiextensions-api for the v1.38 build set, which the Go module
# proxy does not serve (it refuses every version of that module, as it refuses k8s.io/ktesting,
# which only tests import).
#
#   hack/cluster/control-plane-v1.38/apiextensions-api.sh DEST
#
# Kubernetes 1.38 moved the CustomResourceDefinition types and their generated clients out of
# k8s.io/apiextensions-apiserver into that new module (the old packages stay as aliases of the
# new ones). The packages moved as they were: pkg/apis/apiextensions/{v1,v1beta1} (types,
# deep copies, defaults, protobuf, OpenAPI model names) and pkg/client/... . This script takes
# them from k8s.io/apiextensions-apiserver $SOURCE_VERSION (served by the proxy), without the
# conversions to the internal version (those stayed in apiextensions-apiserver) and without
# tests, and rewrites their import paths. A field that 1.38 added to the CRD types would fail
# the build of apiextensions-apiserver v0.38's generated conversions, so a build that passes
# has every field 1.38 converts. What differs from the real module: the protobuf package name
# (1.38 renamed it; the wire format is the same) and the packages' doc comments.
#
# go.mod replaces k8s.io/apiextensions-api with DEST (./apiextensions-api, ignored by git).
# Drop the replace, and this script, once the proxy serves the module.
set -o errexit -o nounset -o pipefail

SOURCE_VERSION=v0.37.1
dest=${1:?usage: apiextensions-api.sh DEST}

tmp=${dest}.tmp.$$
rm -rf "${tmp}"
trap 'rm -rf "${tmp}"' EXIT
mkdir -p "${tmp}"
# Downloaded outside any module, so that no go.mod or go.sum is touched.
src=$(cd "${tmp}" && go mod download -json "k8s.io/apiextensions-apiserver@${SOURCE_VERSION}" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -d ${src} ]] || { echo "apiextensions-api.sh: k8s.io/apiextensions-apiserver@${SOURCE_VERSION} not found" >&2; exit 1; }
(
  cd "${src}"
  find pkg/apis/apiextensions/v1 pkg/apis/apiextensions/v1beta1 pkg/client -name '*.go' \
    ! -name '*_test.go' ! -name 'conversion.go' ! -name 'zz_generated.conversion.go'
) | while read -r f; do
  mkdir -p "${tmp}/$(dirname "${f}")"
  sed -e 's#"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"#"k8s.io/apiextensions-api/pkg/apis/apiextensions/v1"#' \
    -e 's#"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"#"k8s.io/apiextensions-api/pkg/apis/apiextensions/v1beta1"#' \
    -e 's#"k8s.io/apiextensions-apiserver/pkg/client/#"k8s.io/apiextensions-api/pkg/client/#' \
    -e 's#"sigs.k8s.io/structured-merge-diff/v6/#"sigs.k8s.io/structured-merge-diff/v7/#' \
    "${src}/${f}" >"${tmp}/${f}"
done
# marshal.go compares with nullLiteral, which the left-out conversion.go declares.
for v in v1 v1beta1; do
  printf 'package %s\n\nvar nullLiteral = []byte(`null`)\n' "${v}" >"${tmp}/pkg/apis/apiextensions/${v}/null.go"
done
if grep -rl '"k8s.io/apiextensions-apiserver' "${tmp}" >&2; then
  echo "apiextensions-api.sh: the files above still import k8s.io/apiextensions-apiserver" >&2
  exit 1
fi
printf 'module k8s.io/apiextensions-api\n\ngo 1.26.0\n' >"${tmp}/go.mod"
echo "${SOURCE_VERSION}" >"${tmp}/SOURCE_VERSION"
rm -rf "${dest}"
mv -T "${tmp}" "${dest}"
trap - EXIT
