# metalshift — run `make help` for the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT := $(CURDIR)
BIN := $(ROOT)/bin
GO ?= go
CONTROLLER_GEN := $(BIN)/controller-gen
GOLANGCI_LINT := $(BIN)/golangci-lint
# envtest and the embedded control plane find etcd and kube-apiserver here.
export KUBEBUILDER_ASSETS := $(BIN)
export METALSHIFT_BIN_DIR := $(BIN)
# The live image, the iPXE artifacts, the QEMU lab's OS image and the
# container images (oci/).
IMAGES := $(BIN)/images
export METALSHIFT_IMAGES_DIR := $(IMAGES)
# metalshift's version, a semantic version: the tag of the manager's
# container image (bin/images/oci/manager; the commit is in its revision
# label) and the version of the clusterctl providers, whose Deployments run
# that image. IMAGE_PLATFORMS: linux/amd64,linux/arm64 for both.
VERSION ?= v0.1.0
IMAGE_PLATFORMS ?= linux/amd64
export PATH := $(BIN):$(PATH)

TEST_FLAGS ?=
TEST_TIMEOUT ?= 30m
BENCH ?= .
# BENCH_TIMEOUT bounds make bench: BenchmarkCAPIFleet at 100 clusters, with its anchor, takes more than go test's default 10m.
BENCH_TIMEOUT ?= 60m
# make fuzz: how long each fuzz target runs, and which run (a shell
# pattern on their names, e.g. FUZZ='FuzzRead*').
FUZZTIME ?= 30s
FUZZ ?= *

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z0-9_-]+:.*?##/ { printf "  %-10s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: tools
tools: ## Build the pinned tools (etcd, kube-apiserver, kube-controller-manager, kubectl, kubelet, kube-scheduler, controller-gen, golangci-lint, clusterctl) into bin/, skipping what is up to date.
	@hack/tools/build.sh

.PHONY: generate
generate: ## Generate deepcopy code, CRDs, RBAC and webhook configurations, and copy Cluster API's CRDs and webhooks from its module.
	@hack/tools/build.sh controller-gen
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd:maxDescLen=0,allowDangerousTypes=true paths=./api/... output:crd:artifacts:config=config/crd/bases
	@rm -rf config/rbac
	@# One role per clusterctl provider (manager/providers), from the RBAC
	@# markers of the packages of its components only; the metal provider
	@# runs the bare-metal operator's webhook, not its controller.
	$(CONTROLLER_GEN) rbac:roleName=metalshift-infrastructure-metal-manager paths="./hostengine/...;./infrastructure/metal/...;./infrastructure/equinix/...;./clusterbaremetal/webhooks/..." output:rbac:artifacts:config=config/rbac/infrastructure-metal
	$(CONTROLLER_GEN) rbac:roleName=metalshift-bootstrap-openshift-manager paths="./bootstrap/..." output:rbac:artifacts:config=config/rbac/bootstrap-openshift
	$(CONTROLLER_GEN) rbac:roleName=metalshift-control-plane-openshift-manager paths="./controlplane/..." output:rbac:artifacts:config=config/rbac/control-plane-openshift
	$(CONTROLLER_GEN) rbac:roleName=metalshift-addon-agent-manager paths="./assisted/..." output:rbac:artifacts:config=config/rbac/addon-agent
	@# The bare-metal operator as a release payload runs it (clusterbaremetal/manifests).
	$(CONTROLLER_GEN) rbac:roleName=cluster-baremetal-operator paths="./clusterbaremetal/..." output:rbac:artifacts:config=config/rbac/baremetal-operator
	$(CONTROLLER_GEN) webhook paths=./... output:webhook:artifacts:config=config/webhook
	@hack/copy-capi-manifests.sh

.PHONY: verify
verify: generate ## Fail when generated files or go.mod are stale.
	$(GO) mod tidy
	@if [[ -n "$$(git status --porcelain -- api config go.mod go.sum)" ]]; then \
		git status --porcelain -- api config go.mod go.sum; \
		echo "verify: generated files are stale: run 'make generate' and 'go mod tidy' and commit"; exit 1; fi

.PHONY: lint
lint: ## Run golangci-lint.
	@hack/tools/build.sh golangci-lint
	$(GOLANGCI_LINT) run ./...

.PHONY: build
build: ## Build the metalshift binaries into bin/.
	$(GO) build -o $(BIN)/metalshift ./cmd/metalshift
	$(GO) build -o $(BIN)/manager ./cmd/manager
	CGO_ENABLED=0 $(GO) build -o $(BIN)/metalshift-agent ./cmd/metalshift-agent

.PHONY: images
images: ## Build the live image (hybrid BIOS/UEFI ISO with the agent), its iPXE kernel and initramfs, the QEMU lab's OS image and the manager's container image holding the live images (OCI layout bin/images/oci/manager, VERSION, IMAGE_PLATFORMS) into bin/images, skipping what is up to date.
	@hack/deps.sh images
	@CGO_ENABLED=0 $(GO) build -o $(BIN)/metalshift-agent ./cmd/metalshift-agent
	@$(GO) run ./hack/images -out $(IMAGES) -agent $(BIN)/metalshift-agent -version '$(VERSION)' -platforms '$(IMAGE_PLATFORMS)'

# The clusterctl local repository of metalshift's providers, version VERSION
# (docs/production.md); their Deployments run PROVIDER_IMAGE, by default the
# image `make images` tags.
PROVIDER_IMAGE ?=
CLUSTERCTL_REPO := $(BIN)/clusterctl-repo

.PHONY: clusterctl-repo
clusterctl-repo: ## Generate metalshift's Cluster API providers as a clusterctl local repository in bin/clusterctl-repo (VERSION, PROVIDER_IMAGE).
	$(GO) run ./hack/clusterctl-repo -out $(CLUSTERCTL_REPO) -version '$(VERSION)' $(if $(PROVIDER_IMAGE),-image $(PROVIDER_IMAGE))

##@ Checks

# The tools the tests and the hub run; linters and generators are not needed to test.
RUNTIME_TOOLS := etcd kube-apiserver kube-controller-manager kubectl clusterctl
# The real node of the node e2e (TestNode).
NODE_TOOLS := kubelet kube-scheduler

# make test's suites, in the order they run; SUITES picks some (make test
# SUITES=e2e), and make test-<suite> runs one. Each prints the command it
# runs and how long it took (hack/suite.sh).
ALL_SUITES := unit e2e qemu
SUITES ?= $(ALL_SUITES)
# unit: every package but the end-to-end tests (pure logic, envtest, the
# embedded hub's packages).
UNIT_PKGS = $$($(GO) list ./... | grep -v /test/e2e)
# e2e: the end-to-end tests (test/e2e/<area>), less the QEMU ones. They
# build and run the metalshift and manager binaries, which Go's test cache
# cannot see: never reuse a cached result.
E2E_PKGS := ./test/e2e/...
# qemu: real boots of the live image (the host engine's machines, the
# agent-based install's discovery, the live image's DHCP lease renewal on a
# simulated segment) in QEMU, alone, one package at a time (-p 1): two TCG
# VMs take both cores. The unit suite skips them in sim/qemu.
QEMU_E2E := TestQEMUMachines|TestQEMUDiscovery|TestQEMUDevice|TestQEMULeaseRenewal
QEMU_E2E_PKGS := ./test/e2e/hostengine/ ./test/e2e/discovery/ ./test/e2e/equinix/ ./sim/qemu/

SUITE_unit = $(GO) test -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) -skip '^($(QEMU_E2E))$$' $(UNIT_PKGS)
SUITE_e2e = $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) -skip '^($(QEMU_E2E))$$' $(E2E_PKGS)
SUITE_qemu = $(GO) test -p 1 -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) -run '^($(QEMU_E2E))$$' -v $(QEMU_E2E_PKGS)
# hack/suite.sh NAME 'COMMAND' for suite $(1).
run-suite = hack/suite.sh $(1) '$(subst ','\'',$(SUITE_$(1)))'

ifneq ($(filter-out $(ALL_SUITES),$(SUITES)),)
$(error SUITES: unknown suite(s) $(filter-out $(ALL_SUITES),$(SUITES)); the suites are $(ALL_SUITES))
endif

.PHONY: deps
deps: ## Install the Debian packages the tests need when missing (hack/deps.sh: as root or with sudo -n, else it prints the command to run).
	@hack/deps.sh test

.PHONY: test-setup
test-setup: deps images
	@hack/tools/build.sh $(RUNTIME_TOOLS) $(NODE_TOOLS)

.PHONY: test
test: test-setup ## Run every test suite in order (SUITES: unit e2e qemu), installing the Debian packages and building the tools and images first when missing.
	@$(foreach s,$(SUITES),$(call run-suite,$(s)) && ) true

.PHONY: test-unit
test-unit: test-setup ## Run the unit suite alone (UNIT_PKGS: every package but test/e2e).
	@$(call run-suite,unit)

.PHONY: test-e2e
test-e2e: test-setup ## Run the end-to-end suite alone (E2E_PKGS: test/e2e/..., less the QEMU tests).
	@$(call run-suite,e2e)

.PHONY: test-qemu
test-qemu: test-setup ## Run the QEMU suite alone (QEMU_E2E in QEMU_E2E_PKGS, one package at a time).
	@$(call run-suite,qemu)

# The fault tests (sim/fault plans against the hub): the short ones run in
# make test too; those that still find a gap, or take long, only here.
CHAOS_RUN ?= Under|Fault|Restart|Chaos

# Each scenario adds a line to CHAOS_REPORT (runs, completed, mean time
# against the fault-free run of the same test, faults fired, orphans, disks
# written twice, seeds of failed runs), printed as a table at the end.
# METALSHIFT_CHAOS_RUNS sets the runs per scenario, METALSHIFT_CHAOS_SEED
# replays a printed seed.
CHAOS_REPORT ?= $(CURDIR)/bin/chaos-report.tsv
CHAOS_TIMEOUT ?= 120m

.PHONY: chaos
chaos: test-setup ## Run the fault tests (CHAOS_RUN picks them by name), including those make test leaves out (METALSHIFT_CHAOS=1), and print the report per scenario.
	@rm -f $(CHAOS_REPORT)
	@status=0; METALSHIFT_CHAOS=1 METALSHIFT_CHAOS_REPORT=$(CHAOS_REPORT) $(GO) test -count=1 -timeout $(CHAOS_TIMEOUT) $(TEST_FLAGS) \
		-run '$(CHAOS_RUN)' -v ./test/e2e/... ./sim/... || status=$$?; \
	echo; echo "== make chaos: per scenario ($(CHAOS_REPORT))"; \
	if [ -s $(CHAOS_REPORT) ]; then \
		if command -v column >/dev/null; then column -t -s "$$(printf '\t')" $(CHAOS_REPORT); else cat $(CHAOS_REPORT); fi; \
	else echo "no scenario reported"; fi; \
	exit $$status

.PHONY: bench
bench: images ## Run the benchmarks and print their figures.
	@hack/tools/build.sh $(RUNTIME_TOOLS)
	@# -p 1: one package's benchmarks at a time, so that none measures another's load.
	$(GO) test -p 1 -run '^$$' -timeout $(BENCH_TIMEOUT) -bench '$(BENCH)' -benchmem ./...

.PHONY: fuzz
fuzz: ## Run every fuzz target (func Fuzz* in a _test.go file) for FUZZTIME (30s) each, one after another; FUZZ='FuzzX*' picks some.
	@# Found by name, so that a new target is fuzzed without a list to keep.
	@# `make test` runs their seed corpora (f.Add and testdata/fuzz/) as tests.
	@grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . | sort | while IFS=: read -r file fn; do \
		name=$${fn#func }; pkg=./$$(dirname "$${file#./}"); \
		case "$$name" in $(FUZZ)) ;; *) continue ;; esac; \
		echo "== $$name ($$pkg)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $(TEST_FLAGS) "$$pkg" || exit 1; \
	done

##@ Demo

.PHONY: demo
demo: build ## Embedded hub + simulator: install a cluster with the installer (hack/demo.sh), two with the agent-based install (hack/demo-agent.sh), and one on an emulated Equinix Metal (hack/demo-equinix.sh).
	@hack/tools/build.sh $(RUNTIME_TOOLS)
	@# The demo's simulated machines do not need the live image; build it when the Debian tools are there.
	@$(MAKE) --no-print-directory images || echo "make demo: the live image was not built (see above); the demo does not need it"
	@hack/demo.sh
	@hack/demo-agent.sh
	@hack/demo-equinix.sh

.PHONY: demo-agent
demo-agent: build ## The demo's second act alone: a single-node and a compact cluster installed from InfraEnv discovery ISOs (agent-based install).
	@hack/tools/build.sh $(RUNTIME_TOOLS)
	@hack/demo-agent.sh

.PHONY: demo-equinix
demo-equinix: build ## The demo's third act alone: 3 masters + 2 workers on an emulated Equinix Metal (devices are simulated machines booting the hub's iPXE script), scaled, destroyed, the emulator's ledger empty.
	@hack/tools/build.sh $(RUNTIME_TOOLS)
	@hack/demo-equinix.sh
