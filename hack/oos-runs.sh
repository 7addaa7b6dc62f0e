#!/usr/bin/env bash
# hack/oos-runs.sh — the backtest runs behind make results-oos: every candidate setting of the
# budget policy on every trace of the collection, under --demand linear and --demand step, one
# JSON report per (candidate, demand) in $CACHE (kept: a rerun only runs what is missing).
# Candidates are lines "name|flags" in $CANDIDATES (default: hack/oos-candidates.txt).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TRACES=${TRACES:-$ROOT/../shared/traces}
CACHE=${CACHE:-$ROOT/bin/oos}
CANDIDATES=${CANDIDATES:-$ROOT/hack/oos-candidates.txt}
BIN=${BIN:-$ROOT/bin/debi}
COMMON=${COMMON:---max-steps 8064}
if [ ! -d "$TRACES" ]; then echo "no trace directory $TRACES (the shared traces are not shipped)" >&2; exit 1; fi
mkdir -p "$CACHE"
args=()
for f in "$TRACES"/*_*.csv; do args+=(--trace "$f"); done
run() { # name demand policies flags...
  local name=$1 demand=$2 policies=$3; shift 3
  local out="$CACHE/$name-$demand.json"
  [ -s "$out" ] && return 0
  echo "oos-runs: $name, demand $demand" >&2
  # shellcheck disable=SC2086
  "$BIN" backtest "${args[@]}" --policies "$policies" --demand "$demand" $COMMON "$@" --format json > "$out.tmp"
  mv "$out.tmp" "$out"
}
for demand in linear step; do
  # The yardstick: the default budget beside the clairvoyant diagnostics (and the oracle, always).
  run yardstick "$demand" hpa,budget,clairvoyant-0s-budget,clairvoyant-15m-budget,clairvoyant-1h-budget
done
while IFS='|' read -r name flags; do
  case $name in ''|'#'*|default) continue ;; esac # default: the yardstick's budget
  for demand in linear step; do
    # shellcheck disable=SC2086
    run "$name" "$demand" hpa,budget $flags
  done
done < "$CANDIDATES"
