# AWARE for Kubernetes. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

BIN        ?= bin
BINARIES   := recommender updater admission-controller rl-agent
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -s -w -X github.com/aware-k8s/aware/pkg/version.Version=$(VERSION)
# Packages under test: everything except the e2e suite, which needs a
# control plane (make e2e).
UNIT_PKGS  = $(shell go list ./... | grep -v '/e2e')

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the four binaries into bin/.
	@mkdir -p $(BIN)
	go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./,$(BINARIES))

.PHONY: check
check: ## Everything CI runs, set-up included: deps, unit tests, verify, lint, fuzz, e2e.
	hack/install-deps_test.sh
	hack/e2e_test.sh
	hack/install-deps.sh
	$(MAKE) test
	$(MAKE) verify
	$(MAKE) lint
	$(MAKE) fuzz
	@# Builds the control plane from its Go modules on the first run (cached
	@# in ~/.cache/aware by version), then runs the end-to-end tests on it.
	$(MAKE) e2e

.PHONY: deps
deps: ## Install the Debian packages and pinned Go tools the tests need, and check them by name.
	hack/install-deps.sh

.PHONY: test
test: ## Run unit and integration tests with the race detector (not e2e).
	go test -race -count=1 -timeout 20m $(UNIT_PKGS)
	@# Single-goroutine learning tests that the race detector slows 20-fold
	@# are built with !race; run them here so they still gate every change.
	go test -count=1 -timeout 10m -run 'AdaptsFaster' ./pkg/policy/
	@# The VPA benchmark's report glue is built with its tag only (make bench-vpa).
	go test -race -count=1 -tags benchvpa ./hack/benchvpa/

.PHONY: fuzz
fuzz: ## Run every fuzz target with a budget of FUZZTIME each (default 30000x executions).
	hack/fuzz.sh

.PHONY: fuzz-long
fuzz-long: ## Run every fuzz target (or FUZZ_TARGETS, a regexp) for 10 million executions each; hours on 2 cores, not in CI.
	FUZZTIME=10000000x FUZZ_TEST_TIMEOUT=0 hack/fuzz.sh

.PHONY: generate
generate: ## Regenerate deepcopy, clients, CRDs and protobuf code.
	hack/update-codegen.sh

.PHONY: verify
verify: ## Fail if any generated file is out of date, go.mod is not tidy or gofmt would change code.
	hack/verify-codegen.sh
	@go mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	@grep -q 'Apache License' LICENSE && grep -q 'Copyright The AWARE for Kubernetes Authors' LICENSE || \
		{ echo "LICENSE must be Apache-2.0, copyright The AWARE for Kubernetes Authors"; exit 1; }
	@out="$$(gofmt -l .)"; \
	if [[ -n "$$out" ]]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

.PHONY: lint
lint: ## Run go vet and the pinned staticcheck (e2e files included).
	go vet ./...
	go vet -tags e2e ./e2e/...
	go vet -tags benchvpa ./hack/benchvpa/...
	source hack/tools.sh && aware::tools::build && "$$TOOLS_BIN/staticcheck" $$(go list ./... | grep -v '/pkg/generated/') && "$$TOOLS_BIN/staticcheck" -tags e2e ./e2e/... && "$$TOOLS_BIN/staticcheck" -tags benchvpa ./hack/benchvpa/...

.PHONY: demo
demo: build ## Run the simulator demo: default policies vs the oracle, with plots.
	$(BIN)/rl-agent demo

.PHONY: testbed-up
testbed-up: ## Start a loopback control plane (builds and caches the binaries).
	hack/testbed/up.sh

.PHONY: testbed-down
testbed-down: ## Stop the loopback control plane.
	hack/testbed/down.sh

.PHONY: e2e
e2e: ## Run the end-to-end tests against a loopback control plane.
	hack/e2e.sh

.PHONY: bench-vpa
bench-vpa: ## Benchmark AWARE against VPA (built from the Go module proxy) on a loopback control plane; slow, not in check. docs/performance.md.
	hack/bench-vpa.sh $(BENCH_VPA_ARGS)

.PHONY: clean
clean: ## Remove build outputs.
	rm -rf $(BIN)
