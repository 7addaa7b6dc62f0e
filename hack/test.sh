#!/usr/bin/env bash
# hack/test.sh — every test of debi: unit tests, the rule files through promtool, and the
# integration tests against real Prometheus, Alertmanager and kube-apiserver + etcd on
# 127.0.0.1. The servers are built from the Go module proxy the first time (≈15–30 min on two
# cores, with progress lines) and cached outside the clone; later runs reuse them.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== servers (built once per machine, cached in ${DEBI_CACHE:-$HOME/.cache/debi} and ~/.cache/k8s-assets)"
DEBI_PROMETHEUS_DIR=$(hack/servers.sh prometheus)
DEBI_ALERTMANAGER_DIR=$(hack/servers.sh alertmanager)
DEBI_K8S_ASSETS=$(hack/k8s-env.sh build)
export DEBI_PROMETHEUS_DIR DEBI_ALERTMANAGER_DIR DEBI_K8S_ASSETS
DEBI_HELM_DIR=$(hack/servers.sh helm); export DEBI_HELM_DIR   # helm lint/template of deploy/helm/debi
# With the servers present an integration test that skips is a failure, not a pass.
export DEBI_REQUIRE_INTEGRATION=1
echo "   prometheus:   $DEBI_PROMETHEUS_DIR"
echo "   alertmanager: $DEBI_ALERTMANAGER_DIR"
echo "   kube-apiserver + etcd: $DEBI_K8S_ASSETS"
if [ -x hack/rules-test.sh ]; then
  echo "== rules: promtool check rules + promtool test rules"
  hack/rules-test.sh
fi
echo "== differential HPA test against k8s.io/kubernetes v1.37.2"
hack/hpadiff.sh
echo "== image: built without Docker, validated, run, reproducible (hack/image)"
hack/image.sh test
echo "== go test"
go test -count=1 -timeout 20m ${GOTESTFLAGS:-} ./...
# A count, not a duration: with a duration -fuzztime, Go 1.26's fuzz
# coordinator can fail a target with a bare "context deadline exceeded" when a
# starved worker misses the deadline (golang/go#75804, fixed in Go 1.27) — it
# failed CI once on this 2-core machine with nothing found. A count has no
# wall-clock deadline to race.
echo "== fuzz: every target for ${FUZZTIME:-10000x} executions (make fuzz runs them for 10m)"
${MAKE:-make} --no-print-directory fuzz FUZZTIME="${FUZZTIME:-10000x}"
