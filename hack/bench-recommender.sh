#!/usr/bin/env bash
# The recommender-driven phase of the benchmark (make bench-recommender, and
# make bench with BENCH_PHASES including "recommender"):
#   1. builds our updater, the upstream updater (bench/go.mod's version of
#      k8s.io/autoscaler/vertical-pod-autoscaler/pkg/updater) and the driver
#      bench/cmd/recommender-bench;
#   2. starts a local cluster of its own (CLUSTER_DIR=_output/bench/cluster)
#      with one hollow node, metrics-server and upstream's VPA recommender
#      (hack/cluster/README.md, "Add-ons");
#   3. applies deploy/overlays/local (namespace, CRDs, RBAC; our updater runs
#      with its ServiceAccount token) and removes its two webhook
#      configurations: no admission controller runs;
#   4. runs the driver: for our updater, then upstream's, a fresh namespace of
#      BENCH_REC_PODS pods whose usage (hollow-node usage annotation, seeded
#      noise) the recommender turns into recommendations; convergence, a
#      steady window (churn), then a usage step (latency);
#   5. prints the comparison and writes bench/results/<date>-recommender.md.
# Everything it started is stopped on exit, on failure and on Ctrl-C.
#
# Env: BENCH_REC_PODS (20), BENCH_REC_DEPLOYMENTS (20: one pod per VPA), BENCH_REC_WINDOW (10m:
# the steady window), BENCH_REC_NOISE (10, ±percent), BENCH_REC_ARGS (more
# driver flags, _output/bench/bin/recommender-bench --help),
# CLUSTER_RECOMMENDER_INTERVAL (10s), BENCH_REC_RESULTS (report path), BENCH_ONLY (ours|upstream),
# BENCH_KEEP=1, BENCH_CLUSTER_DIR, BENCH_OURS_BINARY / BENCH_OURS_VERSION,
# BENCH_OURS_ARGS / BENCH_UPSTREAM_ARGS (as in hack/bench.sh).
# BENCH_CHECK_ONLY=1 (hack/bench.sh's): nothing to check here; starts nothing.
# Logs: _output/bench/recommender/.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."
if [[ ${BENCH_CHECK_ONLY:-0} == 1 ]]; then
  echo "== BENCH_CHECK_ONLY=1: the recommender phase starts nothing"
  exit 0
fi
root=$(pwd)

pods=${BENCH_REC_PODS:-20}
deployments=${BENCH_REC_DEPLOYMENTS:-20}
window=${BENCH_REC_WINDOW:-10m}
noise=${BENCH_REC_NOISE:-10}
for v in "${pods}" "${deployments}" "${noise}"; do
  [[ ${v} =~ ^[0-9]+$ ]] || { echo "BENCH_REC_PODS, BENCH_REC_DEPLOYMENTS and BENCH_REC_NOISE must be numbers" >&2; exit 2; }
done
((pods >= 1 && pods <= 100)) || { echo "BENCH_REC_PODS must be within 1..100 (one hollow node)" >&2; exit 2; }
results=${BENCH_REC_RESULTS:-bench/results/$(date -u +%Y-%m-%d)-recommender.md}
out=${root}/_output/bench
bin=${out}/bin
logs=${out}/recommender

export CLUSTER_DIR=${BENCH_CLUSTER_DIR:-${out}/cluster}
export CLUSTER_PROFILE=v1.37
export CLUSTER_METRICS_SERVER=1 CLUSTER_RECOMMENDER=1
export CLUSTER_RECOMMENDER_INTERVAL=${CLUSTER_RECOMMENDER_INTERVAL:-10s}
export CLUSTER_RECOMMENDER_NAME=${CLUSTER_RECOMMENDER_NAME:-default}
export CLUSTER_NODES=hollow-1
# Room for every pod after the usage step (20 pods of about 350m and 400 MB).
export CLUSTER_NODE_CORES=${CLUSTER_NODE_CORES:-16} CLUSTER_NODE_MEMORY=${CLUSTER_NODE_MEMORY:-32Gi}
# As in hack/bench.sh: the kubelet does not share the API server's CPUs on a
# real cluster.
export CLUSTER_NODE_NICE=${CLUSTER_NODE_NICE:-19}

mkdir -p "${bin}" "${logs}"
echo "== building our updater, the upstream updater and the driver"
if [[ -n ${BENCH_OURS_BINARY:-} ]]; then
  ours_binary=${BENCH_OURS_BINARY}
  ours_version=${BENCH_OURS_VERSION:-"prebuilt ${BENCH_OURS_BINARY}"}
else
  ours_binary=${bin}/updater
  go build -o "${ours_binary}" ./cmd/updater
  ours_version="commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if ! git diff-index --quiet HEAD -- cmd pkg go.mod go.sum 2>/dev/null ||
    [[ -n $(git ls-files --others --exclude-standard -- cmd pkg 2>/dev/null) ]]; then
    ours_version+=" with uncommitted changes"
  fi
fi
upstream_version=$(cd bench && go list -m -f '{{.Version}}' k8s.io/autoscaler/vertical-pod-autoscaler)
(
  cd bench
  go build -o "${bin}/recommender-bench" ./cmd/recommender-bench
  go build -o "${bin}/vpa-updater-${upstream_version}" k8s.io/autoscaler/vertical-pod-autoscaler/pkg/updater
)

driver_pid=
cleanup() {
  local rc=$?
  if [[ -n ${driver_pid} ]] && kill -0 "${driver_pid}" 2>/dev/null; then
    kill -TERM "${driver_pid}" 2>/dev/null || true
    wait "${driver_pid}" 2>/dev/null || true
  fi
  if [[ ${BENCH_KEEP:-0} == 1 ]]; then
    echo "cluster left running: . ${CLUSTER_DIR}/env.sh; stop it with CLUSTER_DIR=${CLUSTER_DIR} hack/cluster/down.sh --purge"
  else
    hack/cluster/down.sh --purge >/dev/null 2>&1 || true
  fi
  exit "${rc}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

echo "== cluster: hollow-1, metrics-server, upstream's recommender (${CLUSTER_DIR})"
hack/cluster/down.sh --purge >/dev/null
hack/cluster/up.sh
# shellcheck disable=SC1091
source "${CLUSTER_DIR}/env.sh"
[[ ${CLUSTER_RECOMMENDER} == 1 ]] || { echo "error: the cluster runs no recommender" >&2; exit 1; }

echo "== applying deploy/overlays/local"
webhook_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
CLUSTER_ENV=${CLUSTER_DIR}/env.sh WEBHOOK_PORT=${webhook_port} OUT_DIR=${out}/deploy \
  hack/deploy/local-apply.sh >"${logs}/deploy.log"
for path in mutatingwebhookconfigurations/vpa-inplace-pods validatingwebhookconfigurations/vpa-inplace-vpas; do
  code=$(curl --silent --output /dev/null --write-out '%{http_code}' --cacert "${CLUSTER_CA}" \
    --cert "${CLUSTER_ADMIN_CERT}" --key "${CLUSTER_ADMIN_KEY}" -X DELETE \
    "${CLUSTER_APISERVER}/apis/admissionregistration.k8s.io/v1/${path}")
  [[ ${code} == 200 || ${code} == 404 ]] || { echo "error: deleting ${path}: HTTP ${code}" >&2; exit 1; }
done

# The recommender's flags as it runs (credentials and address left out).
rec_pid=$(cut -d' ' -f1 "${CLUSTER_DIR}/pids/vpa-recommender.pid")
rec_flags=$(tr '\0' '\n' <"/proc/${rec_pid}/cmdline" | tail -n +2 |
  awk '/^--(kubeconfig|address)$/ {skip=1; next} skip {skip=0; next} /^--(kubeconfig|address)=/ {next} {printf "%s ", $0}')
recommender="k8s.io/autoscaler/vertical-pod-autoscaler ${upstream_version} pkg/recommender, ServiceAccount kube-system/vpa-recommender; flags: ${rec_flags% }; metrics-server v0.9.0 --metric-resolution 10s"

extra=()
[[ -n ${BENCH_ONLY:-} ]] && extra+=(--only="${BENCH_ONLY}")
echo "== running the recommender-driven phase (${pods} pods, window ${window}; logs in ${logs})"
reproduce="make bench-recommender BENCH_REC_PODS=${pods} BENCH_REC_DEPLOYMENTS=${deployments} BENCH_REC_WINDOW=${window}${BENCH_ONLY:+ BENCH_ONLY=${BENCH_ONLY}}"
# shellcheck disable=SC2086
"${bin}/recommender-bench" \
  --kubeconfig="${KUBECONFIG}" --pods="${pods}" --deployments="${deployments}" --noise="${noise}" \
  --window="${window}" --recommender-name="${CLUSTER_RECOMMENDER_NAME}" --recommender="${recommender}" \
  --work-dir="${logs}" --results="${results}" --reproduce="${reproduce}" \
  --ours-binary="${ours_binary}" --ours-version="${ours_version}" --ours-kubeconfig="${out}/deploy/updater.kubeconfig" \
  --ours-identity="ServiceAccount vpa-inplace-system/vpa-inplace-updater (RBAC of deploy/)" \
  --ours-args="--feature-gates=InPlace=true --leader-elect=false --updater-interval=1m -v=2 ${BENCH_OURS_ARGS:-}" \
  --upstream-binary="${bin}/vpa-updater-${upstream_version}" --upstream-version="k8s.io/autoscaler/vertical-pod-autoscaler ${upstream_version}" --upstream-kubeconfig="${KUBECONFIG}" \
  --upstream-identity="cluster admin (system:masters): upstream's RBAC is not deployed here" \
  --upstream-ready-path="" \
  --upstream-args="--feature-gates=InPlace=true --min-replicas=1 --in-place-skip-disruption-budget=true --eviction-tolerance=0.5 --use-admission-controller-status=false --updater-interval=1m --v=2 ${BENCH_UPSTREAM_ARGS:-}" \
  --cluster="1 hollow node (hollow-1, ${CLUSTER_NODE_CORES} CPUs, ${CLUSTER_NODE_MEMORY}) at nice ${CLUSTER_NODE_NICE}" \
  "${extra[@]}" ${BENCH_REC_ARGS:-} \
  > >(tee "${logs}/driver.log") 2>&1 &
driver_pid=$!
wait "${driver_pid}"
driver_pid=
echo "== done: ${results}"
