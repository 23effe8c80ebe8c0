#!/usr/bin/env bash
# End-to-end tests against vpa-inplace deployed as in production, in a kind
# cluster: builds both images, loads them into the cluster, deploys deploy/base
# with hack/deploy/apply.sh (certificates included), waits for the rollouts and
# runs `go test -tags e2e ./e2e/...` with KUBECONFIG set to the cluster.
#
# Usage: hack/kind/e2e-kind.sh        (make e2e-kind)
# Env:
#   KIND_CLUSTER_NAME  (default vpa-inplace-e2e); an existing cluster of that
#                      name is reused and kept
#   KIND_NODE_IMAGE    overrides the node image of hack/kind-config.yaml
#   KEEP_CLUSTER=true  keep a cluster this script created (default: deleted)
#   IMAGE_TAG          tag of the images built (default e2e)
#   E2E_TIMEOUT        go test -timeout (default 30m)
#   E2E_ARGS           extra go test arguments, e.g. "-run TestResize -v"
#
# Needs a Docker engine, kind, kubectl, go and openssl.
set -o errexit -o nounset -o pipefail
# shellcheck source=hack/deploy/lib.sh
source "$(dirname "$0")/../deploy/lib.sh"
cd "${DEPLOY_REPO_ROOT}"

if ! docker info >/dev/null 2>&1; then
  echo "error: make e2e-kind needs a Docker engine ('docker info' failed)." >&2
  echo "       Without one, run the binaries against a local cluster: see deploy/README.md." >&2
  exit 1
fi
for cmd in kind kubectl go openssl; do deploy::need "${cmd}"; done

cluster=${KIND_CLUSTER_NAME:-vpa-inplace-e2e}
tag=${IMAGE_TAG:-e2e}
out=${DEPLOY_REPO_ROOT}/_output/kind
mkdir -p "${out}"
export KUBECONFIG=${out}/kubeconfig

created=false
finish() {
  local rc=$?
  if [[ ${rc} -ne 0 ]] && kind get clusters 2>/dev/null | grep -qx "${cluster}"; then
    kind export logs "${out}/logs" --name "${cluster}" >/dev/null 2>&1 \
      && echo "cluster logs: ${out}/logs" >&2
  fi
  if [[ ${created} == true && ${KEEP_CLUSTER:-false} != true ]]; then
    kind delete cluster --name "${cluster}" || true
  fi
  exit "${rc}"
}
trap finish EXIT

if kind get clusters 2>/dev/null | grep -qx "${cluster}"; then
  echo "reusing kind cluster ${cluster}"
else
  kind create cluster --name "${cluster}" --config hack/kind-config.yaml \
    ${KIND_NODE_IMAGE:+--image "${KIND_NODE_IMAGE}"} --kubeconfig "${KUBECONFIG}" --wait 180s
  created=true
fi
kind get kubeconfig --name "${cluster}" >"${KUBECONFIG}"

for component in updater admission-controller; do
  image=vpa-inplace/${component}:${tag}
  docker build --file "build/${component}.Dockerfile" --tag "${image}" .
  kind load docker-image "${image}" --name "${cluster}"
done

UPDATER_IMAGE=vpa-inplace/updater:${tag} \
  ADMISSION_CONTROLLER_IMAGE=vpa-inplace/admission-controller:${tag} \
  CERT_DIR=${out}/certs \
  hack/deploy/apply.sh deploy/base

# shellcheck disable=SC2086 # E2E_ARGS is a list of arguments
go test -tags e2e -count=1 -timeout "${E2E_TIMEOUT:-30m}" ./e2e/... ${E2E_ARGS:-}
