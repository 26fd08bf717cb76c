# AWARE for Kubernetes. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

BIN        ?= bin
BINARIES   := recommender updater admission-controller rl-agent
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS    := -s -w -X github.com/aware-k8s/aware/pkg/version.Version=$(VERSION)
# grpcnotrace leaves out gRPC's request tracing (golang.org/x/net/trace),
# which links html/template: executing templates makes the linker keep every
# exported method of every type, 21 MB more binary and resident memory
# (docs/results/performance.md).
GOTAGS     := grpcnotrace
# Images (make images, make push): one OCI layout per binary under
# IMAGE_DIR, named aware-BINARY:TAG as deploy/ and the Helm chart name them.
IMAGE_DIR  ?= $(BIN)/images
TAG        ?= $(VERSION)
REGISTRY   ?=
REVISION   ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# The commit time is the images' creation time: one commit, one digest.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_SOURCE := https://github.com/aware-k8s/aware
IMAGE_ARCH ?= $(shell go env GOARCH)
# Expanded once, as make starts (?= alone would run git at every use): a
# commit made while a long target runs (make bench-real builds the images
# and then installs them by TAG, an hour later for its last run) must not
# give the images one tag and their install another.
VERSION := $(VERSION)
TAG := $(TAG)
REVISION := $(REVISION)
SOURCE_DATE_EPOCH := $(SOURCE_DATE_EPOCH)
# The real-node benchmark's workload (e2e/cmd): built into images of their
# own by make images, kept apart from the product's BINARIES (not pushed,
# not in the Helm chart).
WORKLOAD_BINARIES := testapp loadgen
# Packages under test: everything except the e2e suite, which needs a
# control plane (make e2e); the workload's, the e2e framework's, the node install's, the emulator's and the soak's pure parts' unit tests need none.
UNIT_PKGS  = $(shell go list ./... | grep -v '/e2e') ./e2e/testapp/... ./e2e/loadgen/... ./e2e/framework/... ./e2e/nodeinstall/... ./e2e/emulator/... ./e2e/soak/...

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the four binaries into bin/.
	@mkdir -p $(BIN)
	go build -trimpath -tags $(GOTAGS) -ldflags '$(LDFLAGS)' -o $(BIN)/ $(addprefix ./,$(BINARIES))

.PHONY: images
images: images-workload ## Build one OCI image per binary (static, scratch base, user 65532) into bin/images/aware-BINARY (OCI layouts), and the workload's.
	@mkdir -p $(IMAGE_DIR)/bin
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) go build -trimpath -tags $(GOTAGS) -ldflags '$(LDFLAGS) -buildid=' -o $(IMAGE_DIR)/bin/ $(addprefix ./,$(BINARIES))
	go run ./hack/images build --binaries $(IMAGE_DIR)/bin --out $(IMAGE_DIR) --tag '$(TAG)' \
		--version '$(VERSION)' --revision '$(REVISION)' --source '$(IMAGE_SOURCE)' --epoch '$(SOURCE_DATE_EPOCH)' \
		--arch $(IMAGE_ARCH) $(BINARIES)

.PHONY: images-workload
images-workload: ## Build the real-node benchmark's workload images, aware-testapp and aware-loadgen, the same way (docs/real-node.md).
	@mkdir -p $(IMAGE_DIR)/bin-workload
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) go build -trimpath -tags $(GOTAGS) -ldflags '$(LDFLAGS) -buildid=' -o $(IMAGE_DIR)/bin-workload/ $(addprefix ./e2e/cmd/,$(WORKLOAD_BINARIES))
	go run ./hack/images build --binaries $(IMAGE_DIR)/bin-workload --out $(IMAGE_DIR) --tag '$(TAG)' \
		--version '$(VERSION)' --revision '$(REVISION)' --source '$(IMAGE_SOURCE)' --epoch '$(SOURCE_DATE_EPOCH)' \
		--arch $(IMAGE_ARCH) $(WORKLOAD_BINARIES)

.PHONY: images-test
images-test: images ## Build the images, then open each and check entrypoint, user, labels, size and that its binary runs.
	AWARE_IMAGES_DIR='$(abspath $(IMAGE_DIR))' AWARE_IMAGES_TAG='$(TAG)' AWARE_IMAGES_VERSION='$(VERSION)' \
		AWARE_IMAGES_REVISION='$(REVISION)' AWARE_IMAGES_SOURCE='$(IMAGE_SOURCE)' AWARE_IMAGES_WORKLOAD='$(WORKLOAD_BINARIES)' \
		go test -tags images -count=1 -run TestBuiltImages ./hack/images/

.PHONY: push
push: images ## Push the images to REGISTRY (e.g. make push REGISTRY=ghcr.io/example TAG=v0.1.0), as REGISTRY/aware-BINARY:TAG.
	@[[ -n '$(REGISTRY)' ]] || { echo "make push needs REGISTRY, e.g. make push REGISTRY=ghcr.io/example"; exit 1; }
	go run ./hack/images push --dir $(IMAGE_DIR) --registry '$(REGISTRY)' --tag '$(TAG)' $(BINARIES)

.PHONY: check
check: ## Everything CI runs, set-up included: deps, unit tests, verify, lint, fuzz, images, e2e.
	hack/install-deps_test.sh
	hack/release_test.sh
	hack/e2e_test.sh
	hack/install-deps.sh
	$(MAKE) test
	$(MAKE) verify
	$(MAKE) lint
	$(MAKE) fuzz
	$(MAKE) images-test
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
	go test -count=1 -timeout 10m -run 'AdaptsFaster' ./pkg/rl/nn/
	@# The benchmarks' glue is built with their tags only (make bench-vpa, make bench-real).
	go test -race -count=1 -tags benchvpa ./hack/benchvpa/
	go test -race -count=1 -tags benchreal ./hack/benchreal/

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
lint: ## Run go vet, the pinned staticcheck (e2e files included), make chart and make rules.
	go vet ./...
	go vet -tags e2e ./e2e/...
	go vet -tags 'e2e upgraderecord' ./e2e/
	go vet -tags 'e2e soak' ./e2e/
	go vet -tags e2enode ./e2e/node/
	go vet -tags images ./hack/images/
	go vet -tags chart ./deploy/helm/
	go vet -tags benchvpa ./hack/benchvpa/...
	go vet -tags benchwhatif ./recommender/app/
	go vet -tags benchreal ./hack/benchreal/
	source hack/tools.sh && aware::tools::build && "$$TOOLS_BIN/staticcheck" $$(go list ./... | grep -v '/pkg/generated/') && "$$TOOLS_BIN/staticcheck" -tags e2e ./e2e/... && "$$TOOLS_BIN/staticcheck" -tags 'e2e soak' ./e2e/ && "$$TOOLS_BIN/staticcheck" -tags e2enode ./e2e/node/ && "$$TOOLS_BIN/staticcheck" -tags benchvpa ./hack/benchvpa/... && "$$TOOLS_BIN/staticcheck" -tags benchwhatif ./recommender/app/ && "$$TOOLS_BIN/staticcheck" -tags benchreal ./hack/benchreal/
	$(MAKE) chart
	$(MAKE) rules

.PHONY: rules
rules: ## Check the alerting rules (deploy/helm/aware/files/rules.yaml) with promtool and run their unit tests (deploy/helm/rules_test.yaml).
	promtool="$$(hack/promtool.sh)" && "$$promtool" check rules deploy/helm/aware/files/rules.yaml && \
		"$$promtool" test rules deploy/helm/rules_test.yaml

.PHONY: chart
chart: ## Lint the Helm chart (deploy/helm/aware) and check it renders what kustomize builds from deploy/, with the pinned helm and kustomize.
	source hack/tools.sh && aware::tools::build_deploy
	$(BIN)/tools/helm lint --strict deploy/helm/aware
	$(BIN)/tools/helm template aware deploy/helm/aware --include-crds >/dev/null
	AWARE_HELM='$(abspath $(BIN))/tools/helm' AWARE_KUSTOMIZE='$(abspath $(BIN))/tools/kustomize' \
		go test -tags chart -count=1 ./deploy/helm/

# The demo's held-out apps. With the shipped agents the evaluation is all
# of the demo's time, linear in the apps: 200 (rl-agent demo's default)
# took 469-486 s of CPU, more than two cores have in 3 minutes; 100 took
# 213 s of CPU and 136 s wall on the shared 2-core machine, with the same
# conclusions for the agents (docs/results/demo.md). DEMO_APPS=200 runs
# the full set.
DEMO_APPS ?= 100

.PHONY: demo
demo: build ## Run the simulator demo on DEMO_APPS held-out apps (100): defaults, oracle and the shipped agents (rl-agent demo --train trains them afresh), with plots.
	$(BIN)/rl-agent demo --apps=$(DEMO_APPS)

# The demo's agents, trained as `rl-agent demo` trains them and shipped in
# pkg/lab/demo/agents (compiled into rl-agent), and the small configuration
# whose agents rl-agent/app's TestWriteAgentsReproduces trains again and
# compares byte for byte. Run it when that test fails: the training, the
# simulator or the default the agents learn beside changed.
.PHONY: agents
agents: build ## Train the demo's agents as the demo would and write them where it ships them (pkg/lab/demo/agents); 7 to 13 min of CPU measured.
	$(BIN)/rl-agent demo --write-agents=pkg/lab/demo/agents
	$(BIN)/rl-agent demo --config=rl-agent/app/testdata/agents-small.yaml --write-agents=rl-agent/app/testdata/agents-small --no-progress

.PHONY: testbed-up
testbed-up: ## Start a loopback control plane (builds and caches the binaries).
	hack/testbed/up.sh

.PHONY: testbed-down
testbed-down: ## Stop the loopback control plane.
	hack/testbed/down.sh

.PHONY: upgrade-fixture
upgrade-fixture: ## Record the upgrade fixture of VERSION (from REF, default the tag VERSION or HEAD) into e2e/testdata/upgrade/VERSION, for TestUpgrade (docs/operations.md).
	hack/upgrade-fixture.sh $(VERSION) $(REF)

.PHONY: e2e
e2e: ## Run the end-to-end tests against a loopback control plane.
	hack/e2e.sh

E2E_REPEAT     ?= 5
E2E_REPEAT_OUT ?= $(CURDIR)/e2e-repeat-out

.PHONY: e2e-repeat
e2e-repeat: ## Run the whole e2e tier E2E_REPEAT times (5) in a row on a fresh clone of HEAD, each on a fresh testbed; report each run's result and duration into E2E_REPEAT_OUT (slow, not in check). docs/operations.md.
	E2E_REPEAT_OUT='$(E2E_REPEAT_OUT)' hack/e2e-repeat.sh $(E2E_REPEAT)

.PHONY: e2e-node
e2e-node: images ## Run the install from deploy/ as real pods: containerd, runc and a kubelet joined to a loopback testbed (root; slow, not in check). hack/testbed/README.md.
	AWARE_IMAGES_TAG='$(TAG)' hack/e2e-node.sh

# The soak's defaults (issue 36): 2 hours over 1,000 autoscalers, a
# restart every 20 minutes. SOAK_ARGS go to the test (-soak.churn=60 ...).
# SOAK_REJUDGE=soak-out/report.json judges a recorded soak again instead.
SOAK_DURATION      ?= 2h
SOAK_MPAS          ?= 1000
SOAK_RESTART_EVERY ?= 20m

.PHONY: soak
soak: ## Soak the components on a loopback control plane (SOAK_DURATION 2h, SOAK_MPAS 1000, SOAK_RESTART_EVERY 20m): restarts, churn, growth judged; slow, not in check. docs/operations.md#soak.
	SOAK_DURATION='$(SOAK_DURATION)' SOAK_MPAS='$(SOAK_MPAS)' SOAK_RESTART_EVERY='$(SOAK_RESTART_EVERY)' hack/soak.sh $(SOAK_ARGS)

.PHONY: bench-vpa
bench-vpa: ## Benchmark AWARE against VPA (built from the Go module proxy) on a loopback control plane; slow, not in check. docs/results/performance.md.
	hack/bench-vpa.sh $(BENCH_VPA_ARGS)

.PHONY: bench-whatif
bench-whatif: ## Time recommender whatif over 7 days of 100 workloads at one minute, backfilled into the testbed's Prometheus; slow to set up, not in check. docs/whatif.md.
	hack/bench-whatif.sh

.PHONY: bench-real
bench-real: images ## Run every policy (real HPA, VPA, both, the fused default, the AWARE agent as a learner and as a frozen ensemble) against the same trace on the test app as real pods on a real node; root, slow (10 min a run), not in check. docs/real-node.md.
	AWARE_IMAGES_TAG='$(TAG)' hack/bench-real.sh $(BENCH_REAL_ARGS)

QUOTA_PROBE_OUT  ?= $(CURDIR)/quotaprobe-out
QUOTA_PROBE_ARGS ?=

.PHONY: quota-probe
quota-probe: ## One replica of the test app under a CFS quota, outside Kubernetes, at constant rates with and without a background load, beside the simulator's quota model (root; ~30 min; not in check). QUOTA_PROBE_ARGS go to hack/quotaprobe. docs/real-node-rounds.md.
	go build -o '$(QUOTA_PROBE_OUT)/bin/testapp' ./e2e/cmd/testapp
	go build -o '$(QUOTA_PROBE_OUT)/bin/quotaprobe' ./hack/quotaprobe
	'$(QUOTA_PROBE_OUT)/bin/quotaprobe' -testapp '$(QUOTA_PROBE_OUT)/bin/testapp' -out '$(QUOTA_PROBE_OUT)' $(QUOTA_PROBE_ARGS)

.PHONY: release
release: ## Release HEAD as VERSION (make release VERSION=v0.2.0; DRY_RUN=1 only prints): CHANGELOG.md section, chart and deploy/ stamped, one commit tagged, then make build images. Pushes nothing.
	@[[ '$(origin VERSION)' == 'command line' ]] || { echo "make release needs VERSION=vX.Y.Z on the command line"; exit 1; }
	hack/release.sh $(if $(filter 1,$(DRY_RUN)),--dry-run) '$(VERSION)'

.PHONY: clean
clean: ## Remove build outputs.
	rm -rf $(BIN)
