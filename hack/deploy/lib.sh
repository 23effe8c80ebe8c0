# shellcheck shell=bash
# Helpers shared by the scripts in hack/deploy. Source it; it only defines
# variables and functions.
#
# The kustomizations under deploy/ use nothing but `resources:`, so they can be
# rendered here without kustomize: deploy::render walks them depth first and
# concatenates the files in the order listed. hack/deploy/verify-manifests.sh
# checks that this stays true (and, when kubectl is installed, that
# `kubectl kustomize` renders the same objects).

# The variables are for the scripts that source this file.
# shellcheck disable=SC2034
DEPLOY_REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
readonly DEPLOY_REPO_ROOT
readonly DEPLOY_NAMESPACE=vpa-inplace-system
readonly DEPLOY_FIELD_MANAGER=vpa-inplace-deploy
readonly DEPLOY_TLS_SECRET=vpa-inplace-admission-tls
# Placeholders in deploy/. The scripts replace them; verify-manifests.sh checks
# that the manifests use exactly these strings.
readonly DEPLOY_UPDATER_IMAGE_PLACEHOLDER=vpa-inplace/updater:dev
readonly DEPLOY_ADMISSION_IMAGE_PLACEHOLDER=vpa-inplace/admission-controller:dev
readonly DEPLOY_CA_BUNDLE_PLACEHOLDER=__CA_BUNDLE__
readonly DEPLOY_WEBHOOK_PORT_PLACEHOLDER=__WEBHOOK_PORT__

deploy::die() {
  echo "error: $*" >&2
  exit 1
}

# deploy::need CMD [HINT]: fails with a clear message when CMD is not on PATH.
deploy::need() {
  command -v "$1" >/dev/null 2>&1 || deploy::die "$1 is required${2:+ ($2)}"
}

# deploy::resources DIR: prints, one per line, the manifest files that the
# kustomization in DIR lists, recursing into listed directories.
deploy::resources() {
  local dir kfile entry
  dir=$(cd "$1" && pwd) || deploy::die "$1: no such directory"
  kfile="${dir}/kustomization.yaml"
  [[ -f ${kfile} ]] || deploy::die "${dir}: no kustomization.yaml"
  while IFS= read -r entry; do
    if [[ -d ${dir}/${entry} ]]; then
      deploy::resources "${dir}/${entry}"
    elif [[ -f ${dir}/${entry} ]]; then
      echo "$(cd "$(dirname "${dir}/${entry}")" && pwd)/$(basename "${entry}")"
    else
      deploy::die "${kfile}: resource ${entry} does not exist"
    fi
  done < <(awk '
    /^resources:/ { inres = 1; next }
    /^[^ #-]/     { inres = 0 }
    inres && /^[ ]*- / {
      sub(/^[ ]*- /, ""); sub(/[ ]+#.*$/, ""); gsub(/["\047]/, ""); print
    }' "${kfile}")
}

# deploy::resources_only DIR: whether the kustomization in DIR uses nothing but
# resources: (so that deploy::render renders it); the others (patches,
# generators, replacements) need kustomize.
deploy::resources_only() {
  ! grep -Eq '^[a-zA-Z]' <(grep -Ev '^(apiVersion|kind|resources):' "$1/kustomization.yaml")
}

# deploy::files DIR: prints, one per line, every file the kustomization in DIR
# uses: its resources (as deploy::resources) and the files its patches name.
deploy::files() {
  local dir
  deploy::resources "$1"
  dir=$(cd "$1" && pwd)
  awk '/^[ ]*(- )?path:/ { sub(/^[ ]*(- )?path:[ ]*/, ""); gsub(/["\047]/, ""); print }' "${dir}/kustomization.yaml" \
    | while IFS= read -r f; do echo "${dir}/${f}"; done
}

# deploy::render DIR: prints the YAML stream of the kustomization in DIR.
deploy::render() {
  local f files
  deploy::resources_only "$1" \
    || deploy::die "$1 uses more than resources: (patches, generators): apply it with kubectl apply -k"
  files=$(deploy::resources "$1") || exit 1
  while IFS= read -r f; do
    echo "---"
    cat "${f}"
    # A last line without a newline would merge with the next separator.
    [[ -z $(tail -c 1 "${f}") ]] || echo
  done <<<"${files}"
}

# deploy::split OUTDIR: splits the YAML stream on stdin into one file per
# document (OUTDIR/000.yaml, 001.yaml, ...), dropping empty documents.
deploy::split() {
  mkdir -p "$1"
  awk -v out="$1" '
    function flush() {
      if (doc ~ /(^|\n)kind:/) { printf "%s", doc > sprintf("%s/%03d.yaml", out, n); close(sprintf("%s/%03d.yaml", out, n)); n++ }
      doc = ""
    }
    /^---[[:space:]]*$/ { flush(); next }
    { doc = doc $0 "\n" }
    END { flush() }'
}

# deploy::field FILE apiVersion|kind|name|namespace: prints that field of the
# single document in FILE (top-level keys and direct children of metadata).
deploy::field() {
  awk -v want="$2" '
    function val(s) { sub(/^[^:]*:[ ]*/, "", s); sub(/[ ]+#.*$/, "", s); gsub(/["\047]/, "", s); return s }
    /^[^ #]/ { inmeta = ($0 ~ /^metadata:/) }
    (want == "apiVersion" || want == "kind") && $0 ~ ("^" want ":") { print val($0); exit }
    inmeta && $0 ~ ("^  " want ":") { print val($0); exit }' "$1"
}

# deploy::api_path APIVERSION KIND NAME [NAMESPACE]: prints the REST path of
# one object. Only the kinds deploy/ ships are known.
deploy::api_path() {
  local api_version=$1 kind=$2 name=$3 namespace=${4:-} plural namespaced=true prefix
  case "${kind}" in
    Namespace) plural=namespaces namespaced=false ;;
    CustomResourceDefinition) plural=customresourcedefinitions namespaced=false ;;
    ClusterRole) plural=clusterroles namespaced=false ;;
    ClusterRoleBinding) plural=clusterrolebindings namespaced=false ;;
    MutatingWebhookConfiguration) plural=mutatingwebhookconfigurations namespaced=false ;;
    ValidatingWebhookConfiguration) plural=validatingwebhookconfigurations namespaced=false ;;
    ValidatingAdmissionPolicy) plural=validatingadmissionpolicies namespaced=false ;;
    ValidatingAdmissionPolicyBinding) plural=validatingadmissionpolicybindings namespaced=false ;;
    ServiceAccount) plural=serviceaccounts ;;
    Role) plural=roles ;;
    RoleBinding) plural=rolebindings ;;
    Secret) plural=secrets ;;
    ConfigMap) plural=configmaps ;;
    Lease) plural=leases ;;
    Service) plural=services ;;
    Deployment) plural=deployments ;;
    PodDisruptionBudget) plural=poddisruptionbudgets ;;
    APIService) plural=apiservices namespaced=false ;;
    *) deploy::die "no REST path known for kind ${kind}: add it to deploy::api_path in hack/deploy/lib.sh" ;;
  esac
  if [[ ${api_version} == */* ]]; then prefix=/apis/${api_version}; else prefix=/api/${api_version}; fi
  if [[ ${namespaced} == true ]]; then
    [[ -n ${namespace} ]] || deploy::die "${kind}/${name} has no metadata.namespace"
    echo "${prefix}/namespaces/${namespace}/${plural}/${name}"
  else
    echo "${prefix}/${plural}/${name}"
  fi
}
