# syntax=docker/dockerfile:1
# The fluxdeployer image for machines with Docker: make docker-build docker-push IMG=... (the Makefile passes
# VERSION, COMMIT and CREATED). hack/image (make image) builds the same image without a container engine.

# Build a static binary on the build machine's platform, for the target's.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
ARG COMMIT=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
COPY pkg/ pkg/
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/fluxdeployer/fluxdeployer/internal/version.Version=${VERSION} -X github.com/fluxdeployer/fluxdeployer/internal/version.Commit=${COMMIT}" \
      -o /out/fluxdeployer ./cmd/fluxdeployer

# Distroless static: CA certificates, /etc/passwd with nonroot (65532), no shell.
FROM gcr.io/distroless/static:nonroot
ARG VERSION=dev
ARG COMMIT=unknown
ARG CREATED
LABEL org.opencontainers.image.title="fluxdeployer" \
      org.opencontainers.image.description="Kubernetes operator that deploys OCM vectors through Flux" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.source="https://github.com/fluxdeployer/fluxdeployer" \
      org.opencontainers.image.url="https://github.com/fluxdeployer/fluxdeployer" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.created="${CREATED}"
COPY --from=build /out/fluxdeployer /fluxdeployer
USER 65532:65532
ENTRYPOINT ["/fluxdeployer"]
