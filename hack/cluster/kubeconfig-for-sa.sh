#!/usr/bin/env bash
# Writes a kubeconfig that authenticates as a ServiceAccount of the local cluster, so that a
# binary can run outside the cluster with exactly the RBAC of deploy/.
#
#   hack/cluster/kubeconfig-for-sa.sh NAMESPACE SERVICEACCOUNT OUT [EXPIRATION_SECONDS]
#
# The token comes from the TokenRequest API (POST .../serviceaccounts/SA/token), called with
# curl and the admin client certificate; default lifetime 24h. The ServiceAccount must exist.
# Needs a running cluster (hack/cluster/up.sh).
set -o errexit -o nounset -o pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cluster::python_init

if [[ $# -lt 3 ]]; then
  echo "usage: $0 NAMESPACE SERVICEACCOUNT OUT [EXPIRATION_SECONDS]" >&2
  exit 2
fi
ns=$1 sa=$2 out=$3 ttl=${4:-86400}
[[ -f ${CLUSTER_DIR}/env.sh ]] || cluster::die "no cluster: ${CLUSTER_DIR}/env.sh is missing (run hack/cluster/up.sh)"
# shellcheck source=/dev/null
source "${CLUSTER_DIR}/env.sh"

resp=$(mktemp -p "${CLUSTER_DIR}" .token.XXXXXX)
trap 'rm -f "${resp}"' EXIT
code=$(curl -sS --max-time 20 --cacert "${CLUSTER_CA}" --cert "${CLUSTER_ADMIN_CERT}" --key "${CLUSTER_ADMIN_KEY}" \
  -o "${resp}" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
  --data "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenRequest\",\"spec\":{\"expirationSeconds\":${ttl}}}" \
  "${CLUSTER_APISERVER}/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token")
if [[ ${code} != 201 ]]; then
  cluster::die "TokenRequest for ${ns}/${sa}: HTTP ${code}: $(cluster::json 'd.get("message", "")' <"${resp}" 2>/dev/null || cat "${resp}")"
fi
token=$(cluster::json 'd["status"]["token"]' <"${resp}")
expires=$(cluster::json 'd["status"]["expirationTimestamp"]' <"${resp}")

mkdir -p "$(dirname "${out}")"
umask 077
cat >"${out}" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: vpa-inplace-local
  cluster:
    server: ${CLUSTER_APISERVER}
    certificate-authority: ${CLUSTER_CA}
users:
- name: system:serviceaccount:${ns}:${sa}
  user:
    token: ${token}
contexts:
- name: ${sa}@vpa-inplace-local
  context:
    cluster: vpa-inplace-local
    namespace: ${ns}
    user: system:serviceaccount:${ns}:${sa}
current-context: ${sa}@vpa-inplace-local
EOF
cluster::log "wrote ${out} (system:serviceaccount:${ns}:${sa}, token expires ${expires})"
