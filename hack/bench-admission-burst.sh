#!/usr/bin/env bash
# A burst of pod creations on the local cluster, once with our admission
# controller registered and once with upstream VPA's (make
# bench-admission-burst):
#   1. builds our admission controller, upstream's pod admission (bench/cmd/
#      upstream-admission-controller: its main's wiring, on 127.0.0.1) and
#      the driver bench/cmd/admission-burst;
#   2. starts a local cluster of its own (CLUSTER_DIR=_output/bench/burst-cluster)
#      with hollow nodes for the pods;
#   3. applies deploy/overlays/local (namespace, CRDs, RBAC, our webhooks on
#      https://127.0.0.1:PORT; ours runs with its ServiceAccount token,
#      upstream's with the cluster admin's credentials);
#   4. runs the driver: BENCH_BURST_DEPLOYMENTS Deployments (30) of
#      BENCH_BURST_REPLICAS pods (10) under InPlace VPAs, created at once,
#      with each admission controller in turn; the API server's webhook
#      latency histogram, each controller's peak RSS and CPU;
#   5. writes bench/results/<date>-admission-burst.md (BENCH_RESULTS).
# Everything it started is stopped on exit. Hold the cluster lock:
#   flock /tmp/vpa-e2e.lock make bench-admission-burst
# Logs: _output/bench/admission-burst/.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

deployments=${BENCH_BURST_DEPLOYMENTS:-30}
replicas=${BENCH_BURST_REPLICAS:-10}
pods=$((deployments * replicas))
results=${BENCH_RESULTS:-bench/results/$(date -u +%Y-%m-%d)-admission-burst.md}
out=${root}/_output/bench
bin=${out}/bin
logs=${out}/admission-burst
per_node=100
nodes=$(((pods + per_node - 1) / per_node))

export CLUSTER_DIR=${BENCH_CLUSTER_DIR:-${out}/burst-cluster}
export CLUSTER_PROFILE=v1.37
export CLUSTER_METRICS_SERVER=0
CLUSTER_NODES=$(for ((i = 1; i <= nodes; i++)); do printf 'hollow-%d ' "${i}"; done)
export CLUSTER_NODES=${CLUSTER_NODES% }
export CLUSTER_NODE_MAX_PODS=110
export CLUSTER_NODE_NICE=${CLUSTER_NODE_NICE:-19}
# Pods are created by the ReplicaSet controller: as fast as the API server
# takes them, not at its default 20 QPS.
export CLUSTER_KCM_ARGS=${CLUSTER_KCM_ARGS:-"--kube-api-qps=1000 --kube-api-burst=2000"}

mkdir -p "${bin}" "${logs}"
echo "== building our admission controller, upstream's and the driver"
go build -o "${bin}/admission-controller" ./cmd/admission-controller
ours_version="commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if ! git diff-index --quiet HEAD -- cmd pkg go.mod go.sum 2>/dev/null; then
  ours_version+=" with uncommitted changes"
fi
upstream_version=$(cd bench && go list -m -f '{{.Version}}' k8s.io/autoscaler/vertical-pod-autoscaler)
(
  cd bench
  go build -o "${bin}/admission-burst" ./cmd/admission-burst
  go build -o "${bin}/upstream-admission-controller" ./cmd/upstream-admission-controller
)

cleanup() {
  local rc=$?
  hack/cluster/down.sh --purge >/dev/null 2>&1 || true
  exit "${rc}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

echo "== cluster: ${nodes} hollow nodes (${CLUSTER_DIR})"
hack/cluster/down.sh --purge >/dev/null
hack/cluster/up.sh
# shellcheck disable=SC1091
source "${CLUSTER_DIR}/env.sh"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
webhook_port=$(free_port) health_port=$(free_port) upstream_port=$(free_port)
echo "== applying deploy/overlays/local"
CLUSTER_ENV=${CLUSTER_DIR}/env.sh WEBHOOK_PORT=${webhook_port} OUT_DIR=${out}/burst-deploy \
  hack/deploy/local-apply.sh >"${logs}/deploy.log"
certs=${out}/burst-deploy/certs

echo "== running the burst (${deployments} Deployments of ${replicas} pods; logs in ${logs})"
"${bin}/admission-burst" --kubeconfig="${KUBECONFIG}" --deployments="${deployments}" --replicas="${replicas}" \
  --work-dir="${logs}" --results="${results}" \
  --reproduce="make bench-admission-burst BENCH_BURST_DEPLOYMENTS=${deployments} BENCH_BURST_REPLICAS=${replicas}" \
  --cluster="${nodes} hollow nodes at nice ${CLUSTER_NODE_NICE} (v1.37), kube-controller-manager ${CLUSTER_KCM_ARGS}" \
  --ours-binary="${bin}/admission-controller" --ours-version="${ours_version}, ServiceAccount token (RBAC of deploy/)" \
  --ours-webhook=pods.vpa-inplace.github.io \
  --ours-args="--kubeconfig=${out}/burst-deploy/admission-controller.kubeconfig,--tls-cert-file=${certs}/tls.crt,--tls-private-key-file=${certs}/tls.key,--bind-address=127.0.0.1,--port=${webhook_port},--address=127.0.0.1:${health_port},--feature-gates=InPlace=true" \
  --upstream-binary="${bin}/upstream-admission-controller" \
  --upstream-version="k8s.io/autoscaler/vertical-pod-autoscaler ${upstream_version} (bench/cmd/upstream-admission-controller), cluster admin" \
  --upstream-webhook=vpa.k8s.io \
  --upstream-args="--kubeconfig=${KUBECONFIG},--tls-cert-file=${certs}/tls.crt,--tls-private-key=${certs}/tls.key,--client-ca-file=${certs}/ca.crt,--port=${upstream_port}" \
  2>&1 | tee "${logs}/driver.log"
echo "== done: ${results}"
