# debi for those who build with Docker (BuildKit). The release image is built without Docker by
# `make image` (hack/image); this file gives the same binary — static, -trimpath, the Makefile's
# ldflags — on distroless's static base with its nonroot user 65532, the chart's runAsUser.
#
#   docker build \
#     --build-arg VERSION=$(git describe --tags --always --dirty) \
#     --build-arg REVISION=$(git rev-parse HEAD) \
#     --build-arg BRANCH=$(git rev-parse --abbrev-ref HEAD) \
#     --build-arg SOURCE_DATE_EPOCH=$(git log -1 --format=%ct) \
#     -t ghcr.io/debi-scaler/debi:dev .
#
# Multi-platform: docker buildx build --platform linux/amd64,linux/arm64 … (cross-compiled on the
# build platform, no emulation).
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/root/go/pkg/mod go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
ARG REVISION=unknown
ARG BRANCH=unknown
ARG SOURCE_DATE_EPOCH=0
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    BUILD_DATE=$(date -u -d "@${SOURCE_DATE_EPOCH}" +%Y%m%d-%H:%M:%S) && \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath -ldflags " \
      -X github.com/prometheus/common/version.Version=${VERSION} \
      -X github.com/prometheus/common/version.Revision=${REVISION} \
      -X github.com/prometheus/common/version.Branch=${BRANCH} \
      -X github.com/prometheus/common/version.BuildUser=debi \
      -X github.com/prometheus/common/version.BuildDate=${BUILD_DATE}" \
      -o /out/debi ./cmd/debi

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.source="https://github.com/debi-scaler/debi" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.title="debi" \
      org.opencontainers.image.description="Predictive Kubernetes autoscaler on Prometheus and Alertmanager: exporter, webhook and backtest in one static binary."
COPY --from=build /out/debi /debi
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/debi"]
