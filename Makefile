# debi — predictive autoscaler for Kubernetes. `make help` lists the targets.
GO        ?= go
BIN       ?= bin
PKGS      ?= ./...
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BRANCH    ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -X github.com/prometheus/common/version.Version=$(VERSION) \
             -X github.com/prometheus/common/version.Revision=$(REVISION) \
             -X github.com/prometheus/common/version.Branch=$(BRANCH) \
             -X github.com/prometheus/common/version.BuildUser=debi \
             -X github.com/prometheus/common/version.BuildDate=$(shell date -u +%Y%m%d-%H:%M:%S)
BENCHTIME ?= 1x
FUZZTIME  ?= 10m
# Fuzz targets as package:Target, run one after another by `make fuzz`.
FUZZ_TARGETS ?= ./webhook:FuzzDecodeAlertmanager ./webhook:FuzzDecodeTidal ./config:FuzzLoad ./tidal/schedule:FuzzParse

.PHONY: all build test unit-test integration-test bench fuzz lint format rules-check rules-test dashboards generate helm-lint e2e demo servers bench-fleet results results-budget results-oos same-decisions help

all: format lint build test ## format, lint, build and test

build: ## build bin/debi
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/debi ./cmd/debi

demo: ## run the main job on the embedded traces: the backtest comparison (no cluster needed)
	$(GO) run ./cmd/debi backtest

test: ## every test: unit, rules (promtool) and integration against real Prometheus, Alertmanager and kube-apiserver (builds them once, cached outside the clone)
	hack/test.sh

unit-test: ## unit tests only (no servers)
	$(GO) test -count=1 $(PKGS)

bench: ## benchmarks (figures for the closing notes)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

fuzz: ## every fuzz target for FUZZTIME (10m) each, one after another (new inputs in the Go cache, crashes in testdata/fuzz/)
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

lint: ## go vet and gofmt check
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

format: ## gofmt every Go file
	gofmt -w $$(git ls-files '*.go')

rules-check: ## promtool check rules
	hack/rules-test.sh check

rules-test: ## promtool test rules
	hack/rules-test.sh test

bench-fleet: ## the exporter at fleet scale against a real Prometheus: make bench-fleet N=1000 (or N=10000; METRICS=2 for two metrics per policy) prints policies=… loop_seconds=… queries_per_interval=… (hack/bench-fleet.sh)
	hack/bench-fleet.sh $(or $(N),1000)

hpa-diff: ## differential test of scaling.HPA against the real Kubernetes v1.37.2 HPA controller (hack/hpadiff)
	hack/hpadiff.sh

dashboards: ## regenerate grafana/*.json from the Go definitions in grafana/
	$(GO) run ./hack/gen-dashboards

generate: dashboards ## regenerate dashboards, deploy/'s PrometheusRule and dashboard ConfigMaps, docs/configuration.md
	$(GO) run ./hack/gen-deploy
	$(GO) run ./hack/gen-docs

helm-lint: ## helm lint and template deploy/helm/debi (builds helm once, cached outside the clone)
	DEBI_HELM_DIR=$$(hack/servers.sh helm) $(GO) test -count=1 -run 'TestHelm' ./deploy/

e2e: ## the closed loop on real servers: simulator → Prometheus → exporter → Alertmanager → webhook → kube-apiserver
	DEBI_PROMETHEUS_DIR=$$(hack/servers.sh prometheus) DEBI_ALERTMANAGER_DIR=$$(hack/servers.sh alertmanager) \
	DEBI_K8S_ASSETS=$$(hack/k8s-env.sh build) DEBI_REQUIRE_INTEGRATION=1 $(GO) test -count=1 -v -run TestClosedLoop ./e2e

results: ## regenerate docs/results.md: the paper's table on every trace of ../shared/traces (15–30 min)
	hack/results.sh

results-budget: ## regenerate docs/results-budget.md: budget at 0.5/1/2 %, three start-ups, every model (≈ 20 min)
	hack/budget-results.sh

same-decisions: ## a change that should change no decision: backtest reports at BASE (default origin/main) and the working tree compared (≈ 30 min)
	hack/same-decisions.sh $(BASE)

results-oos: ## the out-of-sample section of docs/results-budget.md: candidates chosen on one half of the traces, reported on the other, both demand models (15–30 min)
	hack/results-oos.sh

servers: ## build Prometheus, Alertmanager, kube-apiserver, etcd and helm from the Go module proxy (cached)
	hack/servers.sh all

help: ## this list
	@grep -E '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-18s %s\n", $$1, $$2}'

# The container image, without Docker (hack/image). Every timestamp is SOURCE_DATE_EPOCH (default:
# the commit time), BuildDate included, so two builds of one commit give the same digest.
# IMAGE_PLATFORMS=linux/amd64 builds one platform (no arm64 cross-build: minutes less on a cold
# cache). The tag is IMAGE_TAG, the chart's appVersion, which the chart and kustomize pull and the
# release publishes: one string from deploy/helm/debi/Chart.yaml (deploy.TestOneImageTag).
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_TAG       ?= $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$$/\1/p' deploy/helm/debi/Chart.yaml)
.PHONY: image image-test image-tag

image: ## the image without Docker: bin/image/ (OCI layout, IMAGE_PLATFORMS; IMAGE_PLATFORMS=linux/amd64 for one) and bin/debi-image.tar (docker load), tagged IMAGE_TAG; prints progress and the digests
	@echo "make image: ghcr.io/debi-scaler/debi:$(IMAGE_TAG) for $(IMAGE_PLATFORMS) (debi $(VERSION)); IMAGE_PLATFORMS=linux/amd64 skips the arm64 cross-build" >&2
	hack/image.sh build --version '$(IMAGE_TAG)' --revision '$(REVISION)' --ldflags '$(LDFLAGS)' --platforms '$(IMAGE_PLATFORMS)'

image-tag: ## print the image tag (the chart's appVersion)
	@echo '$(IMAGE_TAG)'

image-test: ## the image's test: validate the layout, run debi from the layer, same digest twice
	hack/image.sh test
