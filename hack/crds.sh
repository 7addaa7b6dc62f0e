#!/usr/bin/env bash
# hack/crds.sh [OUT_DIR] — regenerate the ElasticScaler and Tidal CRDs (deploy/crds/, or OUT_DIR)
# and the deepcopy functions (apis/*/v1alpha1/zz_generated.deepcopy.go) from the Go types in apis/.
#
# controller-gen (sigs.k8s.io/controller-tools, pinned in hack/crdgen/go.mod) is built from its
# own nested module, so it never enters debi's go.mod; the binary is cached outside the clone.
# With OUT_DIR only the CRDs are written there (the staleness test, apis/crds_test.go, uses it).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export GOFLAGS=${GOFLAGS:--buildvcs=false}
VERSION=$(awk '$1=="sigs.k8s.io/controller-tools"{print $2}' "$ROOT/hack/crdgen/go.mod")
BIN=${CONTROLLER_GEN:-${XDG_CACHE_HOME:-$HOME/.cache}/debi-tools/controller-gen-$VERSION}
if [ ! -x "$BIN" ]; then
  mkdir -p "$(dirname "$BIN")"
  (cd "$ROOT/hack/crdgen" && go build -o "$BIN.tmp" sigs.k8s.io/controller-tools/cmd/controller-gen)
  mv "$BIN.tmp" "$BIN"
fi
cd "$ROOT"
if [ $# -ge 1 ]; then
  exec "$BIN" crd paths=./apis/... output:crd:dir="$1"
fi
"$BIN" object paths=./apis/...
"$BIN" crd paths=./apis/... output:crd:dir=deploy/crds
