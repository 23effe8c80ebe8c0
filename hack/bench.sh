#!/usr/bin/env bash
# Benchmarks our updater against the upstream VPA updater side by side on the
# local cluster (make bench):
#   1. builds our updater, the upstream updater (k8s.io/autoscaler/
#      vertical-pod-autoscaler/pkg/updater at the version pinned in
#      bench/go.mod, built inside the bench module) and the driver
#      bench/cmd/resize-bench;
#   2. starts a local cluster of its own (CLUSTER_DIR=_output/bench/cluster)
#      with enough hollow nodes for BENCH_PODS pods, plus a node
#      hollow-deferred (tainted) where a filler pod holds resizes Deferred;
#   3. applies deploy/overlays/local (namespace, CRDs, RBAC; our updater runs
#      with its ServiceAccount token) and removes its two webhook
#      configurations: no admission controller runs in the benchmark;
#   4. runs the driver: the workload, then the scenarios against our updater,
#      then against upstream's (with the cluster admin's credentials);
#   5. prints the comparison and writes bench/results/<date>-<profile>.md.
# Everything it started is stopped on exit, on failure and on Ctrl-C.
#
# Env: BENCH_PODS (1000; 10000 for the large profile), BENCH_PODS_PER_NODE (90;
# 400 above 2,000 pods, on nodes of 16 CPUs, 32Gi and 450 pods that sync
# their pods every minute and send no events), BENCH_TOKEN_VOLUME (true;
# false above 2,000 pods: automountServiceAccountToken: false),
# BENCH_NODES (default ceil(BENCH_PODS / BENCH_PODS_PER_NODE)), BENCH_RESULTS
# (report path), BENCH_QPS / BENCH_BURST (client limits of both updaters,
# 50 / 100), BENCH_ONLY (ours|upstream), BENCH_PPROF=1 (fetch profiles from
# updaters that serve /debug/pprof), BENCH_ARGS (more driver flags),
# BENCH_KEEP=1 (leave the cluster running), BENCH_CLUSTER_DIR, BENCH_OURS_BINARY
# (use this updater binary instead of building ./cmd/updater; BENCH_OURS_VERSION
# describes it in the report), BENCH_OURS_ARGS / BENCH_UPSTREAM_ARGS (flags
# appended to an updater's).
# BENCH_PHASES (resize,recommender; resize in the sharded mode): "resize" is
# what this script measures itself; "recommender" then runs
# hack/bench-recommender.sh (the recommender-driven phase, on a cluster of its
# own; its variables there).
# BENCH_NAMESPACES (1; in the sharded mode pods / 100, at least 2): the
# namespaces the Deployments are spread over.
# The sharded mode, BENCH_SHARDED=<replicas> (e.g. 3): our updater alone, as
# one replica under leader election, then as that many replicas sharing
# BENCH_SHARDS (12) shards of the namespaces, on the same workload; the
# chart's shards' Leases (updater.shards=BENCH_SHARDS) are applied first.
# Upstream's updater is not run. Results: <date>-<pods>pods-sharded<replicas>.md.
# The v1.37 API server ignores the shards' selector unless
# CLUSTER_FEATURE_GATES=ShardedListAndWatch=true (then it filters server-side).
# BENCH_CHECK_ONLY=1: build, check the flags of every updater replica the
# run would start against the updater's own parsing and validation, and stop
# there (no cluster).
# Logs: _output/bench/<profile>/.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

sharded=${BENCH_SHARDED:-}
if [[ -n ${sharded} ]] && ! [[ ${sharded} =~ ^[0-9]+$ && ${sharded} -ge 2 ]]; then
  echo "BENCH_SHARDED must be a number of replicas, 2 or more" >&2
  exit 2
fi
default_phases=resize,recommender
[[ -n ${sharded} ]] && default_phases=resize
phases=,${BENCH_PHASES:-${default_phases}},
for phase in ${phases//,/ }; do
  [[ ${phase} == resize || ${phase} == recommender ]] || { echo "BENCH_PHASES: unknown phase ${phase} (resize, recommender)" >&2; exit 2; }
done
if [[ ${BENCH_CHECK_ONLY:-0} == 1 ]]; then
  # The resize phase's replicas are what there is to check; no phase starts
  # a cluster.
  phases=,resize,
fi
if [[ ${phases} == *,recommender,* ]]; then
  # One phase after the other, each with its own cluster (same ports).
  if [[ ${phases} == *,resize,* ]]; then
    BENCH_PHASES=resize hack/bench.sh
  fi
  exec hack/bench-recommender.sh
fi
[[ ${phases} == *,resize,* ]] || { echo "BENCH_PHASES names no phase" >&2; exit 2; }

pods=${BENCH_PODS:-1000}
if ! [[ ${pods} =~ ^[0-9]+$ ]] || ((pods < 10)); then
  echo "BENCH_PODS must be a number >= 10" >&2
  exit 2
fi
# Above 2,000 pods, fewer and larger nodes: a hollow kubelet costs about
# 90 MiB and a share of the 2 CPUs whatever its pods, and 112 of them would
# slow the API server down for both updaters alike.
if ((pods > 2000)); then
  per_node=${BENCH_PODS_PER_NODE:-400}
  export CLUSTER_NODE_MAX_PODS=${CLUSTER_NODE_MAX_PODS:-450}
  export CLUSTER_NODE_CORES=${CLUSTER_NODE_CORES:-16}
  export CLUSTER_NODE_MEMORY=${CLUSTER_NODE_MEMORY:-32Gi}
  # Each kubelet syncs every running pod each --sync-frequency (10s): for
  # 10,000 pods that alone takes about a core. Resizes are synced when the
  # pod changes, whatever this period.
  # Kubelet events (three per pod start, two per resize) are off: nothing
  # here reads them, and 10,000 pods would add tens of thousands of writes
  # to the API server while it serves both updaters.
  export CLUSTER_NODE_ARGS=${CLUSTER_NODE_ARGS:-"--sync-frequency 1m --events=false"}
  # No service-account token volume in the bench pods: starting a pod then
  # takes no TokenRequest and no projected volume (see bench/README.md).
  token_volume=${BENCH_TOKEN_VOLUME:-false}
else
  per_node=${BENCH_PODS_PER_NODE:-90}
  token_volume=${BENCH_TOKEN_VOLUME:-true}
fi
nodes=${BENCH_NODES:-$(((pods + per_node - 1) / per_node))}
profile=${pods}pods
if [[ -n ${sharded} ]]; then
  shards=${BENCH_SHARDS:-12}
  namespaces=${BENCH_NAMESPACES:-$((pods >= 200 ? pods / 100 : 2))}
  profile+=-sharded${sharded}
else
  namespaces=${BENCH_NAMESPACES:-1}
fi
qps=${BENCH_QPS:-50}
burst=${BENCH_BURST:-100}
results=${BENCH_RESULTS:-bench/results/$(date -u +%Y-%m-%d)-${profile}.md}
out=${root}/_output/bench
bin=${out}/bin
logs=${out}/${profile}

export CLUSTER_DIR=${BENCH_CLUSTER_DIR:-${out}/cluster}
export CLUSTER_PROFILE=v1.37
# No metrics-server or recommender: recommendations are the driver's, and the
# figures are the updaters' alone.
export CLUSTER_METRICS_SERVER=${CLUSTER_METRICS_SERVER:-0}
CLUSTER_NODES=$(for ((i = 1; i <= nodes; i++)); do printf 'hollow-%d ' "${i}"; done)hollow-deferred
export CLUSTER_NODES
export CLUSTER_NODE_ARGS_hollow_deferred="--register-with-taints vpa-inplace.dev/bench=deferred:NoSchedule"
export CLUSTER_NODE_MAX_PODS=${CLUSTER_NODE_MAX_PODS:-110}
# The hollow kubelets run at nice 19: on a real cluster kubelets do not share
# the API server's CPUs. Here, at normal priority, a few dozen of them took
# most of the machine and the API server answered resize patches in seconds,
# whichever updater sent them. 19, the lowest priority, because each of them
# weighs on its own: 26 kubelets at nice 10 still outweigh the API server
# almost three to one, at 19 they weigh about a third of it.
export CLUSTER_NODE_NICE=${CLUSTER_NODE_NICE:-19}
# Pods are created by the ReplicaSet controller: faster than its default 20 QPS.
export CLUSTER_KCM_ARGS=${CLUSTER_KCM_ARGS:-"--kube-api-qps=100 --kube-api-burst=200"}

if ((pods > nodes * CLUSTER_NODE_MAX_PODS)); then
  echo "error: ${pods} pods do not fit on ${nodes} nodes of ${CLUSTER_NODE_MAX_PODS} pods" >&2
  exit 2
fi

mkdir -p "${bin}" "${logs}"
if [[ -n ${sharded} ]]; then
  echo "== building our updater, the driver and helm (to render the chart's shards' Leases)"
  hack/tools/install.sh helm >/dev/null
else
  echo "== building our updater, the upstream updater and the driver"
fi
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
  go build -o "${bin}/resize-bench" ./cmd/resize-bench
  # The sharded mode runs ours alone.
  if [[ -z ${sharded} ]]; then
    go build -o "${bin}/vpa-updater-${upstream_version}" k8s.io/autoscaler/vertical-pod-autoscaler/pkg/updater
  fi
)

# The driver's flags but --kubeconfig (the cluster's, once it runs).
extra=()
[[ -n ${BENCH_ONLY:-} ]] && extra+=(--only="${BENCH_ONLY}")
[[ ${BENCH_PPROF:-0} == 1 ]] && extra+=(--pprof)
ours_args="--feature-gates=InPlace=true --leader-elect=false --updater-interval=1m -v=2 ${BENCH_OURS_ARGS:-}"
reproduce="make bench BENCH_PODS=${pods} BENCH_PHASES=resize${BENCH_ONLY:+ BENCH_ONLY=${BENCH_ONLY}}"
if [[ -n ${sharded} ]]; then
  # Leader election, its timings and the shards are the driver's to add
  # (resize-bench --help: --lease-duration, ...).
  # shellcheck source=hack/e2e-shards.sh
  source hack/e2e-shards.sh
  # As many node room buckets as the chart's objects applied below.
  ours_args="--feature-gates=InPlace=true --updater-interval=1m --node-room-buckets=${shard_node_room_buckets} -v=2 ${BENCH_OURS_ARGS:-}"
  extra+=(--sharded-replicas="${sharded}" --shards="${shards}" --apiserver-pid-file="${CLUSTER_DIR}/pids/kube-apiserver.pid")
  reproduce+=" BENCH_SHARDED=${sharded} BENCH_SHARDS=${shards} BENCH_NAMESPACES=${namespaces}"
elif ((namespaces != 1)); then
  reproduce+=" BENCH_NAMESPACES=${namespaces}"
fi
driver_args=(
  --pods="${pods}" --namespaces="${namespaces}" --qps="${qps}" --burst="${burst}"
  --work-dir="${logs}" --results="${results}" --reproduce="${reproduce}"
  --ours-binary="${ours_binary}" --ours-version="${ours_version}" --ours-kubeconfig="${out}/deploy/updater.kubeconfig"
  --ours-identity="ServiceAccount vpa-inplace-system/vpa-inplace-updater (RBAC of deploy/)"
  --ours-args="${ours_args}"
  --upstream-binary="${bin}/vpa-updater-${upstream_version}" --upstream-version="k8s.io/autoscaler/vertical-pod-autoscaler ${upstream_version}" --upstream-kubeconfig="${CLUSTER_DIR}/admin.kubeconfig"
  --upstream-identity="cluster admin (system:masters): upstream's RBAC is not deployed here"
  --upstream-ready-path=""
  --upstream-args="--feature-gates=InPlace=true --min-replicas=1 --in-place-skip-disruption-budget=true --eviction-tolerance=0.5 --use-admission-controller-status=false --updater-interval=1m --v=2 ${BENCH_UPSTREAM_ARGS:-}"
  --token-volume="${token_volume}"
  --cluster="${nodes} hollow nodes of ${CLUSTER_NODE_MAX_PODS} pods (${CLUSTER_NODE_CORES:-4} CPUs, ${CLUSTER_NODE_MEMORY:-8Gi}) plus ${CLUSTER_NODES##* }, running at nice ${CLUSTER_NODE_NICE}; hollow kubelet flags: ${CLUSTER_NODE_ARGS:-none}${CLUSTER_FEATURE_GATES:+; API server feature gates: ${CLUSTER_FEATURE_GATES}}"
  "${extra[@]}"
)
# Before any cluster: every replica of ours the run starts, with its flags,
# against the updater's own parsing and validation.
echo "== checking the flags of our updater's replicas"
# shellcheck disable=SC2086
"${bin}/resize-bench" "${driver_args[@]}" ${BENCH_ARGS:-} --check-updater-args
if [[ ${BENCH_CHECK_ONLY:-0} == 1 ]]; then
  echo "== BENCH_CHECK_ONLY=1: flags checked, nothing started"
  exit 0
fi

# About 0.6 GiB for the control plane (more with many pods) and 90 MiB per
# hollow node (hack/cluster/README.md); refuse to start what cannot fit.
need_mib=$((1024 + pods / 10 + (nodes + 1) * 90))
avail_mib=$(($(sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo) / 1024))
if ((avail_mib < need_mib)); then
  echo "error: ${nodes} hollow nodes and ${pods} pods need about ${need_mib} MiB; ${avail_mib} MiB available" >&2
  exit 1
fi

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

echo "== cluster: ${nodes} hollow nodes + hollow-deferred, ${CLUSTER_NODE_MAX_PODS} pods each (${CLUSTER_DIR})"
# Always a fresh cluster of this size (a kept one may have other nodes).
hack/cluster/down.sh --purge >/dev/null
hack/cluster/up.sh
# shellcheck disable=SC1091
source "${CLUSTER_DIR}/env.sh"

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
if [[ -n ${sharded} ]]; then
  echo "== applying the chart's shards' Leases and Role (updater.shards=${shards})"
  shard_objects apply "${logs}/shards" "${shards}" >>"${logs}/deploy.log"
fi

echo "== running the benchmark (${pods} pods${sharded:+ over ${namespaces} namespaces, 1 replica then ${sharded} sharing ${shards} shards}; logs in ${logs})"
# shellcheck disable=SC2086
"${bin}/resize-bench" --kubeconfig="${KUBECONFIG}" "${driver_args[@]}" ${BENCH_ARGS:-} \
  > >(tee "${logs}/driver.log") 2>&1 &
driver_pid=$!
wait "${driver_pid}"
driver_pid=
echo "== done: ${results}"
