# fluxdeployer — see README.md. Every target installs or builds what it needs itself.
SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := build

CONTROLLER_GEN := go tool -modfile=hack/tools/controller-gen/go.mod controller-gen
FUZZTIME ?= 5s

.PHONY: generate
generate: ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: ## Generate CRDs and RBAC under config/.
	$(CONTROLLER_GEN) crd:allowDangerousTypes=false rbac:roleName=fluxdeployer paths=./... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: verify-generated
verify-generated: generate manifests ## Fail when committed generated files are stale.
	@git diff --exit-code -- api config || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config)" || { git status --porcelain -- api config; echo "untracked generated files: commit them"; exit 1; }

.PHONY: fmt
fmt:
	go fmt ./...

.PHONY: vet
vet:
	go vet ./...

.PHONY: lint
lint: ## golangci-lint with .golangci.yml (pinned in hack/tools/golangci-lint; the first run builds it).
	go tool -modfile=hack/tools/golangci-lint/go.mod golangci-lint run ./...

.PHONY: test-assets
test-assets: ## Build kube-apiserver and etcd for envtest, and the Flux controllers for e2e (first run 15-25 minutes).
	@hack/test-assets.sh
	@hack/flux-assets.sh

.PHONY: test
test: lint vet verify-generated ## Lint, unit, envtest and short fuzz tests.
	@# envtest runs a real kube-apiserver and etcd, and e2e/ the real Flux source- and kustomize-controller, all
	@# built from the Go module proxy into a cache outside the clone on first use.
	assets=$$(hack/test-assets.sh) && flux=$$(hack/flux-assets.sh) && \
		KUBEBUILDER_ASSETS=$$assets FLUX_ASSETS=$$flux go test ./... -count=1
	$(MAKE) fuzz

.PHONY: fuzz
fuzz: ## A short run of every fuzz target.
	go test ./pkg/hash -run '^$$' -fuzz '^FuzzFnv$$' -fuzztime $(FUZZTIME)
	go test ./pkg/sanitize -run '^$$' -fuzz '^FuzzNamesAreAlwaysValid$$' -fuzztime $(FUZZTIME)
	go test ./internal/vectordeployment/naming -run '^$$' -fuzz '^FuzzArtifactDeploymentName$$' -fuzztime $(FUZZTIME)

.PHONY: bench
bench: ## Benchmarks of the naming core (compare runs with benchstat).
	go test ./pkg/... ./internal/vectordeployment/naming -run '^$$' -bench . -benchmem -count 10

.PHONY: build
build: ## Build bin/fluxdeployer.
	go build -o bin/fluxdeployer ./cmd/fluxdeployer

.PHONY: demo
demo: build ## The main job: publish a sample vector (CTF and local registry) and inspect it.
	hack/demo.sh

.PHONY: run
run: manifests ## Run the operator against the current kubeconfig.
	go run ./cmd/fluxdeployer run
