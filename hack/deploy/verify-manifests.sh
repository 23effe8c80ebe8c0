#!/usr/bin/env bash
# Checks the manifests in deploy/ and the chart in charts/vpa-inplace: every
# file parses, the kustomizations render (resources-only ones with
# hack/deploy/lib.sh and, identically, with kustomize; the others with
# kustomize), the RBAC is least privilege (no pod delete or eviction,
# pods/resize patch for the updater, ...), the webhooks and Deployments have
# the settings deploy/README.md promises, the CRD is the one of the VPA module
# in go.mod, and the chart (helm lint, helm template with its schema) renders
# deploy/'s CRDs, RBAC, admission policies and webhook settings; every
# rendered object validates against the OpenAPI of Kubernetes 1.33 to 1.38
# (hack/openapi/check.sh); the chart's alerting rules pass
# `promtool test rules`. Prints FAIL lines and a final OK/FAIL line.
#
# Usage: hack/deploy/verify-manifests.sh [-v]   (-v also prints passing checks)
# Env:   DEPLOY_DIR  the tree to check (default deploy/)
#        CHART_DIR   the chart to check (default charts/vpa-inplace)
#
# Needs python3 and openssl (a throwaway certificate for
# overlays/provided-certificate). kustomize, helm and promtool are built,
# pinned, by hack/tools/install.sh (cached in _output/tools). PyYAML is used
# when installed; without it, YAML is converted to JSON by a throwaway Go
# program built outside the repository from the module cache
# (sigs.k8s.io/yaml at the version go.mod selects, no download).
set -o errexit -o nounset -o pipefail
# shellcheck source=hack/deploy/lib.sh
source "$(dirname "$0")/lib.sh"
cd "${DEPLOY_REPO_ROOT}"
deploy::need python3
deploy::need openssl

tools=$(hack/tools/install.sh kustomize helm promtool) || deploy::die "cannot build the pinned tools"
{ read -r kustomize; read -r helm; read -r promtool; } <<<"${tools}"

deploy_dir=$(cd "${DEPLOY_DIR:-deploy}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
status=0

if ! hack/deploy/update-crd.sh --verify; then
  status=1
fi
if [[ ${DEPLOY_DIR:-} == "" ]]; then
  :
elif ! cmp -s "${deploy_dir}/base/crd/vpa-v1-crd-gen.yaml" deploy/base/crd/vpa-v1-crd-gen.yaml; then
  echo "FAIL: ${deploy_dir}/base/crd/vpa-v1-crd-gen.yaml differs from the module copy"
  status=1
fi

# Render every kustomization root: deploy/base and each deploy/overlays/*.
# Resources-only roots are rendered by hack/deploy/lib.sh (what apply.sh and
# local-apply.sh apply) and compared with kustomize; the others by kustomize.
roots=(base)
for d in "${deploy_dir}"/overlays/*/; do
  [[ -f ${d}kustomization.yaml ]] && roots+=("overlays/$(basename "${d}")")
done
mkdir -p "${work}/rendered/overlays" "${work}/kustomized/overlays"
printf '%s\n' "${roots[@]}" >"${work}/rendered/roots.txt"
: >"${work}/rendered/kustomize-only.txt"
# kustomize renders a copy, in which overlays/provided-certificate gets the
# PEM files a user would put there (a throwaway self-signed certificate).
cp -r "${deploy_dir}" "${work}/deploy"
if [[ -d ${work}/deploy/overlays/provided-certificate ]]; then
  (cd "${work}/deploy/overlays/provided-certificate" \
    && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
      -subj "/CN=vpa-inplace-webhook.${DEPLOY_NAMESPACE}.svc" -keyout tls.key -out tls.crt 2>/dev/null \
    && cp tls.crt ca.crt) || deploy::die "openssl could not make a test certificate"
fi
for root in "${roots[@]}"; do
  if ! "${kustomize}" build "${work}/deploy/${root}" >"${work}/kustomized/${root}.yaml" 2>"${work}/kustomize.err"; then
    echo "FAIL: kustomize build deploy/${root}:"
    sed -e 's/^/    /' "${work}/kustomize.err" | head -n 5
    status=1
  fi
  if ! deploy::files "${deploy_dir}/${root}" >"${work}/rendered/${root}.files"; then
    echo "FAIL: deploy/${root}: a file it names does not exist"
    status=1
  fi
  if ! deploy::resources_only "${deploy_dir}/${root}"; then
    echo "${root}" >>"${work}/rendered/kustomize-only.txt"
    cp "${work}/kustomized/${root}.yaml" "${work}/rendered/${root}.yaml"
  elif ! deploy::render "${deploy_dir}/${root}" >"${work}/rendered/${root}.yaml"; then
    echo "FAIL: deploy/${root} does not render"
    status=1
  fi
done
kustomized=(--kustomized-dir "${work}/kustomized")

# An overlay that moves deploy/ to another namespace with namespace: alone,
# in a throwaway overlay of the copy: verify_namespace.py shows that its
# policies, which still name vpa-inplace-system, are caught
# (overlays/another-namespace derives them).
mkdir -p "${work}/moved" "${work}/deploy/namespace-only"
printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: autoscaling\nresources:\n  - ../overlays/self-managed-certs\n' \
  >"${work}/deploy/namespace-only/kustomization.yaml"
if ! "${kustomize}" build "${work}/deploy/namespace-only" >"${work}/moved/namespace-only.yaml" 2>"${work}/kustomize.err"; then
  echo "FAIL: kustomize build of overlays/self-managed-certs with namespace: alone:"
  sed -e 's/^/    /' "${work}/kustomize.err" | head -n 5
  status=1
fi

# Each component that no overlay uses is rendered on top of
# overlays/self-managed-certs, in a throwaway overlay of the copy.
mkdir -p "${work}/components"
for d in "${deploy_dir}"/components/*/; do
  name=$(basename "${d}")
  grep -rqs --include=kustomization.yaml "components/${name}\$" "${deploy_dir}/overlays" && continue
  mkdir -p "${work}/deploy/with-${name}"
  printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../overlays/self-managed-certs\ncomponents:\n  - ../components/%s\n' \
    "${name}" >"${work}/deploy/with-${name}/kustomization.yaml"
  if ! "${kustomize}" build "${work}/deploy/with-${name}" >"${work}/components/${name}.yaml" 2>"${work}/kustomize.err"; then
    echo "FAIL: kustomize build of overlays/self-managed-certs with components/${name}:"
    sed -e 's/^/    /' "${work}/kustomize.err" | head -n 5
    status=1
  fi
done

# The chart: the update-chart.sh copies are current, helm lint passes, and
# helm template renders (schema enforced) with the default values and each
# charts/vpa-inplace/ci/*-values.yaml; each hack/deploy/chart-invalid/*.yaml
# must be refused with the message its first line names.
chart_dir=$(cd "${CHART_DIR:-charts/vpa-inplace}" && pwd)
if [[ ${CHART_DIR:-} == "" ]] && ! hack/deploy/update-chart.sh --verify; then
  status=1
fi
mkdir -p "${work}/chart"
chart_cases=(default)
for f in "${chart_dir}"/ci/*-values.yaml; do
  [[ -f ${f} ]] && chart_cases+=("$(basename "${f}" -values.yaml)")
done
printf '%s\n' "${chart_cases[@]}" >"${work}/chart/cases.txt"
for c in "${chart_cases[@]}"; do
  values=()
  [[ ${c} == default ]] || values=(--values "${chart_dir}/ci/${c}-values.yaml")
  if ! "${helm}" lint --strict "${chart_dir}" "${values[@]}" >"${work}/helm.out" 2>&1; then
    echo "FAIL: helm lint --strict (${c} values):"
    sed -e 's/^/    /' "${work}/helm.out" | grep -v '^    $' | head -n 10
    status=1
  fi
  if ! "${helm}" template vpa-inplace "${chart_dir}" --namespace "${DEPLOY_NAMESPACE}" --include-crds \
    "${values[@]}" >"${work}/chart/${c}.yaml" 2>"${work}/helm.out"; then
    echo "FAIL: helm template (${c} values):"
    sed -e 's/^/    /' "${work}/helm.out" | head -n 10
    status=1
  fi
done
# The chart's names follow the release (hack/deploy/verify_manifests.py,
# check_release): release "platform" in namespace "autoscaling", with the
# default values and with every optional object; a second release
# "tenant" in the same namespace; ServiceAccounts of your own.
mkdir -p "${work}/release"
release_cases=(
  "platform default"
  "platform full --values ${chart_dir}/ci/secret-monitoring-values.yaml --set certificates.mode=cert-manager --set-string admissionController.webhooks.namespaceSelector.matchLabels.tenant=true"
  "tenant default"
  "platform existing-sa --set updater.serviceAccount.create=false --set updater.serviceAccount.name=autoscaler --set admissionController.serviceAccount.create=false --set admissionController.serviceAccount.name=webhook-server"
)
for rc in "${release_cases[@]}"; do
  read -r -a words <<<"${rc}"
  if ! "${helm}" template "${words[0]}" "${chart_dir}" --namespace autoscaling "${words[@]:2}" \
    >"${work}/release/${words[0]}-${words[1]}.yaml" 2>"${work}/helm.out"; then
    echo "FAIL: helm template ${words[0]} --namespace autoscaling (${words[1]}):"
    sed -e 's/^/    /' "${work}/helm.out" | head -n 10
    status=1
  fi
done
# As a subchart: Helm passes the parent's global values, which the schema
# must accept while it refuses any other unknown key.
mkdir -p "${work}/parent/charts"
cp -r "${chart_dir}" "${work}/parent/charts/vpa-inplace"
printf 'apiVersion: v2\nname: platform\nversion: 1.0.0\n' >"${work}/parent/Chart.yaml"
printf 'global:\n  imageRegistry: registry.example.com\nvpa-inplace:\n  updater:\n    replicaCount: 1\n    leaderElection:\n      enabled: false\n' >"${work}/parent/values.yaml"
if ! "${helm}" template platform "${work}/parent" --namespace autoscaling >"${work}/release/subchart.yaml" 2>"${work}/helm.out"; then
  echo "FAIL: the chart as a subchart (a parent chart with global values):"
  sed -e 's/^/    /' "${work}/helm.out" | head -n 10
  status=1
elif [[ ${1:-} == -v ]]; then
  echo "ok    chart: renders as a subchart, with the parent's global values"
fi
# The chart's NOTES, rendered by Helm's engine with each case's values next
# to the objects of the same release (hack/deploy/verify_notes.py checks
# what they say against those objects): a copy of the chart in which
# templates/zz-rendered-notes.yaml renders templates/NOTES.txt (copied to
# notes/, which .Files reads) as `helm install` does, with tpl.
mkdir -p "${work}/notes"
cp -r "${chart_dir}" "${work}/notes-chart"
mkdir -p "${work}/notes-chart/notes"
cp "${chart_dir}/templates/NOTES.txt" "${work}/notes-chart/notes/NOTES.txt"
printf '%s\n' 'apiVersion: v1' 'kind: RenderedNotes' 'metadata:' '  name: notes' \
  'notes: {{ tpl (.Files.Get "notes/NOTES.txt") . | toJson }}' >"${work}/notes-chart/templates/zz-rendered-notes.yaml"
notes_cases=(
  "default rightsizer autoscaling"
  "deploy vpa-inplace vpa-inplace-system"
  "cert-manager platform autoscaling --set certificates.mode=cert-manager"
  "secret platform autoscaling --set certificates.mode=secret --set certificates.secret.caBundle=Cg=="
  "updater-only platform autoscaling --set admissionController.enabled=false"
  "admission-only platform autoscaling --set updater.enabled=false"
  "no-policies platform autoscaling --set updater.admissionPolicy.enabled=false"
  "gate-off platform autoscaling --set featureGates.InPlace=false"
  "one-updater platform autoscaling --set updater.replicaCount=1 --set updater.leaderElection.enabled=false"
  "sharded platform autoscaling --set updater.replicas=3 --set updater.shards=4"
)
: >"${work}/notes/cases.txt"
for nc in "${notes_cases[@]}"; do
  read -r -a words <<<"${nc}"
  if ! "${helm}" template "${words[1]}" "${work}/notes-chart" --namespace "${words[2]}" "${words[@]:3}" \
    >"${work}/notes/${words[0]}.yaml" 2>"${work}/helm.out"; then
    echo "FAIL: helm template of the NOTES (${words[0]}):"
    sed -e 's/^/    /' "${work}/helm.out" | head -n 10
    status=1
  fi
  echo "${words[*]:0:3}" >>"${work}/notes/cases.txt"
done
# Supported Kubernetes versions: 1.33 to 1.38 (Chart.yaml kubeVersion).
for v in 1.33.0 1.37.0 1.38.0; do
  if ! "${helm}" template vpa-inplace "${chart_dir}" --kube-version "${v}" >/dev/null 2>"${work}/helm.out"; then
    echo "FAIL: helm template --kube-version ${v} (a supported version):"
    sed -e 's/^/    /' "${work}/helm.out" | head -n 5
    status=1
  fi
done
if "${helm}" template vpa-inplace "${chart_dir}" --kube-version 1.32.9 >/dev/null 2>&1; then
  echo "FAIL: helm template --kube-version 1.32.9 passes: the chart's kubeVersion must refuse Kubernetes before 1.33"
  status=1
elif [[ ${1:-} == -v ]]; then
  echo "ok    chart: installs on Kubernetes 1.33 to 1.38, refused on 1.32"
fi

for f in hack/deploy/chart-invalid/*.yaml; do
  want=$(head -n 1 "${f}" | sed -e 's/^# *refused: *//')
  if "${helm}" template vpa-inplace "${chart_dir}" --values "${f}" >/dev/null 2>"${work}/helm.out"; then
    echo "FAIL: helm template accepts ${f} (it must be refused: ${want})"
    status=1
  elif ! grep -qF -- "${want}" "${work}/helm.out"; then
    echo "FAIL: helm template refuses ${f}, but not with \"${want}\":"
    sed -e 's/^/    /' "${work}/helm.out" | head -n 5
    status=1
  elif [[ ${1:-} == -v ]]; then
    echo "ok    chart: ${f} is refused (${want})"
  fi
done

# The rendered objects, for the checks below, with the caBundle placeholder
# (not base64, on purpose) replaced by a valid value.
(cd "${work}" && find rendered chart release components -name '*.yaml') | while IFS= read -r f; do
  mkdir -p "$(dirname "${work}/decode/${f}")"
  sed -e "s#${DEPLOY_CA_BUNDLE_PLACEHOLDER}#Cg==#" "${work}/${f}" >"${work}/decode/${f}"
done

# Every rendered object decodes strictly (no unknown field, no wrong type) into
# the Kubernetes API types of 1.37 (the product's go.mod) and 1.35 (the
# go.mod of hack/cluster/kubelet-v1.35): a throwaway program built outside the
# repository from hack/deploy/strictdecode/main.go.
for api in product:go.mod 1.35:hack/cluster/kubelet-v1.35/go.mod; do
  name=${api%%:*} mod=${api#*:}
  dir=${work}/strictdecode-${name}
  mkdir -p "${dir}"
  sed -e 's#^module .*#module strictdecode#' "${mod}" >"${dir}/go.mod"
  cp "$(dirname "${mod}")/go.sum" "${dir}/go.sum"
  grep -v '^//go:build ignore$' hack/deploy/strictdecode/main.go >"${dir}/main.go"
  if ! (cd "${dir}" && GOWORK=off GOFLAGS=-mod=mod go build -o strictdecode . 2>"${dir}/build.err"); then
    echo "FAIL: cannot build the strict decoder against ${mod}:"
    sed -e 's/^/    /' "${dir}/build.err" | head -n 5
    status=1
    continue
  fi
  mapfile -t rendered < <(find "${work}/decode" -name '*.yaml' | sort)
  if ! "${dir}/strictdecode" "${rendered[@]}" >"${dir}/out.txt"; then
    echo "FAIL: rendered objects do not decode strictly into the API types of ${mod}:"
    grep '^FAIL' "${dir}/out.txt" | sed -e "s#${work}/decode/##" -e 's/^/    /'
    status=1
  elif [[ ${1:-} == -v ]]; then
    sed -e "s#${work}/decode/##" -e "s#^ok    #ok    API types of ${mod}: #" "${dir}/out.txt"
  fi
done

# Every rendered object against the OpenAPI v3 schemas of Kubernetes 1.33 to
# 1.37 (hack/openapi/check.sh), after the checker's own tests, which show it
# refusing bad objects.
if ! (cd hack/openapi && GOWORK=off go test -count=1 . >"${work}/openapi-test.out" 2>&1); then
  echo "FAIL: the tests of hack/openapi:"
  sed -e 's/^/    /' "${work}/openapi-test.out" | tail -n 20
  status=1
fi
mapfile -t rendered < <(find "${work}/decode" -name '*.yaml' | sort)
verbose=()
[[ ${1:-} == -v ]] && verbose=(-v)
if ! hack/openapi/check.sh "${verbose[@]}" "${rendered[@]}" >"${work}/openapi.out" 2>&1; then
  echo "FAIL: rendered objects do not validate against the Kubernetes OpenAPI:"
  grep -v '^ok\|^skip' "${work}/openapi.out" | sed -e "s#${work}/decode/##" -e 's/^/    /'
  status=1
else
  sed -e "s#${work}/decode/##" -e 's/^/ok    OpenAPI: /' "${work}/openapi.out" | grep -v '^ok    OpenAPI: \(ok\|skip\) ' || true
  if [[ ${1:-} == -v ]]; then
    sed -e "s#${work}/decode/##" "${work}/openapi.out" | grep '^\(ok\|skip\) '
  fi
fi

# The updater's ValidatingAdmissionPolicies, evaluated by the API server's own
# admission code (hack/deploy/policytest, a module of its own): what the
# updater writes is allowed, anything else by its ServiceAccount refused with
# the rule's message, and the expressions' cost stays far within the budget.
# It also renders the chart's policies for other releases, with this helm.
if ! (cd hack/deploy/policytest && HELM="${helm}" GOWORK=off go test -count=1 . >"${work}/policytest.out" 2>&1); then
  echo "FAIL: the updater's admission policies (hack/deploy/policytest):"
  sed -e 's/^/    /' "${work}/policytest.out" | tail -n 30
  status=1
elif [[ ${1:-} == -v ]]; then
  echo "ok    the updater's admission policies allow and refuse what hack/deploy/policytest expects"
fi

# The alerting rules of the chart, as rendered, against their unit tests.
if ! hack/monitoring/test-rules.sh "${helm}" "${promtool}" "${chart_dir}"; then
  status=1
fi

mirror=()
if [[ -n ${VERIFY_WITHOUT_PYYAML:-} ]] || ! python3 -c 'import yaml' 2>/dev/null; then
  # YAML -> JSON with sigs.k8s.io/yaml, from a module outside the repository.
  mkdir -p "${work}/yaml2json"
  # The product's requirements, so that every version resolves from the module
  # cache exactly as for the product build.
  sed -e 's#^module .*#module yaml2json#' go.mod >"${work}/yaml2json/go.mod"
  cp go.sum "${work}/yaml2json/go.sum"
  cat >"${work}/yaml2json/main.go" <<'GO'
// Command yaml2json writes, for each YAML file argument F, the JSON array of
// its non-empty documents to MIRROR/F.json (usage: yaml2json MIRROR F...).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"sigs.k8s.io/yaml"
)

var separator = regexp.MustCompile(`(?m)^---[ \t]*$`)

func main() {
	mirror, failed := os.Args[1], false
	for _, file := range os.Args[2:] {
		if err := convert(mirror, file); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", file, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

func convert(mirror, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	docs := []json.RawMessage{}
	for _, doc := range separator.Split(string(data), -1) {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return err
		}
		if string(j) != "null" {
			docs = append(docs, j)
		}
	}
	out, err := json.Marshal(docs)
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	dest := filepath.Join(mirror, abs+".json")
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dest, out, 0o644)
}
GO
  (cd "${work}/yaml2json" && GOWORK=off GOFLAGS=-mod=mod GOPROXY=off go build -o yaml2json .) \
    || deploy::die "cannot build the YAML converter (and PyYAML is not installed)"
  mapfile -t files < <(find "${deploy_dir}" "${chart_dir}" "${work}/rendered" "${work}/kustomized" "${work}/chart" \
    "${work}/release" "${work}/components" "${work}/notes" "${work}/moved" -name '*.yaml' -not -path '*/templates/*')
  if ! "${work}/yaml2json/yaml2json" "${work}/mirror" "${files[@]}"; then
    echo "FAIL: a YAML file does not parse"
    status=1
  fi
  mirror=(--json-mirror "${work}/mirror")
fi

# The VPA module's source: the pods policy's annotation prefix is checked
# against upstream's constant (update-crd.sh above has downloaded it).
vpa_module_dir=$(go list -m -f '{{.Dir}}' k8s.io/autoscaler/vertical-pod-autoscaler)

if ! python3 hack/deploy/verify_manifests.py --deploy-dir "${deploy_dir}" \
  --vpa-module-dir "${vpa_module_dir}" \
  --rendered-dir "${work}/rendered" "${kustomized[@]}" --chart-dir "${chart_dir}" \
  --chart-rendered-dir "${work}/chart" --metrics-source pkg/updater/report/metrics.go --metrics-source pkg/updater/report/safety.go --metrics-source cmd/updater/app/leadermetric.go --metrics-source pkg/shard/owner/metrics.go --metrics-source pkg/updater/noderoom/buckets/metrics.go --metrics-source cmd/updater/app/sharded.go \
  --metrics-source pkg/records/metrics.go --metrics-source pkg/admission/metrics.go --metrics-source cmd/admission-controller/app/server.go \
  --release-rendered-dir "${work}/release" --component-rendered-dir "${work}/components" \
  --notes-rendered-dir "${work}/notes" --moved-rendered-dir "${work}/moved" "${mirror[@]}" "$@"; then
  status=1
fi

if [[ ${status} -ne 0 ]]; then
  echo "verify-deploy: FAIL"
  exit 1
fi
echo "verify-deploy: OK"
