//! The operator as the xDS control plane of the fleets it runs: the index's Envoys,
//! EnvoyRoutes, Services and EndpointSlices in, one snapshot per Envoy out ([`publish`]: the
//! pure translation of [`envoy_operator_core::xds`], converted to Envoy's protobuf messages),
//! served by [`server`] on every replica ([`control_plane`] assembles one), each of which
//! reports its proxies to the leader ([`report`]).

pub mod authorize;
pub mod control_plane;
pub mod debug;
pub mod isolate;
pub mod metrics;
pub mod publish;
pub mod report;
#[cfg(test)]
mod report_tests;
pub mod server;
