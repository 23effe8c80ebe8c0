# vpa-inplace: an updater and admission controller adding the InPlace update
# mode to the Vertical Pod Autoscaler. Every target is documented: `make help`.

SHELL := /usr/bin/env bash
GO    ?= go
BIN   ?= $(CURDIR)/_output/bin

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
		/^[a-zA-Z0-9_.-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 } \
		/^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build and test

.PHONY: build
build: ## Build both binaries into _output/bin.
	$(GO) build -o $(BIN)/ ./cmd/...

.PHONY: test
test: ## Run unit tests (with the race detector) and a short fuzz run of the webhook decoder.
	hack/test.sh

.PHONY: verify
verify: ## Check formatting, go vet and go.mod tidiness.
	hack/verify.sh
