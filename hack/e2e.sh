#!/usr/bin/env bash
# Runs the e2e suite on the project's local cluster, for each profile:
# bring the cluster up, apply what the Helm chart renders (its CRDs,
# ServiceAccounts, RBAC and webhooks, the webhooks pointed at 127.0.0.1: see
# hack/deploy/local-apply.sh, DEPLOY_FROM=chart), run both binaries as
# processes with the chart's ServiceAccount tokens (so the RBAC shipped is
# what is tested), run `go test -tags e2e ./e2e/`, and tear everything down,
# also when a test fails. The suite's admission controllers serve files
# (their certificate from files, the chart's RBAC of its default, self-managed mode);
# TestSelfManagedCertificates starts one more, in
# --cert-mode=self-managed, from the binary and kubeconfig named by
# E2E_ADMISSION_BINARY and E2E_ADMISSION_KUBECONFIG;
# TestFitsNodeServingOneNamespaceCountsTheOthers one more updater, serving
# E2E_SCOPED_NAMESPACE only, from E2E_UPDATER_BINARY. The suite's updaters run
# with --decrease-min-history=0: its tests write point recommendations by hand
# on VPAs seconds old, which the default would hold for an hour
# (docs/resize-timing.md).
#
# Profiles (hack/cluster/up.sh), in the order they run by default:
# v1.37 (control plane and kubelets v1.37: the 1.37 column of the versions
# table and the chart's install, core_v137 below), v1.38 (control plane and
# kubelets v1.38.0-beta.0: the whole suite, the steady scenario and the
# install phase), v1.35-kubelet (kubelets v1.35 under the v1.37 control
# plane: the 1.35 column, kubelet_v135 below), v1.37-preemption (v1.37 with
# InPlacePodVerticalScalingSchedulerPreemption on every component: the
# resize-preemption and Deferred tests, preemption_tests below) and v1.34
# (control plane and kubelets v1.34), which runs the AEP core scenarios only
# (core_v134) and is not a default profile: `make e2e-v1.34` (its cold build
# does not fit CI's budget). A test a profile's Kubernetes cannot run skips
# and says why; every skip is listed in the profile's summary and never
# counts as a pass, and a skip of a test the profile must run
# (required_tests) fails the profile. While the first profile runs, the
# binaries of the others are built in the background, at a lower priority
# (its tests mostly wait on the cluster; a cold build is CPU-bound).
#
# Env: E2E_PROFILES (default "v1.37 v1.38 v1.35-kubelet v1.37-preemption"), E2E_RUN (go test -run
# pattern, within each profile's tests), E2E_KEEP=1 keeps the last cluster running for inspection,
# E2E_DEPLOY_FROM=deploy applies deploy/overlays/local instead of the chart,
# E2E_STEADY_DURATION (default 10m; empty: not run) how long the steady-usage scenario counts resizes,
# E2E_UPDATER_KUBECONFIG= (empty) makes the policy test impersonate the updater instead of using its token.
# Logs: _output/e2e/<profile>/.
#
# After the suite, in the same cluster, the install phase (e2e/install_test.go,
# TestChartInstall and TestKustomizeInstall, when E2E_RUN is empty or
# matches them): the suite's binaries are stopped and its objects deleted
# (local-apply.sh --delete; the CRDs stay), then the chart is installed with
# the pinned helm as release "platform" in namespace "autoscaling", and
# deploy/overlays/self-managed-certs applied as kubectl apply -k would, each
# run with the args, env and ServiceAccount of its own Deployments, upgraded
# and removed.
#
# Between the suite and the install phase, on v1.38 and v1.37, the sharded
# phase (hack/e2e-shards.sh): the TestShards tests, with updater replicas
# sharing the namespaces' shards in place of the suite's updater.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
# shellcheck source=hack/e2e-shards.sh
source hack/e2e-shards.sh

profiles=${E2E_PROFILES:-"v1.37 v1.38 v1.35-kubelet v1.37-preemption"}
# The namespace of the steady-usage scenario (e2e/recommender_test.go).
steady_namespace=e2e-steady
# The namespace an updater with --vpa-object-namespace serves, started by
# its test (e2e/capacity_test.go); the suite's updater ignores it.
scoped_namespace=e2e-scoped
# The nodes every profile's cluster starts with (hack/cluster/up.sh): what
# the caller set, or up.sh's three (hollow-1, hollow-2 kept free for the
# Deferred tests, hollow-static) and four more for the parallel tests. A
# profile's env.sh exports the node names without their kinds; the next
# profile must not take those.
readonly cluster_nodes=${CLUSTER_NODES-hollow-1 hollow-2 hollow-static:static hollow-3 hollow-4 hollow-5 hollow-6}
# The nodes the parallel tests take one each (e2e/parallel_test.go): every
# plain node but the Deferred tests' (with up.sh's default nodes: hollow-1
# alone, so they run one at a time).
parallel_nodes=
for n in ${cluster_nodes:-hollow-1 hollow-2 hollow-static:static}; do
  [[ ${n} == *:* || ${n} == "${E2E_DEFERRED_NODE:-hollow-2}" ]] || parallel_nodes+="${parallel_nodes:+ }${n}"
done
readonly parallel_nodes
# The suite's cluster lives apart from the one `make cluster-up` starts.
export CLUSTER_DIR=${E2E_CLUSTER_DIR:-${root}/_output/e2e/cluster}
# The cluster runs metrics-server and the upstream recommender. The recommender
# answers only to VPAs that name it (spec.recommenders), so the tests that
# write recommendations by hand are left alone.
export CLUSTER_RECOMMENDER_NAME=${CLUSTER_RECOMMENDER_NAME:-e2e}
export CLUSTER_RECOMMENDER_INTERVAL=${CLUSTER_RECOMMENDER_INTERVAL:-10s}
mkdir -p _output/bin
echo "== building the binaries"
go build -o _output/bin/ ./cmd/...
# The install phase's tools, pinned (hack/tools/install.sh).
{ read -r helm_bin; read -r kustomize_bin; } < <(hack/tools/install.sh helm kustomize)
# Which tests run: the suite's (all but the install phase's) and the
# install phase's, each narrowed by E2E_RUN.
readonly install_tests='^(TestChartInstall|TestKustomizeInstall)$'
# Listed first, so that a suite that does not compile fails here instead of
# selecting nothing; a pattern that selects no test at all fails too.
listing=$(go test -tags e2e -list "${E2E_RUN:-.}" ./e2e/) || {
  echo "${listing}" >&2
  echo "e2e: the suite does not build (go test -tags e2e -list)" >&2
  exit 1
}
mapfile -t listed < <(grep '^Test' <<<"${listing}" || true)
if ((${#listed[@]} == 0)); then
  echo "e2e: no test matches E2E_RUN=${E2E_RUN:-.}" >&2
  exit 1
fi

# The AEP-8818 core scenarios on a v1.34 control plane and kubelets: resizes
# in place, Deferred (waited for, completed when room frees), Infeasible
# (marked by the kubelet: before 1.36 there is no admission-time refusal),
# the retry rules of the infeasible records, records across an updater
# restart, restarting resizes, a memory-limit decrease (allowed with
# NotRequired since 1.34, refused by the kubelet below the memory in use)
# and suspended Jobs (templates immutable before 1.35: nothing sent,
# reported once); the chart installs.
readonly core_v134='^(TestBasicInPlaceUpdate|TestNoEvictionOnFailure|TestRecommendationAppliedAtPodCreation|TestSingleReplicaDeploymentResized|TestIndefiniteWaitForDeferredUpdate|TestDeferredResizeCompletesWhenCapacityFrees|TestVPAConditionDeferred|TestInfeasibleResizeHandling|TestInfeasibleStatusStorage|TestVPAConditionInfeasible|TestNoRetryForUnchangedRecommendation|TestRetryAfterRecommendationChange|TestSuccessfulUpdateClearsStoredAttempt|TestStaleEntryCleanup|TestFailedUpdateRetrySuccess|TestInfeasibleRecordSurvivesRestart|TestRestartingResizesRespectTheTolerance|TestInfeasibleRestartingResizeGivesItsPlaceBack|TestKubeletRefusedMemoryLimitDecrease|TestSuspendedJobTemplateNotSentBefore135|TestChartInstall)$'
# Resize preemption (KEP-5836, alpha in 1.37) on a v1.37 cluster whose
# components all run with its gate on: the scheduler preempts a pod of lower
# priority for a Deferred resize and the updater says so; a fits-node resize
# is never Deferred, so it preempts nothing; a Deferred resize among pods of
# one priority still waits, and completes when room frees.
readonly preemption_tests='^(TestResizePreemptionMadeVisible|TestFitsNodeResizeCausesNoPreemption|TestIndefiniteWaitForDeferredUpdate|TestDeferredResizeCompletesWhenCapacityFrees|TestVPAConditionDeferred|TestStrimziNodePoolResizeWhenAlwaysIsDeferred)$'
# The versions table's 1.37 column (README.md, docs/kubernetes-versions.md)
# on a v1.37 control plane and kubelets, with what 1.38 changed: resizes in
# place and their completion, over-capacity resizes refused at admission (403
# NodeCapacity) and recorded, memory-limit decreases kept above the memory in
# use, pod-level resources moved with the containers, sidecars, suspended
# Jobs' templates written, Deferred resizes waited for, resize preemption off,
# LimitRanger checking a resize whole (1.38 checks only what it changes); the
# chart installs. The v1.38 profile runs these and every other test; a skip
# of one of these fails v1.37 and v1.38.
readonly core_v137='^(TestBasicInPlaceUpdate|TestIndefiniteWaitForDeferredUpdate|TestInfeasibleResizeHandling|TestInfeasiblePatchRejectionWithNodeCapacityCause|TestNoEvictionOnFailure|TestVPAConditionInfeasible|TestKubeletRefusedMemoryLimitDecrease|TestMetricsAPIKeepsMemoryLimitAboveUsage|TestPodLevelResourcesResizedInPlace|TestSidecarResizedInPlace|TestSuspendedJobStartsRightSized|TestCronJobsSuspendedJobGetsTheCronJobVPA|TestSuspendedJobRefusalIsReportedOnce|TestDeferredResizeCompletesWhenCapacityFrees|TestVPAConditionDeferred|TestResizePreemptionMadeVisible|TestResizeFollowsTheServersLimitRanger|TestChartInstall)$'
# The 1.35 column: what kubelets of 1.35 (under a 1.37 control plane without
# PodResizeValidator) do differently: over-capacity resizes accepted and
# marked Infeasible by the kubelet, recorded, not retried, across an updater
# restart; the kubelet's refusal of a memory limit below usage; pod-level
# resources kept with kubelets that do not declare the feature; sidecars;
# Deferred resizes. A skip of one fails the profile.
readonly kubelet_v135='^(TestBasicInPlaceUpdate|TestIndefiniteWaitForDeferredUpdate|TestInfeasibleResizeHandling|TestInfeasibleStatusStorage|TestNoEvictionOnFailure|TestVPAConditionInfeasible|TestInfeasibleRecordSurvivesRestart|TestNoRetryForUnchangedRecommendation|TestKubeletRefusedMemoryLimitDecrease|TestMetricsAPIKeepsMemoryLimitAboveUsage|TestPodLevelResourcesResizedInPlace|TestSidecarResizedInPlace|TestSuspendedJobStartsRightSized|TestCronJobsSuspendedJobGetsTheCronJobVPA|TestSuspendedJobRefusalIsReportedOnce|TestDeferredResizeCompletesWhenCapacityFrees|TestVPAConditionDeferred|TestResizePreemptionMadeVisible)$'
# profile_tests PROFILE: the tests a profile runs (a pattern; empty: all).
profile_tests() {
  case $1 in
    v1.34) echo "${core_v134}" ;;
    v1.37) echo "${core_v137}" ;;
    v1.35-kubelet) echo "${kubelet_v135}" ;;
    v1.37-preemption) echo "${preemption_tests}" ;;
    *) echo "" ;;
  esac
}
# required_tests PROFILE: the tests that must pass on a profile when they
# run: a skip of one fails the profile. On v1.38, the tests of its column in
# the versions table, the same as 1.37's.
required_tests() {
  case $1 in
    v1.34) echo "${core_v134}" ;;
    v1.37 | v1.38) echo "${core_v137}" ;;
    v1.35-kubelet) echo "${kubelet_v135}" ;;
    v1.37-preemption) echo "${preemption_tests}" ;;
    *) echo '^$' ;;
  esac
}
# cluster_profile PROFILE: the cluster profile (hack/cluster/up.sh) it runs on.
cluster_profile() {
  case $1 in
    v1.37-preemption) echo v1.37 ;;
    *) echo "$1" ;;
  esac
}
# feature_gates PROFILE: the gates given to every component of its cluster.
feature_gates() {
  case $1 in
    v1.37-preemption) echo InPlacePodVerticalScalingSchedulerPreemption=true ;;
    *) echo "" ;;
  esac
}
# tests_of PROFILE SUITE|INSTALL: the listed tests the profile runs in that phase.
tests_of() {
  local name pattern
  pattern=$(profile_tests "$1")
  for name in "${listed[@]}"; do
    [[ -z ${pattern} || ${name} =~ ${pattern} ]] || continue
    [[ ${name} =~ ${shard_tests} ]] && continue # the sharded phase's (hack/e2e-shards.sh)
    if [[ ${name} =~ ${install_tests} ]]; then
      [[ $2 == install ]] && echo "${name}"
    else
      [[ $2 == suite ]] && echo "${name}"
    fi
  done
  return 0
}

# summarize LOG PROFILE: counts the passes, failures and skips of a go test
# -v log, lists every skip with its message, and fails when a test the
# profile requires was skipped.
summarize() {
  python3 - "$1" "$(required_tests "$2")" <<'PY'
import re, sys
log, required = sys.argv[1], re.compile(sys.argv[2])
current, said, results = None, {}, {}
for line in open(log, errors="replace"):
    m = re.match(r"=== (?:RUN|CONT|PAUSE|NAME)\s+(\S+)", line)
    if m:
        current = m.group(1)
        continue
    m = re.match(r"\s*--- (PASS|FAIL|SKIP): (\S+)", line)
    if m:
        results[m.group(2)] = m.group(1)
        continue
    m = re.match(r"\s+\S+_test\.go:\d+: (.*)", line)
    if m and current:
        said[current] = m.group(1)
top = {k: v for k, v in results.items() if "/" not in k}
count = lambda r: sum(1 for v in top.values() if v == r)
print("  %d passed, %d failed, %d skipped (a skip is not a pass)" % (count("PASS"), count("FAIL"), count("SKIP")))
bad = False
for name in sorted(k for k, v in top.items() if v == "SKIP"):
    must = required.search(name) is not None
    bad = bad or must
    print("  SKIP %s%s: %s" % (name, " (REQUIRED on this profile)" if must else "", said.get(name, "")))
sys.exit(1 if bad else 0)
PY
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

wait_ready() { # name url
  local i
  for ((i = 0; i < 120; i++)); do
    if curl --silent --fail --insecure --max-time 2 "$2" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  echo "error: $1 did not become ready at $2" >&2
  return 1
}

pids=()
prebuild_pid=
stop_binaries() {
  local p f
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
  # The updater may have been restarted by a test: not a child of this shell.
  for f in "${root}"/_output/e2e/*/updater-*.pid "${root}"/_output/e2e/*/shards/*.pid; do
    [[ -f $f ]] || continue
    kill "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
}

cleanup() {
  stop_binaries
  if [[ -n ${prebuild_pid} ]]; then kill -- "-${prebuild_pid}" 2>/dev/null || true; fi
  if [[ ${E2E_KEEP:-0} != 1 ]]; then
    hack/cluster/down.sh --purge >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

# apply_yaml FILE: server-side apply of one object with the admin cert.
apply_yaml() {
  local file=$1 kind name path
  kind=$(sed -n 's/^kind: *//p' "$file" | head -1)
  name=$(sed -n '/^metadata:/,/^[a-z]/s/^  name: *//p' "$file" | head -1)
  case $kind in
    ValidatingWebhookConfiguration) path=/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations ;;
    *) echo "apply_yaml: unsupported kind $kind" >&2; return 1 ;;
  esac
  curl --silent --show-error --fail --cacert "${CLUSTER_CA}" \
    --cert "${CLUSTER_PKI_DIR}/admin.crt" --key "${CLUSTER_PKI_DIR}/admin.key" \
    -X PATCH -H 'Content-Type: application/apply-patch+yaml' --data-binary @"$file" \
    "${CLUSTER_APISERVER}${path}/${name}?fieldManager=vpa-inplace-e2e&force=true" >/dev/null
}

# write_updater_script LOGS REPLICA PORT DEPLOY_OUT writes
# LOGS/restart-updater-REPLICA.sh: it stops the replica (SIGTERM) if it runs,
# starts it again with the identity updater-REPLICA (the Lease's holder
# identity starts with it) and returns once its /readyz answers.
write_updater_script() {
  local logs=$1 replica=$2 port=$3 out=$4
  cat >"${logs}/restart-updater-${replica}.sh" <<SCRIPT
#!/usr/bin/env bash
set -o errexit -o nounset -o pipefail
pidfile=${logs}/updater-${replica}.pid
if [[ -f \${pidfile} ]]; then
  pid=\$(cat "\${pidfile}")
  kill -TERM "\${pid}" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do kill -0 "\${pid}" 2>/dev/null || break; sleep 0.1; done
fi
cd ${root}
POD_NAME=updater-${replica} nohup _output/bin/updater --kubeconfig="${out}/updater.kubeconfig" --feature-gates=InPlace=true,CPUStartupBoost=true \\
  --ignored-vpa-object-namespaces=${steady_namespace},${scoped_namespace} --updater-interval=5s --deferred-warning-after=5s --restart-min-ready=10s --decrease-min-history=0 --address="127.0.0.1:${port}" \\
  --canary=off --resize-observation-window=20s \\
  --leader-elect-lease-duration=12s --leader-elect-renew-deadline=9s --leader-elect-retry-period=1s \\
  -v=2 >>"${logs}/updater-${replica}.log" 2>&1 &
echo \$! >"\${pidfile}"
for ((i = 0; i < 240; i++)); do
  curl --silent --fail --max-time 2 "http://127.0.0.1:${port}/readyz" >/dev/null 2>&1 && exit 0
  sleep 0.5
done
echo "updater-${replica} did not become ready" >&2
exit 1
SCRIPT
  chmod +x "${logs}/restart-updater-${replica}.sh"
}

run_profile() {
  local profile=$1 logs=${root}/_output/e2e/$1
  rm -rf "${logs}" && mkdir -p "${logs}"
  local suite_run install_run shard_run
  mapfile -t suite_run < <(tests_of "${profile}" suite)
  mapfile -t install_run < <(tests_of "${profile}" install)
  mapfile -t shard_run < <(shard_tests_of "${profile}" "${listed[@]}")
  if ((${#suite_run[@]} + ${#install_run[@]} + ${#shard_run[@]} == 0)); then
    echo "== profile ${profile}: no test selected"
    return 0
  fi
  local cluster gates
  cluster=$(cluster_profile "${profile}") gates=$(feature_gates "${profile}")
  echo "== profile ${profile}: cluster up (cluster profile ${cluster}${gates:+, feature gates ${gates}})"
  CLUSTER_PROFILE=${cluster} CLUSTER_FEATURE_GATES=${gates} CLUSTER_NODES=${cluster_nodes} hack/cluster/up.sh
  # shellcheck disable=SC1091
  source "${CLUSTER_DIR}/env.sh"

  local webhook_port gate_off_port ac_health gate_off_health updater_metrics out=${logs}/deploy
  local standby_metrics
  webhook_port=$(free_port) gate_off_port=$(free_port) ac_health=$(free_port) gate_off_health=$(free_port) updater_metrics=$(free_port)
  standby_metrics=$(free_port)
  echo "== profile ${profile}: applying the objects of ${E2E_DEPLOY_FROM:-chart}"
  CLUSTER_ENV=${CLUSTER_DIR}/env.sh WEBHOOK_PORT=${webhook_port} OUT_DIR=${out} DEPLOY_FROM=${E2E_DEPLOY_FROM:-chart} \
    hack/deploy/local-apply.sh >"${logs}/deploy.log"

  local certs=(--tls-cert-file="${out}/certs/tls.crt" --tls-private-key-file="${out}/certs/tls.key")
  _output/bin/admission-controller --kubeconfig="${out}/admission-controller.kubeconfig" "${certs[@]}" \
    --bind-address=127.0.0.1 --port="${webhook_port}" --address="127.0.0.1:${ac_health}" \
    --feature-gates=InPlace=true,CPUStartupBoost=true -v=2 >"${logs}/admission-controller.log" 2>&1 &
  pids+=($!)
  _output/bin/admission-controller --kubeconfig="${out}/admission-controller.kubeconfig" "${certs[@]}" \
    --bind-address=127.0.0.1 --port="${gate_off_port}" --address="127.0.0.1:${gate_off_health}" \
    -v=2 >"${logs}/admission-controller-gate-off.log" 2>&1 &
  pids+=($!)
  # Each updater replica is started by a generated script that tests run
  # again to restart it (SIGTERM releases the lease; same flags, same port).
  # Replica "a" runs for the whole suite; replica "b" is started by the
  # failover test only. Lease timings shorter than the defaults (15s, 10s,
  # 2s) keep a takeover after a crash within seconds; the renew deadline
  # stays long enough for a busy API server (a replica that cannot renew in
  # time exits, as it would in its pod, and nothing here starts it again).
  write_updater_script "${logs}" a "${updater_metrics}" "${out}"
  write_updater_script "${logs}" b "${standby_metrics}" "${out}"
  "${logs}/restart-updater-a.sh"
  # The steady-usage scenario's namespace has an updater of its own, which
  # no test restarts: a restart forgets the pods' last resizes, and the
  # scenario counts resizes over ten minutes while other tests restart
  # replica "a" (which ignores that namespace). No leader election: one
  # replica, and the same Lease as "a" would make one of them wait.
  local steady_metrics
  steady_metrics=$(free_port)
  _output/bin/updater --kubeconfig="${out}/updater.kubeconfig" --feature-gates=InPlace=true \
    --vpa-object-namespace="${steady_namespace}" --leader-elect=false --updater-interval=5s --decrease-min-history=0 \
    --address="127.0.0.1:${steady_metrics}" -v=2 >"${logs}/updater-steady.log" 2>&1 &
  pids+=($!)
  wait_ready updater-steady "http://127.0.0.1:${steady_metrics}/readyz"

  local ca_bundle
  ca_bundle=$(base64 <"${out}/certs/ca.crt" | tr -d '\n')
  sed -e "s|\${CA_BUNDLE}|${ca_bundle}|" -e "s|\${GATE_OFF_PORT}|${gate_off_port}|" \
    e2e/testdata/gate-off-webhook.yaml >"${logs}/gate-off-webhook.yaml"
  apply_yaml "${logs}/gate-off-webhook.yaml"

  wait_ready admission-controller "http://127.0.0.1:${ac_health}/readyz"
  wait_ready admission-controller-gate-off "http://127.0.0.1:${gate_off_health}/readyz"

  local rc=0
  if ((${#suite_run[@]} > 0)); then
    local suite_pattern
    suite_pattern="^($(IFS='|'; echo "${suite_run[*]}"))\$"
    # A subtest pattern of E2E_RUN (TestX/sub) narrows within the tests.
    [[ ${E2E_RUN:-} == */* ]] && suite_pattern+="/${E2E_RUN#*/}"
    echo "== profile ${profile}: go test -tags e2e ./e2e/ (${#suite_run[@]} tests)"
    if ! KUBECONFIG=${KUBECONFIG} E2E_PROFILE=${cluster} E2E_UPDATER_METRICS="http://127.0.0.1:${updater_metrics}/metrics" \
      E2E_UPDATER_RESTART="${logs}/restart-updater-a.sh" E2E_UPDATER_PIDFILE="${logs}/updater-a.pid" \
      E2E_UPDATER_KUBECONFIG="${E2E_UPDATER_KUBECONFIG-${out}/updater.kubeconfig}" \
      E2E_STANDBY_RESTART="${logs}/restart-updater-b.sh" E2E_STANDBY_PIDFILE="${logs}/updater-b.pid" \
      E2E_STANDBY_METRICS="http://127.0.0.1:${standby_metrics}/metrics" E2E_DEFERRED_WARNING_AFTER=5s \
      E2E_RECOMMENDER_NAME="${CLUSTER_RECOMMENDER_NAME}" E2E_RECOMMENDER_INTERVAL="${CLUSTER_RECOMMENDER_INTERVAL}" \
      E2E_ADMISSION_BINARY="${root}/_output/bin/admission-controller" E2E_ADMISSION_KUBECONFIG="${out}/admission-controller.kubeconfig" \
      E2E_UPDATER_BINARY="${root}/_output/bin/updater" E2E_SCOPED_NAMESPACE="${scoped_namespace}" \
      E2E_LOG_DIR="${logs}" E2E_STEADY_NAMESPACE="${steady_namespace}" E2E_STEADY_DURATION="${E2E_STEADY_DURATION-10m}" \
      E2E_PARALLEL_NODES="${parallel_nodes}" \
      go test -tags e2e -count=1 -v -timeout 30m -parallel 16 -run "${suite_pattern}" ./e2e/ 2>&1 | tee "${logs}/go-test.log"; then
      rc=1
    fi
    echo "== profile ${profile}: suite"
    summarize "${logs}/go-test.log" "${profile}" || rc=1
    # Tests restart replica "a"; none leaves it stopped. When it is gone, the
    # tests after its exit had no updater: say why it ended.
    if ! kill -0 "$(cat "${logs}/updater-a.pid" 2>/dev/null || echo 0)" 2>/dev/null; then
      echo "== profile ${profile}: updater-a was not running at the end of the suite; the end of its log:"
      tail -n 5 "${logs}/updater-a.log" | cut -c1-300
    fi
  fi
  if ((${#shard_run[@]} > 0)); then
    shard_phase "${profile}" "${logs}" "${out}" "${steady_namespace},${scoped_namespace}" "${shard_run[@]}" || rc=1
  fi
  stop_binaries
  if ((${#install_run[@]} > 0)); then
    # A cluster without the suite's deployment: the install tests bring
    # their own (the overlay uses deploy/'s names and namespace).
    echo "== profile ${profile}: install phase: removing the suite's objects"
    CLUSTER_ENV=${CLUSTER_DIR}/env.sh OUT_DIR=${out} DEPLOY_FROM=${E2E_DEPLOY_FROM:-chart} \
      hack/deploy/local-apply.sh --delete >>"${logs}/deploy.log"
    curl --silent --show-error --fail --cacert "${CLUSTER_CA}" \
      --cert "${CLUSTER_PKI_DIR}/admin.crt" --key "${CLUSTER_PKI_DIR}/admin.key" -X DELETE \
      "${CLUSTER_APISERVER}/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/vpa-inplace-e2e-gate-off" >/dev/null
    echo "== profile ${profile}: install phase: go test -tags e2e -run ${install_tests} ./e2e/"
    local run
    run="^($(IFS='|'; echo "${install_run[*]}"))\$"
    if ! KUBECONFIG=${KUBECONFIG} E2E_PROFILE=${cluster} E2E_INSTALL_PHASE=1 E2E_STEADY_DURATION= \
      E2E_HELM="${helm_bin}" E2E_KUSTOMIZE="${kustomize_bin}" E2E_REPO_ROOT="${root}" \
      E2E_UPDATER_BINARY="${root}/_output/bin/updater" E2E_ADMISSION_BINARY="${root}/_output/bin/admission-controller" \
      E2E_LOG_DIR="${logs}" go test -tags e2e -count=1 -v -timeout 15m -run "${run}" ./e2e/ 2>&1 | tee "${logs}/go-test-install.log"; then
      rc=1
    fi
    echo "== profile ${profile}: install phase"
    summarize "${logs}/go-test-install.log" "${profile}" || rc=1
  fi
  if [[ ${E2E_KEEP:-0} != 1 ]]; then hack/cluster/down.sh --purge >/dev/null; fi
  echo "== profile ${profile}: $( ((rc == 0)) && echo PASS || echo FAIL) (logs in _output/e2e/${profile})"
  return "${rc}"
}

# prebuild: builds the cluster binaries of the profiles after the first in the
# background, at a lower priority, in a session of its own (stopped with the
# suite). build.sh locks each set: a profile whose set is still being built
# waits for it, then finds it built.
prebuild() {
  local p c first=1 seen=" " later=()
  for p in ${profiles}; do
    c=$(cluster_profile "${p}")
    if ((first)); then first=0 seen+="${c} " && continue; fi
    [[ ${seen} == *" ${c} "* ]] && continue
    seen+="${c} " later+=("${c}")
  done
  ((${#later[@]} > 0)) || return 0
  mkdir -p _output/e2e
  echo "== building the cluster binaries of ${later[*]} in the background (_output/e2e/prebuild.log)"
  setsid bash -c 'for c in "$@"; do nice -n 10 hack/cluster/build.sh "${c}" || exit 1; done' prebuild "${later[@]}" \
    >_output/e2e/prebuild.log 2>&1 &
  prebuild_pid=$!
}
prebuild

failed=() took=()
for profile in ${profiles}; do
  t0=$(date +%s)
  run_profile "${profile}" || failed+=("${profile}")
  took+=("${profile} $(($(date +%s) - t0))s")
done
echo "== profile times: $(IFS=','; echo "${took[*]}" | sed 's/,/, /g')"
if ((${#failed[@]} > 0)); then
  echo "e2e FAILED on: ${failed[*]}" >&2
  exit 1
fi
echo "e2e passed on: ${profiles}"
