# BPA's Makefile. `make demo` and `make test` are the two commands a newcomer needs.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)
# Argo's web UI takes one package (argo-ui) from GitHub. Where GitHub is out of reach,
# BPA_ARGO_UI_TARBALL names a copy of it (argoproj/argo-ui at 54f36c7; see
# hack/build-tools.sh); .ci/run sets it.
export BPA_ARGO_UI_TARBALL
# make demo and make test go on without Argo's web UI when it cannot be built (GitHub out of
# reach and no BPA_ARGO_UI_TARBALL, or no Node.js >= 20), saying in one line why and what to
# set; e2e scenario u (the UI) then fails with that line. make tools stops there instead.
demo test: export BPA_UI_OPTIONAL = 1

.PHONY: all
all: build

##@ Build
.PHONY: build
build: ## Build bin/bpa
	$(GO) build -o $(BIN)/bpa ./cmd/bpa && ln -f $(BIN)/bpa $(BIN)/kubectl-bpa

.PHONY: images
images: ## Build the images (bpa, pause, Argo's executor, the stand-in kubespray) without Docker into bin/images/*.tar; BPA_TAG sets the bpa tag (dev), PUSH=host:port also pushes them
	$(GO) run ./hack/build-images $(if $(BPA_TAG),-bpa-tag $(BPA_TAG)) $(if $(PUSH),-push $(PUSH) $(if $(PUSH_INSECURE),-insecure) $(if $(PUSH_TOKEN_FILE),-token-file $(PUSH_TOKEN_FILE)))

.PHONY: generate
generate: ## Generate deepcopy code (controller-gen, run as a Go tool) and the ad-hoc run of workflowtemplates/provision.yaml (pkg/translator)
	$(GO) tool controller-gen object:headerFile=hack/boilerplate.go.txt paths=./pkg/apis/...
	$(GO) run ./hack/gen-workflowtemplates

.PHONY: manifests
manifests: ## Generate CRDs (controller-gen) into config/crd/bases
	$(GO) tool controller-gen crd paths=./pkg/apis/... output:crd:artifacts:config=config/crd/bases
	$(GO) run ./hack/crd-nullable config/crd/bases/bpa.akraino.org_provisionings.yaml
	$(GO) tool controller-gen rbac:roleName=bpa-controller paths=./pkg/controller/... output:rbac:artifacts:config=config/rbac

.PHONY: verify-generated
verify-generated: ## Fail if the generated CRDs, RBAC, deepcopy or WorkflowTemplate DAG are stale
	hack/verify-generated.sh

##@ Test
.PHONY: deps
deps: ## Install the Debian packages the demo and the tests need, when missing (apt-get as root, else sudo); check Node.js
	@hack/deps.sh --ui

.PHONY: tools
tools: ## Build the real test components (etcd, kube-apiserver, versitygw, workflow-controller, promtool, Argo's UI, CLI and executor, the test node's kubelet, kube-proxy, kube-scheduler, kube-controller-manager, containerd, runc, CNI plugins) into bin/, once
	@hack/build-tools.sh

# The suites that run on the test node (test/framework/node). A node takes the machine's
# node lock: they run one at a time.
NODE_SUITES := ./test/deploy ./test/e2e ./test/framework/node ./test/soak
MODULE := $(shell $(GO) list -m 2>/dev/null)

.PHONY: test
test: deps tools verify-generated build ## Run every test (golangci-lint, unit, fuzz seeds, real-component integration and e2e)
	$(BIN)/golangci-lint run ./...
	$(BIN)/bpa lint
	$(BIN)/bpa lint $(addprefix -f ,$(wildcard examples/*.yaml pkg/validation/testdata/good/*.yaml $(if $(BPA_REFERENCE_DIR),$(addprefix $(BPA_REFERENCE_DIR)/,seeds/*.yaml icn/provisioning/*.yaml icn/software/*.yaml))))
	$(GO) vet ./...
	@# Two lanes, one after the other: every package but the node suites, two at a time, then
	@# the suites on the test node (one node per machine) one after another. Not side by side:
	@# each lane alone keeps both cores busy, and together every wait in one became a timeout
	@# in the other (a kubespray run of the e2e took 15 times as long as alone).
	@# (The shell runs with -e: each lane's status is kept, not exited on, so both run.)
	@# Each lane's output is kept in bin/test-logs; on a failure the failed tests are named last.
	@mkdir -p $(BIN)/test-logs; \
	rest=0; $(GO) test -p 2 -timeout 45m -count=1 $$($(GO) list ./... | grep -vxF $(addprefix -e $(MODULE)/,$(NODE_SUITES:./%=%))) 2>&1 | tee $(BIN)/test-logs/rest.log || rest=$$?; \
	nrc=0; $(GO) test -p 1 -timeout 70m -count=1 $(NODE_SUITES) 2>&1 | tee $(BIN)/test-logs/node.log || nrc=$$?; \
	if [ $$rest != 0 ] || [ $$nrc != 0 ]; then hack/test-summary.sh $(BIN)/test-logs/node.log $(BIN)/test-logs/rest.log; exit 1; fi

FAULTS ?= 100

.PHONY: soak
soak: deps tools ## The chaos soak (docs/soak.md): FAULTS faults (100) at seeded moments while a seeded workload runs on the real node; SEED=<n> replays a run (default: random, printed)
	BPA_SOAK_FAULTS=$(FAULTS) $(if $(SEED),BPA_SOAK_SEED=$(SEED)) $(GO) test -count=1 -v -timeout $$(( $(FAULTS) + 40 ))m -run TestSoak ./test/soak

.PHONY: lint
lint: ## Run golangci-lint alone (pinned in hack/tools/golangci-lint; .golangci.yml); make test runs it too
	@hack/build-tools.sh golangci-lint
	$(BIN)/golangci-lint run ./...

.PHONY: bench
bench: tools ## Run the benchmarks (translation, matching, lease parsing, verified etcd snapshots; the controller at scale on the rig; pod start on the real node)
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/...
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./test/bench/

##@ Run
.PHONY: demo
demo: deps tools ## Provision the example cluster on an embedded control plane and a real node (simulated machines; runs as root); DEMO_ONESHOT=1 exits when done
	@hack/logged.sh "building the demo (module downloads and compiler output: bin/logs/build-demo.log)" $(BIN)/logs/build-demo.log \
		$(GO) build -o $(BIN)/demo ./cmd/bpa-demo
	@# The demo runs a real node (a bridge, network namespaces, iptables rules, cgroups): root.
	@if [ "$$(id -u)" = 0 ]; then $(BIN)/demo; \
	elif command -v sudo >/dev/null; then echo "demo: the node needs root; running bin/demo with sudo"; \
		sudo --preserve-env=DEMO_ONESHOT,PATH $(BIN)/demo; \
	else echo "demo: the node needs root (a bridge, network namespaces, iptables, cgroups): run make demo as root"; exit 1; fi

.PHONY: deploy
deploy: ## Apply CRDs (first, until Established), RBAC, the admission policy, the controller, bpa serve and the WorkflowTemplates to the current kubeconfig
	hack/deploy.sh config/

.PHONY: kubespray-check
kubespray-check: build ## Run a kubespray checkout's validate_inventory on every example's bpa plan (KUBESPRAY_DIR=...; not part of make test)
	hack/kubespray-check.sh

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

.PHONY: metal3-crd
metal3-crd: ## Regenerate the BareMetalHost CRD the tests install, from the pinned metal3 API module
	$(GO) tool controller-gen crd:allowDangerousTypes=true paths=github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1 output:crd:artifacts:config=$(CURDIR)/bin/metal3-crds
	cp bin/metal3-crds/metal3.io_baremetalhosts.yaml test/framework/bpatest/crds/
