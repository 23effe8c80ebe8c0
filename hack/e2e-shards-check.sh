#!/usr/bin/env bash
# Checks the sharded phase of the e2e suite (hack/e2e-shards.sh) without a
# cluster, so that a renamed updater flag or a broken start script fails here
# and not after the suite's half hour:
#   - start-shard.sh with the updater built from this tree and a kubeconfig
#     that does not exist: every flag it passes parses and validates (the
#     replica gets as far as loading its client configuration), and the
#     script says the replica exited and leaves no pid file;
#   - start-shard.sh with a stand-in updater that serves /readyz on the
#     --address it is given: the pid and metrics files (as e2e/shard_test.go
#     reads them), the identity, one port per replica, a restart of a running
#     replica, a name that is not a DNS label refused; shard_stop_replicas
#     stops them all;
#   - which list mode the clusters get (sharded_list), which tests the
#     profiles run (shard_tests_of), and that a skipped or missing test fails
#     the phase (shard_require_passed);
#   - that the phase's shards and node room buckets are the chart's
#     ci/sharded-values.yaml's, which overlays/sharded ships too.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."
# shellcheck source=hack/e2e-shards.sh
source hack/e2e-shards.sh

work=$(mktemp -d)
trap 'shard_stop_replicas "${work}/real"; shard_stop_replicas "${work}/stand-in"; rm -rf "${work}"' EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# sharded_list and the profiles' tests.
while read -r version gates want; do
  [[ ${gates} == - ]] && gates=""
  got=$(sharded_list "${version}" "${gates}")
  [[ ${got} == "${want}" ]] || fail "sharded_list ${version} '${gates}': ${got}, want ${want}"
done <<'CASES'
v1.38.0-beta.0 - on
v1.38.2 Foo=true on
v1.38.0 ShardedListAndWatch=false off
v1.37.1 - off
v1.37.1 InPlacePodVerticalScalingSchedulerPreemption=true off
v1.37.1 ShardedListAndWatch=true on
v1.37.1 A=true,ShardedListAndWatch=true,B=false on
v1.34.5 - off
- - off
CASES
listed=(TestBasicInPlaceUpdate TestShardsEveryNamespaceIsWorkedByOneReplica
  TestShardsOfAKilledReplicaAreTakenOverWithoutALostRecord TestShardsMoveToANewReplicaWithoutAResizeSentTwice
  TestShardsNeverTogetherSendMoreThanANodeHolds)
[[ $(shard_tests_of v1.38 "${listed[@]}" | wc -l) == 4 ]] || fail "v1.38 runs the four shard tests"
shard_tests_of v1.38 "${listed[@]}" | grep -qx TestShardsNeverTogetherSendMoreThanANodeHolds ||
  fail "v1.38 runs TestShardsNeverTogetherSendMoreThanANodeHolds"
[[ $(shard_tests_of v1.37 "${listed[@]}") == TestShardsEveryNamespaceIsWorkedByOneReplica ]] ||
  fail "v1.37 runs TestShardsEveryNamespaceIsWorkedByOneReplica only"
[[ -z $(shard_tests_of v1.35-kubelet "${listed[@]}") ]] || fail "v1.35-kubelet has no sharded phase"

# The phase's shards and buckets, as the chart's sharded values.
for pair in "shards ${shard_count}" "nodeRoomBuckets ${shard_node_room_buckets}"; do
  read -r key want <<<"${pair}"
  got=$(sed -n "s/^  ${key}: *\([0-9][0-9]*\) *$/\1/p" charts/vpa-inplace/ci/sharded-values.yaml)
  [[ ${got} == "${want}" ]] || fail "the phase's updater.${key} is ${want}, charts/vpa-inplace/ci/sharded-values.yaml's ${got:-unset}"
done

# Every kind the chart's shards.yaml renders has a REST path for
# shard_objects (an unknown kind once went unapplied: the PATCH went to the
# API server's root, which answers 200).
kinds=$(sed -n 's/^kind: *\([A-Za-z]*\) *$/\1/p' charts/vpa-inplace/templates/updater/shards.yaml | sort -u)
[[ -n ${kinds} ]] || fail "no kind found in charts/vpa-inplace/templates/updater/shards.yaml"
for kind in ${kinds}; do
  # shellcheck source=hack/deploy/lib.sh
  (source hack/deploy/lib.sh && deploy::api_path v1 "${kind}" x ns >/dev/null 2>&1) ||
    fail "shard_objects cannot apply the ${kind} of shards.yaml: deploy::api_path does not know it"
done

# shard_require_passed on go test -v logs.
cat >"${work}/pass.log" <<'LOG'
=== RUN   TestShardsA
--- PASS: TestShardsA (61.20s)
=== RUN   TestShardsB
    shard_test.go:75: E2E_SHARDS_START and E2E_SHARDS_DIR are needed
--- SKIP: TestShardsB (0.00s)
=== RUN   TestShardsC
--- FAIL: TestShardsC (3.00s)
LOG
shard_require_passed "${work}/pass.log" TestShardsA >/dev/null || fail "a passed test fails the phase"
shard_require_passed "${work}/pass.log" TestShardsA TestShardsB >/dev/null && fail "a skipped test passes the phase"
shard_require_passed "${work}/pass.log" TestShardsC >/dev/null && fail "a failed test passes the phase"
shard_require_passed "${work}/pass.log" TestShardsA TestShardsD >/dev/null && fail "a test without a result passes the phase"

# The updater of this tree, its flags checked by itself.
go build -o "${work}/bin/" ./cmd/updater
mkdir -p "${work}/real"
write_shard_script "${work}/real" "${work}/bin/updater" "${work}/missing.kubeconfig" e2e-steady,e2e-scoped
if "${work}/real/start-shard.sh" shard-x >"${work}/real.out" 2>&1; then
  fail "start-shard.sh succeeded with a kubeconfig that does not exist"
fi
grep -q "exited before it was ready" "${work}/real.out" || fail "start-shard.sh does not say the replica exited: $(cat "${work}/real.out")"
grep -q "loading client configuration" "${work}/real/shard-x.log" ||
  fail "the updater stopped before loading its client configuration (a flag or its validation?): $(cat "${work}/real/shard-x.log")"
[[ ! -e ${work}/real/shard-x.pid ]] || fail "a replica that exited leaves its pid file"

# A stand-in updater: records its arguments and identity, serves /readyz
# (a file of that name) on its --address.
mkdir -p "${work}/stand-in" "${work}/www"
touch "${work}/www/readyz"
cat >"${work}/bin/stand-in" <<STANDIN
#!/usr/bin/env bash
printf '%s\n' "\$@" >"${work}/stand-in/\${POD_NAME}.args"
for a in "\$@"; do [[ \${a} == --address=* ]] && address=\${a#--address=}; done
exec python3 -m http.server --bind "\${address%:*}" --directory "${work}/www" "\${address##*:}"
STANDIN
chmod +x "${work}/bin/stand-in"
write_shard_script "${work}/stand-in" "${work}/bin/stand-in" /k/updater.kubeconfig e2e-steady,e2e-scoped
start=${work}/stand-in/start-shard.sh
"${start}" shard-a || fail "start-shard.sh shard-a"
"${start}" shard-b || fail "start-shard.sh shard-b"
pid_a=$(cat "${work}/stand-in/shard-a.pid") || fail "no shard-a.pid"
kill -0 "${pid_a:-0}" 2>/dev/null || fail "shard-a's pid ${pid_a:-} runs no process"
metrics_a=$(cat "${work}/stand-in/shard-a.metrics")
[[ ${metrics_a} =~ ^http://127\.0\.0\.1:[0-9]+/metrics$ ]] || fail "shard-a's metrics URL: ${metrics_a}"
[[ ${metrics_a} != "$(cat "${work}/stand-in/shard-b.metrics")" ]] || fail "shard-a and shard-b share a port"
args_a=${work}/stand-in/shard-a.args
port_a=${metrics_a##*:}
grep -qx -- "--address=127.0.0.1:${port_a%/metrics}" "${args_a}" ||
  fail "shard-a's --address is not its metrics URL's"
for want in --kubeconfig=/k/updater.kubeconfig --shards=12 --shard-lease-prefix=vpa-inplace-updater \
  --leader-elect-lease-duration=12s --leader-elect-resource-namespace=vpa-inplace-system --node-room-buckets=8 \
  --ignored-vpa-object-namespaces=e2e-steady,e2e-scoped; do
  grep -qx -- "${want}" "${args_a}" || fail "shard-a was not given ${want}"
done
"${start}" shard-a || fail "start-shard.sh shard-a, again"
shard_gone "${pid_a}" || fail "starting shard-a again leaves its first process (${pid_a}) running"
[[ $(cat "${work}/stand-in/shard-a.pid") != "${pid_a}" ]] || fail "shard-a's pid file not rewritten"
if "${start}" shard_c 2>/dev/null; then fail "start-shard.sh accepted the name shard_c"; fi
[[ ! -e ${work}/stand-in/shard_c.pid ]] || fail "a refused name left a pid file"
pids=$(cat "${work}"/stand-in/*.pid)
shard_stop_replicas "${work}/stand-in"
for p in ${pids}; do shard_gone "${p}" || fail "replica ${p} still runs after shard_stop_replicas"; done
compgen -G "${work}/stand-in/*.pid" >/dev/null && fail "pid files left after shard_stop_replicas"

# The generated script itself.
if command -v shellcheck >/dev/null; then
  shellcheck "${start}" || fail "shellcheck start-shard.sh"
fi

if ((failures > 0)); then
  echo "e2e-shards-check: ${failures} failure(s)" >&2
  exit 1
fi
echo "e2e-shards-check: ok"
