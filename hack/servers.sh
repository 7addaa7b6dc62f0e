#!/usr/bin/env bash
# hack/servers.sh prometheus|alertmanager|k8s|helm|all — build the real servers the integration tests
# run, from the Go module proxy, into a cache outside the clone keyed on version. Prints the
# directory holding the binaries on stdout; progress goes to stderr.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${DEBI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/debi}
PROM_MODULE=${PROM_MODULE:-v0.316.0}     # Prometheus 3.16.0
AM_VERSION=${AM_VERSION:-v0.35.0}
HELM_VERSION=${HELM_VERSION:-v3.22.0}
now() { date +%s; }

# progress prints a line every 30 s while a long build runs, so CI logs never look hung.
progress() {
  local what=$1 pid=$2 t0; t0=$(now)
  while kill -0 "$pid" 2>/dev/null; do
    sleep 30; kill -0 "$pid" 2>/dev/null && echo "  ... still building $what ($(( $(now) - t0 ))s)" >&2
  done
  wait "$pid"
}

prometheus() {
  local dest=$CACHE/prometheus-$PROM_MODULE
  if [ -x "$dest/prometheus" ] && [ -x "$dest/promtool" ]; then echo "$dest"; return; fi
  local m=${PROM_MODULE#v0.}; local pv=3.$(( ${m%%.*} - 300 )).${PROM_MODULE##*.}
  echo "building Prometheus $pv + promtool from the Go module proxy (≈11 min on 2 cores, once per machine)" >&2
  local t0; t0=$(now); mkdir -p "$dest.tmp"
  GOFLAGS=-buildvcs=false GOBIN=$dest.tmp go install -tags remove_all_sd -trimpath \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$pv" \
    github.com/prometheus/prometheus/cmd/prometheus@$PROM_MODULE \
    github.com/prometheus/prometheus/cmd/promtool@$PROM_MODULE >&2 &
  progress prometheus $!
  rm -rf "$dest"; mv "$dest.tmp" "$dest"
  echo "built Prometheus in $(( $(now) - t0 ))s" >&2; echo "$dest"
}

alertmanager() {
  local dest=$CACHE/alertmanager-$AM_VERSION
  if [ -x "$dest/alertmanager" ] && [ -x "$dest/amtool" ]; then echo "$dest"; return; fi
  echo "building Alertmanager $AM_VERSION from the Go module proxy (≈3 min, once per machine)" >&2
  local t0; t0=$(now)
  local dir; dir=$(go mod download -json "github.com/prometheus/alertmanager@$AM_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",/\1/p')
  local src; src=$(mktemp -d)/alertmanager; cp -r "$dir" "$src"; chmod -R u+w "$src"
  # The module zip lacks the built web UI; the HTTP API does not need it.
  mkdir -p "$src/ui/app/dist/elm" "$src/ui/app/dist/mantine"
  echo '<html>UI not built</html>' | tee "$src/ui/app/dist/elm/index.html" > "$src/ui/app/dist/mantine/index.html" >/dev/null
  mkdir -p "$dest.tmp"
  (cd "$src" && GOFLAGS=-buildvcs=false go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=${AM_VERSION#v}" \
     -o "$dest.tmp/alertmanager" ./cmd/alertmanager && \
   GOFLAGS=-buildvcs=false go build -trimpath -o "$dest.tmp/amtool" ./cmd/amtool) >&2 &
  progress alertmanager $!
  rm -rf "$dest" "${src%/alertmanager}"; mv "$dest.tmp" "$dest"
  echo "built Alertmanager in $(( $(now) - t0 ))s" >&2; echo "$dest"
}

# helm is only a test tool (helm lint, helm template of deploy/helm/debi): built with go install
# so it never enters debi's go.mod.
helm() {
  local dest=$CACHE/helm-$HELM_VERSION
  if [ -x "$dest/helm" ]; then echo "$dest"; return; fi
  echo "building helm $HELM_VERSION from the Go module proxy (≈4 min on 2 cores, once per machine)" >&2
  local t0; t0=$(now); mkdir -p "$dest.tmp"
  GOFLAGS=-buildvcs=false GOBIN=$dest.tmp go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    helm.sh/helm/v3/cmd/helm@$HELM_VERSION >&2 &
  progress helm $!
  rm -rf "$dest"; mv "$dest.tmp" "$dest"
  echo "built helm in $(( $(now) - t0 ))s" >&2; echo "$dest"
}

k8s() {
  echo "kube-apiserver + etcd: see hack/k8s-env.sh (12–20 min the first time on 2 cores)" >&2
  "$HERE/k8s-env.sh" build
}

all() { alertmanager; prometheus; k8s; helm; }

"${1:-all}"
