#!/usr/bin/env bash
# hack/image.sh — debi's container image, built without Docker by hack/image (its own module, so
# go-containerregistry never enters debi's go.mod; see hack/image/README.md).
#   hack/image.sh build [flags]   bin/image/ (OCI image layout) and bin/debi-image.tar (docker load);
#                                 `make image` passes the Makefile's VERSION, REVISION and LDFLAGS
#   hack/image.sh test            go test in hack/image: builds the image twice (same digest),
#                                 validates the layout and runs debi from the layer
# Timestamps are SOURCE_DATE_EPOCH, default the commit time of HEAD. The first run compiles
# go-containerregistry (under a minute); later runs reuse the build cache.
set -euo pipefail
cd "$(dirname "$0")/image"
now() { date +%s; }
cmd=${1:-build}; [ $# -gt 0 ] && shift
case "$cmd" in
build)
  exec go run . "$@"
  ;;
test)
  t0=$(now)
  go test -count=1 ${IMAGE_TESTFLAGS:-} ./...
  echo "image: layout valid, debi ran from the layer, two builds gave the same digest ($(( $(now) - t0 ))s)" >&2
  ;;
*)
  echo "usage: hack/image.sh build [flags] | test" >&2; exit 2
  ;;
esac
