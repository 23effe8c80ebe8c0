#!/usr/bin/env bash
# End-to-end check of in-place resize on the local cluster (curl against the API, no kubectl),
# in its own namespace, which is deleted at the end (SMOKE_KEEP=1 keeps it).
#
#   1. a Deployment pod is resized (cpu+memory up, then memory down): observedGeneration ==
#      generation, no PodResize* condition, status resources == desired
#   2. an over-allocatable resize:
#        v1.37, v1.38  -> 403 Forbidden, cause NodeCapacity (PodResizeValidator admission)
#        v1.35-kubelet -> accepted, then PodResizePending reason Infeasible (kubelet v1.35)
#        v1.34         -> accepted, then PodResizePending reason Infeasible (no such admission
#                         plugin before 1.36; kubelet v1.34)
#   3. with a filler pod on the node, a resize ends PodResizePending/Deferred, and completes on
#      its own once the filler is deleted
#   4. on the static CPU manager node, a CPU resize of a Guaranteed pod is Infeasible
#   5. a memory-limit decrease below the pod's reported usage (annotation
#      hollow-node.vpa-inplace.dev/memory-usage) ends PodResizeInProgress reason Error
#   6. the kill annotation (hollow-node.vpa-inplace.dev/kill) ends a container OOMKilled, then,
#      changed, Error: each time lastState.terminated says so, restartCount rises, the
#      container runs again and the pod's Ready condition changed in between
#   7. a memory-limit decrease below what a container needs (kill annotation,
#      memory-limit-below) is OOM-killed right after; the limit raised again, it runs and
#      stays up
# Exits non-zero on the first failure. Needs a running cluster (hack/cluster/up.sh).
set -o errexit -o nounset -o pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cluster::python_init
[[ -f ${CLUSTER_DIR}/env.sh ]] || cluster::die "no cluster: ${CLUSTER_DIR}/env.sh is missing (run hack/cluster/up.sh)"
# shellcheck source=/dev/null
source "${CLUSTER_DIR}/env.sh"

T0=$(date +%s.%N)
say() { printf '[smoke %s +%5.1fs] %s\n' "${CLUSTER_PROFILE}" "$(echo "$(date +%s.%N) - ${T0}" | bc)" "$*"; }
fail() { say "FAIL: $*"; exit 1; }

NS=smoke-$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
LAST=$(mktemp -p "${CLUSTER_DIR}" .smoke.XXXXXX)
# api METHOD PATH [BODY [CONTENT-TYPE]]: prints the HTTP code; the body goes to $LAST.
api() {
  local args=(-sS --max-time 20 --cacert "${CLUSTER_CA}" --cert "${CLUSTER_ADMIN_CERT}" --key "${CLUSTER_ADMIN_KEY}"
    -o "${LAST}" -w '%{http_code}' -X "$1")
  [[ $# -ge 3 ]] && args+=(-H "Content-Type: ${4:-application/json}" --data "$3")
  curl "${args[@]}" "${CLUSTER_APISERVER}$2"
}
must() { # expected-code METHOD PATH [BODY [CT]]
  local want=$1 code
  shift
  code=$(api "$@")
  [[ ${code} == "${want}" ]] || fail "$1 $2: HTTP ${code}, want ${want}: $(head -c 600 "${LAST}")"
}
json() { cluster::json "$1" <"${LAST}"; }

cleanup() {
  local rc=$?
  if [[ ${SMOKE_KEEP:-0} == 1 ]]; then
    say "keeping namespace ${NS}"
  else
    api DELETE "/api/v1/namespaces/${NS}" >/dev/null || true
  fi
  rm -f "${LAST}"
  exit "${rc}"
}
trap cleanup EXIT

# the first node without a kind suffix, i.e. not the static CPU manager node
NODE=${SMOKE_NODE:-}
STATIC_NODE=${SMOKE_STATIC_NODE:-}
for n in ${CLUSTER_NODES}; do
  must 200 GET "/api/v1/nodes/${n}"
  if [[ $(json 'd["metadata"].get("labels", {}).get("vpa-inplace.dev/cpu-manager", "")') == static ]]; then
    [[ -n ${STATIC_NODE} ]] || STATIC_NODE=${n}
  else
    [[ -n ${NODE} ]] || NODE=${n}
  fi
done
[[ -n ${NODE} ]] || fail "no node without the static CPU manager"
must 200 GET "/api/v1/nodes/${NODE}"
ALLOC_CPU_M=$(json 'str(int(float(d["status"]["allocatable"]["cpu"].rstrip("m")) * (1 if d["status"]["allocatable"]["cpu"].endswith("m") else 1000)))')
say "namespace ${NS}, node ${NODE} (allocatable cpu ${ALLOC_CPU_M}m), static node ${STATIC_NODE:-none}"

must 201 POST /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"${NS}\"}}"

container() { # name cpu memory
  echo "{\"name\":\"$1\",\"image\":\"registry.k8s.io/pause:3.10\",\"resources\":{\"requests\":{\"cpu\":\"$2\",\"memory\":\"$3\"},\"limits\":{\"cpu\":\"$2\",\"memory\":\"$3\"}}}"
}
must 201 POST "/apis/apps/v1/namespaces/${NS}/deployments" "$(
  cat <<EOF
{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
 "spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},
  "template":{"metadata":{"labels":{"app":"web"}},
   "spec":{"nodeSelector":{"kubernetes.io/hostname":"${NODE}"},"terminationGracePeriodSeconds":0,
    "containers":[$(container c 100m 100Mi)]}}}}
EOF
)"

# wait_for DESC TIMEOUT CMD...: polls CMD every 0.2s
wait_for() {
  local desc=$1 timeout=$2
  shift 2
  local deadline=$(($(date +%s) + timeout))
  until "$@"; do
    (($(date +%s) < deadline)) || fail "timeout (${timeout}s) waiting for ${desc}${LAST_STATE:+; last state: ${LAST_STATE}}"
    sleep 0.2
  done
}
web_pod() { # sets POD to the running web pod
  must 200 GET "/api/v1/namespaces/${NS}/pods?labelSelector=app%3Dweb"
  POD=$(json '" ".join(p["metadata"]["name"] for p in d["items"] if p["status"].get("phase") == "Running")')
  [[ -n ${POD} && ${POD} != *" "* ]]
}
wait_for "the web pod to run" 60 web_pod
say "deployment pod ${POD} is running on ${NODE}"

# pod_state NAME: "<generation==observedGeneration> <PodResize conditions> <status cpu> <status memory>"
pod_state() {
  must 200 GET "/api/v1/namespaces/${NS}/pods/$1"
  json '" ".join([
    str(d["metadata"]["generation"] == d["status"].get("observedGeneration")).lower(),
    ",".join("%s/%s" % (c["type"], c.get("reason", "")) for c in d["status"].get("conditions", [])
             if c["type"].startswith("PodResize")) or "-",
    d["status"]["containerStatuses"][0].get("resources", {}).get("requests", {}).get("cpu", "?"),
    d["status"]["containerStatuses"][0].get("resources", {}).get("requests", {}).get("memory", "?")])'
}
state_is() { # POD WANT
  LAST_STATE=$(pod_state "$1")
  [[ ${LAST_STATE} == "$2" ]]
}
resize() { # POD CONTAINER CPU MEMORY -> HTTP code
  api PATCH "/api/v1/namespaces/${NS}/pods/$1/resize" \
    "{\"spec\":{\"containers\":[$(container "$2" "$3" "$4")]}}" application/strategic-merge-patch+json
}
expect_state() { # POD WANT TIMEOUT
  LAST_STATE=""
  wait_for "pod $1 state '$2' (generation==observedGeneration conditions cpu memory)" "$3" state_is "$1" "$2"
  say "  ok: ${LAST_STATE}"
}

say "1) resize: cpu 100m->300m, memory 100Mi->150Mi, then memory 150Mi->120Mi"
code=$(resize "${POD}" c 300m 150Mi)
[[ ${code} == 200 ]] || fail "resize: HTTP ${code}: $(head -c 600 "${LAST}")"
expect_state "${POD}" "true - 300m 150Mi" 30
code=$(resize "${POD}" c 300m 120Mi)
[[ ${code} == 200 ]] || fail "resize: HTTP ${code}: $(head -c 600 "${LAST}")"
expect_state "${POD}" "true - 300m 120Mi" 30

over=$((ALLOC_CPU_M / 1000 + 1))
case ${CLUSTER_PROFILE} in
  v1.37 | v1.38)
    say "2) over-allocatable resize (cpu ${over}) is refused by the apiserver"
    must 200 GET "/api/v1/namespaces/${NS}/pods/${POD}"
    gen=$(json 'd["metadata"]["generation"]')
    code=$(resize "${POD}" c "${over}" 120Mi)
    [[ ${code} == 403 ]] || fail "want HTTP 403, got ${code}: $(head -c 600 "${LAST}")"
    cause=$(json '",".join(c.get("reason", "") for c in d.get("details", {}).get("causes", []))')
    [[ ${cause} == NodeCapacity ]] || fail "want cause NodeCapacity, got '${cause}': $(head -c 600 "${LAST}")"
    say "  ok: 403 $(json 'd["message"]')"
    must 200 GET "/api/v1/namespaces/${NS}/pods/${POD}"
    [[ $(json 'd["metadata"]["generation"]') == "${gen}" ]] || fail "pod generation changed by a refused resize"
    ;;
  v1.35-kubelet | v1.34)
    say "2) over-allocatable resize (cpu ${over}) is marked Infeasible by the kubelet"
    code=$(resize "${POD}" c "${over}" 120Mi)
    [[ ${code} == 200 ]] || fail "want HTTP 200 (no PodResizeValidator), got ${code}: $(head -c 600 "${LAST}")"
    expect_state "${POD}" "true PodResizePending/Infeasible 300m 120Mi" 30
    must 200 GET "/api/v1/namespaces/${NS}/pods/${POD}"
    say "  message: $(json '[c["message"] for c in d["status"]["conditions"] if c["type"] == "PodResizePending"][0]')"
    code=$(resize "${POD}" c 300m 120Mi)
    [[ ${code} == 200 ]] || fail "revert: HTTP ${code}"
    expect_state "${POD}" "true - 300m 120Mi" 30
    ;;
esac

fill=$((ALLOC_CPU_M - 300 - 200))
say "3) filler (${fill}m) on ${NODE}: resize to 900m is Deferred, then completes after the filler is deleted"
must 201 POST "/api/v1/namespaces/${NS}/pods" "$(
  cat <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"filler"},
 "spec":{"nodeSelector":{"kubernetes.io/hostname":"${NODE}"},"terminationGracePeriodSeconds":0,
  "containers":[$(container f "${fill}m" 64Mi)]}}
EOF
)"
filler_running() {
  must 200 GET "/api/v1/namespaces/${NS}/pods/filler"
  [[ $(json 'd["status"].get("phase", "")') == Running ]]
}
wait_for "the filler pod to run" 60 filler_running
code=$(resize "${POD}" c 900m 120Mi)
[[ ${code} == 200 ]] || fail "resize: HTTP ${code}: $(head -c 600 "${LAST}")"
expect_state "${POD}" "true PodResizePending/Deferred 300m 120Mi" 30
must 200 DELETE "/api/v1/namespaces/${NS}/pods/filler" '{"gracePeriodSeconds":0}'
expect_state "${POD}" "true - 900m 120Mi" 90

if [[ -n ${STATIC_NODE} ]]; then
  say "4) static CPU manager node ${STATIC_NODE}: CPU resize of a Guaranteed pod is Infeasible"
  must 201 POST "/api/v1/namespaces/${NS}/pods" "$(
    cat <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pinned"},
 "spec":{"nodeSelector":{"kubernetes.io/hostname":"${STATIC_NODE}"},"terminationGracePeriodSeconds":0,
  "tolerations":[{"key":"vpa-inplace.dev/cpu-manager","operator":"Equal","value":"static","effect":"NoSchedule"}],
  "containers":[$(container c 1 100Mi)]}}
EOF
  )"
  pinned_running() {
    must 200 GET "/api/v1/namespaces/${NS}/pods/pinned"
    [[ $(json 'd["status"].get("phase", "")') == Running ]]
  }
  wait_for "the pinned pod to run" 60 pinned_running
  code=$(resize pinned c 2 100Mi)
  [[ ${code} == 200 ]] || fail "resize: HTTP ${code}: $(head -c 600 "${LAST}")"
  expect_state pinned "true PodResizePending/Infeasible 1 100Mi" 30
else
  say "4) skipped: no node with the static CPU manager"
fi

say "5) memory limit decrease below the reported usage (150Mi) ends PodResizeInProgress/Error"
must 201 POST "/api/v1/namespaces/${NS}/pods" "$(
  cat <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"memuse","annotations":{"hollow-node.vpa-inplace.dev/memory-usage":"150Mi"}},
 "spec":{"nodeSelector":{"kubernetes.io/hostname":"${NODE}"},"terminationGracePeriodSeconds":0,
  "containers":[$(container c 100m 200Mi)]}}
EOF
)"
memuse_running() {
  must 200 GET "/api/v1/namespaces/${NS}/pods/memuse"
  [[ $(json 'd["status"].get("phase", "")') == Running ]]
}
wait_for "the memuse pod to run" 60 memuse_running
code=$(resize memuse c 100m 100Mi)
[[ ${code} == 200 ]] || fail "resize: HTTP ${code}: $(head -c 600 "${LAST}")"
expect_state memuse "true PodResizeInProgress/Error 100m 200Mi" 60
must 200 GET "/api/v1/namespaces/${NS}/pods/memuse"
say "  message: $(json '[c["message"] for c in d["status"]["conditions"] if c["type"] == "PodResizeInProgress"][0]')"

# ctr_state NAME: "<restartCount> <running|waiting:REASON|terminated:REASON> <lastState.terminated reason/exitCode> <ready>"
ctr_state() {
  must 200 GET "/api/v1/namespaces/${NS}/pods/$1"
  json '(lambda c: " ".join([str(c.get("restartCount", 0)),
    "running" if "running" in c["state"] else ",".join("%s:%s" % (k, v.get("reason", "")) for k, v in c["state"].items()),
    "%s/%s" % (c.get("lastState", {}).get("terminated", {}).get("reason", "-"), c.get("lastState", {}).get("terminated", {}).get("exitCode", "-")),
    str(c.get("ready", False)).lower()]))((d["status"].get("containerStatuses") or [{"state": {}}])[0])'
}
ctr_state_is() { # POD WANT
  LAST_STATE=$(ctr_state "$1")
  [[ ${LAST_STATE} == "$2" ]]
}
expect_ctr() { # POD WANT TIMEOUT
  LAST_STATE=""
  wait_for "pod $1 container state '$2' (restartCount state lastState ready)" "$3" ctr_state_is "$1" "$2"
  say "  ok: ${LAST_STATE}"
}
# ready_since POD: lastTransitionTime of the pod's Ready condition
ready_since() {
  must 200 GET "/api/v1/namespaces/${NS}/pods/$1"
  json '[c["lastTransitionTime"] for c in d["status"]["conditions"] if c["type"] == "Ready"][0]'
}
annotate() { # POD KEY VALUE
  must 200 PATCH "/api/v1/namespaces/${NS}/pods/$1" "{\"metadata\":{\"annotations\":{\"$2\":\"$3\"}}}" application/merge-patch+json
}

say "6) kill annotation: OOMKilled once, then Error once"
must 201 POST "/api/v1/namespaces/${NS}/pods" "$(
  cat <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"crashy"},
 "spec":{"nodeSelector":{"kubernetes.io/hostname":"${NODE}"},"terminationGracePeriodSeconds":0,
  "containers":[$(container c 100m 100Mi)]}}
EOF
)"
expect_ctr crashy "0 running -/- true" 60
ready0=$(ready_since crashy)
sleep 1 # the Ready condition's times have a resolution of a second
annotate crashy hollow-node.vpa-inplace.dev/kill "c=reason:OOMKilled,restart:0"
expect_ctr crashy "1 running OOMKilled/137 true" 60
ready1=$(ready_since crashy)
[[ ${ready1} > ${ready0} ]] || fail "Ready did not change across the OOM kill (${ready0} -> ${ready1})"
say "  Ready since ${ready0}, lost and back since ${ready1}"
annotate crashy hollow-node.vpa-inplace.dev/kill "c=restart:1"
expect_ctr crashy "2 running Error/1 true" 60

say "7) memory limit 400Mi -> 200Mi, below what the container needs (300Mi): OOM-killed after the resize; raised back, it stays up"
must 201 POST "/api/v1/namespaces/${NS}/pods" "$(
  cat <<EOF
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"hungry","annotations":{"hollow-node.vpa-inplace.dev/kill":"c=memory-limit-below:300Mi"}},
 "spec":{"nodeSelector":{"kubernetes.io/hostname":"${NODE}"},"terminationGracePeriodSeconds":0,
  "containers":[$(container c 100m 400Mi)]}}
EOF
)"
expect_ctr hungry "0 running -/- true" 60
code=$(resize hungry c 100m 200Mi)
[[ ${code} == 200 ]] || fail "resize: HTTP ${code}: $(head -c 600 "${LAST}")"
oom_killed() {
  LAST_STATE=$(ctr_state hungry)
  [[ ${LAST_STATE} == [1-9]*" OOMKilled/137 "* ]]
}
wait_for "hungry to be OOM-killed" 30 oom_killed
say "  ok: ${LAST_STATE}"
code=$(resize hungry c 100m 400Mi)
[[ ${code} == 200 ]] || fail "resize: HTTP ${code}: $(head -c 600 "${LAST}")"
running_ready() {
  LAST_STATE=$(ctr_state hungry)
  [[ ${LAST_STATE} == *" running "*" true" ]]
}
wait_for "hungry to run again" 90 running_ready
expect_state hungry "true - 100m 400Mi" 30
LAST_STATE=$(ctr_state hungry)
up=${LAST_STATE}
sleep 3
ctr_state_is hungry "${up}" || fail "hungry changed after its limit was raised: ${up} -> ${LAST_STATE}"
say "  ok: running with 400Mi, stays up: ${LAST_STATE}"

say "SMOKE OK"
