#!/usr/bin/env bash
# Builds both binaries as OCI images without a container engine: static
# (CGO_ENABLED=0) binaries cross-compiled for each platform, put by the image
# tool (hack/images) on an empty base with the nonroot user (65532), as one
# image index per binary, written as an OCI image layout in a tar file:
#
#   _output/images/updater.tar, _output/images/admission-controller.tar
#
# Environment: VERSION (default: the chart's appVersion; the tag),
# PLATFORMS (default linux/amd64,linux/arm64), SOURCE_DATE_EPOCH (default:
# the commit's time), IMAGE_LICENSES (SPDX, default Apache-2.0).
set -o errexit -o nounset -o pipefail
source "$(dirname "$0")/lib.sh"
cd "${IMAGES_REPO_ROOT}"

command -v go >/dev/null || images::die "go is not in PATH"
[[ -n ${IMAGES_VERSION} ]] || images::die "no VERSION and no appVersion in charts/vpa-inplace/Chart.yaml"
tool=$(images::tool)
revision=$(images::revision)
created=$(images::created)
mkdir -p "${IMAGES_OUT}"

IFS=, read -r -a platforms <<<"${IMAGES_PLATFORMS}"
binaries=()
for platform in "${platforms[@]}"; do
  os=${platform%/*} arch=${platform#*/}
  bindir=${IMAGES_OUT}/bin/${os}_${arch}
  start=$(date +%s)
  # -trimpath and no VCS stamp: the binaries depend on the sources only.
  CGO_ENABLED=0 GOOS=${os} GOARCH=${arch} GOFLAGS=-mod=readonly \
    go build -trimpath -buildvcs=false -ldflags='-s -w' -o "${bindir}/" ./cmd/updater ./cmd/admission-controller
  echo "built the binaries for ${platform} in $(($(date +%s) - start))s" >&2
  binaries+=("${platform}=${bindir}")
done

for name in "${IMAGES_NAMES[@]}"; do
  args=(build -name "${name}" -out "${IMAGES_OUT}/${name}.tar" -tag "${IMAGES_VERSION}" -created "${created}"
    -label "org.opencontainers.image.title=${name}"
    -label "org.opencontainers.image.description=$(images::description "${name}")"
    -label "org.opencontainers.image.source=${IMAGES_SOURCE}"
    -label "org.opencontainers.image.url=${IMAGES_SOURCE}"
    -label "org.opencontainers.image.version=${IMAGES_VERSION}"
    -label "org.opencontainers.image.revision=${revision}"
    -label "org.opencontainers.image.licenses=${IMAGES_LICENSES}"
    -label "org.opencontainers.image.created=${created}")
  for b in "${binaries[@]}"; do
    args+=(-binary "${b%%=*}=${b#*=}/${name}")
  done
  "${tool}" "${args[@]}"
done
