# syntax=docker/dockerfile:1
#
# kernelstream consumer image: a static Go binary on distroless/static,
# running as the non-root user 65532.
#
#   make image IMAGE=ghcr.io/kernelstream/kernelstream-consumer VERSION=0.1.0
#   (= docker build --build-arg VERSION=0.1.0 -t ghcr.io/kernelstream/kernelstream-consumer:0.1.0 .)
#   docker buildx build --platform linux/amd64,linux/arm64 -t ... --push .
#
# The StatefulSet in deployments/k8s mounts the configuration at
# /etc/kernelstream/config.yaml (the default CMD) and the state volume at
# /var/lib/kernelstream. deployments/k8s/k8s_test.go checks this file against
# the manifests.

ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
# Modules first, so that source edits reuse the download layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH=amd64
# The release name reported by -version and kernelstream_build_info.
ARG VERSION=devel
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w -X github.com/kernelstream/kernelstream/internal/buildinfo.Version=$VERSION" \
    -o /out/kernelstream-consumer ./cmd/consumer
# The state directory, owned by the runtime user, for runs without a volume.
RUN mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kernelstream-consumer /kernelstream-consumer
COPY --from=build --chown=65532:65532 /out/state /var/lib/kernelstream
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/kernelstream-consumer"]
CMD ["-config", "/etc/kernelstream/config.yaml"]
