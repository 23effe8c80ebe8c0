#!/usr/bin/env bash
# Checks make bench's start logic without a cluster (hack/bench.sh with
# BENCH_CHECK_ONLY=1: it builds, checks the flags of every updater replica
# it would start against the updater's own parsing and validation, and
# stops), so that a renamed updater flag or a broken default fails here and
# not after an hour of benchmark:
#   - the sharded mode at both sizes: the namespaces, the profile, the
#     configurations, and every replica's flags (single-0, its standby
#     single-1, sharded-0 to -2) accepted by the updater built from this
#     tree, with leader election and the shards;
#   - the ordinary run: ours with its flags, as before;
#   - what the scripts refuse: a sharded mode of one replica, one
#     namespace, an unknown phase;
#   - the chart's shards' Leases and Role as the sharded mode applies them
#     (updater.shards=12): a Lease per shard and per member.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# check NAME WANT... -- ENV...: runs hack/bench.sh BENCH_CHECK_ONLY=1 with ENV
# and wants every WANT (a fixed string) in its output.
check() {
  local name=$1 out=${work}/$1.out want=() w
  shift
  while [[ $1 != -- ]]; do want+=("$1") && shift; done
  shift
  if ! env BENCH_CHECK_ONLY=1 BENCH_OURS_BINARY="${work}/bin/updater" BENCH_OURS_VERSION=check "$@" hack/bench.sh >"${out}" 2>&1; then
    fail "${name}: hack/bench.sh failed: $(tail -n 20 "${out}")"
    return
  fi
  for w in "${want[@]}"; do
    grep -qF -- "${w}" "${out}" || fail "${name}: no '${w}' in: $(cat "${out}")"
  done
}

# refused NAME WANT -- ENV...: hack/bench.sh must fail, saying WANT.
refused() {
  local name=$1 said=$2 out=${work}/$1.out
  shift 3
  if env BENCH_CHECK_ONLY=1 BENCH_OURS_BINARY="${work}/bin/updater" BENCH_OURS_VERSION=check "$@" hack/bench.sh >"${out}" 2>&1; then
    fail "${name}: hack/bench.sh accepted it"
  fi
  grep -qF -- "${said}" "${out}" || fail "${name}: no '${said}' in: $(cat "${out}")"
}

go build -o "${work}/bin/" ./cmd/updater

sharded_flags=(--leader-elect=true --leader-elect-lease-duration=15s --leader-elect-resource-namespace=vpa-inplace-system
  --shards=12 --shard-lease-prefix=vpa-inplace-updater)
check quick "profile 1000pods-sharded3: 1000 pods in 100 Deployments over 10 namespaces" \
  "ours as single (1 replica), then sharded (3 replicas, 12 shards)" \
  "single-0: " "single-1: " "sharded-0: " "sharded-1: " "sharded-2: " "${sharded_flags[@]}" "--shards=1: flags accepted" \
  "BENCH_CHECK_ONLY=1: flags checked, nothing started" -- BENCH_SHARDED=3 BENCH_PODS=1000
check large "profile 10000pods-sharded3: 10000 pods in 1000 Deployments over 100 namespaces" "sharded-2: " \
  -- BENCH_SHARDED=3 BENCH_PODS=10000
check shards16 "sharded (4 replicas, 16 shards)" "sharded-3: " "--shards=16 " -- BENCH_SHARDED=4 BENCH_SHARDS=16 BENCH_PODS=1000
if grep -qF -- "--leader-elect=false" "${work}/quick.out"; then
  fail "a sharded replica runs without leader election: $(grep -F -- --leader-elect=false "${work}/quick.out")"
fi
check ordinary "profile 1000pods: 1000 pods in 100 Deployments over 1 namespaces; updaters: ours, upstream" \
  "ours: " "--leader-elect=false --updater-interval=1m -v=2: flags accepted" -- BENCH_PODS=1000
grep -qF "sharded-0" "${work}/ordinary.out" && fail "the ordinary run starts sharded replicas"
grep -qF "recommender" "${work}/ordinary.out" && fail "BENCH_CHECK_ONLY=1 went on to the recommender phase: $(cat "${work}/ordinary.out")"

refused one-replica "BENCH_SHARDED must be a number of replicas, 2 or more" -- BENCH_SHARDED=1
refused one-namespace "--sharded-replicas needs --namespaces of at least 2" -- BENCH_SHARDED=3 BENCH_NAMESPACES=1
refused phase "BENCH_PHASES: unknown phase shards" -- BENCH_SHARDED=3 BENCH_PHASES=shards

# The chart's shards' objects, as shard_objects renders them for the
# sharded mode.
helm=$(hack/tools/install.sh helm)
"${helm}" template vpa-inplace charts/vpa-inplace --namespace vpa-inplace-system --set updater.shards=12 \
  --show-only templates/updater/shards.yaml >"${work}/shards.yaml"
leases=$(grep -c '^kind: Lease$' "${work}/shards.yaml" || true)
[[ ${leases} == 24 ]] || fail "the chart renders ${leases} Leases for 12 shards, want 24 (a shard's and a member's each)"
for name in vpa-inplace-updater-shard-0 vpa-inplace-updater-shard-11 vpa-inplace-updater-member-11; do
  grep -qx "  name: ${name}" "${work}/shards.yaml" || fail "the chart renders no Lease ${name} (--shard-lease-prefix=vpa-inplace-updater)"
done

if ((failures > 0)); then
  echo "bench-check: ${failures} failure(s)" >&2
  exit 1
fi
echo "bench-check: ok"
