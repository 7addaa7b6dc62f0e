#!/usr/bin/env bash
# hack/same-decisions.sh [BASE] — the decision-identity check of a change that should not change
# any decision (a reorganisation, a refactoring): debi built at BASE (default: origin/main, else
# HEAD~1) and at the working tree replays the embedded traces and, when ../shared is there, every
# shared trace, under both demand models, every non-neural policy, and the start-up sweep; then
# hack/samedecisions compares the reports field by field, timing left out. The neural policies are
# not compared: their training stops at a wall-clock time budget, so two runs of one binary
# differ. NEW lists fields the working tree may add (a new column or parameter). About 15 minutes
# a binary on two cores. Exits 1 when a decision differs.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BASE=${1:-$(git rev-parse --verify -q origin/main || git rev-parse HEAD~1)}
NEW=${NEW:-}
OUT=${OUT:-$(mktemp -d)}
P=hpa,apa,debi,budget,oracle,evt-holtwinters-hpa,holtwinters-hpa,holtwinters-budget,arima-debi,arima-budget,evt-arima-hpa,naive-debi,naive-budget,evt-naive-hpa,seasonal-naive-debi,seasonal-naive-budget,seasonal-naive-hpa
echo "same-decisions: $(git rev-parse --short "$BASE") against the working tree, reports in $OUT" >&2
wt="$OUT/base-src"
git worktree add -q --detach "$wt" "$BASE"
trap 'git worktree remove --force "$wt"' EXIT
(cd "$wt" && go build -o "$OUT/debi-base" ./cmd/debi)
go build -o "$OUT/debi-head" ./cmd/debi
shared=()
if [ -d ../shared/traces ]; then
  for f in ../shared/traces/*.csv; do [ "$(basename "$f")" = index.csv ] || shared+=(--trace="$f"); done
else
  echo "same-decisions: ../shared/traces absent: the embedded traces only" >&2
fi
status=0
for side in base head; do
  bin="$OUT/debi-$side"
  for d in linear step; do
    echo "same-decisions: $side, $d demand" >&2
    "$bin" backtest --format json --demand $d --policies $P > "$OUT/$side-emb-$d.json" 2> "$OUT/$side-emb-$d.err"
    [ ${#shared[@]} -eq 0 ] || "$bin" backtest --format json --demand $d --policies $P "${shared[@]}" > "$OUT/$side-shared-$d.json" 2> "$OUT/$side-shared-$d.err"
  done
  "$bin" backtest --format json --startup-sweep 30s,5m --policies hpa,debi,budget > "$OUT/$side-sweep.json" 2> "$OUT/$side-sweep.err"
done
for f in "$OUT"/base-*.json; do
  go run ./hack/samedecisions -new "$NEW" "$f" "${f/base-/head-}" || status=1
done
for f in "$OUT"/base-*.err; do # the warnings too
  cmp -s "$f" "${f/base-/head-}" || { echo "same-decisions: the warnings differ: diff $f ${f/base-/head-}"; status=1; }
done
exit $status
