#!/usr/bin/env bash
# hack/rules-test.sh — check and unit-test the rule files in rules/ with promtool (found or built
# by hack/servers.sh): `promtool check rules` lints every rule file, `promtool test rules` runs
# the test cases in rules/tests/.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROMTOOL=${PROMTOOL:-$("$ROOT/hack/servers.sh" prometheus)/promtool}
cd "$ROOT/rules"
"$PROMTOOL" check rules ./*.yaml
"$PROMTOOL" test rules tests/*.yaml
