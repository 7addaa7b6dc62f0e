#!/usr/bin/env bash
# hack/results-oos.sh (make results-oos) — the generalisation discipline of issue 19: the budget
# policy's candidate settings (hack/oos-candidates.txt) on every trace of ../shared/traces under
# --demand linear and --demand step (hack/oos-runs.sh, cached in bin/oos), the default also at
# budgets 0.5 % and 2 %; then hack/oos splits the traces into two fixed halves (trace.Halves),
# chooses on each half, reports on the other and writes the section between the results-oos
# markers of docs/results-budget.md. About 50 minutes on two cores from an empty cache; a rerun only runs what is
# missing from bin/oos (delete it after changing the policy). Needs ../shared.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TRACES=${TRACES:-$ROOT/../shared/traces}
export TRACES CACHE=${CACHE:-$ROOT/bin/oos} BIN=${BIN:-$ROOT/bin/debi}
COMMON=${COMMON:---max-steps 8064}
# The ten traces the defaults were tuned on before issue 19 (marked ° in the tables).
IN_SAMPLE=${IN_SAMPLE:-azure_vm2019_total_cpu_5min,google2019_cell_avg_cpu_5min,azure_vm2017_vm1663289_avgcpu_5min,azure_vm2017_vm942980_avgcpu_5min,azure_vm2017_vm1471895_avgcpu_5min,azure_vm2017_vm1099406_avgcpu_5min,nasa_http_1995-07-01_to_07-27_rpm,wc98_1998-05-04_to_05-31_rpm,wc98_1998-07-01_to_07-02_nomatch_rpm,wc98_1998-06-22_to_06-28_rpm}
cd "$ROOT"
if [ ! -d "$TRACES" ]; then echo "no trace directory $TRACES (the shared traces are not shipped)" >&2; exit 1; fi
go build -o "$BIN" ./cmd/debi
COMMON=$COMMON hack/oos-runs.sh
args=()
for f in "$TRACES"/*_*.csv; do args+=(--trace "$f"); done
for b in 0.005 0.02; do
  for demand in linear step; do
    out="$CACHE/default-b$b-$demand.json"
    [ -s "$out" ] && continue
    echo "results-oos: default at budget $b, demand $demand" >&2
    # shellcheck disable=SC2086
    "$BIN" backtest "${args[@]}" --policies hpa,budget --demand "$demand" --budget.overload-budget "$b" $COMMON --format json > "$out.tmp"
    mv "$out.tmp" "$out"
  done
done
go run ./hack/oos --traces "$TRACES" --cache "$CACHE" --in-sample "$IN_SAMPLE" --out docs/results-budget.md
