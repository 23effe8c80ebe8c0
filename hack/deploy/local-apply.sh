#!/usr/bin/env bash
# Prepares a cluster for running the updater and the admission controller as
# processes on this machine, with exactly the permissions they have in a
# cluster deploy:
#   1. applies deploy/overlays/local (namespace, CRDs, ServiceAccounts, RBAC,
#      the updater's admission policies and Lease, the self-managed
#      certificate's empty Secret, webhooks that call
#      https://127.0.0.1:WEBHOOK_PORT) with curl and
#      server-side apply, as the cluster admin; no kubectl or kustomize needed;
#   2. generates the webhook serving certificate (SAN 127.0.0.1);
#   3. writes one kubeconfig per binary, authenticated by a token of its
#      ServiceAccount (TokenRequest API), to OUT_DIR/<component>.kubeconfig.
#
# Usage: hack/deploy/local-apply.sh            # apply, mint kubeconfigs
#        hack/deploy/local-apply.sh --delete   # remove what it applied (not the CRDs)
#
# The cluster comes from CLUSTER_ENV (default _output/cluster/run/env.sh), which
# must export CLUSTER_APISERVER (https URL), CLUSTER_CA (CA file) and
# CLUSTER_PKI_DIR (holding admin.crt/admin.key); the variables may also be set
# in the environment instead. Other env:
#   ADMIN_CERT, ADMIN_KEY   client certificate of a cluster admin
#                           (default $CLUSTER_PKI_DIR/admin.crt, admin.key)
#   WEBHOOK_PORT            where the admission controller listens (default 18443)
#   OUT_DIR                 (default _output/deploy/local)
#   TOKEN_EXPIRATION_SECONDS  requested token lifetime (default 86400); run the
#                           script again for fresh tokens
#   DELETE_CRDS=true        with --delete, also delete the VPA CRDs (and so
#                           every VPA object in the cluster)
#   DEPLOY_FROM=chart       apply, instead of deploy/overlays/local, what the
#                           Helm chart renders (`helm template`, the pinned helm
#                           of hack/tools/install.sh): its CRDs, ServiceAccounts,
#                           RBAC, admission policies, the updater's Lease, the
#                           self-managed certificate's empty Secret and the
#                           webhooks (its default values), the
#                           webhooks' Service replaced by https://127.0.0.1:PORT,
#                           and deploy/base's namespace. Its Deployments,
#                           Services and PodDisruptionBudgets are only sent
#                           with dryRun=All: refused, or warned about (Pod
#                           Security), they fail the script.
#
# Needs bash, curl, openssl, python3 (standard library only).
set -o errexit -o nounset -o pipefail
# shellcheck source=hack/deploy/lib.sh
source "$(dirname "$0")/lib.sh"
cd "${DEPLOY_REPO_ROOT}"

action=apply
case "${1:-}" in
  "") ;;
  --delete) action=delete ;;
  *) deploy::die "usage: $0 [--delete]" ;;
esac

env_file=${CLUSTER_ENV:-_output/cluster/run/env.sh}
if [[ -f ${env_file} ]]; then
  # shellcheck source=/dev/null
  source "${env_file}"
elif [[ -z ${CLUSTER_APISERVER:-} ]]; then
  deploy::die "${env_file} not found and CLUSTER_APISERVER not set: start the local cluster first, or export CLUSTER_APISERVER, CLUSTER_CA and ADMIN_CERT/ADMIN_KEY"
fi
for cmd in curl openssl python3; do deploy::need "${cmd}"; done
server=${CLUSTER_APISERVER:?CLUSTER_APISERVER is not set (by ${env_file})}
server=${server%/}
ca=${CLUSTER_CA:?CLUSTER_CA is not set (by ${env_file})}
admin_cert=${ADMIN_CERT:-${CLUSTER_PKI_DIR:-}/admin.crt}
admin_key=${ADMIN_KEY:-${CLUSTER_PKI_DIR:-}/admin.key}
[[ -r ${ca} ]] || deploy::die "CLUSTER_CA ${ca}: not readable"
for f in "${admin_cert}" "${admin_key}"; do
  [[ -r ${f} ]] || deploy::die "${f}: not readable (set ADMIN_CERT/ADMIN_KEY if the admin client certificate lives elsewhere)"
done
webhook_port=${WEBHOOK_PORT:-18443}
[[ ${webhook_port} =~ ^[0-9]+$ ]] || deploy::die "WEBHOOK_PORT must be a port number"
out_dir=${OUT_DIR:-_output/deploy/local}
token_seconds=${TOKEN_EXPIRATION_SECONDS:-86400}

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT

# api METHOD PATH [CONTENT_TYPE FILE]: one request as the admin. The response
# body is left in ${work}/response; returns non-zero unless the status is 2xx.
http_code=
api() {
  local args=(--silent --show-error --cacert "${ca}" --cert "${admin_cert}" --key "${admin_key}"
    --request "$1" --header "Accept: application/json"
    --output "${work}/response" --dump-header "${work}/headers" --write-out '%{http_code}')
  if [[ $# -ge 4 ]]; then
    args+=(--header "Content-Type: $3" --data-binary "@$4")
  fi
  http_code=$(curl "${args[@]}" "${server}$2") || deploy::die "cannot reach ${server} ($1 $2)"
  [[ ${http_code} == 2?? ]]
}

fail_request() { # WHAT
  echo "error: $1: HTTP ${http_code}" >&2
  cat "${work}/response" >&2
  echo >&2
  exit 1
}

# chart_objects KINDS: the chart's objects of the kinds in KINDS (a regular
# expression), rendered with its default values (certificates.mode
# self-managed: the admission controller's RBAC grants what the e2e suite's
# self-managed admission controller needs), with the webhooks' service
# (name, namespace, path, port lines) turned into a URL on this machine and
# the placeholders of deploy/ for the port and the CA (the suite's
# admission controllers serve files).
chart_objects() {
  local helm
  helm=$(hack/tools/install.sh helm) || deploy::die "cannot build helm"
  "${helm}" template vpa-inplace charts/vpa-inplace --namespace "${DEPLOY_NAMESPACE}" --include-crds \
    | awk -v port="${DEPLOY_WEBHOOK_PORT_PLACEHOLDER}" -v ca="${DEPLOY_CA_BUNDLE_PLACEHOLDER}" -v kinds="$1" '
      function flush() {
        if (doc ~ ("(^|\n)kind: (" kinds ")\n"))
          printf "---\n%s", doc
        doc = ""
      }
      /^---/ { flush(); next }
      /^      service:$/ { insvc = 1; next }
      insvc && /^        path:/ { path = $2; next }
      insvc && /^        / { next }
      insvc { doc = doc "      url: https://127.0.0.1:" port path "\n      caBundle: " ca "\n"; insvc = 0 }
      /^      caBundle:/ { next }
      { doc = doc $0 "\n" }
      END { flush() }'
}

# What a process outside the cluster needs; the namespace is deploy/base's
# (a chart installs into a namespace that exists).
readonly chart_local_kinds='CustomResourceDefinition|ServiceAccount|ClusterRole|ClusterRoleBinding|Role|RoleBinding|Lease|Secret|MutatingWebhookConfiguration|ValidatingWebhookConfiguration|ValidatingAdmissionPolicy|ValidatingAdmissionPolicyBinding'
# What runs in a cluster: validated by the API server (dry run) only.
readonly chart_workload_kinds='Deployment|Service|PodDisruptionBudget'

case ${DEPLOY_FROM:-deploy} in
  deploy) deploy::render deploy/overlays/local | deploy::split "${work}/docs" ;;
  chart) { deploy::render deploy/base/namespace; chart_objects "${chart_local_kinds}"; } | deploy::split "${work}/docs" ;;
  *) deploy::die "DEPLOY_FROM must be deploy or chart" ;;
esac
docs=("${work}"/docs/*.yaml)

if [[ ${action} == delete ]]; then
  for ((i = ${#docs[@]} - 1; i >= 0; i--)); do
    doc=${docs[i]}
    kind=$(deploy::field "${doc}" kind)
    name=$(deploy::field "${doc}" name)
    if [[ ${kind} == CustomResourceDefinition && ${DELETE_CRDS:-false} != true ]]; then
      echo "kept ${kind}/${name} (DELETE_CRDS=true deletes it)"
      continue
    fi
    path=$(deploy::api_path "$(deploy::field "${doc}" apiVersion)" "${kind}" "${name}" "$(deploy::field "${doc}" namespace)")
    if api DELETE "${path}"; then
      echo "deleted ${kind}/${name}"
    elif [[ ${http_code} == 404 ]]; then
      echo "absent ${kind}/${name}"
    else
      fail_request "delete ${kind}/${name}"
    fi
  done
  rm -f "${out_dir}"/*.kubeconfig
  exit 0
fi

hack/deploy/gen-certs.sh "${out_dir}/certs" 127.0.0.1
ca_bundle=$(base64 <"${out_dir}/certs/ca.crt" | tr -d '\n')

for doc in "${docs[@]}"; do
  sed -i -e "s#${DEPLOY_WEBHOOK_PORT_PLACEHOLDER}#${webhook_port}#g" \
    -e "s#${DEPLOY_CA_BUNDLE_PLACEHOLDER}#${ca_bundle}#g" "${doc}"
  kind=$(deploy::field "${doc}" kind)
  name=$(deploy::field "${doc}" name)
  path=$(deploy::api_path "$(deploy::field "${doc}" apiVersion)" "${kind}" "${name}" "$(deploy::field "${doc}" namespace)")
  api PATCH "${path}?fieldManager=${DEPLOY_FIELD_MANAGER}&force=true" application/apply-patch+yaml "${doc}" \
    || fail_request "apply ${kind}/${name}"
  echo "applied ${kind}/${name}"
done

# The binaries start their VPA informers right away: wait for the CRDs.
for doc in "${docs[@]}"; do
  [[ $(deploy::field "${doc}" kind) == CustomResourceDefinition ]] || continue
  name=$(deploy::field "${doc}" name)
  for ((i = 0; ; i++)); do
    if api GET "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}" \
      && python3 -c 'import json, sys
conds = json.load(open(sys.argv[1])).get("status", {}).get("conditions", [])
sys.exit(0 if any(c["type"] == "Established" and c["status"] == "True" for c in conds) else 1)' "${work}/response"; then
      break
    fi
    ((i < 60)) || deploy::die "CustomResourceDefinition ${name} not Established after 30s"
    sleep 0.5
  done
done

if [[ ${DEPLOY_FROM:-deploy} == chart ]]; then
  # The chart's Deployments, Services and PodDisruptionBudgets, sent with
  # dryRun=All: the API server validates them (schema, and the restricted Pod
  # Security level the namespace warns about) without running them.
  chart_objects "${chart_workload_kinds}" | deploy::split "${work}/workloads"
  for doc in "${work}"/workloads/*.yaml; do
    kind=$(deploy::field "${doc}" kind)
    name=$(deploy::field "${doc}" name)
    path=$(deploy::api_path "$(deploy::field "${doc}" apiVersion)" "${kind}" "${name}" "$(deploy::field "${doc}" namespace)")
    api PATCH "${path}?fieldManager=${DEPLOY_FIELD_MANAGER}&force=true&dryRun=All" application/apply-patch+yaml "${doc}" \
      || fail_request "dry run of ${kind}/${name}"
    if grep -i '^warning:' "${work}/headers"; then
      deploy::die "the API server warns about ${kind}/${name} of the chart"
    fi
    echo "validated ${kind}/${name} (dry run)"
  done
fi

mkdir -p "${out_dir}"
ca_data=$(base64 <"${ca}" | tr -d '\n')
for component in updater admission-controller; do
  sa=vpa-inplace-${component}
  printf '{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":%d}}' \
    "${token_seconds}" >"${work}/token-request.json"
  api POST "/api/v1/namespaces/${DEPLOY_NAMESPACE}/serviceaccounts/${sa}/token" application/json \
    "${work}/token-request.json" || fail_request "token for ServiceAccount ${sa}"
  mapfile -t fields < <(python3 -c 'import json, sys
status = json.load(open(sys.argv[1]))["status"]
print(status["token"])
print(status["expirationTimestamp"])' "${work}/response")
  [[ ${#fields[@]} -eq 2 ]] || fail_request "token for ServiceAccount ${sa}: unexpected response"
  token=${fields[0]}
  expires=${fields[1]}
  kubeconfig=${out_dir}/${component}.kubeconfig
  (
    umask 077
    cat >"${kubeconfig}.tmp" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
  - name: vpa-inplace-local
    cluster:
      server: ${server}
      certificate-authority-data: ${ca_data}
users:
  - name: ${sa}
    user:
      token: ${token}
contexts:
  - name: ${sa}
    context:
      cluster: vpa-inplace-local
      user: ${sa}
      namespace: ${DEPLOY_NAMESPACE}
current-context: ${sa}
KUBECONFIG
    mv -f "${kubeconfig}.tmp" "${kubeconfig}"
  )
  echo "wrote ${kubeconfig} (ServiceAccount ${DEPLOY_NAMESPACE}/${sa}, token expires ${expires})"
done

cat <<EOM

Run the binaries on this machine (everything on 127.0.0.1):
  _output/bin/admission-controller --kubeconfig=${out_dir}/admission-controller.kubeconfig \\
      --tls-cert-file=${out_dir}/certs/tls.crt --tls-private-key-file=${out_dir}/certs/tls.key \\
      --bind-address=127.0.0.1 --port=${webhook_port} --address=127.0.0.1:18944 --feature-gates=InPlace=true
  _output/bin/updater --kubeconfig=${out_dir}/updater.kubeconfig \\
      --address=127.0.0.1:18943 --feature-gates=InPlace=true --leader-elect=false
Until the admission controller serves on port ${webhook_port}, creating or updating a VPA
with updateMode InPlace is rejected (its webhook fails closed). Remove everything with:
  $0 --delete
EOM
