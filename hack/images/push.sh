#!/usr/bin/env bash
# Pushes the images `make images` wrote (every platform, one index each) to
# $REGISTRY/<name>:$TAG, with the credentials of the Docker config file
# (~/.docker/config.json or $DOCKER_CONFIG, and its credential helpers: log in
# with `crane auth login`, `docker login` or `podman login --authfile`).
# Prints each reference with its digest, to pin the chart to
# (updater.image.digest, admissionController.image.digest).
#
#   REGISTRY=registry.example.com/vpa-inplace [TAG=0.1.0] [INSECURE=true] hack/images/push.sh
#
# With REGISTRY=registry.example.com/vpa-inplace the chart takes
# updater.image.repository=registry.example.com/vpa-inplace/updater and
# admissionController.image.repository=registry.example.com/vpa-inplace/admission-controller.
set -o errexit -o nounset -o pipefail
source "$(dirname "$0")/lib.sh"
cd "${IMAGES_REPO_ROOT}"

[[ -n ${REGISTRY:-} ]] || images::die "set REGISTRY, e.g. make push REGISTRY=registry.example.com/vpa-inplace"
tag=${TAG:-${IMAGES_VERSION}}
tool=$(images::tool)
insecure=()
[[ ${INSECURE:-false} == true ]] && insecure=(-insecure)

for name in "${IMAGES_NAMES[@]}"; do
  tar=${IMAGES_OUT}/${name}.tar
  [[ -f ${tar} ]] || images::die "${tar} is missing: run make images first"
  # Nothing is pushed that would not pass make verify-images.
  "${tool}" verify -name "${name}" -platform "${IMAGES_PLATFORMS}" "${tar}" >/dev/null
  "${tool}" push "${insecure[@]}" "${tar}" "${REGISTRY%/}/${name}:${tag}"
done
