#!/usr/bin/env bash
# Starts the local cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
# hollow nodes (real kubelet code, fake container runtime), everything on 127.0.0.1 with
# ports picked free at start. Builds missing binaries first (hack/cluster/build.sh).
#
#   CLUSTER_PROFILE=v1.37         (default) control plane and kubelets v1.37.1; the apiserver's
#                                 PodResizeValidator admission plugin is on (over-allocatable
#                                 resizes are refused with 403, cause NodeCapacity)
#   CLUSTER_PROFILE=v1.35-kubelet same control plane with --disable-admission-plugins=
#                                 PodResizeValidator, hollow nodes built from kubelet v1.35
#                                 (over-allocatable resizes end PodResizePending/Infeasible)
#   CLUSTER_PROFILE=v1.34         control plane and kubelets v1.34 (module control-plane-v1.34):
#                                 no PodResizeValidator (over-allocatable resizes end
#                                 PodResizePending/Infeasible), suspended Jobs' templates
#                                 immutable, no KEP-5836
#   CLUSTER_PROFILE=v1.38         control plane and kubelets v1.38 (module control-plane-v1.38,
#                                 built with Go 1.27): as v1.37 (PodResizeValidator on), plus
#                                 1.38's LimitRanger, which checks only what a resize changes
#
# Writes $CLUSTER_DIR/env.sh (default _output/cluster/run/env.sh); see README.md for its
# contract and for all the knobs below.
#
# Nodes: CLUSTER_NODES="name[:static] ..." (default "hollow-1 hollow-2 hollow-static:static");
#   or CLUSTER_NODE_COUNT=N (generic nodes hollow-1..N) and CLUSTER_STATIC_NODE=0|1.
#   ":static" = fake static CPU manager, label vpa-inplace.dev/cpu-manager=static and taint
#   vpa-inplace.dev/cpu-manager=static:NoSchedule. Every node: label vpa-inplace.dev/hollow=true.
# Shape: CLUSTER_NODE_CORES (4), CLUSTER_NODE_MEMORY (8Gi), CLUSTER_NODE_RESERVED_CPU (500m),
#   CLUSTER_NODE_RESERVED_MEMORY (512Mi), CLUSTER_NODE_MAX_PODS (110),
#   CLUSTER_NODE_ARGS (extra hollow-node flags, all nodes),
#   CLUSTER_NODE_ARGS_<name, - as _> (one node, e.g. CLUSTER_NODE_ARGS_hollow_2="--cores 2"),
#   CLUSTER_NODE_NICE (0; niceness of the hollow nodes and of their sessions' autogroups:
#   above 0 the control plane, and what runs beside it, get the CPUs first, as on a real
#   cluster whose kubelets run elsewhere).
# Control plane: CLUSTER_APISERVER_ARGS, CLUSTER_KCM_ARGS, CLUSTER_SCHEDULER_ARGS,
#   CLUSTER_ETCD_ARGS (extra flags); CLUSTER_LOG_LEVEL (klog -v, default 1).
# Feature gates: CLUSTER_FEATURE_GATES (Gate=true,...; default none) is given to the API server,
#   the controller-manager, the scheduler and every hollow node, e.g.
#   InPlacePodVerticalScalingSchedulerPreemption=true (alpha in v1.37, KEP-5836). A gate the
#   profile's Kubernetes does not know stops the component at start.
# Add-ons, started once the nodes are Ready, each with a ServiceAccount token of its own:
#   metrics-server (CLUSTER_METRICS_SERVER=1 by default; serves metrics.k8s.io through the
#   aggregation layer, scraping the hollow kubelets' /metrics/resource; CLUSTER_METRICS_SERVER_ARGS),
#   the upstream VPA recommender (CLUSTER_RECOMMENDER=1 by default, needs metrics-server; VPA CRDs
#   from deploy/base/crd; CLUSTER_RECOMMENDER_INTERVAL (10s), CLUSTER_RECOMMENDER_NAME (default:
#   recommends for VPAs that name no recommender or "default"), CLUSTER_RECOMMENDER_ARGS).
# On failure everything started is stopped again (logs are kept) unless CLUSTER_KEEP_ON_FAILURE=1.
set -o errexit -o nounset -o pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cluster::python_init
cluster::profile_check

T0=$(date +%s.%N)
ts() { cluster::log "$(printf '+%5.1fs' "$(echo "$(date +%s.%N) - ${T0}" | bc)") $*"; }

# ---------- already running? ----------
if [[ -f ${CLUSTER_DIR}/pids/kube-apiserver.pid ]] && cluster::pid_alive "${CLUSTER_DIR}/pids/kube-apiserver.pid"; then
  running=$(sed -n 's/^export CLUSTER_PROFILE=//p' "${CLUSTER_DIR}/env.sh" 2>/dev/null || true)
  if [[ ${running} == "${CLUSTER_PROFILE}" ]]; then
    cluster::log "cluster already up (profile ${running}); source ${CLUSTER_DIR}/env.sh"
    exit 0
  fi
  cluster::die "a cluster (profile '${running:-unknown}') is already running in ${CLUSTER_DIR}; run hack/cluster/down.sh first"
fi
# leftovers of a stopped or half-started cluster: stop what is left, start from scratch
if [[ -e ${CLUSTER_DIR} ]]; then
  "${CLUSTER_HACK_DIR}/down.sh" --purge >&2
fi

# ---------- binaries ----------
ts "profile ${CLUSTER_PROFILE}: checking binaries"
CP_BIN="" KUBELET_BIN="" METRICS_SERVER_BIN="" RECOMMENDER_BIN=""
built=$("${CLUSTER_HACK_DIR}/build.sh" "${CLUSTER_PROFILE}")
while read -r set dir; do
  case ${set} in
    control-plane | control-plane-v1.34 | control-plane-v1.38) CP_BIN=${dir} ;;
    kubelet-v1.35) KUBELET_BIN=${dir} ;;
    metrics-server) METRICS_SERVER_BIN=${dir}/metrics-server ;;
    recommender) RECOMMENDER_BIN=${dir}/vpa-recommender ;;
  esac
done <<<"${built}"
[[ -n ${CP_BIN} ]] || cluster::die "build.sh did not report the control-plane binaries"
case ${CLUSTER_PROFILE} in
  v1.38 | v1.37 | v1.34) HOLLOW=${CP_BIN}/hollow-node ;;
  v1.35-kubelet) HOLLOW=${KUBELET_BIN:-missing}/hollow-node-v1.35 ;;
esac
for b in "${CP_BIN}"/{etcd,kube-apiserver,kube-controller-manager,kube-scheduler} "${HOLLOW}"; do
  [[ -x ${b} ]] || cluster::die "missing binary ${b}"
done

# ---------- node list ----------
if [[ -z ${CLUSTER_NODES:-} ]]; then
  CLUSTER_NODES=""
  for ((i = 1; i <= ${CLUSTER_NODE_COUNT:-2}; i++)); do CLUSTER_NODES+="hollow-${i} "; done
  [[ ${CLUSTER_STATIC_NODE:-1} == 1 ]] && CLUSTER_NODES+="hollow-static:static"
fi
NODE_NAMES=() NODE_KINDS=()
for spec in ${CLUSTER_NODES}; do
  NODE_NAMES+=("${spec%%:*}")
  if [[ ${spec} == *:* ]]; then NODE_KINDS+=("${spec#*:}"); else NODE_KINDS+=(""); fi
done
((${#NODE_NAMES[@]} > 0)) || cluster::die "no nodes (CLUSTER_NODES is empty)"

# ---------- layout, ports, state ----------
PKI=${CLUSTER_DIR}/pki LOGS=${CLUSTER_DIR}/logs PIDS=${CLUSTER_DIR}/pids
mkdir -p "${PKI}" "${LOGS}" "${PIDS}" "${CLUSTER_DIR}/nodes"
touch "${CLUSTER_DIR}/.vpa-inplace-cluster" # marks the directory as ours for down.sh --purge
read -r -a PORTS <<<"$(cluster::free_ports $((7 + ${#NODE_NAMES[@]})))"
ETCD_PORT=${PORTS[0]} ETCD_PEER_PORT=${PORTS[1]} API_PORT=${PORTS[2]} KCM_PORT=${PORTS[3]} SCHED_PORT=${PORTS[4]}
METRICS_SERVER_PORT=${PORTS[5]} RECOMMENDER_PORT=${PORTS[6]}
NODE_PORT0=7 # PORTS[NODE_PORT0 + i]: the kubelet of node i
APISERVER=https://127.0.0.1:${API_PORT}
{
  echo "CLUSTER_PROFILE=${CLUSTER_PROFILE}"
  echo "ETCD_PORT=${ETCD_PORT} ETCD_PEER_PORT=${ETCD_PEER_PORT} API_PORT=${API_PORT} KCM_PORT=${KCM_PORT} SCHED_PORT=${SCHED_PORT}"
  echo "CP_BIN=${CP_BIN}"
  echo "HOLLOW=${HOLLOW}"
  echo "METRICS_SERVER_PORT=${METRICS_SERVER_PORT} RECOMMENDER_PORT=${RECOMMENDER_PORT}"
  echo "METRICS_SERVER_BIN=${METRICS_SERVER_BIN}"
  echo "RECOMMENDER_BIN=${RECOMMENDER_BIN}"
} >"${CLUSTER_DIR}/state"

cleanup_on_failure() {
  local rc=$?
  ((rc == 0)) && return 0
  cluster::log "up.sh failed (exit ${rc}); component logs are in ${LOGS}"
  local f
  for f in "${LOGS}"/*.log; do
    [[ -f ${f} ]] || continue
    echo "----- tail ${f}" >&2
    tail -n 8 "${f}" >&2
  done
  if [[ ${CLUSTER_KEEP_ON_FAILURE:-0} == 1 ]]; then
    cluster::log "CLUSTER_KEEP_ON_FAILURE=1: leaving processes running; stop them with hack/cluster/down.sh"
  else
    "${CLUSTER_HACK_DIR}/down.sh" >&2 || true
  fi
  exit "${rc}"
}
trap cleanup_on_failure EXIT

# ---------- PKI + kubeconfigs ----------
"${CLUSTER_HACK_DIR}/pki.sh" init "${PKI}" "${NODE_NAMES[@]}"
ts "PKI ready (${PKI})"
kubeconfig() { # file user cert-basename
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: vpa-inplace-local
  cluster:
    server: ${APISERVER}
    certificate-authority: ${PKI}/ca.crt
users:
- name: $2
  user:
    client-certificate: ${PKI}/$3.crt
    client-key: ${PKI}/$3.key
contexts:
- name: vpa-inplace-local
  context: {cluster: vpa-inplace-local, user: $2}
current-context: vpa-inplace-local
EOF
}
kubeconfig "${CLUSTER_DIR}/admin.kubeconfig" admin admin
kubeconfig "${CLUSTER_DIR}/kube-controller-manager.kubeconfig" kube-controller-manager controller-manager
kubeconfig "${CLUSTER_DIR}/kube-scheduler.kubeconfig" kube-scheduler scheduler
for n in "${NODE_NAMES[@]}"; do kubeconfig "${CLUSTER_DIR}/nodes/${n}.kubeconfig" "${n}" "node-${n}"; done

# ---------- process helpers ----------
start() { # name cmd...   (setsid: detached from the terminal, so its Ctrl-C does not reach it; PID recorded at once)
  local name=$1
  shift
  setsid "$@" >"${LOGS}/${name}.log" 2>&1 </dev/null &
  local pid=$!
  echo "${pid} $(cluster::proc_start_time "${pid}")" >"${PIDS}/${name}.pid"
}
# niced N cmd... (as start's command): runs cmd at niceness N in the session
# start() made for it. With the kernel's autogroup scheduling (on by default on
# most distributions) every session is a scheduling group of its own, as heavy
# as any other, and a process's nice only orders it against the threads of its
# own session: nice alone leaves each hollow node weighing as much as the API
# server. So the session's autogroup gets the same niceness (raising it needs no
# privilege; where autogroup is off, the process's nice is what counts).
# shellcheck disable=SC2016 # $1 and $@ belong to the inner shell
niced=(bash -c '{ [[ $1 != 0 && -w /proc/self/autogroup ]] && echo "$1" >/proc/self/autogroup; } 2>/dev/null; exec nice -n "$1" "${@:2}"' niced)
waitfor() { # desc timeout-seconds "pid-names..." cmd...  (fails early if one of the processes died)
  local desc=$1 timeout=$2 names=$3 name
  shift 3
  local deadline=$(($(date +%s) + timeout))
  while (($(date +%s) < deadline)); do
    if "$@" >/dev/null 2>&1; then
      ts "${desc}"
      return 0
    fi
    for name in ${names}; do
      cluster::pid_alive "${PIDS}/${name}.pid" ||
        cluster::die "${name} exited while waiting for: ${desc} (log ${LOGS}/${name}.log)"
    done
    sleep 0.2
  done
  cluster::die "timeout (${timeout}s) waiting for: ${desc}"
}
api() { curl -sS --fail --max-time 10 --cacert "${PKI}/ca.crt" --cert "${PKI}/admin.crt" --key "${PKI}/admin.key" "${APISERVER}$1"; }
V=${CLUSTER_LOG_LEVEL:-1}
GATES=()
if [[ -n ${CLUSTER_FEATURE_GATES:-} ]]; then
  [[ ${CLUSTER_FEATURE_GATES} =~ ^[A-Za-z0-9]+=(true|false)(,[A-Za-z0-9]+=(true|false))*$ ]] ||
    cluster::die "CLUSTER_FEATURE_GATES must read Gate=true|false[,...] (got '${CLUSTER_FEATURE_GATES}')"
  GATES=(--feature-gates "${CLUSTER_FEATURE_GATES}")
fi
NODE_NICE=${CLUSTER_NODE_NICE:-0}
if ! [[ ${NODE_NICE} =~ ^[0-9]+$ ]] || ((NODE_NICE > 19)); then
  cluster::die "CLUSTER_NODE_NICE must be a number from 0 to 19 (got '${NODE_NICE}')"
fi

# ---------- etcd ----------
# shellcheck disable=SC2086 # the *_ARGS variables are word lists by design
start etcd "${CP_BIN}/etcd" --name vpa-inplace --data-dir "${CLUSTER_DIR}/etcd" \
  --listen-client-urls "http://127.0.0.1:${ETCD_PORT}" --advertise-client-urls "http://127.0.0.1:${ETCD_PORT}" \
  --listen-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" --initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
  --initial-cluster "vpa-inplace=http://127.0.0.1:${ETCD_PEER_PORT}" --unsafe-no-fsync --log-level warn \
  ${CLUSTER_ETCD_ARGS:-}
waitfor "etcd healthy (127.0.0.1:${ETCD_PORT})" 60 etcd curl -fsS "http://127.0.0.1:${ETCD_PORT}/health"

# ---------- kube-apiserver ----------
admission=(--enable-admission-plugins NodeRestriction)
[[ ${CLUSTER_PROFILE} == v1.35-kubelet ]] && admission+=(--disable-admission-plugins PodResizeValidator)
# shellcheck disable=SC2086
start kube-apiserver "${CP_BIN}/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:${ETCD_PORT}" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "${API_PORT}" \
  --endpoint-reconciler-type none \
  --tls-cert-file "${PKI}/apiserver.crt" --tls-private-key-file "${PKI}/apiserver.key" \
  --client-ca-file "${PKI}/ca.crt" \
  --requestheader-client-ca-file "${PKI}/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
  --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
  --requestheader-extra-headers-prefix X-Remote-Extra- \
  --proxy-client-cert-file "${PKI}/front-proxy-client.crt" --proxy-client-key-file "${PKI}/front-proxy-client.key" \
  --kubelet-client-certificate "${PKI}/apiserver-kubelet-client.crt" --kubelet-client-key "${PKI}/apiserver-kubelet-client.key" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "${PKI}/sa.pub" --service-account-signing-key-file "${PKI}/sa.key" \
  --service-cluster-ip-range 10.0.0.0/24 \
  --authorization-mode Node,RBAC \
  "${admission[@]}" "${GATES[@]}" \
  --allow-privileged=true --profiling=false --v="${V}" \
  ${CLUSTER_APISERVER_ARGS:-}
waitfor "kube-apiserver ready (${APISERVER})" 180 kube-apiserver api /readyz

# ---------- kube-controller-manager + kube-scheduler ----------
kcm_cfg=${CLUSTER_DIR}/kube-controller-manager.kubeconfig
# shellcheck disable=SC2086
start kube-controller-manager "${CP_BIN}/kube-controller-manager" \
  --kubeconfig "${kcm_cfg}" --authentication-kubeconfig "${kcm_cfg}" --authorization-kubeconfig "${kcm_cfg}" \
  --bind-address 127.0.0.1 --secure-port "${KCM_PORT}" \
  --service-account-private-key-file "${PKI}/sa.key" --root-ca-file "${PKI}/ca.crt" \
  --cluster-signing-cert-file "${PKI}/ca.crt" --cluster-signing-key-file "${PKI}/ca.key" \
  --use-service-account-credentials=true --leader-elect=false "${GATES[@]}" --v="${V}" \
  ${CLUSTER_KCM_ARGS:-}
sched_cfg=${CLUSTER_DIR}/kube-scheduler.kubeconfig
# shellcheck disable=SC2086
start kube-scheduler "${CP_BIN}/kube-scheduler" \
  --kubeconfig "${sched_cfg}" --authentication-kubeconfig "${sched_cfg}" --authorization-kubeconfig "${sched_cfg}" \
  --bind-address 127.0.0.1 --secure-port "${SCHED_PORT}" --leader-elect=false "${GATES[@]}" --v="${V}" \
  ${CLUSTER_SCHEDULER_ARGS:-}
ts "kube-controller-manager (:${KCM_PORT}) and kube-scheduler (:${SCHED_PORT}) started"

# ---------- hollow nodes ----------
for i in "${!NODE_NAMES[@]}"; do
  n=${NODE_NAMES[i]} kind=${NODE_KINDS[i]}
  labels=vpa-inplace.dev/hollow=true
  args=()
  case ${kind} in
    "") ;;
    static)
      labels+=,vpa-inplace.dev/cpu-manager=static
      args+=(--fake-static-cpu-manager --register-with-taints vpa-inplace.dev/cpu-manager=static:NoSchedule)
      ;;
    *) cluster::die "node ${n}: unknown kind '${kind}' (want static or nothing)" ;;
  esac
  # A v1.34 kubelet reports a running container's CPU request from the runtime only: when the
  # runtime reports none (the fake CRI by default) it keeps the value reported before, so
  # status.containerStatuses[].resources never shows a CPU resize. v1.35+ fall back to the
  # actuated values. The fake CRI then echoes what was applied, as containerd reports it.
  [[ ${CLUSTER_PROFILE} == v1.34 ]] && args+=(--report-runtime-resources)
  per_node="CLUSTER_NODE_ARGS_${n//-/_}"
  # shellcheck disable=SC2086
  start "node-${n}" "${niced[@]}" "${NODE_NICE}" "${HOLLOW}" --name "${n}" --kubeconfig "${CLUSTER_DIR}/nodes/${n}.kubeconfig" \
    --root-dir "${CLUSTER_DIR}/nodes/${n}" --address 127.0.0.1 --kubelet-port "${PORTS[NODE_PORT0 + i]}" \
    --cores "${CLUSTER_NODE_CORES:-4}" --memory "${CLUSTER_NODE_MEMORY:-8Gi}" \
    --reserved-cpu "${CLUSTER_NODE_RESERVED_CPU:-500m}" --reserved-memory "${CLUSTER_NODE_RESERVED_MEMORY:-512Mi}" \
    --max-pods "${CLUSTER_NODE_MAX_PODS:-110}" --node-labels "${labels}" \
    "${args[@]}" "${GATES[@]}" ${CLUSTER_NODE_ARGS:-} ${!per_node:-} --v="${V}"
done
ts "${#NODE_NAMES[@]} hollow nodes started ($(basename "${HOLLOW}"))"

nodes_ready() { # all of NODE_NAMES registered and Ready
  api /api/v1/nodes | "${CLUSTER_PYTHON}" -c '
import json, sys
want = set(sys.argv[1:])
ready = {n["metadata"]["name"] for n in json.load(sys.stdin)["items"]
         if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))}
sys.exit(0 if want <= ready else 1)
' "${NODE_NAMES[@]}"
}
waitfor "${#NODE_NAMES[@]} nodes Ready" $((120 + 3 * ${#NODE_NAMES[@]})) "${NODE_NAMES[*]/#/node-}" nodes_ready
waitfor "default ServiceAccount" 120 kube-controller-manager api /api/v1/namespaces/default/serviceaccounts/default

for name in etcd kube-apiserver kube-controller-manager kube-scheduler; do
  cluster::pid_alive "${PIDS}/${name}.pid" || cluster::die "${name} is not running (log ${LOGS}/${name}.log)"
done

# ---------- add-ons: metrics-server, the VPA recommender ----------
# shellcheck source=../deploy/lib.sh
source "${CLUSTER_REPO_ROOT}/hack/deploy/lib.sh"
# apply_manifest FILE: server-side apply of every document of FILE, placeholders filled in.
apply_manifest() {
  local dir doc kind name path ca_bundle
  dir=$(mktemp -d -p "${CLUSTER_DIR}" .manifest.XXXXXX)
  ca_bundle=$(base64 <"${PKI}/ca.crt" | tr -d '\n')
  sed -e "s#__METRICS_SERVER_PORT__#${METRICS_SERVER_PORT}#g" -e "s#__CA_BUNDLE__#${ca_bundle}#g" "$1" | deploy::split "${dir}"
  for doc in "${dir}"/*.yaml; do
    kind=$(deploy::field "${doc}" kind) name=$(deploy::field "${doc}" name)
    path=$(deploy::api_path "$(deploy::field "${doc}" apiVersion)" "${kind}" "${name}" "$(deploy::field "${doc}" namespace)")
    curl -sS --fail-with-body --max-time 20 --cacert "${PKI}/ca.crt" --cert "${PKI}/admin.crt" --key "${PKI}/admin.key" \
      -X PATCH -H 'Content-Type: application/apply-patch+yaml' --data-binary @"${doc}" \
      "${APISERVER}${path}?fieldManager=vpa-inplace-cluster&force=true" >/dev/null ||
      cluster::die "apply ${kind}/${name} from $1"
  done
  rm -rf "${dir}"
}
# sa_kubeconfig NAMESPACE SA OUT: a kubeconfig with a 24h token of the ServiceAccount.
sa_kubeconfig() {
  local token
  token=$(curl -sS --fail-with-body --max-time 20 --cacert "${PKI}/ca.crt" --cert "${PKI}/admin.crt" --key "${PKI}/admin.key" \
    -X POST -H 'Content-Type: application/json' \
    --data '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":86400}}' \
    "${APISERVER}/api/v1/namespaces/$1/serviceaccounts/$2/token" | cluster::json 'd["status"]["token"]') ||
    cluster::die "token of ServiceAccount $1/$2"
  (
    umask 077
    cat >"$3" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: vpa-inplace-local
  cluster: {server: ${APISERVER}, certificate-authority: ${PKI}/ca.crt}
users:
- name: $2
  user: {token: ${token}}
contexts:
- name: vpa-inplace-local
  context: {cluster: vpa-inplace-local, user: $2, namespace: $1}
current-context: vpa-inplace-local
KUBECONFIG
  )
}
condition_true() { # API-PATH TYPE: the object's status condition TYPE is True
  api "$1" | cluster::json "next((c['status'] for c in d.get('status', {}).get('conditions', []) if c['type'] == '$2'), '')" | grep -qx True
}
crds_established() {
  condition_true /apis/apiextensions.k8s.io/v1/customresourcedefinitions/verticalpodautoscalers.autoscaling.k8s.io Established &&
    condition_true /apis/apiextensions.k8s.io/v1/customresourcedefinitions/verticalpodautoscalercheckpoints.autoscaling.k8s.io Established
}
if [[ -n ${METRICS_SERVER_BIN} ]]; then
  apply_manifest "${CLUSTER_HACK_DIR}/manifests/metrics-server.yaml"
  ms_cfg=${CLUSTER_DIR}/metrics-server.kubeconfig
  sa_kubeconfig kube-system metrics-server "${ms_cfg}"
  # --deprecated-kubelet-completely-insecure: hollow kubelets (as kubemark's) serve plain HTTP
  # with no authentication. Their node address is the host's; the binary sends its kubelet
  # requests to 127.0.0.1 (see its main.go).
  # shellcheck disable=SC2086
  start metrics-server "${METRICS_SERVER_BIN}" \
    --kubeconfig "${ms_cfg}" --authentication-kubeconfig "${ms_cfg}" --authorization-kubeconfig "${ms_cfg}" \
    --bind-address 127.0.0.1 --secure-port "${METRICS_SERVER_PORT}" \
    --tls-cert-file "${PKI}/metrics-server.crt" --tls-private-key-file "${PKI}/metrics-server.key" \
    --deprecated-kubelet-completely-insecure --kubelet-use-node-status-port --kubelet-preferred-address-types InternalIP \
    --metric-resolution 10s --kubelet-request-timeout 5s --v="${V}" \
    ${CLUSTER_METRICS_SERVER_ARGS:-}
  waitfor "metrics-server serving v1beta1.metrics.k8s.io (127.0.0.1:${METRICS_SERVER_PORT})" 120 "metrics-server kube-apiserver" \
    condition_true /apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io Available
fi
if [[ -n ${RECOMMENDER_BIN} ]]; then
  while read -r crd; do apply_manifest "${crd}"; done < <(deploy::resources "${CLUSTER_REPO_ROOT}/deploy/base/crd")
  apply_manifest "${CLUSTER_HACK_DIR}/manifests/recommender.yaml"
  waitfor "VPA CRDs established" 60 kube-apiserver crds_established
  sa_kubeconfig kube-system vpa-recommender "${CLUSTER_DIR}/vpa-recommender.kubeconfig"
  # Short intervals and half-lives, so that a change of usage shows in the recommendation
  # within a minute or two instead of hours: a CPU sample weighs half as much after 30 s, and
  # memory peaks are taken per 20 s interval over the last 2 minutes.
  # shellcheck disable=SC2086
  start vpa-recommender "${RECOMMENDER_BIN}" \
    --kubeconfig "${CLUSTER_DIR}/vpa-recommender.kubeconfig" --address "127.0.0.1:${RECOMMENDER_PORT}" \
    --leader-elect=false --storage checkpoint --memory-saver \
    --recommender-interval "${CLUSTER_RECOMMENDER_INTERVAL:-10s}" --checkpoints-gc-interval 1m \
    --recommender-name "${CLUSTER_RECOMMENDER_NAME:-default}" \
    --cpu-histogram-decay-half-life 30s --memory-histogram-decay-half-life 30s \
    --memory-aggregation-interval 20s --memory-aggregation-interval-count 6 \
    --pod-recommendation-min-cpu-millicores 10 --pod-recommendation-min-memory-mb 10 \
    --v="${V}" ${CLUSTER_RECOMMENDER_ARGS:-}
  waitfor "vpa-recommender serving /metrics (127.0.0.1:${RECOMMENDER_PORT})" 60 vpa-recommender \
    curl -fsS "http://127.0.0.1:${RECOMMENDER_PORT}/metrics"
fi

# ---------- env.sh ----------
kube_version=$(cluster::kube_version "${CLUSTER_HACK_DIR}")
[[ ${CLUSTER_PROFILE} == v1.34 ]] && kube_version=$(cluster::kube_version "${CLUSTER_HACK_DIR}/control-plane-v1.34")
[[ ${CLUSTER_PROFILE} == v1.38 ]] && kube_version=$(cluster::kube_version "${CLUSTER_HACK_DIR}/control-plane-v1.38")
kubelet_version=${kube_version}
[[ ${CLUSTER_PROFILE} == v1.35-kubelet ]] && kubelet_version=$(cluster::kube_version "${CLUSTER_HACK_DIR}/kubelet-v1.35")
cat >"${CLUSTER_DIR}/env.sh.tmp" <<EOF
# Local cluster environment (written by hack/cluster/up.sh). Source it: . ${CLUSTER_DIR}/env.sh
export KUBECONFIG=${CLUSTER_DIR}/admin.kubeconfig
export CLUSTER_PROFILE=${CLUSTER_PROFILE}
export CLUSTER_DIR=${CLUSTER_DIR}
export CLUSTER_APISERVER=${APISERVER}
export CLUSTER_CA=${PKI}/ca.crt
export CLUSTER_PKI_DIR=${PKI}
export CLUSTER_ADMIN_CERT=${PKI}/admin.crt
export CLUSTER_ADMIN_KEY=${PKI}/admin.key
export CLUSTER_NODES="${NODE_NAMES[*]}"
export CLUSTER_KUBE_VERSION=${kube_version}
export CLUSTER_KUBELET_VERSION=${kubelet_version}
export CLUSTER_FEATURE_GATES=${CLUSTER_FEATURE_GATES:-}
export CLUSTER_BIN_DIR=${CP_BIN}
export CLUSTER_METRICS_SERVER=$([[ -n ${METRICS_SERVER_BIN} ]] && echo 1 || echo 0)
export CLUSTER_RECOMMENDER=$([[ -n ${RECOMMENDER_BIN} ]] && echo 1 || echo 0)
export CLUSTER_RECOMMENDER_NAME=${CLUSTER_RECOMMENDER_NAME:-default}
export CLUSTER_RECOMMENDER_INTERVAL=${CLUSTER_RECOMMENDER_INTERVAL:-10s}
EOF
mv "${CLUSTER_DIR}/env.sh.tmp" "${CLUSTER_DIR}/env.sh"
trap - EXIT

ts "cluster up: profile ${CLUSTER_PROFILE}, apiserver ${APISERVER}, kubelets ${kubelet_version}"
api /api/v1/nodes | "${CLUSTER_PYTHON}" -c '
import json, sys
for n in json.load(sys.stdin)["items"]:
    s, m = n["status"], n["metadata"]
    print("  %-16s cpu %s/%s  memory %s/%s  kubelet %s  taints %s" % (
        m["name"], s["allocatable"]["cpu"], s["capacity"]["cpu"], s["allocatable"]["memory"],
        s["capacity"]["memory"], s["nodeInfo"]["kubeletVersion"],
        ",".join("%s=%s:%s" % (t["key"], t.get("value", ""), t["effect"]) for t in n["spec"].get("taints", [])) or "-"))
' >&2
cat >&2 <<EOF

  Use it:    . ${CLUSTER_DIR}/env.sh     (KUBECONFIG = admin, system:masters)
  Smoke:     hack/cluster/smoke.sh
  As a SA:   hack/cluster/kubeconfig-for-sa.sh NAMESPACE SA OUT
  Stop:      hack/cluster/down.sh [--purge]
EOF
