#!/usr/bin/env bash
# Stops the local cluster started by up.sh, by recorded PID: SIGTERM, wait, then SIGKILL.
# Nodes, scheduler and controller-manager first, then the apiserver, then etcd.
#
#   hack/cluster/down.sh [--purge]     --purge also deletes the run directory ($CLUSTER_DIR)
#
# Idempotent and safe after a half-finished up.sh (every PID is recorded the moment its process
# starts, with the process start time, so a recycled PID is never signalled). Exits 0 unless a
# process survived SIGKILL, so a test runner can simply do:
#   trap 'hack/cluster/down.sh --purge' EXIT
#   hack/cluster/up.sh && . _output/cluster/run/env.sh && go test ./e2e/...
set -o errexit -o nounset -o pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

purge=0
for a in "$@"; do
  case ${a} in
    --purge) purge=1 ;;
    *) cluster::die "usage: down.sh [--purge]" ;;
  esac
done

PIDS=${CLUSTER_DIR}/pids
grace=${CLUSTER_STOP_GRACE_SECONDS:-10}

# stop_group NAME...: SIGTERM to all, wait up to $grace seconds, SIGKILL the rest.
failed=0
stop_group() {
  local name f pid start live=()
  for name in "$@"; do
    f=${PIDS}/${name}.pid
    [[ -f ${f} ]] || continue
    if cluster::pid_alive "${f}"; then
      read -r pid start <"${f}"
      kill -TERM "${pid}" 2>/dev/null || true
      live+=("${name}")
    else
      rm -f "${f}"
    fi
  done
  ((${#live[@]} > 0)) || return 0
  local deadline=$(($(date +%s) + grace)) still
  while :; do
    still=()
    for name in "${live[@]}"; do
      cluster::pid_alive "${PIDS}/${name}.pid" && still+=("${name}")
    done
    ((${#still[@]} == 0)) && break
    if (($(date +%s) >= deadline)); then
      for name in "${still[@]}"; do
        read -r pid start <"${PIDS}/${name}.pid"
        cluster::log "${name} (pid ${pid}) ignored SIGTERM for ${grace}s: SIGKILL"
        kill -KILL "${pid}" 2>/dev/null || true
      done
      sleep 0.5
      for name in "${still[@]}"; do
        if cluster::pid_alive "${PIDS}/${name}.pid"; then
          cluster::log "ERROR: ${name} is still running"
          failed=1
        fi
      done
      break
    fi
    sleep 0.1
  done
  for name in "${live[@]}"; do
    cluster::pid_alive "${PIDS}/${name}.pid" || rm -f "${PIDS}/${name}.pid"
  done
  cluster::log "stopped ${live[*]}"
}

if [[ -d ${PIDS} ]]; then
  control_plane="kube-scheduler kube-controller-manager kube-apiserver etcd"
  others=()
  for f in "${PIDS}"/*.pid; do
    [[ -f ${f} ]] || continue
    name=$(basename "${f}" .pid)
    [[ " ${control_plane} " == *" ${name} "* ]] || others+=("${name}")
  done
  stop_group "${others[@]}" kube-scheduler kube-controller-manager
  stop_group kube-apiserver
  stop_group etcd
else
  cluster::log "nothing to stop in ${CLUSTER_DIR}"
fi
rm -f "${CLUSTER_DIR}/env.sh"

if ((purge)) && [[ -e ${CLUSTER_DIR} ]]; then
  if ((failed)); then
    cluster::log "not purging ${CLUSTER_DIR}: some processes are still running"
  elif [[ -f ${CLUSTER_DIR}/.vpa-inplace-cluster ]]; then
    rm -rf "${CLUSTER_DIR}"
    cluster::log "purged ${CLUSTER_DIR}"
  else
    cluster::log "not purging ${CLUSTER_DIR}: it was not created by up.sh (no .vpa-inplace-cluster marker)"
  fi
fi
exit "${failed}"
