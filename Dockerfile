# syntax=docker/dockerfile:1
# A small, non-root image of envoy-operator: build with the Rust toolchain, run on distroless.
#   docker build -t envoy-operator:0.1.0 .
FROM rust:1.89-slim-bookworm AS build
WORKDIR /src
COPY . .
# Cache the registry and the target directory between builds; copy the binary out of the cache.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin envoy-operator \
 && cp target/release/envoy-operator /envoy-operator

# glibc and libgcc only, no shell, uid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /envoy-operator /usr/local/bin/envoy-operator
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/envoy-operator"]
CMD ["run"]
