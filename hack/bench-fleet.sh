#!/usr/bin/env bash
# hack/bench-fleet.sh — the exporter at fleet scale against a real Prometheus 3.x (issue 14,
# docs/fleet.md): N Deployments' cAdvisor and kube-state-metrics series scraped and recorded
# by rules/, N debi policies (holtwinters, retraining in the background) in one `debi exporter`
# on one core (GOMAXPROCS=1). Prints one line per run:
#   policies=N loop_seconds=… queries_per_interval=… bytes_per_policy=… prometheus_query_seconds=… …
#
# Usage: hack/bench-fleet.sh [N] (or make bench-fleet N=10000). Settings from the environment:
#   INTERVAL (15s), STEPS (loops measured, 8), RETRAIN (history steps of 1 m between trainings, 2),
#   SOAK (e.g. 1h: run that long and write heap profiles before/after into OUT), OUT,
#   BATCH=false (every policy queried on its own: the A/B against batched queries),
#   METRICS=2 (every policy scales on CPU and on requests per second: two runners, five templates).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-${N:-1000}}
DEBI_PROMETHEUS_DIR=${DEBI_PROMETHEUS_DIR:-$(hack/servers.sh prometheus)}
export DEBI_PROMETHEUS_DIR DEBI_REQUIRE_INTEGRATION=1
export DEBI_FLEET_N=$N DEBI_FLEET_INTERVAL=${INTERVAL:-15s} DEBI_FLEET_STEPS=${STEPS:-8} DEBI_FLEET_RETRAIN=${RETRAIN:-2}
export DEBI_FLEET_SOAK=${SOAK:-0s} DEBI_FLEET_OUT=${OUT:-} DEBI_FLEET_BATCH=${BATCH:-true} DEBI_FLEET_METRICS=${METRICS:-1}
timeout=90m
go test -count=1 -timeout "$timeout" -run '^TestFleet$' -v ./exporter/ | grep -E '^(FLEET|--- |FAIL|ok)' | sed 's/^FLEET //'
