#!/usr/bin/env bash
# Checks alerts.yml (and the dashboard's queries) with Prometheus' own tool: `promtool check rules` (the YAML, every PromQL
# expression, the templates) and `promtool test rules alerts.test.yml` (each alert fires on the
# series meant to fire it, with its labels and text, and not on the others). The names of the
# series the rules and the dashboard use are checked against the library's by a test of the
# facade (tests/facade/alerts.rs).
#
#   bash examples/axum_service/check-alerts.sh
#
# Needs `promtool` (Debian: apt-get install prometheus).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
command -v promtool >/dev/null || { echo "needs promtool: apt-get install prometheus" >&2; exit 2; }
cd "$here"
promtool check rules alerts.yml
promtool test rules alerts.test.yml

# The dashboard's queries, as recording rules with Grafana's variables filled in: the same
# PromQL check for each of them.
rules="$(mktemp)"
trap 'rm -f "$rules"' EXIT
python3 - grafana/dashboard.json >"$rules" <<'PY'
import json, sys
panels = json.load(open(sys.argv[1]))["panels"]
print("groups:\n  - name: dashboard\n    rules:")
for panel in panels:
    for target in panel["targets"]:
        expr = target["expr"].replace("$__rate_interval", "1m").replace("$lock", ".*")
        print(f"      - record: dashboard:panel{panel['id']}:{target['refId']}")
        print(f"        expr: {json.dumps(expr)}")
PY
echo "Checking grafana/dashboard.json's queries"
promtool check rules "$rules" | sed 's|^  SUCCESS: \([0-9]*\) rules found|  SUCCESS: \1 queries|' | grep -v '^Checking'
