#!/usr/bin/env bash
# Checks the documentation (make verify): every relative link and anchor of
# every Markdown file resolves (hack/docs/check-links.py), every test it
# names exists (hack/docs/check-test-names.py), and the flag
# reference, docs/flags.md, is what the binaries' --help says
# (hack/docs/flags.sh), and README.md stays within 250 lines. The checkers'
# own tests run first.
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/../.."

command -v python3 >/dev/null || { echo "error: python3 is not in PATH" >&2; exit 1; }
for t in hack/docs/check_links_test.py hack/docs/check_test_names_test.py hack/docs/flags_test.py; do
  if ! out=$(python3 "${t}" 2>&1); then
    echo "FAIL: ${t}:" >&2
    echo "${out}" | sed -e 's/^/    /' >&2
    exit 1
  fi
done
hack/docs/check-links.py
hack/docs/check-test-names.py
hack/docs/flags.sh --verify
# The README is the front door: its depth belongs in docs/.
readme_max=250
readme_lines=$(wc -l <README.md)
if ((readme_lines > readme_max)); then
  echo "README.md has ${readme_lines} lines, more than ${readme_max}: move the depth into docs/" >&2
  exit 1
fi
echo "docs: ok (links, test names, flags reference, README ${readme_lines} lines)"
