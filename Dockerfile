# syntax=docker/dockerfile:1
# gpu-memory-guard container image.
#
# The builder runs the SAME dependency script as CI (.ci/install-deps.sh) and the SAME CMake
# configure/build lines as the Makefile's `build` target, so the image cannot drift from what
# `make test` builds and tests; test/e2e/install-proof.sh checks both statically (there is no
# container engine on the development machines to build this file there). Pin the two base
# images by digest in your registry mirror for reproducible builds.

ARG DEBIAN_TAG=12
ARG DEBIAN_SLIM_TAG=12-slim

FROM debian:${DEBIAN_TAG} AS builder
WORKDIR /src
COPY .ci/install-deps.sh .ci/install-deps.sh
RUN bash .ci/install-deps.sh
COPY . .
# Same lines as the Makefile's `build` target (BUILD=build).
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null \
 && cmake --build build -j "$(nproc)" --target gpu-memory-guard \
 && build/gpu-memory-guard version

FROM debian:${DEBIAN_SLIM_TAG}
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="gpu-memory-guard" \
      org.opencontainers.image.description="Validating admission webhook that keeps each node's declared GPU memory under a threshold of its HBM" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="docker.io/library/debian:12-slim" \
      org.opencontainers.image.documentation="docs/install.md"
# Runtime libraries only: one per library the binary links (checked by install-proof.sh with
# the binary's DT_NEEDED entries), plus CA certificates.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libmicrohttpd12 libgnutls30 libssl3 libcjson1 libcurl4 libyaml-0-2 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=builder /src/build/gpu-memory-guard /usr/local/bin/gpu-memory-guard
# Numeric user and group, so runAsNonRoot can be verified without /etc/passwd; the process
# needs no shell, no writable root filesystem and no capabilities.
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/gpu-memory-guard"]
CMD ["serve"]
