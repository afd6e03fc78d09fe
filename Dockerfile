# Multi-stage build of the receiver: a static binary on a distroless base.
# docker build --build-arg VERSION=$(git describe --tags --always --dirty) .
# stamps the version (`server version`, the start-up log, paywebhooks_build_info,
# and the image's org.opencontainers.image.version label).
FROM golang:1.27.3-bookworm AS build
ARG VERSION=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath \
    -ldflags="-s -w -X github.com/paywebhooks/receiver/internal/version.Version=${VERSION}" \
    -o /out/server ./cmd/server

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=unknown
LABEL org.opencontainers.image.title="paywebhooks receiver" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="MIT"
COPY --from=build /out/server /server
EXPOSE 8080
USER nonroot:nonroot
# distroless has no shell or curl: the binary checks itself, GET /healthz on
# HTTP_ADDR's port (no database needed; readiness is GET /readyz).
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/server", "healthcheck"]
ENTRYPOINT ["/server"]
