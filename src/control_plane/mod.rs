//! The operator as the xDS control plane of the fleets it runs: informer caches of Envoys,
//! EnvoyRoutes, Services and EndpointSlices in, one snapshot per Envoy out (the pure
//! translation of [`envoy_operator_core::xds`], converted to Envoy's protobuf messages), served
//! by [`crate::xds_server`] on every replica, each of which reports its proxies to the leader
//! ([`report`]).

pub mod authorize;
pub mod convert;
pub mod inputs;
pub mod metrics;
pub mod publish;
pub mod report;
#[cfg(test)]
mod report_tests;
pub mod server;
pub mod trust;
