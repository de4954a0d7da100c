# fluxdeployer — see README.md. Every target installs or builds what it needs itself.
SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := build

# One set of build flags for every build, test and asset, so that the Go build cache compiles each package once:
# the image and the release must be static and -trimpath (reproducible), so the host's builds are too. With a
# cgo-enabled net package every package above it compiles a second time; on a first run that doubled most builds.
export CGO_ENABLED ?= 0
export GOFLAGS := $(strip $(filter-out -trimpath,$(GOFLAGS)) -trimpath)

CONTROLLER_GEN := go tool -modfile=hack/tools/controller-gen/go.mod controller-gen
KUSTOMIZE := go tool -modfile=hack/tools/kustomize/go.mod kustomize
# A count, not a duration: Go 1.26's fuzz coordinator can fail a target with a bare "context deadline exceeded"
# when a -fuzztime duration ends (golang/go#75804, fixed in Go 1.27); it hit FuzzFnv in a fresh-clone CI run.
# 150,000 inputs take 3 to 5 s per target on 2 cores.
FUZZTIME ?= 150000x

# The release version (the VERSION file), the commit and its time, stamped into the binary and the image.
VERSION := $(shell cat VERSION)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
CREATED ?= $(shell TZ=UTC git show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD 2>/dev/null)
# The release's tag, of its git commit and its image: the version with a v, as Flux tags its releases.
RELEASE_TAG := v$(VERSION)
# The image the manager runs; config/manager's tag is the release tag.
IMG ?= ghcr.io/fluxdeployer/fluxdeployer:$(RELEASE_TAG)
# Where make release writes the release.
DIST ?= dist
VERSION_PKG := github.com/fluxdeployer/fluxdeployer/internal/version
LDFLAGS := -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Commit=$(COMMIT)

.PHONY: generate
generate: ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: generate ## Generate CRDs and RBAC under config/, and their copies the Helm chart renders (charts/fluxdeployer/files).
	@# After generate, never beside it (make -j): controller-gen reads the API types whose deepcopy code it writes.
	$(CONTROLLER_GEN) crd:allowDangerousTypes=false rbac:roleName=fluxdeployer paths=./... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	rm -f charts/fluxdeployer/files/crds/*.yaml
	cp config/crd/bases/*.yaml charts/fluxdeployer/files/crds/
	cp config/rbac/role.yaml charts/fluxdeployer/files/role.yaml
	cp config/sharding/policy/shard_key_policy.yaml charts/fluxdeployer/files/shard_key_policy.yaml

.PHONY: api-docs
api-docs: manifests ## Write the API reference docs/api from the CRDs (hack/apidocs).
	go run ./hack/apidocs -crds config/crd/bases -samples config/samples -out docs/api

.PHONY: verify-generated
verify-generated: manifests api-docs ## Fail when committed generated files are stale.
	@git diff --exit-code -- api config docs/api charts || { echo "generated files are stale: run 'make generate manifests api-docs' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config docs/api charts)" || { git status --porcelain -- api config docs/api charts; echo "untracked generated files: commit them"; exit 1; }

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
test-assets: ## Build kube-apiserver, etcd and kube-controller-manager, and the three Flux controllers (first run 11-45 minutes on 2 cores).
	@hack/test-assets.sh
	@hack/flux-assets.sh

.PHONY: test
test: ## Lint, unit, envtest, end-to-end, real-node, upgrade and short fuzz tests.
	@# The real-node suites mostly wait for pods, leases and faults to pass, and the rest mostly compiles and runs
	@# on the embedded control plane: the two halves run side by side, each printed whole when it ends.
	$(MAKE) -j2 --output-sync=target test-embedded test-node

.PHONY: test-embedded
test-embedded: ## Lint, unit, envtest, end-to-end on the embedded control plane, release, chart and short fuzz tests.
	@# No make vet: make lint's govet runs every analyzer go vet runs (golangci-lint's default set for it is go
	@# vet's), on the tests too, and a second pass only repeated that work.
	$(MAKE) lint
	$(MAKE) verify-generated
	@# First, so that the release's images for both architectures and cosign are built once, before the tests
	@# that use them run side by side.
	$(MAKE) test-release
	$(MAKE) test-go
	$(MAKE) test-chart
	$(MAKE) fuzz

.PHONY: test-go
test-go: ## go test ./... on the embedded control plane (envtest, real Flux, Chromium; no real node).
	@# envtest runs a real kube-apiserver and etcd, and e2e/ adds kube-controller-manager and the real Flux source-,
	@# kustomize- and helm-controller, all built from source into a cache outside the clone on first use.
	@# The web view's browser test drives Debian's Chromium (hack/browser-assets.sh installs it); its screenshots
	@# are kept in bin/test-artifacts. -vet=off: make lint, which make test runs first, runs every analyzer of
	@# go test's vet subset and more (govet), so go test's own vet pass would only repeat that work.
	mkdir -p bin/test-artifacts
	assets=$$(hack/test-assets.sh) && flux=$$(hack/flux-assets.sh) && chromium=$$(hack/browser-assets.sh) && \
		KUBEBUILDER_ASSETS=$$assets FLUX_ASSETS=$$flux CHROMIUM=$$chromium \
		go test ./... -count=1 -vet=off -timeout 45m -artifacts -outputdir $(CURDIR)/bin/test-artifacts

.PHONY: test-node
test-node: ## The real-node suites: make e2e-node, then make e2e-upgrade.
	$(MAKE) e2e-node
	$(MAKE) e2e-upgrade

.PHONY: test-chart
test-chart: ## Render and lint charts/fluxdeployer with Helm's SDK and compare it with config/default (in hack/tools/flux, the module of the Flux controllers, which are built on Helm's SDK).
	@# -trimpath, as the controllers' build (hack/flux-assets.sh): the tests then reuse Helm's compiled packages.
	cd hack/tools/flux && go test ./chart -count=1

.PHONY: e2e
e2e: ## End-to-end tests: on the embedded control plane, or on an existing cluster with E2E_KUBECONFIG (Flux and the operator installed; E2E_REGISTRY_HOST: this machine's address as the cluster's pods reach it; E2E_KIND_CLUSTER: its name when it is kind, to run the TestNode tests there too).
	mkdir -p bin/test-artifacts
	CHROMIUM=$$(hack/browser-assets.sh) go test ./e2e -count=1 -v -timeout 30m -artifacts -outputdir $(CURDIR)/bin/test-artifacts

.PHONY: e2e-node
e2e-node: ## End-to-end tests on a real node of this machine (root; kubelet, containerd, Flux and the operator as pods from images built here; first run builds them), then the pages of the docs that install the operator.
	assets=$$(hack/test-assets.sh) && flux=$$(hack/flux-assets.sh) && node=$$(hack/node-assets.sh) && \
		export E2E_NODE=1 KUBEBUILDER_ASSETS=$$assets FLUX_ASSETS=$$flux NODE_ASSETS=$$node && \
		go test ./e2e -run '^TestNode' -skip '^TestNodeUpgrade$$' -count=1 -v -timeout 30m && \
		go test ./e2e/doctest -run '^TestNodeDocs$$' -count=1 -v -timeout 30m

.PHONY: e2e-upgrade
e2e-upgrade: ## On a real node as make e2e-node: install the previous release (the commit that first added the newest CHANGELOG entry before HEAD, its image built by its own hack/image), deploy a landscape, upgrade to this tree with its install.yaml, then downgrade back (e2e TestNodeUpgrade; docs/migration.md).
	assets=$$(hack/test-assets.sh) && flux=$$(hack/flux-assets.sh) && node=$$(hack/node-assets.sh) && \
		E2E_NODE=1 KUBEBUILDER_ASSETS=$$assets FLUX_ASSETS=$$flux NODE_ASSETS=$$node \
		go test ./e2e -run '^TestNodeUpgrade$$' -count=1 -v -timeout 30m

.PHONY: e2e-kind
e2e-kind: ## The make e2e suite and the TestNode tests of make e2e-node on a new kind cluster, Flux and the operator installed from dist/install.yaml (needs Docker and internet; not run in this project's CI).
	hack/e2e-kind.sh

.PHONY: fuzz
fuzz: ## A short run of every fuzz target.
	go test ./pkg/hash -run '^$$' -fuzz '^FuzzFnv$$' -fuzztime $(FUZZTIME)
	go test ./pkg/sanitize -run '^$$' -fuzz '^FuzzNamesAreAlwaysValid$$' -fuzztime $(FUZZTIME)
	go test ./internal/vectordeployment/naming -run '^$$' -fuzz '^FuzzArtifactDeploymentName$$' -fuzztime $(FUZZTIME)

.PHONY: bench
bench: ## Benchmarks of the naming core (compare runs with benchstat).
	go test ./pkg/... ./internal/vectordeployment/naming -run '^$$' -bench . -benchmem -count 10

# Scale benchmarks (docs/performance.md): a real kube-apiserver and the in-process registry; each
# iteration takes minutes, so they run once (-benchtime=1x). Save the output for the plot script.
BENCH_SCALE := go test ./internal/bench -run '^$$' -benchtime=1x -timeout 90m

.PHONY: bench-e2e
bench-e2e: ## Convergence: the operator, then the API server's floor writing the same end state, at 100x10, 300x10 and one vector of 500 artifacts (BENCH_CONCURRENT sets the workers).
	$(BENCH_SCALE) -bench 'BenchmarkConverge/(100x10|300x10|1x500)$$'

.PHONY: bench-memory
bench-memory: ## Memory: the operator binary's peak RSS and heap with 1,000, 3,000 and 10,000 ArtifactDeployments (three Flux objects each, with Flux's status).
	$(BENCH_SCALE) -bench 'BenchmarkMemory/(100|300|1000)x10$$'

.PHONY: bench-ui
bench-ui: ## The web view (fluxdeployer ui, its own process) on 1,000 ArtifactDeployments the operator converged: first page, page times, peak RSS, live update latency.
	$(BENCH_SCALE) -bench 'BenchmarkUI$$' | tee docs/data/bench-ui.txt

.PHONY: bench-shards
bench-shards: ## Sharding: three shards of 1,000 and of 3,000 ArtifactDeployments, each a binary with its --watch-label-selector, against one shard alone.
	$(BENCH_SCALE) -bench 'BenchmarkShards/3x(100|300)x10$$' | tee docs/data/bench-shards.txt

.PHONY: collisions
collisions: ## Collision statistics of the name hash (docs/data/collisions.*) and the 2,000-artifact collision storm on a real API server.
	@mkdir -p docs/data
	go run ./hack/collisions -seeds 1000 -csv docs/data/collisions.csv | tee docs/data/collisions.md
	assets=$$(hack/test-assets.sh) && FLUXDEPLOYER_STORM=full KUBEBUILDER_ASSETS=$$assets \
		go test ./internal/vectordeployment -run '^TestCollisionStorm$$' -count=1 -v -timeout 30m | tee docs/data/storm.txt

.PHONY: chaos
chaos: ## Chaos at scale: 1,000 artifacts converging while the operator is SIGKILLed 20 times, the API server restarts and the registry is down 30 s; then leader failover (minutes; not part of make test).
	@mkdir -p docs/data
	assets=$$(hack/test-assets.sh) && KUBEBUILDER_ASSETS=$$assets \
		go test ./internal/chaos -run '^$$' -bench '^BenchmarkChaosAtScale$$' -benchtime 1x -timeout 60m | tee docs/data/bench-chaos.txt

.PHONY: plots
plots: ## Draw docs/*.png from the benchmark outputs in docs/data (hack/plots, gonum/plot).
	cd hack/plots && go run . -data ../../docs/data -out ../../docs

.PHONY: build
build: ## Build bin/fluxdeployer (with the version and commit `fluxdeployer version` prints).
	go build -ldflags "$(LDFLAGS)" -o bin/fluxdeployer ./cmd/fluxdeployer

.PHONY: demo
demo: build ## The main job: deploy a sample vector through fluxdeployer and Flux on an embedded control plane (KEEP=1 keeps it running; NODE=1 runs it on a real node as root, Flux and the operator as pods, the workloads' pods started).
	go run ./hack/demo -fluxdeployer bin/fluxdeployer $(if $(KEEP),-keep) $(if $(NODE),-node)

.PHONY: preview
preview: build ## Publish the sample vector (CTF and local registry) and show the names fluxdeployer gives it, without a cluster.
	hack/preview.sh

.PHONY: run
run: manifests ## Run the operator against the current kubeconfig.
	go run ./cmd/fluxdeployer run

# Image and install (see docs/operating.md, "Installing").

.PHONY: image
image: ## Build the image without a container engine: dist/image.tar (docker load) and dist/image-layout (OCI).
	go run ./hack/image -img "$(IMG)" -version "$(VERSION)" -commit "$(COMMIT)" -created "$(CREATED)" \
		-tarball dist/image.tar -layout dist/image-layout

.PHONY: image-push
image-push: ## Build the image without a container engine and push it to IMG (credentials: ~/.docker/config.json).
	go run ./hack/image -img "$(IMG)" -version "$(VERSION)" -commit "$(COMMIT)" -created "$(CREATED)" -push

.PHONY: docker-build
docker-build: ## Build the image IMG with Docker (the Dockerfile).
	docker build --build-arg VERSION="$(VERSION)" --build-arg COMMIT="$(COMMIT)" --build-arg CREATED="$(CREATED)" -t "$(IMG)" .

.PHONY: docker-push
docker-push: ## Push the image IMG with Docker.
	docker push "$(IMG)"

.PHONY: install
install: ## Install the CRDs into the cluster of the current kubeconfig.
	$(KUSTOMIZE) build config/crd | kubectl apply -f -

.PHONY: uninstall
uninstall: ## Remove the CRDs (and with them every VectorDeployment and ArtifactDeployment).
	$(KUSTOMIZE) build config/crd | kubectl delete --ignore-not-found -f -

.PHONY: deploy
deploy: ## Deploy the operator (config/default) running the image IMG.
	hack/kustomize-with-image.sh "$(IMG)" | kubectl apply -f -

.PHONY: undeploy
undeploy: ## Remove what deploy installed, CRDs included.
	$(KUSTOMIZE) build config/default | kubectl delete --ignore-not-found -f -

.PHONY: build-installer
build-installer: ## Write dist/install.yaml: CRDs, RBAC, Deployment and Service running the image IMG.
	@mkdir -p dist
	hack/kustomize-with-image.sh "$(IMG)" >dist/install.yaml.tmp && mv dist/install.yaml.tmp dist/install.yaml
	@echo "wrote dist/install.yaml (image $(IMG))"

# The release (docs/release.md).

.PHONY: release
release: ## Write the release of IMG into DIST (dist/): install.yaml, the linux/amd64 and linux/arm64 image index as an OCI layout and tarball, SBOMs, a cosign signature (COSIGN_KEY, or an ephemeral key) and checksums.
	rm -rf "$(DIST)/image-index"
	go run ./hack/image -img "$(IMG)" -arch amd64,arm64 -version "$(VERSION)" -commit "$(COMMIT)" -created "$(CREATED)" \
		-layout "$(DIST)/image-index"
	go run ./hack/release -dist "$(DIST)" -img "$(IMG)"

.PHONY: test-release
test-release: ## make release into a temporary directory, then hack/release's test checks every artifact and the signature.
	dist=$$(mktemp -d) && trap 'rm -rf "$$dist"' EXIT && $(MAKE) release DIST="$$dist" && \
		RELEASE_DIST="$$dist" RELEASE_IMG="$(IMG)" go test ./hack/release -run '^TestRelease$$' -count=1 -v
