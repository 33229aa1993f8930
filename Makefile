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
# make fuzz: how long each fuzz target runs, and which run (a shell
# pattern on their names, e.g. FUZZ='FuzzRead*').
FUZZTIME ?= 30s
FUZZ ?= *

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-10s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

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
	@# One role per clusterctl provider (internal/providers), from the RBAC
	@# markers of the packages of its components only; the metal provider
	@# runs the bare-metal operator's webhook, not its controller.
	$(CONTROLLER_GEN) rbac:roleName=metalshift-infrastructure-metal-manager paths="./hostengine/...;./infrastructure/metal/...;./clusterbaremetal/webhooks/..." output:rbac:artifacts:config=config/rbac/infrastructure-metal
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

# The QEMU e2e (real boot of the live image: the host engine's machines, the
# agent-based install's discovery), run on its own, one package at a time.
QEMU_E2E := TestQEMUMachines|TestQEMUDiscovery
QEMU_E2E_PKGS := ./hostengine/reconcilers/baremetalhost/ ./assisted/qemutest/

.PHONY: test
test: images ## Run every test (unit, envtest, embedded hub, CLI, a real node, QEMU machines and discovery), building the tools and images first when missing.
	@hack/tools/build.sh $(RUNTIME_TOOLS) $(NODE_TOOLS)
	$(GO) test -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) -skip '^($(QEMU_E2E))$$' $$($(GO) list ./... | grep -v /test/e2e)
	@# The e2e tests build and run the metalshift binary, which Go's test cache
	@# cannot see: never reuse a cached result.
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) ./test/e2e/...
	@# The QEMU e2e runs alone, a package at a time (-p 1): two TCG VMs take both cores.
	$(GO) test -p 1 -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FLAGS) -run '^($(QEMU_E2E))$$' -v $(QEMU_E2E_PKGS)

.PHONY: bench
bench: images ## Run the benchmarks and print their figures.
	@hack/tools/build.sh $(RUNTIME_TOOLS)
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem ./...

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
demo: build ## Embedded hub + simulator: install a cluster with the installer (hack/demo.sh), then two with the agent-based install (hack/demo-agent.sh).
	@hack/tools/build.sh $(RUNTIME_TOOLS)
	@# The demo's simulated machines do not need the live image; build it when the Debian tools are there.
	@$(MAKE) --no-print-directory images || echo "make demo: the live image was not built (see above); the demo does not need it"
	@hack/demo.sh
	@hack/demo-agent.sh

.PHONY: demo-agent
demo-agent: build ## The demo's second act alone: a single-node and a compact cluster installed from InfraEnv discovery ISOs (agent-based install).
	@hack/tools/build.sh $(RUNTIME_TOOLS)
	@hack/demo-agent.sh
