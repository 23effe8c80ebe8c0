#!/usr/bin/env bash
# `make demo`: brings up the local cluster (profile v1.37, with metrics-server
# and upstream's VPA recommender), applies deploy/overlays/local, runs the
# admission controller and the updater with the InPlace gate on (as processes,
# with their ServiceAccounts' rights), and runs hack/demo against it: usage
# raised -> recommendation raised -> pod resized in place, and back down.
# Everything keeps running afterwards.
# `hack/demo.sh down` (make demo-down) stops it all.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/.."
dir=_output/demo

stop() {
  local f
  for f in "${dir}"/*.pid; do
    [[ -f $f ]] || continue
    kill "$(cat "$f")" 2>/dev/null || true
    rm -f "$f"
  done
  hack/cluster/down.sh --purge
}

if [[ ${1:-} == down ]]; then
  stop
  exit 0
fi

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
wait_ready() {
  local i
  for ((i = 0; i < 120; i++)); do
    curl --silent --fail --max-time 2 "$2" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "error: $1 did not become ready; see ${dir}/$1.log" >&2
  exit 1
}

mkdir -p "${dir}"
echo "== building the binaries"
go build -o _output/bin/ ./cmd/...
echo "== starting the local cluster (the first run compiles Kubernetes, metrics-server and the recommender: about 20 minutes)"
CLUSTER_PROFILE=v1.37 hack/cluster/up.sh
# shellcheck disable=SC1091
source _output/cluster/run/env.sh

webhook_port=$(free_port) ac_health=$(free_port) updater_metrics=$(free_port)
echo "== applying deploy/overlays/local"
WEBHOOK_PORT=${webhook_port} OUT_DIR=${dir}/deploy hack/deploy/local-apply.sh >"${dir}/deploy.log"

echo "== starting the admission controller and the updater with --feature-gates=InPlace=true"
nohup _output/bin/admission-controller --kubeconfig="${dir}/deploy/admission-controller.kubeconfig" \
  --tls-cert-file="${dir}/deploy/certs/tls.crt" --tls-private-key-file="${dir}/deploy/certs/tls.key" \
  --bind-address=127.0.0.1 --port="${webhook_port}" --address="127.0.0.1:${ac_health}" \
  --feature-gates=InPlace=true >"${dir}/admission-controller.log" 2>&1 &
echo $! >"${dir}/admission-controller.pid"
# --decrease-min-history=2m (default 1h): the demo lowers the pod a few
# minutes after its VPA is created; its recommendation rests on that much usage.
nohup _output/bin/updater --kubeconfig="${dir}/deploy/updater.kubeconfig" --feature-gates=InPlace=true \
  --decrease-min-history=2m --address="127.0.0.1:${updater_metrics}" >"${dir}/updater.log" 2>&1 &
echo $! >"${dir}/updater.pid"
wait_ready admission-controller "http://127.0.0.1:${ac_health}/readyz"
wait_ready updater "http://127.0.0.1:${updater_metrics}/readyz"

echo
go run ./hack/demo
cat <<INFO

The cluster and both binaries keep running:
  export KUBECONFIG=${KUBECONFIG}
  updater metrics:  curl -s http://127.0.0.1:${updater_metrics}/metrics | grep vpa_inplace
  logs:             ${dir}/updater.log, ${dir}/admission-controller.log
  the demo objects: namespace "demo" (Deployment web, VPA web)
  usage:            kubectl top pod -n demo   (metrics-server; set it with the pod annotation
                    hollow-node.vpa-inplace.dev/usage, e.g. "app=cpu:300m,memory:200Mi")
  recommender log:  _output/cluster/run/logs/vpa-recommender.log
Stop everything with: make demo-down
INFO
