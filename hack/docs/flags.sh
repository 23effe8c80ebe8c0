#!/usr/bin/env bash
# The flag reference, docs/flags.md, from the binaries themselves: builds
# both, runs each with --help and writes (or, with --verify, compares) the
# tables between the GENERATED markers (hack/docs/flags.py).
#
#   hack/docs/flags.sh            rewrite the tables (make update-flags)
#   hack/docs/flags.sh --verify   fail when they differ (make verify)
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/../.."

mode=()
case ${1:-} in
  --verify) mode=(--check) ;;
  "") ;;
  *) echo "usage: $0 [--verify]" >&2; exit 2 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT
go build -o "${work}/" ./cmd/updater ./cmd/admission-controller
helps=()
for bin in updater admission-controller; do
  # --help prints the usage and exits 0; the text goes to stderr.
  # POD_NAMESPACE is unset: it changes the defaults of the namespace flags.
  env -u POD_NAMESPACE "${work}/${bin}" --help >"${work}/${bin}.help" 2>&1
  helps+=("${bin}=${work}/${bin}.help")
done
if ! python3 hack/docs/flags.py "${mode[@]}" docs/flags.md "${helps[@]}" >"${work}/diff"; then
  echo "docs/flags.md differs from the binaries' --help: run make update-flags" >&2
  cat "${work}/diff" >&2
  exit 1
fi
