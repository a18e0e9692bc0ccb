# syntax=docker/dockerfile:1
# A small, non-root image of envoy-operator: build with the Rust toolchain, run on Debian slim
# with iptables, which `envoy-operator mesh-init` (a mesh sidecar's capture init container, run
# from this same image as root with NET_ADMIN and NET_RAW) pipes its rules to.
#   docker build -t envoy-operator:0.1.0 .
FROM rust:1.89-slim-bookworm AS build
WORKDIR /src
COPY . .
# Cache the registry and the target directory between builds; copy the binary out of the cache.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin envoy-operator \
 && cp target/release/envoy-operator /envoy-operator

# glibc, libgcc, CA certificates and iptables (the nf_tables backend, Debian's default); runs
# as uid 65532 unless a pod says otherwise (only the capture init container does).
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates iptables \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /envoy-operator /usr/local/bin/envoy-operator
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/envoy-operator"]
CMD ["run"]
