#!/usr/bin/env bash
# Checks the manifests in deploy/: every file parses, the kustomizations render
# (with hack/deploy/lib.sh and, when kubectl is installed, identically with
# `kubectl kustomize`), the RBAC is least privilege (no pod delete or eviction,
# pods/resize patch for the updater, ...), the webhooks and Deployments have
# the settings deploy/README.md promises, and the CRD is the one of the VPA
# module in go.mod. Prints FAIL lines and a final OK/FAIL line.
#
# Usage: hack/deploy/verify-manifests.sh [-v]   (-v also prints passing checks)
# Env:   DEPLOY_DIR  the tree to check (default deploy/)
#
# Needs python3. PyYAML is used when installed; without it, YAML is converted to
# JSON by a throwaway Go program built outside the repository from the module
# cache (sigs.k8s.io/yaml at the version go.mod selects, no download).
set -o errexit -o nounset -o pipefail
# shellcheck source=hack/deploy/lib.sh
source "$(dirname "$0")/lib.sh"
cd "${DEPLOY_REPO_ROOT}"
deploy::need python3

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
roots=(base)
for d in "${deploy_dir}"/overlays/*/; do
  [[ -f ${d}kustomization.yaml ]] && roots+=("overlays/$(basename "${d}")")
done
mkdir -p "${work}/rendered/overlays" "${work}/kustomized/overlays"
printf '%s\n' "${roots[@]}" >"${work}/rendered/roots.txt"
for root in "${roots[@]}"; do
  if ! deploy::resources "${deploy_dir}/${root}" >"${work}/rendered/${root}.files" \
    || ! deploy::render "${deploy_dir}/${root}" >"${work}/rendered/${root}.yaml"; then
    echo "FAIL: deploy/${root} does not render"
    status=1
  fi
done

kustomized=()
if command -v kubectl >/dev/null 2>&1; then
  for root in "${roots[@]}"; do
    if ! kubectl kustomize "${deploy_dir}/${root}" >"${work}/kustomized/${root}.yaml" 2>"${work}/kustomize.err"; then
      echo "FAIL: kubectl kustomize deploy/${root}:"
      sed -e 's/^/    /' "${work}/kustomize.err" | head -n 5
      status=1
    fi
  done
  kustomized=(--kustomized-dir "${work}/kustomized")
else
  echo "note: kubectl not found; skipped the comparison with kubectl kustomize"
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
  mapfile -t files < <(find "${deploy_dir}" "${work}/rendered" "${work}/kustomized" -name '*.yaml')
  if ! "${work}/yaml2json/yaml2json" "${work}/mirror" "${files[@]}"; then
    echo "FAIL: a YAML file does not parse"
    status=1
  fi
  mirror=(--json-mirror "${work}/mirror")
fi

if ! python3 hack/deploy/verify_manifests.py --deploy-dir "${deploy_dir}" \
  --rendered-dir "${work}/rendered" "${kustomized[@]}" "${mirror[@]}" "$@"; then
  status=1
fi

if [[ ${status} -ne 0 ]]; then
  echo "verify-deploy: FAIL"
  exit 1
fi
echo "verify-deploy: OK"
