#!/usr/bin/env bash
# hack/hpadiff.sh — the differential test of scaling.HPA against the Kubernetes HPA controller
# itself (k8s.io/kubernetes v1.37.2, driven on fake clients in a testing/synctest bubble). It is
# its own module, hack/hpadiff, so k8s.io/kubernetes never enters debi's go.mod. The first run
# compiles the controller and its dependencies (a few minutes on two cores, progress every 30 s);
# later runs reuse the build cache. HPADIFF_TRACE=1 logs every scenario's replica sequence.
set -euo pipefail
cd "$(dirname "$0")/hpadiff"
now() { date +%s; }

# progress prints a line every 30 s while the test compiles and runs, so CI logs never look hung
# (it polls every second, so a warm run does not wait for the next 30 s mark).
progress() {
  local what=$1 pid=$2 t0 n=0; t0=$(now)
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1; n=$((n + 1))
    if (( n % 30 == 0 )) && kill -0 "$pid" 2>/dev/null; then
      echo "  ... still building/running $what ($(( $(now) - t0 ))s)" >&2
    fi
  done
  wait "$pid"
}

t0=$(now)
(GOFLAGS=-buildvcs=false go test -count=1 -v ${HPADIFF_TESTFLAGS:-} ./... | grep -v -E '^(=== (RUN|NAME)|    --- PASS)') &
progress "the differential HPA test" $!
echo "hpadiff: scaling.HPA matched the v1.37.2 controller at every sync ($(( $(now) - t0 ))s)" >&2
