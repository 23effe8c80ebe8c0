#!/usr/bin/env bash
# Builds the pinned tools that check the chart and the alerting rules, from the
# Go module proxy, outside the product's go.mod (`go install module@version`
# resolves each tool with its own go.mod), and prints the path of each binary.
#
#   hack/tools/install.sh helm|promtool|kustomize...
#
# Output: $TOOLS_BIN_ROOT (default _output/tools)/<tool>-<version>-<go version>/<tool>.
# A binary that exists is reused, so only the first run on a machine builds; a
# new pin or a new Go gives a new directory. Concurrent runs are serialized per
# tool (flock). Build times are appended to $TOOLS_BIN_ROOT/build-times.txt.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/../.."

# Pins. helm: Helm 3; promtool: the module version of Prometheus v3.x is
# v0.3xx.y; kustomize: v5.8.3 needs Go 1.27.
readonly HELM_VERSION=v3.22.0
# The Kubernetes version helm assumes without a cluster (.Capabilities, the
# chart's kubeVersion, deprecation lint): its client-go's, 1.37 for v3.22.0,
# set as helm's own Makefile does.
readonly HELM_KUBE_MINOR=37
readonly PROMTOOL_VERSION=v0.316.0
readonly KUSTOMIZE_VERSION=v5.8.2

TOOLS_BIN_ROOT=${TOOLS_BIN_ROOT:-${PWD}/_output/tools}

die() {
  echo "error: $*" >&2
  exit 1
}

command -v go >/dev/null || die "go is not in PATH"
[[ $# -gt 0 ]] || die "usage: $0 helm|promtool|kustomize..."
gover=$(go env GOVERSION)
mkdir -p "${TOOLS_BIN_ROOT}"

for tool in "$@"; do
  tags="" ldflags="-s -w" key=""
  case ${tool} in
    helm)
      version=${HELM_VERSION} pkg=helm.sh/helm/v3/cmd/helm
      ldflags+=" -X helm.sh/helm/v3/internal/version.version=${version}"
      key=k8s1.${HELM_KUBE_MINOR}
      for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
        ldflags+=" -X ${p}.k8sVersionMajor=1 -X ${p}.k8sVersionMinor=${HELM_KUBE_MINOR}"
      done
      ;;
    promtool)
      # remove_all_sd leaves out the service discovery plugins (cloud SDKs):
      # `promtool test rules` needs none of them, and they are most of the build.
      version=${PROMTOOL_VERSION} pkg=github.com/prometheus/prometheus/cmd/promtool tags=remove_all_sd
      ;;
    kustomize) version=${KUSTOMIZE_VERSION} pkg=sigs.k8s.io/kustomize/kustomize/v5 ;;
    *) die "unknown tool ${tool} (helm, promtool, kustomize)" ;;
  esac
  dest=${TOOLS_BIN_ROOT}/${tool}-${version}-${gover}${key:+-${key}}
  exec 9>"${TOOLS_BIN_ROOT}/.lock-${tool}"
  flock 9
  if [[ ! -x ${dest}/${tool} ]]; then
    tmp=${TOOLS_BIN_ROOT}/.tmp-${tool}-$$
    rm -rf "${tmp}"
    mkdir -p "${tmp}"
    echo "building ${tool} ${version} (${gover}, $(nproc) cpus)" >&2
    start=$(date +%s)
    # GOFLAGS cleared: -mod and friends of the caller do not apply to module@version.
    if ! GOWORK=off GOFLAGS= GOBIN="${tmp}" go install -trimpath -tags "${tags}" -ldflags "${ldflags}" "${pkg}@${version}"; then
      rm -rf "${tmp}"
      die "building ${tool} ${version} failed"
    fi
    secs=$(($(date +%s) - start))
    rm -rf "${dest}"
    mv -T "${tmp}" "${dest}"
    echo "$(date -u +%FT%TZ) ${tool} ${version} ${gover} ${secs}s" >>"${TOOLS_BIN_ROOT}/build-times.txt"
    echo "built ${tool} ${version} in ${secs}s" >&2
  fi
  exec 9>&-
  echo "${dest}/${tool}"
done
