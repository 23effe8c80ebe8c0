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
test: ## Run unit tests (with the race detector) and short fuzz runs of the webhook and records decoders.
	hack/test.sh

.PHONY: verify
verify: ## Check formatting, go vet, go.mod tidiness, every doc link and anchor, and docs/flags.md against the binaries' --help.
	hack/verify.sh

.PHONY: update-flags
update-flags: ## Rewrite the flag tables of docs/flags.md from the binaries' --help.
	hack/docs/flags.sh

##@ Fuzzing

FUZZTIME ?= 5m

.PHONY: fuzz
fuzz: ## Fuzz the webhook's request handling and the records decoder, FUZZTIME each (default 5m).
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

##@ Images

.PHONY: images
images: ## Build both images, linux/amd64 and linux/arm64, as OCI layout tarballs in _output/images (no container engine; VERSION, PLATFORMS).
	hack/images/build.sh

.PHONY: verify-images
verify-images: ## Build the images and check their config and files per platform (user, entrypoint, architecture, labels, static binary); push them to an in-process registry.
	hack/images/verify.sh

.PHONY: push
push: ## Push the images of `make images` to REGISTRY (REGISTRY=registry.example.com/vpa-inplace pushes .../updater:TAG and .../admission-controller:TAG; TAG defaults to VERSION).
	hack/images/push.sh

##@ Deploy

.PHONY: verify-deploy
verify-deploy: ## Check deploy/ and the chart: kustomize, helm lint/template, the chart's Deployments equal to deploy/'s, other releases and namespaces, RBAC, admission policies, webhooks, CRD copies, OpenAPI of 1.33-1.38, alert tests.
	hack/deploy/verify-manifests.sh

.PHONY: update-crd
update-crd: ## Copy the VPA CRDs from the VPA module version in go.mod into deploy/base/crd and the chart.
	hack/deploy/update-crd.sh

.PHONY: update-chart
update-chart: ## Regenerate the chart's CRDs, RBAC and admission policies from deploy/base, and its README from values.yaml.
	hack/deploy/update-chart.sh

.PHONY: test-rules
test-rules: ## Test the chart's alerting rules with promtool, on series labelled as the chart's ServiceMonitor scrape labels them.
	hack/monitoring/test-rules.sh

.PHONY: tools
tools: ## Build the pinned helm, promtool and kustomize into _output/tools (once per version).
	hack/tools/install.sh helm promtool kustomize

.PHONY: deploy
deploy: ## Deploy deploy/base to the cluster of KUBECONFIG with kubectl (UPDATER_IMAGE, ADMISSION_CONTROLLER_IMAGE).
	hack/deploy/apply.sh

.PHONY: deploy-local
deploy-local: ## Apply deploy/overlays/local to the local cluster and write per-binary kubeconfigs (no kubectl).
	hack/deploy/local-apply.sh

.PHONY: undeploy-local
undeploy-local: ## Remove what deploy-local applied (the CRDs stay).
	hack/deploy/local-apply.sh --delete

.PHONY: e2e-kind
e2e-kind: ## Build images, deploy to a kind cluster and run the e2e tests (needs a Docker engine).
	hack/kind/e2e-kind.sh

##@ Local cluster

CLUSTER_PROFILE ?= v1.37
export CLUSTER_PROFILE

.PHONY: cluster-build
cluster-build: ## Build the local cluster binaries for CLUSTER_PROFILE (v1.37, v1.38, v1.35-kubelet or v1.34) into _output/cluster/bin.
	hack/cluster/build.sh

.PHONY: cluster-up
cluster-up: ## Start the local cluster (CLUSTER_PROFILE=v1.37|v1.38|v1.35-kubelet|v1.34); then `. _output/cluster/run/env.sh`.
	hack/cluster/up.sh

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and delete its run directory.
	hack/cluster/down.sh --purge

.PHONY: cluster-smoke
cluster-smoke: ## Check in-place resize end to end on the running local cluster.
	hack/cluster/smoke.sh

.PHONY: cluster-status
cluster-status: ## Show the local cluster's processes and their memory.
	hack/cluster/status.sh

##@ End to end

.PHONY: e2e
e2e: ## Run the e2e suite on the local cluster: all of it on v1.38; each version's own tests on v1.37, v1.35-kubelet and v1.37-preemption (E2E_PROFILES, E2E_RUN to narrow).
	hack/e2e.sh

.PHONY: e2e-v1.34
e2e-v1.34: ## Run the AEP core scenarios of the e2e suite on the v1.34 profile: control plane and kubelets v1.34 (E2E_RUN to narrow).
	E2E_PROFILES=v1.34 hack/e2e.sh

.PHONY: demo
demo: ## Bring up the local cluster, deploy, run both binaries and show a pod resized in place; leaves it running.
	hack/demo.sh

.PHONY: demo-down
demo-down: ## Stop what `make demo` started.
	hack/demo.sh down

##@ Benchmarks

BENCH_PODS ?= 1000
# Empty: hack/bench.sh's default (resize,recommender; resize with BENCH_SHARDED).
BENCH_PHASES ?=

.PHONY: bench
bench: ## Benchmark our updater against the upstream VPA updater side by side on a local cluster (BENCH_PODS=1000|10000; BENCH_PHASES=resize,recommender; BENCH_SHARDED=3: ours as 1 replica, then 3 sharing the shards); writes bench/results/.
	BENCH_PODS=$(BENCH_PODS) BENCH_PHASES=$(BENCH_PHASES) hack/bench.sh

.PHONY: bench-recommender
bench-recommender: ## The recommender-driven phase alone: churn under steady noisy usage and usage-step latency, both updaters, real recommender; writes bench/results/<date>-recommender.md.
	hack/bench-recommender.sh

.PHONY: bench-admission
bench-admission: ## Benchmark our pod admission handler against upstream VPA's in process (no cluster); writes bench/results/.
	hack/bench-admission.sh

.PHONY: bench-admission-burst
bench-admission-burst: ## A burst of pod creations on the local cluster with our admission controller, then upstream's; writes bench/results/.
	hack/bench-admission-burst.sh
