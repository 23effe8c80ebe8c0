# shellcheck shell=bash
# The sharded phase of hack/e2e.sh (e2e/shard_test.go): updater replicas
# sharing the namespaces' shards (--shards, docs/scaling.md). hack/e2e.sh
# sources this file; it only defines variables and functions.
#
# After a profile's suite, on the profiles that ask for it (shard_phase_tests),
# in the same cluster and with the suite's admission controllers still
# serving:
#   1. the suite's updaters that work the tests' namespaces are stopped
#      (replicas "a" and "b", restart-updater-*.sh; SIGTERM releases their
#      Lease). The steady scenario's updater serves e2e-steady only and stays;
#      the sharded replicas ignore that namespace and the scoped one, as
#      replica "a" does;
#   2. what the chart ships with updater.shards=12 and nothing else does
#      (templates/updater/shards.yaml) is applied as the cluster admin: a
#      Lease per shard and per member slot, and the Role (get and update them
#      by name, list and watch the namespace's Leases); the node room buckets
#      (updater.nodeRoomBuckets=8, as ci/sharded-values.yaml), empty
#      ConfigMaps, and the Role that gets, lists, watches and updates them by
#      name; both Roles bound to the updater's ServiceAccount. The replicas run
#      with that ServiceAccount's token, as the suite's updater does, and may
#      not create a Lease: without them none would start. A missing bucket
#      they would create (the records' Role lets them create ConfigMaps), but
#      without its Role they could not watch it;
#   3. start-shard.sh is written (write_shard_script) and the shard tests run
#      with E2E_SHARDS_START pointing at it. A skip fails the phase: every
#      test it runs must pass;
#   4. every replica still running is stopped (their pid files in the phase's
#      directory), whatever the tests did, and the objects of step 2 deleted.
#
# Logs: _output/e2e/<profile>/shards/ (go-test.log, <replica>.log).

shard_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly shard_root
# The tests of the sharded phase: the suite's phase leaves them out
# (hack/e2e.sh, tests_of).
readonly shard_tests='^TestShards'
# The shards of the phase's replicas, as the chart's ci/sharded-values.yaml.
readonly shard_count=12
# Their node room buckets (--node-room-buckets), as ci/sharded-values.yaml:
# the chart renders that many, and the replicas write into them.
readonly shard_node_room_buckets=8
# The chart's Leases are named <fullname>-updater-shard-<i>; hack/deploy/local-apply.sh
# renders it as release vpa-inplace (and deploy/ uses the same ServiceAccount).
readonly shard_lease_prefix=vpa-inplace-updater
# Where the chart's Leases live (its release namespace) and where the tests
# read them.
readonly shard_lease_namespace=vpa-inplace-system
# The replicas' lease timings: the suite's (hack/e2e.sh, write_updater_script).
readonly shard_lease_duration=12s shard_renew_deadline=9s shard_retry_period=1s

# shard_phase_tests PROFILE: which shard tests run after the profile's suite
# (a pattern; empty: no sharded phase). v1.38's API server serves sharded
# list and watch (ShardedListAndWatch, beta and on in 1.38): the four tests,
# the node room reserved across replicas among them. v1.37's does not (alpha,
# off): the one test whose assertions differ, each replica dropping the other
# shards' pods itself, as on every cluster before 1.38; the node room is
# reserved the same way whatever the list mode, so once is enough.
# docs/testing.md#the-sharded-phase says what each costs.
shard_phase_tests() {
  case $1 in
    v1.38) echo "${shard_tests}" ;;
    v1.37) echo '^TestShardsEveryNamespaceIsWorkedByOneReplica$' ;;
    *) echo "" ;;
  esac
}

# sharded_list KUBE_VERSION FEATURE_GATES: "on" when an API server of that
# version with those gates (hack/cluster/up.sh's CLUSTER_KUBE_VERSION and
# CLUSTER_FEATURE_GATES) serves sharded list and watch, "off" otherwise: the
# gate as given, else its default (alpha and off in 1.36 and 1.37, beta and
# on from 1.38, absent before).
sharded_list() {
  local minor
  case ",$2," in
    *,ShardedListAndWatch=true,*) echo on && return 0 ;;
    *,ShardedListAndWatch=false,*) echo off && return 0 ;;
  esac
  minor=$(sed -n 's/^v1\.\([0-9][0-9]*\)\..*/\1/p' <<<"$1")
  if [[ -n ${minor} ]] && ((minor >= 38)); then echo on; else echo off; fi
}

# shard_tests_of PROFILE TEST...: the listed TESTs the profile's sharded
# phase runs.
shard_tests_of() {
  local pattern name
  pattern=$(shard_phase_tests "$1")
  shift
  [[ -n ${pattern} ]] || return 0
  for name in "$@"; do
    [[ ${name} =~ ${pattern} ]] && echo "${name}"
  done
  return 0
}

# shard_updater_args KUBECONFIG IGNORED_NAMESPACES: a replica's flags, one a
# line, all but --address (start-shard.sh picks a port at each start): the
# suite's updater's (write_updater_script), the shards and the node room
# buckets.
shard_updater_args() {
  printf '%s\n' --kubeconfig="$1" --feature-gates=InPlace=true,CPUStartupBoost=true \
    --ignored-vpa-object-namespaces="$2" --updater-interval=5s --deferred-warning-after=5s \
    --restart-min-ready=10s --decrease-min-history=0 --canary=off --resize-observation-window=20s \
    --leader-elect-lease-duration="${shard_lease_duration}" --leader-elect-renew-deadline="${shard_renew_deadline}" \
    --leader-elect-retry-period="${shard_retry_period}" --leader-elect-resource-namespace="${shard_lease_namespace}" \
    --shards="${shard_count}" --shard-lease-prefix="${shard_lease_prefix}" \
    --node-room-buckets="${shard_node_room_buckets}" -v=2
}

# write_shard_script DIR BINARY KUBECONFIG IGNORED_NAMESPACES writes
# DIR/start-shard.sh NAME (E2E_SHARDS_START): it stops the replica NAME if it
# runs, starts it again with the identity NAME (POD_NAME: the Leases' holder
# identity is NAME_<uuid>, read back up to the "_") on a port of its own,
# writes DIR/NAME.pid and DIR/NAME.metrics (its metrics URL), appends its
# output to DIR/NAME.log and returns once its /readyz answers; it fails, and
# leaves nothing running, when the replica exits or is not ready within 120 s.
write_shard_script() {
  local dir=$1 binary=$2 config_file=$3 ignored=$4 args arg
  mapfile -t args < <(shard_updater_args "${config_file}" "${ignored}")
  {
    echo '#!/usr/bin/env bash'
    echo '# Starts the sharded updater replica named by its argument (hack/e2e-shards.sh).'
    echo 'set -o errexit -o nounset -o pipefail'
    printf 'dir=%q\nbinary=%q\n' "${dir}" "${binary}"
    echo 'args=('
    for arg in "${args[@]}"; do printf "  '%s'\n" "${arg//\'/\'\\\'\'}"; done
    echo ')'
    cat <<'SCRIPT'
name=${1:?usage: start-shard.sh NAME}
if [[ ! ${name} =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]]; then
  echo "start-shard.sh: NAME must be a DNS label (the Leases' holder identity is NAME_<uuid>), got '${name}'" >&2
  exit 2
fi
pidfile=${dir}/${name}.pid log=${dir}/${name}.log
# stop PID: SIGTERM (the replica releases its Leases), SIGKILL after 20 s;
# an earlier start's replica is not a child of this script: gone or a zombie.
stop() {
  local i stat
  kill -TERM "$1" 2>/dev/null || return 0
  for ((i = 0; i < 200; i++)); do
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    [[ ${stat##*) } == Z* ]] && return 0
    sleep 0.1
  done
  kill -KILL "$1" 2>/dev/null || true
}
if [[ -f ${pidfile} ]]; then
  stop "$(cat "${pidfile}")"
  rm -f "${pidfile}"
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
echo "== start-shard.sh ${name} at $(date -u +%FT%TZ) on 127.0.0.1:${port}" >>"${log}"
POD_NAME=${name} nohup "${binary}" "${args[@]}" --address="127.0.0.1:${port}" >>"${log}" 2>&1 &
pid=$!
echo "${pid}" >"${pidfile}"
echo "http://127.0.0.1:${port}/metrics" >"${dir}/${name}.metrics"
for ((i = 0; i < 240; i++)); do
  if curl --silent --fail --max-time 2 "http://127.0.0.1:${port}/readyz" >/dev/null 2>&1; then exit 0; fi
  if ! kill -0 "${pid}" 2>/dev/null; then
    echo "start-shard.sh: ${name} exited before it was ready; the end of ${log}:" >&2
    tail -n 20 "${log}" | cut -c1-400 >&2
    rm -f "${pidfile}"
    exit 1
  fi
  sleep 0.5
done
echo "start-shard.sh: ${name} was not ready within 120s (http://127.0.0.1:${port}/readyz); stopped it, log ${log}" >&2
stop "${pid}"
rm -f "${pidfile}"
exit 1
SCRIPT
  } >"${dir}/start-shard.sh"
  chmod +x "${dir}/start-shard.sh"
}

# shard_stop_pidfile FILE: stops the process FILE names (SIGTERM, SIGKILL
# after 20 s), not a child of this shell, and removes FILE.
shard_stop_pidfile() {
  local pid i
  [[ -f $1 ]] || return 0
  pid=$(cat "$1")
  rm -f "$1"
  [[ ${pid} =~ ^[0-9]+$ ]] || return 0
  kill -TERM "${pid}" 2>/dev/null || return 0
  for ((i = 0; i < 200; i++)); do
    shard_gone "${pid}" && return 0
    sleep 0.1
  done
  echo "pid ${pid} ($1) did not exit on SIGTERM within 20s: SIGKILL" >&2
  kill -KILL "${pid}" 2>/dev/null || true
}

# shard_gone PID: whether the process has ended (gone, or a zombie its
# parent has not reaped yet).
shard_gone() {
  local stat
  kill -0 "$1" 2>/dev/null || return 0
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  [[ ${stat##*) } == Z* ]]
}

# shard_stop_replicas DIR: stops every replica whose pid file is in DIR.
shard_stop_replicas() {
  local f
  for f in "$1"/*.pid; do
    [[ -f ${f} ]] || continue
    shard_stop_pidfile "${f}"
  done
}

# shard_objects apply|delete DIR [SHARDS]: applies (server-side, as the
# cluster admin) or deletes what the chart ships with updater.shards=SHARDS
# (12 by default, the phase's) only (templates/updater/shards.yaml: the
# Leases, the node room buckets and their Roles), rendered into DIR/objects.
# Run from the repository's root, with hack/cluster's env.sh sourced. make
# bench's sharded mode applies them too (hack/bench.sh).
shard_objects() {
  (
    # shellcheck source=hack/deploy/lib.sh
    source hack/deploy/lib.sh
    local action=$1 objects=$2/objects count=${3:-${shard_count}} helm doc kind name path code docs
    local admin=(--silent --show-error --cacert "${CLUSTER_CA}" --cert "${CLUSTER_PKI_DIR}/admin.crt"
      --key "${CLUSTER_PKI_DIR}/admin.key" --output /dev/null --write-out '%{http_code}')
    if [[ ${action} == apply ]]; then
      rm -rf "${objects}"
      helm=$(hack/tools/install.sh helm) || deploy::die "cannot build helm"
      "${helm}" template vpa-inplace charts/vpa-inplace --namespace "${shard_lease_namespace}" \
        --set updater.shards="${count}",updater.nodeRoomBuckets="${shard_node_room_buckets}" --show-only templates/updater/shards.yaml | deploy::split "${objects}" ||
        deploy::die "cannot render the chart's templates/updater/shards.yaml"
    fi
    docs=("${objects}"/*.yaml)
    [[ -f ${docs[0]} ]] || deploy::die "nothing rendered in ${objects}"
    for doc in "${docs[@]}"; do
      kind=$(deploy::field "${doc}" kind) name=$(deploy::field "${doc}" name)
      # An unknown kind is an error here, not an empty path: a PATCH of the
      # API server's root is answered 200 and applies nothing.
      path=$(deploy::api_path "$(deploy::field "${doc}" apiVersion)" "${kind}" "${name}" "$(deploy::field "${doc}" namespace)") ||
        deploy::die "no REST path for ${kind}/${name}"
      if [[ ${action} == apply ]]; then
        code=$(curl "${admin[@]}" -X PATCH -H 'Content-Type: application/apply-patch+yaml' --data-binary @"${doc}" \
          "${CLUSTER_APISERVER}${path}?fieldManager=vpa-inplace-e2e&force=true") || code=000
      else
        code=$(curl "${admin[@]}" -X DELETE "${CLUSTER_APISERVER}${path}") || code=000
      fi
      [[ ${code} == 2?? || (${action} == delete && ${code} == 404) ]] ||
        deploy::die "${action} ${kind}/${name}: HTTP ${code}"
    done
  )
}

# shard_require_passed LOG TEST...: fails unless the go test -v LOG shows
# every TEST passed: a skip, a failure or no result fails the phase.
shard_require_passed() {
  local log=$1 name rc=0
  shift
  for name in "$@"; do
    if grep -q "^--- PASS: ${name} (" "${log}"; then continue; fi
    rc=1
    if grep -q "^--- SKIP: ${name} (" "${log}"; then
      echo "  ${name} was skipped: the sharded phase runs it to pass, a skip fails it"
    elif ! grep -q "^--- FAIL: ${name} (" "${log}"; then
      echo "  ${name} has no result (the run ended before it)"
    fi
  done
  return "${rc}"
}

# shard_phase PROFILE LOGS DEPLOY_OUT IGNORED_NAMESPACES TEST...: the sharded
# phase of a profile whose cluster, admission controllers and updaters
# hack/e2e.sh has started (its env.sh sourced: the tests run as its
# KUBECONFIG, the admin); LOGS holds the suite updaters' pid files,
# DEPLOY_OUT the ServiceAccounts' kubeconfigs (hack/deploy/local-apply.sh);
# the replicas ignore IGNORED_NAMESPACES (comma-separated). Uses
# hack/e2e.sh's summarize and cluster_profile.
# Returns non-zero when a test failed, skipped or did not run.
shard_phase() {
  local profile=$1 logs=$2 out=$3 ignored=$4
  shift 4
  local dir=${logs}/shards list rc=0 t0 pattern
  t0=$(date +%s)
  list=$(sharded_list "${CLUSTER_KUBE_VERSION:-}" "${CLUSTER_FEATURE_GATES:-}")
  rm -rf "${dir}" && mkdir -p "${dir}"
  echo "== profile ${profile}: sharded phase: $# tests, --shards=${shard_count}, sharded list and watch ${list} (${CLUSTER_KUBE_VERSION:-?}${CLUSTER_FEATURE_GATES:+, ${CLUSTER_FEATURE_GATES}})"
  shard_stop_pidfile "${logs}/updater-a.pid"
  shard_stop_pidfile "${logs}/updater-b.pid"
  if ! shard_objects apply "${dir}"; then
    echo "  cannot apply the shards' Leases, the node room buckets and their Roles"
    rc=1
  fi
  write_shard_script "${dir}" "${shard_root}/_output/bin/updater" "${out}/updater.kubeconfig" "${ignored}"
  if ((rc == 0)); then
    pattern="^($(IFS='|'; echo "$*"))\$"
    echo "== profile ${profile}: sharded phase: go test -tags e2e -run '${pattern}' ./e2e/"
    if ! E2E_PROFILE=$(cluster_profile "${profile}") E2E_STEADY_DURATION='' E2E_LOG_DIR="${dir}" \
      E2E_SHARDS_START="${dir}/start-shard.sh" E2E_SHARDS_DIR="${dir}" E2E_SHARDS="${shard_count}" \
      E2E_SHARD_LEASE_PREFIX="${shard_lease_prefix}" E2E_SHARD_LEASE_DURATION="${shard_lease_duration}" \
      E2E_SHARDED_LIST="${list}" go test -tags e2e -count=1 -v -timeout 20m -run "${pattern}" ./e2e/ 2>&1 |
      tee "${dir}/go-test.log"; then
      rc=1
    fi
    echo "== profile ${profile}: sharded phase"
    summarize "${dir}/go-test.log" "${profile}" || rc=1
    shard_require_passed "${dir}/go-test.log" "$@" || rc=1
  fi
  # The tests stop the replicas they start; a test that failed, or a go test
  # that timed out, may not have.
  shard_stop_replicas "${dir}"
  if ! shard_objects delete "${dir}"; then
    echo "  cannot delete the shards' Leases, the node room buckets and their Roles"
    rc=1
  fi
  echo "== profile ${profile}: sharded phase: $( ((rc == 0)) && echo PASS || echo FAIL) in $(($(date +%s) - t0))s (logs in _output/e2e/${profile}/shards)"
  return "${rc}"
}
