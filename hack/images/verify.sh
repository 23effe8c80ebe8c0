#!/usr/bin/env bash
# Checks the images: the image tool's own tests (which show each check
# failing on a broken image, and push against an in-process registry), then
# builds both images (hack/images/build.sh) and checks their config and file
# system for every platform: user 65532:65532, entrypoint /<name>,
# architecture, the OCI labels (version, revision of this commit), a static
# binary for that architecture, nothing but /etc/passwd, /etc/group and the
# binary. Last, pushes them with hack/images/push.sh to an in-memory registry
# on 127.0.0.1 and checks that it serves the digests built.
set -o errexit -o nounset -o pipefail
source "$(dirname "$0")/lib.sh"
cd "${IMAGES_REPO_ROOT}"

start=$(date +%s)
if ! out=$(cd hack/images && GOWORK=off GOFLAGS=-mod=readonly go vet . 2>&1 && GOWORK=off GOFLAGS=-mod=readonly go test -count=1 . 2>&1); then
  echo "FAIL: the tests of hack/images:"
  echo "${out}" | tail -n 30 | sed -e 's/^/    /'
  exit 1
fi
echo "ok    hack/images vet and tests"

build_out=$(hack/images/build.sh)
echo "${build_out}" | sed -e 's/^/ok    built /'
tool=$(images::tool)
revision=$(images::revision)
for name in "${IMAGES_NAMES[@]}"; do
  "${tool}" verify -name "${name}" -platform "${IMAGES_PLATFORMS}" \
    -label "org.opencontainers.image.version=${IMAGES_VERSION}" \
    -label "org.opencontainers.image.revision=${revision}" \
    "${IMAGES_OUT}/${name}.tar"
done

work=$(mktemp -d)
registry_pid=
cleanup() {
  if [[ -n ${registry_pid} ]]; then
    kill "${registry_pid}" 2>/dev/null || true
    wait "${registry_pid}" 2>/dev/null || true
  fi
  rm -rf "${work}"
}
trap cleanup EXIT
"${tool}" registry -addr-file "${work}/addr" 2>"${work}/registry.log" &
registry_pid=$!
for _ in $(seq 100); do
  [[ -s ${work}/addr ]] && break
  sleep 0.1
done
[[ -s ${work}/addr ]] || images::die "the test registry did not start: $(cat "${work}/registry.log")"
pushed=$(REGISTRY="$(cat "${work}/addr")/vpa-inplace" TAG=verify hack/images/push.sh)
for name in "${IMAGES_NAMES[@]}"; do
  built=$(echo "${build_out}" | awk -v f="${IMAGES_OUT}/${name}.tar" '$1 == f {print $2}')
  if ! echo "${pushed}" | grep -q "/vpa-inplace/${name}:verify@${built}\$"; then
    echo "FAIL: push of ${name}: want digest ${built}, got:"
    echo "${pushed}" | sed -e 's/^/    /'
    exit 1
  fi
  echo "ok    pushed ${name} to an in-process registry: ${built}"
done
echo "verify-images: ok ($(($(date +%s) - start))s)"
