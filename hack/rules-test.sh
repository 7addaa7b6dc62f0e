#!/usr/bin/env bash
# hack/rules-test.sh [check|test|all] — check and unit-test the rule files in rules/ with promtool (found or built
# by hack/servers.sh): `promtool check rules` lints every rule file, `promtool test rules` runs
# the test cases in rules/tests/.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROMTOOL=${PROMTOOL:-$("$ROOT/hack/servers.sh" prometheus)/promtool}
cd "$ROOT/rules"
case ${1:-all} in
  check) "$PROMTOOL" check rules ./*.yaml ;;
  test)  "$PROMTOOL" test rules tests/*.yaml ;;
  all)   "$PROMTOOL" check rules ./*.yaml && "$PROMTOOL" test rules tests/*.yaml ;;
  *)     echo "usage: $0 [check|test|all]" >&2; exit 2 ;;
esac
