# shellcheck shell=bash
# Shared by hack/images/*.sh. Source it; it defines variables and functions.
#
# images::tool builds the image tool (this directory, a module of its own
# with go-containerregistry pinned in its go.sum, so that the product's go.mod
# never sees it) into $TOOLS_BIN_ROOT/images-<hash of its sources>-<go>/, once
# per source change and Go version, as hack/tools/install.sh does for helm.

IMAGES_REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
readonly IMAGES_REPO_ROOT
# The images, named as deploy/ and the chart name them (vpa-inplace/<name>):
# the binary is /<name>, its entrypoint.
readonly IMAGES_NAMES=(updater admission-controller)
readonly IMAGES_OUT=${IMAGES_OUT:-${IMAGES_REPO_ROOT}/_output/images}
IMAGES_PLATFORMS=${PLATFORMS:-linux/amd64,linux/arm64}
# The chart's appVersion: the tag the chart pulls by default.
IMAGES_VERSION=${VERSION:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "${IMAGES_REPO_ROOT}/charts/vpa-inplace/Chart.yaml")}
readonly IMAGES_SOURCE=https://github.com/vpa-inplace/vpa-inplace
# SPDX expression of the licence: the repository's LICENSE.
IMAGES_LICENSES=${IMAGE_LICENSES:-Apache-2.0}

images::die() {
  echo "error: $*" >&2
  exit 1
}

images::description() {
  case $1 in
    updater) echo "vpa-inplace updater: resizes the pods of VerticalPodAutoscalers in InPlace mode through pods/resize; never evicts" ;;
    admission-controller) echo "vpa-inplace admission controller: recommendations for new pods of InPlace VPAs, validation of VPAs" ;;
    *) images::die "unknown image $1" ;;
  esac
}

# images::revision: the commit, with -dirty when the work tree differs from it.
images::revision() {
  local rev
  rev=$(git -C "${IMAGES_REPO_ROOT}" rev-parse HEAD)
  if [[ -n $(git -C "${IMAGES_REPO_ROOT}" status --porcelain --untracked-files=no) ]]; then
    rev+=-dirty
  fi
  echo "${rev}"
}

# images::created: SOURCE_DATE_EPOCH, or the commit's time, in UTC: equal
# sources give equal images.
images::created() {
  local epoch=${SOURCE_DATE_EPOCH:-$(git -C "${IMAGES_REPO_ROOT}" log -1 --format=%ct HEAD)}
  date -u -d "@${epoch}" +%Y-%m-%dT%H:%M:%SZ
}

images::tool() {
  local root=${TOOLS_BIN_ROOT:-${IMAGES_REPO_ROOT}/_output/tools}
  local src=${IMAGES_REPO_ROOT}/hack/images gover hash dest tmp
  gover=$(go env GOVERSION)
  hash=$(cd "${src}" && cat go.mod go.sum $(ls -- *.go | grep -v '_test\.go$') | sha256sum | cut -c1-12)
  dest=${root}/images-${hash}-${gover}
  mkdir -p "${root}"
  (
    flock 9
    if [[ ! -x ${dest}/images ]]; then
      tmp=${root}/.tmp-images-$$
      rm -rf "${tmp}"
      echo "building the image tool (hack/images, ${gover})" >&2
      (cd "${src}" && GOWORK=off GOFLAGS=-mod=readonly go build -trimpath -o "${tmp}/images" .) ||
        { rm -rf "${tmp}"; images::die "building hack/images failed"; }
      rm -rf "${dest}"
      mv -T "${tmp}" "${dest}"
    fi
  ) 9>"${root}/.lock-images"
  echo "${dest}/images"
}
