#!/usr/bin/env bash
# Tests the chart's alerting rules with Prometheus' own `promtool`: renders
# the PrometheusRule with the chart's default thresholds, checks the rules
# (`promtool check rules`) and runs the unit tests of rules-test.yaml
# (`promtool test rules`) on them.
#
# Usage: hack/monitoring/test-rules.sh [HELM PROMTOOL [CHART_DIR]]
#        (default: the pinned tools of hack/tools/install.sh, charts/vpa-inplace)
set -o errexit -o nounset -o pipefail
cd "$(dirname "$0")/../.."

if [[ $# -ge 2 ]]; then
  helm=$1 promtool=$2
else
  { read -r helm; read -r promtool; } < <(hack/tools/install.sh helm promtool)
fi
chart=${3:-charts/vpa-inplace}
work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT

# The PrometheusRule's spec is a Prometheus rule file, indented by two spaces.
"${helm}" template vpa-inplace "${chart}" --namespace vpa-inplace-system \
  --set prometheusRule.enabled=true --show-only templates/prometheusrule.yaml >"${work}/rule.yaml"
awk '/^spec:/ { inspec = 1; next } inspec { sub(/^  /, ""); print }' "${work}/rule.yaml" >"${work}/vpa-inplace.rules.yaml"
grep -q '^groups:' "${work}/vpa-inplace.rules.yaml" || { echo "FAIL: no rule groups in the rendered PrometheusRule"; exit 1; }
cp hack/monitoring/rules-test.yaml "${work}/"

status=0
"${promtool}" check rules "${work}/vpa-inplace.rules.yaml" || status=1
(cd "${work}" && "${promtool}" test rules rules-test.yaml) || status=1
if [[ ${status} -ne 0 ]]; then
  echo "FAIL: the chart's alerting rules (hack/monitoring/rules-test.yaml)"
  exit 1
fi
echo "OK: the chart's alerting rules pass promtool check rules and test rules"
