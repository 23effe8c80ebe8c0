#!/usr/bin/env bash
# Tests the chart's alerting rules with Prometheus' own `promtool`: renders
# the PrometheusRule (release vpa-inplace in vpa-inplace-system, default
# thresholds) twice, with the chart's ServiceMonitors and without them,
# checks the rules (`promtool check rules`) and runs the unit tests on them
# (`promtool test rules`): rules-test.yaml on the first,
# rules-test-without-servicemonitor.yaml on the second. Every input series
# of rules-test.yaml must carry the labels a scrape through the chart's
# ServiceMonitor gives it (checked below against the rendered Service,
# ServiceMonitor and Deployment), so the rules are tested with the labels
# they will really see.
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

# rules FILE ARGS...: the PrometheusRule's spec, a Prometheus rule file
# indented by two spaces, rendered with ARGS.
rules() {
  local out=$1
  shift
  "${helm}" template vpa-inplace "${chart}" --namespace vpa-inplace-system \
    --set prometheusRule.enabled=true "$@" --show-only templates/prometheusrule.yaml >"${work}/rule.yaml"
  awk '/^spec:/ { inspec = 1; next } inspec { sub(/^  /, ""); print }' "${work}/rule.yaml" >"${work}/${out}"
  grep -q '^groups:' "${work}/${out}" || { echo "FAIL: no rule groups in the rendered PrometheusRule"; exit 1; }
}
monitors=(--set updater.serviceMonitor.enabled=true --set admissionController.serviceMonitor.enabled=true)
rules vpa-inplace.rules.yaml "${monitors[@]}"
rules vpa-inplace-unscraped.rules.yaml
cp hack/monitoring/rules-test.yaml hack/monitoring/rules-test-without-servicemonitor.yaml "${work}/"

status=0
# The target labels of each component's scrape: the Service's name (job and
# service), the ServiceMonitor endpoint's port (endpoint), the container.
"${helm}" template vpa-inplace "${chart}" --namespace vpa-inplace-system "${monitors[@]}" >"${work}/chart.yaml"
python3 - "${work}/chart.yaml" hack/monitoring/rules-test.yaml <<'PY' || status=1
import re, sys
chart, tests = open(sys.argv[1]).read(), open(sys.argv[2]).read()
docs = re.split(r"(?m)^---\s*$", chart)
def doc(kind, name_part):
    for d in docs:
        m = re.search(r"(?m)^kind: (\w+)\s*$", d)
        n = re.search(r"(?m)^  name: (\S+)\s*$", d)
        if m and n and m.group(1) == kind and name_part in n.group(1):
            return d, n.group(1)
    sys.exit(f"FAIL: no {kind} *{name_part}* in the rendered chart")
want = {}
for prefix, component in (("vpa_inplace_updater_", "updater"), ("vpa_inplace_admission_", "admission")):
    _, service = doc("Service", f"{component}-metrics")
    sm, _ = doc("ServiceMonitor", component)
    port = re.search(r"(?m)^    - port: (\S+)\s*$", sm).group(1)
    dep, _ = doc("Deployment", component)
    container = re.search(r"(?m)^        - name: (\S+)\s*$", dep).group(1)
    want[prefix] = {"job": service, "service": service, "endpoint": port, "container": container,
                    "namespace": "vpa-inplace-system"}
bad = 0
target = ("job", "instance", "namespace", "service", "pod", "container", "endpoint")
for name, labels in re.findall(r"- series: '(\w+)\{([^}]*)\}'", tests):
    got = dict(re.findall(r'(\w+)="([^"]*)"', labels))
    for prefix, w in want.items():
        if not name.startswith(prefix):
            continue
        # Every series has the target labels; those of this release (the
        # others stand for another release) their values.
        missing = [k for k in target if not got.get(k)]
        if got.get("namespace") == "vpa-inplace-system":
            missing += [f"{k}={v}" for k, v in w.items() if got.get(k) != v]
        if missing:
            print(f"FAIL: rules-test.yaml series {name}{{{labels}}} lacks the scrape's labels: {missing}")
            bad = 1
if bad:
    sys.exit(1)
PY
for f in vpa-inplace.rules.yaml vpa-inplace-unscraped.rules.yaml; do
  "${promtool}" check rules "${work}/${f}" || status=1
done
(cd "${work}" && "${promtool}" test rules rules-test.yaml rules-test-without-servicemonitor.yaml) || status=1
if [[ ${status} -ne 0 ]]; then
  echo "FAIL: the chart's alerting rules (hack/monitoring/rules-test*.yaml)"
  exit 1
fi
echo "OK: the chart's alerting rules pass promtool check rules and test rules, with the labels of the chart's scrape"
