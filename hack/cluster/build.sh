#!/usr/bin/env bash
# Builds the binaries of the local cluster harness from the Go module proxy.
#
#   hack/cluster/build.sh [v1.38 | v1.37 | v1.35-kubelet | v1.34 | all]     (default: $CLUSTER_PROFILE, else v1.37)
#
# Build sets, one `go build` invocation each (shared packages compile once, links run in
# parallel):
#   control-plane  (module hack/cluster, k8s.io/kubernetes v1.37.1):
#                  etcd, kube-apiserver, kube-controller-manager, kube-scheduler, hollow-node
#                  (+ kubectl with CLUSTER_BUILD_KUBECTL=1)
#   kubelet-v1.35  (module hack/cluster/kubelet-v1.35, k8s.io/kubernetes v1.35.x):
#                  hollow-node-v1.35        (needed by CLUSTER_PROFILE=v1.35-kubelet)
#   control-plane-v1.34 (module hack/cluster/control-plane-v1.34, k8s.io/kubernetes v1.34.x):
#                  etcd, kube-apiserver, kube-controller-manager, kube-scheduler, hollow-node
#                  (needed by CLUSTER_PROFILE=v1.34)
#   control-plane-v1.38 (module hack/cluster/control-plane-v1.38, k8s.io/kubernetes v1.38.x, built
#                  with GOTOOLCHAIN=go1.27.3: see cluster::toolchain):
#                  etcd, kube-apiserver, kube-controller-manager, kube-scheduler, hollow-node
#                  (needed by CLUSTER_PROFILE=v1.38)
#   metrics-server (module hack/cluster/metrics-server, sigs.k8s.io/metrics-server pinned there):
#                  metrics-server           (unless CLUSTER_METRICS_SERVER=0)
#   recommender    (module bench, k8s.io/autoscaler/vertical-pod-autoscaler pinned there):
#                  vpa-recommender          (unless CLUSTER_RECOMMENDER=0 or CLUSTER_METRICS_SERVER=0)
# Output: _output/cluster/bin/<set>-<sha256>/, the key being the sha256 of the module's
# go.mod, go.sum, hollow-node sources, build.sh and `go version`. A set whose directory
# already exists is skipped. The $CLUSTER_BIN_KEEP (default 3) most recent directories of each
# set are kept. Concurrent runs are serialized per set (flock).
# Prints the output directory of every set on stdout (one "<set> <dir>" line each).
set -o errexit -o nounset -o pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

profile=${1:-${CLUSTER_PROFILE}}
sets=$(cluster::sets_for_profile "${profile}")
mkdir -p "${CLUSTER_BIN_ROOT}"
command -v go >/dev/null || cluster::die "go is not in PATH (Go >= 1.26 is needed)"

# version ldflags: without them the binaries report v0.0.0-master+$Format:%H$ (e.g. as the
# kubelet version of the Node).
ldflags_for() { # module-dir
  local v minor
  v=$(cluster::kube_version "$1")
  minor=$(cut -d. -f2 <<<"${v}")
  local ldf="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf+=" -X ${p}.gitVersion=${v} -X ${p}.gitMajor=1 -X ${p}.gitMinor=${minor}"
    ldf+=" -X ${p}.gitTreeState=clean -X ${p}.gitCommit=0000000000000000000000000000000000000000"
    ldf+=" -X ${p}.buildDate=2026-01-01T00:00:00Z"
  done
  echo "${ldf}"
}

build_set() { # set dest-tmp
  local set=$1 out=$2 dir
  dir=$(cluster::set_module_dir "${set}")
  local pkgs=()
  case ${set} in
    control-plane)
      pkgs=(go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kube-apiserver
        k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler ./cmd/hollow-node)
      [[ ${CLUSTER_BUILD_KUBECTL:-0} == 1 ]] && pkgs+=(k8s.io/kubernetes/cmd/kubectl)
      ;;
    kubelet-v1.35) pkgs=(./cmd/hollow-node) ;;
    control-plane-v1.34 | control-plane-v1.38)
      pkgs=(go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kube-apiserver
        k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler ./cmd/hollow-node)
      ;;
    metrics-server) pkgs=(.) ;;
    recommender) pkgs=(k8s.io/autoscaler/vertical-pod-autoscaler/pkg/recommender) ;;
  esac
  local ldf="-s -w"
  case ${set} in
    control-plane | kubelet-v1.35 | control-plane-v1.34 | control-plane-v1.38) ldf=$(ldflags_for "${dir}") ;;
  esac
  local toolchain
  toolchain=$(cluster::toolchain "${set}")
  # The Go module proxy does not serve k8s.io/apiextensions-api, which 1.38 needs: lay it out
  # from what it does serve (the script says how); go.mod replaces the module with it.
  if [[ ${set} == control-plane-v1.38 ]]; then
    GOTOOLCHAIN=${toolchain} "${dir}/apiextensions-api.sh" "${dir}/apiextensions-api"
  fi
  (cd "${dir}" && GOTOOLCHAIN=${toolchain} go build -buildvcs=false -ldflags "${ldf}" -o "${out}/" "${pkgs[@]}")
  case ${set} in
    # etcd's main package is the module root go.etcd.io/etcd/server/v3, so `-o dir/` names it "server"
    control-plane | control-plane-v1.34 | control-plane-v1.38) mv "${out}/server" "${out}/etcd" ;;
    kubelet-v1.35) mv "${out}/hollow-node" "${out}/hollow-node-v1.35" ;;
    metrics-server) ;;
    recommender) mv "${out}/recommender" "${out}/vpa-recommender" ;;
  esac
}

prune() { # set: keep the $CLUSTER_BIN_KEEP (3) most recent directories of a set
  local set=$1
  # Only the set's own directories, <set>-<sha256>: "control-plane-" also begins the names of
  # control-plane-v1.34's and control-plane-v1.38's.
  # shellcheck disable=SC2012
  ls -1dt "${CLUSTER_BIN_ROOT}/${set}-"* 2>/dev/null | { grep -E "/${set}-[0-9a-f]{64}\$" || true; } |
    tail -n +$((${CLUSTER_BIN_KEEP:-3} + 1)) | while read -r old; do
    cluster::log "removing old build ${old}"
    rm -rf "${old}"
  done
}

for set in ${sets}; do
  key=$(cluster::key "${set}")
  dest=${CLUSTER_BIN_ROOT}/${key}
  # one build per set at a time (a second build.sh waits, then finds the result)
  exec 9>"${CLUSTER_BIN_ROOT}/.lock-${set}"
  flock 9
  if [[ -d ${dest} ]]; then
    cluster::log "${set}: up to date (${dest})"
    echo "${set} ${dest}"
    exec 9>&-
    continue
  fi
  tmp=${CLUSTER_BIN_ROOT}/.tmp-${key}-$$
  rm -rf "${tmp}"
  mkdir -p "${tmp}"
  trap 'rm -rf "${tmp}"' EXIT
  cluster::log "${set}: building into ${dest} ($(GOTOOLCHAIN=$(cluster::toolchain "${set}") go version | cut -d' ' -f3), $(nproc) cpus)"
  start=$(date +%s)
  build_set "${set}" "${tmp}"
  secs=$(($(date +%s) - start))
  mv -T "${tmp}" "${dest}"
  trap - EXIT
  sizes=$(cd "${dest}" && for b in *; do printf '%s=%sMiB ' "${b}" $(($(stat -c %s "${b}") / 1048576)); done)
  cluster::log "${set}: built in ${secs}s: ${sizes}"
  mkdir -p "${CLUSTER_OUTPUT}"
  echo "$(date -u +%FT%TZ) ${key} ${secs}s ${sizes}" >>"${CLUSTER_OUTPUT}/build-times.txt"
  prune "${set}"
  exec 9>&-
  echo "${set} ${dest}"
done
