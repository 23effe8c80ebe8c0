#!/usr/bin/env bash
# Shared helpers of the local cluster harness. Sourced by build.sh, up.sh, down.sh, smoke.sh
# and kubeconfig-for-sa.sh; not meant to be run directly.
set -o errexit -o nounset -o pipefail

CLUSTER_HACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER_REPO_ROOT=$(cd "${CLUSTER_HACK_DIR}/../.." && pwd)
CLUSTER_OUTPUT=${CLUSTER_OUTPUT:-${CLUSTER_REPO_ROOT}/_output/cluster}
CLUSTER_DIR=${CLUSTER_DIR:-${CLUSTER_OUTPUT}/run}
CLUSTER_BIN_ROOT=${CLUSTER_BIN_ROOT:-${CLUSTER_OUTPUT}/bin}
CLUSTER_PROFILE=${CLUSTER_PROFILE:-v1.37}

# Turn SIGINT/SIGTERM/SIGHUP into a normal exit, so that the scripts' EXIT traps (stopping a
# half-started cluster, deleting a smoke namespace, removing a partial build) always run.
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

if [[ -x /usr/local/go/bin/go ]] && ! command -v go >/dev/null 2>&1; then
  export PATH="/usr/local/go/bin:${PATH}"
fi

cluster::log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
cluster::die() { cluster::log "ERROR: $*"; exit 1; }

# cluster::python_init: python3 parses JSON and picks free ports. Resolve the interpreter once
# and export it to child scripts: version-manager shims in PATH can cost seconds per call on a
# loaded machine.
cluster::python_init() {
  if [[ -z ${CLUSTER_PYTHON:-} ]]; then
    command -v python3 >/dev/null || cluster::die "python3 is required"
    CLUSTER_PYTHON=$(python3 -c 'import sys; print(sys.executable)')
    export CLUSTER_PYTHON
  fi
}

# cluster::profile_check: fails on an unknown CLUSTER_PROFILE.
cluster::profile_check() {
  case ${CLUSTER_PROFILE} in
    v1.38 | v1.37 | v1.35-kubelet | v1.34) ;;
    *) cluster::die "unknown CLUSTER_PROFILE '${CLUSTER_PROFILE}' (want v1.38, v1.37, v1.35-kubelet or v1.34)" ;;
  esac
}

# Build sets. "control-plane" is the v1.37 module (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, hollow-node); "kubelet-v1.35" is the second module (hollow-node-v1.35);
# "control-plane-v1.34" is the v1.34 module (the same five binaries, all v1.34, for the v1.34
# profile); "control-plane-v1.38" is the v1.38 module (the same five binaries, all v1.38, for
# the v1.38 profile);
# "metrics-server" is the module hack/cluster/metrics-server (metrics-server); "recommender" is
# the bench module, which pins upstream VPA (vpa-recommender).
cluster::set_module_dir() {
  case $1 in
    control-plane) echo "${CLUSTER_HACK_DIR}" ;;
    kubelet-v1.35) echo "${CLUSTER_HACK_DIR}/kubelet-v1.35" ;;
    control-plane-v1.34) echo "${CLUSTER_HACK_DIR}/control-plane-v1.34" ;;
    control-plane-v1.38) echo "${CLUSTER_HACK_DIR}/control-plane-v1.38" ;;
    metrics-server) echo "${CLUSTER_HACK_DIR}/metrics-server" ;;
    recommender) echo "${CLUSTER_REPO_ROOT}/bench" ;;
    *) cluster::die "unknown build set $1" ;;
  esac
}

# cluster::addons: the build sets of the add-ons up.sh starts: metrics-server unless
# CLUSTER_METRICS_SERVER=0, the recommender unless CLUSTER_RECOMMENDER=0 (it needs the
# metrics API, so it is off when metrics-server is).
cluster::addons() {
  [[ ${CLUSTER_METRICS_SERVER:-1} == 1 ]] || return 0
  echo -n " metrics-server"
  [[ ${CLUSTER_RECOMMENDER:-1} == 1 ]] && echo -n " recommender"
  return 0
}

# cluster::sets_for_profile PROFILE: the build sets a profile needs.
cluster::sets_for_profile() {
  case $1 in
    v1.37) echo "control-plane$(cluster::addons)" ;;
    v1.35-kubelet) echo "control-plane kubelet-v1.35$(cluster::addons)" ;;
    v1.34) echo "control-plane-v1.34$(cluster::addons)" ;;
    v1.38) echo "control-plane-v1.38$(cluster::addons)" ;;
    all) echo "control-plane kubelet-v1.35 control-plane-v1.34 control-plane-v1.38$(cluster::addons)" ;;
    *) cluster::die "unknown profile $1" ;;
  esac
}

# cluster::toolchain SET: the GOTOOLCHAIN a build set needs. Kubernetes 1.38's go.mod says
# `go 1.27.0`; the go command fetches that toolchain from the Go module proxy on first use
# (about 76 MB, seconds). The other sets build with the Go in PATH (local).
cluster::toolchain() {
  case $1 in
    control-plane-v1.38) echo go1.27.3 ;;
    *) echo local ;;
  esac
}

# cluster::key SET: sha256 of everything that determines the binaries of a build set:
# the module's go.mod and go.sum, its own sources (hollow-node's under cmd/, symlinked shared
# files read through the link; the v1.38 set's iptables stand-in and the script that lays out
# its apiextensions-api; metrics-server's main.go; none for the recommender, all
# upstream's), build.sh and `go version` (of the set's toolchain). Printed as "<set>-<sha256>". Everything that
# changes how binaries are built lives in build.sh, so that edits to lib.sh don't force a rebuild.
cluster::key() {
  local set=$1 dir
  dir=$(cluster::set_module_dir "${set}")
  local sum
  sum=$(
    cd "${dir}"
    {
      for f in go.mod go.sum; do echo "== ${f}"; cat "${f}"; done
      case ${set} in
        control-plane | kubelet-v1.35 | control-plane-v1.34) find cmd -name '*.go' ;;
        control-plane-v1.38) find cmd iptables-wrappers -name '*.go'; echo apiextensions-api.sh ;;
        metrics-server) find . -maxdepth 1 -name '*.go' ;;
      esac | LC_ALL=C sort | while read -r f; do echo "== ${f}"; cat "${f}"; done
      echo "== build.sh"; cat "${CLUSTER_HACK_DIR}/build.sh"
      echo "== go version"; GOTOOLCHAIN=$(cluster::toolchain "${set}") go version
      echo "== build kubectl ${CLUSTER_BUILD_KUBECTL:-0}"
    } | sha256sum | cut -d' ' -f1
  )
  echo "${set}-${sum}"
}

# cluster::kube_version MODULE-DIR: the k8s.io/kubernetes version required by a module's go.mod.
cluster::kube_version() { sed -n 's#^[[:space:]]*k8s.io/kubernetes \(v[^[:space:]]*\).*#\1#p' "$1/go.mod" | head -n 1; }

# cluster::bin_dir SET: the (possibly not yet built) output directory of a build set.
cluster::bin_dir() { echo "${CLUSTER_BIN_ROOT}/$(cluster::key "$1")"; }

# cluster::free_ports N: prints N distinct free TCP ports on 127.0.0.1 (the kernel picks them;
# all sockets stay open until every port is chosen, so the N ports are distinct).
cluster::free_ports() {
  "${CLUSTER_PYTHON}" - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
PY
}

# cluster::json EXPR: evaluates a Python expression over the JSON document on stdin, bound to
# "d" (missing keys are an error, so write d.get(...) for optional fields). Prints strings raw,
# everything else as compact JSON.
cluster::json() {
  "${CLUSTER_PYTHON}" -c '
import json, sys
d = json.load(sys.stdin)
v = eval(sys.argv[1], {"d": d, "json": json})
print(v if isinstance(v, str) else json.dumps(v, separators=(",", ":")))
' "$1"
}

# cluster::proc_start_time PID: the process start time (clock ticks since boot, field 22 of
# /proc/PID/stat). Recorded next to each PID so that a recycled PID is never signalled.
cluster::proc_start_time() {
  local stat fields
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return 0; }
  read -r -a fields <<<"${stat##*) }" # drop "pid (comm) "; fields[0] is field 3
  echo "${fields[19]}"
}

# cluster::pid_alive PIDFILE: true if the process recorded in PIDFILE ("pid starttime") runs.
cluster::pid_alive() {
  local pid start
  read -r pid start <"$1" 2>/dev/null || return 1
  [[ -n ${pid} ]] && kill -0 "${pid}" 2>/dev/null && [[ $(cluster::proc_start_time "${pid}") == "${start:-}" ]]
}
