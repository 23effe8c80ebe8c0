#!/usr/bin/env bash
# Shows the processes of the local cluster: PID, state, RSS (and peak RSS), CPU time.
#
#   hack/cluster/status.sh
set -o errexit -o nounset -o pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PIDS=${CLUSTER_DIR}/pids
if [[ ! -d ${PIDS} ]] || ! compgen -G "${PIDS}/*.pid" >/dev/null; then
  echo "no cluster in ${CLUSTER_DIR}"
  exit 1
fi
[[ -f ${CLUSTER_DIR}/env.sh ]] && sed -n 's/^export \(CLUSTER_PROFILE\|CLUSTER_APISERVER\|KUBECONFIG\)=/\1=/p' "${CLUSTER_DIR}/env.sh"
tick=$(getconf CLK_TCK)
total=0 down=0
printf '%-26s %8s %-8s %9s %9s %8s\n' COMPONENT PID STATE RSS_MiB PEAK_MiB CPU_s
for f in "${PIDS}"/*.pid; do
  name=$(basename "${f}" .pid)
  read -r pid _ <"${f}"
  if cluster::pid_alive "${f}"; then
    rss=$(awk '/^VmRSS:/ {print int($2 / 1024)}' "/proc/${pid}/status")
    hwm=$(awk '/^VmHWM:/ {print int($2 / 1024)}' "/proc/${pid}/status")
    stat=$(cat "/proc/${pid}/stat")
    read -r -a fields <<<"${stat##*) }"
    cpu=$(((fields[11] + fields[12]) / tick))
    printf '%-26s %8s %-8s %9s %9s %8s\n' "${name}" "${pid}" running "${rss}" "${hwm}" "${cpu}"
    total=$((total + rss))
  else
    printf '%-26s %8s %-8s\n' "${name}" "${pid}" stopped
    down=1
  fi
done
echo "total RSS: ${total} MiB"
exit "${down}"
