#!/usr/bin/env bash
# Writes the parts of charts/vpa-inplace that deploy/ owns, so that the chart
# and the kustomize manifests never drift apart:
#   - crds/vpa-v1-crd-gen.yaml: a verbatim copy of deploy/base/crd's;
#   - templates/<component>/rbac.yaml: the RBAC of deploy/base/<component>/rbac
#     (hack/deploy/chart_template.py: the release's namespace, the chart's
#     names and labels, the ServiceAccounts of the values; the chart writes
#     the ServiceAccounts themselves), switched by <component>.enabled, with
#     rbac.extraRules appended to each binary's ClusterRole; the objects named
#     vpa-inplace-updater-pods (the updater's patch on pods, which only the
#     admission policy of that name narrows) are further switched by
#     updater.admissionPolicy.enabled;
#   - templates/updater/lease.yaml: the updater's Lease of
#     deploy/base/updater/lease, switched by updater.enabled;
#   - templates/admission-controller/certs-rbac.yaml: the RBAC and the empty
#     certificate Secret of deploy/base/admission-controller/certs-rbac,
#     rendered only with certificates.mode self-managed;
#   - README.md: README.tpl.md with the table of values.yaml
#     (hack/deploy/chart_readme.py);
#   - templates/updater/admission-policy.yaml: the ValidatingAdmissionPolicies
#     of deploy/base/updater/policy, with the chart's names and the
#     ServiceAccount's username, switched by updater.enabled and
#     updater.admissionPolicy.enabled.
# Edit deploy/ and run this script; never edit those chart files by hand.
#
# Usage: hack/deploy/update-chart.sh           # write
#        hack/deploy/update-chart.sh --verify  # fail if the chart's copies differ
set -o errexit -o nounset -o pipefail
# shellcheck source=hack/deploy/lib.sh
source "$(dirname "$0")/lib.sh"
cd "${DEPLOY_REPO_ROOT}"

readonly chart=charts/vpa-inplace

mode=write
case "${1:-}" in
  "") ;;
  --verify) mode=verify ;;
  *) echo "usage: $0 [--verify]" >&2; exit 2 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT

# template DIR ARGS...: the chart template of the kustomization deploy/base/DIR.
template() {
  local dir=$1
  shift
  deploy::render "deploy/base/${dir}" | python3 hack/deploy/chart_template.py --source "deploy/base/${dir}" "$@"
}

mkdir -p "${work}/crds" "${work}/templates/updater" "${work}/templates/admission-controller"
cp deploy/base/crd/vpa-v1-crd-gen.yaml "${work}/crds/vpa-v1-crd-gen.yaml"
template updater/rbac --enabled .Values.updater.enabled --extra-rules vpa-inplace-updater \
  --switch vpa-inplace-updater-pods=.Values.updater.admissionPolicy.enabled >"${work}/templates/updater/rbac.yaml"
template updater/lease --enabled .Values.updater.enabled >"${work}/templates/updater/lease.yaml"
template admission-controller/rbac --enabled .Values.admissionController.enabled \
  --extra-rules vpa-inplace-admission-controller >"${work}/templates/admission-controller/rbac.yaml"
template admission-controller/certs-rbac \
  --enabled '(and .Values.admissionController.enabled (eq .Values.certificates.mode "self-managed"))' \
  >"${work}/templates/admission-controller/certs-rbac.yaml"
template updater/policy --enabled '(and .Values.updater.enabled .Values.updater.admissionPolicy.enabled)' \
  >"${work}/templates/updater/admission-policy.yaml"

# Any namespace left means a manifest spells it in a way the seds above miss.
if grep -n "${DEPLOY_NAMESPACE}" "${work}"/templates/*/*.yaml; then
  deploy::die "deploy/ names ${DEPLOY_NAMESPACE} where update-chart.sh does not replace it"
fi

status=0
for f in crds/vpa-v1-crd-gen.yaml templates/updater/rbac.yaml templates/updater/lease.yaml templates/admission-controller/rbac.yaml \
  templates/admission-controller/certs-rbac.yaml templates/updater/admission-policy.yaml; do
  if [[ ${mode} == verify ]]; then
    if ! cmp -s "${work}/${f}" "${chart}/${f}"; then
      echo "FAIL: ${chart}/${f} is not what deploy/ generates; run hack/deploy/update-chart.sh" >&2
      diff -u "${chart}/${f}" "${work}/${f}" | head -n 40 >&2 || true
      status=1
    fi
  else
    mkdir -p "$(dirname "${chart}/${f}")"
    cp "${work}/${f}" "${chart}/${f}"
  fi
done
# The chart's README: its values table comes from values.yaml.
if [[ ${mode} == verify ]]; then
  python3 hack/deploy/chart_readme.py "${chart}" --verify || status=1
else
  python3 hack/deploy/chart_readme.py "${chart}"
fi
if [[ ${mode} == verify && ${status} -eq 0 ]]; then
  echo "OK: the chart's CRDs, RBAC, Lease, certificate Secret and admission policies are deploy/'s, its README is values.yaml's"
fi
exit "${status}"
