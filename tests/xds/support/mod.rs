//! The xDS tests' support: testkit's parts under one name, and the parts that need the
//! library's own types (its xDS server, its identity CA, `operator::run`).

pub mod certs;
pub mod control_plane;
pub mod operator;

pub use envoy_operator_testkit::xds::resources;
pub use envoy_operator_testkit::{CONVERGE, backend, envoy, eventually, fleet, pod_host};
