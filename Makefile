# BPA's Makefile. `make demo` and `make test` are the two commands a newcomer needs.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
BIN := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)

.PHONY: all
all: build

##@ Build
.PHONY: build
build: ## Build bin/bpa
	$(GO) build -o $(BIN)/bpa ./cmd/bpa

.PHONY: generate
generate: ## Generate deepcopy code (controller-gen, run as a Go tool)
	$(GO) tool controller-gen object:headerFile=hack/boilerplate.go.txt paths=./pkg/apis/...

.PHONY: manifests
manifests: ## Generate CRDs (controller-gen) into config/crd/bases
	$(GO) tool controller-gen crd paths=./pkg/apis/... output:crd:artifacts:config=config/crd/bases
	$(GO) run ./hack/crd-nullable config/crd/bases/bpa.akraino.org_provisionings.yaml
