# Image of the vpa-inplace updater. Build from the repository root:
#   docker build -f build/updater.Dockerfile -t vpa-inplace/updater:dev .
# A static binary on a distroless base: no shell, no package manager, runs as
# the unprivileged user 65532 that deploy/ also sets.

ARG GO_IMAGE=golang:1.26
ARG RUNTIME_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${GO_IMAGE} AS builder
WORKDIR /src
# Dependencies first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} GOFLAGS=-mod=readonly \
    go build -trimpath -ldflags="-s -w" -o /out/updater ./cmd/updater

FROM ${RUNTIME_IMAGE}
COPY --from=builder /out/updater /updater
USER 65532:65532
ENTRYPOINT ["/updater"]
