#!/usr/bin/env bash
# Deploys vpa-inplace into the cluster kubectl points at (KUBECONFIG or the
# current context): renders a kustomization of deploy/, substitutes the images
# and the webhook CA, creates the serving certificate Secret, applies with
# server-side apply, waits for the Deployments, and registers the webhooks last
# so that they never point at an admission controller that is not serving yet.
#
# Usage: hack/deploy/apply.sh [--print] [KUSTOMIZATION_DIR]
#   KUSTOMIZATION_DIR  deploy/base (default) or deploy/overlays/with-upstream-vpa
#   --print            print the rendered objects and exit (no cluster needed)
#
# Env:
#   UPDATER_IMAGE               (default vpa-inplace/updater:dev)
#   ADMISSION_CONTROLLER_IMAGE  (default vpa-inplace/admission-controller:dev)
#   CERT_DIR        where hack/deploy/gen-certs.sh keeps the CA and serving
#                   certificate (default _output/deploy/certs)
#   APISERVER_CIDRS comma-separated source ranges of the API server's calls to
#                   the webhooks, for the admission controller's NetworkPolicy
#                   (default: the "kubernetes" Service's endpoints, /32 each;
#                   see deploy/base/admission-controller/networkpolicy.yaml)
#   ROLLOUT_TIMEOUT (default 180s)
#   KUBECTL         (default kubectl)
#
# Needs kubectl and openssl. For deploy/overlays/local use local-apply.sh.
set -o errexit -o nounset -o pipefail
# shellcheck source=hack/deploy/lib.sh
source "$(dirname "$0")/lib.sh"
cd "${DEPLOY_REPO_ROOT}"

print_only=false
if [[ ${1:-} == --print ]]; then
  print_only=true
  shift
fi
dir=${1:-deploy/base}
[[ $# -le 1 ]] || deploy::die "usage: $0 [--print] [KUSTOMIZATION_DIR]"
[[ ${dir} != *overlays/local* ]] || deploy::die "${dir} is for processes outside the cluster: use hack/deploy/local-apply.sh"

updater_image=${UPDATER_IMAGE:-${DEPLOY_UPDATER_IMAGE_PLACEHOLDER}}
admission_image=${ADMISSION_CONTROLLER_IMAGE:-${DEPLOY_ADMISSION_IMAGE_PLACEHOLDER}}
cert_dir=${CERT_DIR:-_output/deploy/certs}
rollout_timeout=${ROLLOUT_TIMEOUT:-180s}
kubectl=${KUBECTL:-kubectl}

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT

deploy::render "${dir}" >"${work}/rendered.yaml"
sed -i \
  -e "s#image: ${DEPLOY_UPDATER_IMAGE_PLACEHOLDER}\$#image: ${updater_image}#" \
  -e "s#image: ${DEPLOY_ADMISSION_IMAGE_PLACEHOLDER}\$#image: ${admission_image}#" \
  "${work}/rendered.yaml"

with_webhooks=false
if grep -q "${DEPLOY_CA_BUNDLE_PLACEHOLDER}" "${work}/rendered.yaml"; then
  with_webhooks=true
  if [[ ${print_only} == true ]]; then
    ca_bundle="<base64 of ${cert_dir}/ca.crt>"
  else
    hack/deploy/gen-certs.sh "${cert_dir}" >&2
    ca_bundle=$(base64 <"${cert_dir}/ca.crt" | tr -d '\n')
  fi
  sed -i "s#${DEPLOY_CA_BUNDLE_PLACEHOLDER}#${ca_bundle}#" "${work}/rendered.yaml"
fi

if grep -q "cidr: __APISERVER_CIDR__" "${work}/rendered.yaml"; then
  cidrs=${APISERVER_CIDRS:-}
  if [[ -z ${cidrs} && ${print_only} == false ]]; then
    deploy::need "${kubectl}" "in-cluster deploys use kubectl; see deploy/README.md"
    cidrs=$("${kubectl}" get endpoints kubernetes --namespace=default \
      -o jsonpath='{range .subsets[*].addresses[*]}{.ip}/32,{end}')
    cidrs=${cidrs%,}
    [[ -n ${cidrs} ]] || deploy::die "cannot find the API server's addresses: set APISERVER_CIDRS"
  fi
  cidrs=${cidrs:-<APISERVER_CIDRS>}
  # One ipBlock per range, in place of the placeholder's.
  awk -v cidrs="${cidrs}" '
    /- ipBlock:$/ { held = $0; next }
    held != "" && /cidr: __APISERVER_CIDR__$/ {
      indent = substr(held, 1, index(held, "-") - 1)
      n = split(cidrs, list, ",")
      for (i = 1; i <= n; i++) { print indent "- ipBlock:"; print indent "    cidr: " list[i] }
      held = ""; next
    }
    held != "" { print held; held = "" }
    { print }' "${work}/rendered.yaml" >"${work}/rendered.tmp"
  mv "${work}/rendered.tmp" "${work}/rendered.yaml"
fi

if [[ ${print_only} == true ]]; then
  cat "${work}/rendered.yaml"
  exit 0
fi

deploy::need "${kubectl}" "in-cluster deploys use kubectl; see deploy/README.md"

# Sort the documents into the three phases.
deploy::split "${work}/docs" <"${work}/rendered.yaml"
: >"${work}/1-first.yaml" && : >"${work}/2-workloads.yaml" && : >"${work}/3-webhooks.yaml"
deployments=()
crds=()
for doc in "${work}"/docs/*.yaml; do
  kind=$(deploy::field "${doc}" kind)
  case "${kind}" in
    Namespace | CustomResourceDefinition) phase=1-first ;;
    MutatingWebhookConfiguration | ValidatingWebhookConfiguration) phase=3-webhooks ;;
    *) phase=2-workloads ;;
  esac
  case "${kind}" in
    Deployment) deployments+=("$(deploy::field "${doc}" name)") ;;
    CustomResourceDefinition) crds+=("$(deploy::field "${doc}" name)") ;;
  esac
  { echo "---"; cat "${doc}"; } >>"${work}/${phase}.yaml"
done

apply() { # FILE
  [[ -s $1 ]] || return 0
  "${kubectl}" apply --server-side --force-conflicts --field-manager="${DEPLOY_FIELD_MANAGER}" -f "$1"
}

apply "${work}/1-first.yaml"
if [[ ${#crds[@]} -gt 0 ]]; then
  for crd in "${crds[@]}"; do
    "${kubectl}" wait --for=condition=Established --timeout=60s "customresourcedefinition/${crd}"
  done
fi
if [[ ${with_webhooks} == true ]]; then
  "${kubectl}" create secret generic "${DEPLOY_TLS_SECRET}" --namespace="${DEPLOY_NAMESPACE}" \
    --type=kubernetes.io/tls \
    --from-file=tls.crt="${cert_dir}/tls.crt" --from-file=tls.key="${cert_dir}/tls.key" \
    --from-file=ca.crt="${cert_dir}/ca.crt" --dry-run=client -o yaml \
    | "${kubectl}" apply --server-side --force-conflicts --field-manager="${DEPLOY_FIELD_MANAGER}" -f -
fi
apply "${work}/2-workloads.yaml"
for deployment in "${deployments[@]}"; do
  "${kubectl}" rollout status --namespace="${DEPLOY_NAMESPACE}" --timeout="${rollout_timeout}" \
    "deployment/${deployment}"
done
apply "${work}/3-webhooks.yaml"
echo "deployed ${dir} to namespace ${DEPLOY_NAMESPACE}"
