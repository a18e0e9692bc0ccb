//! The fleets' proxies as the operator's xDS server sees them, across replicas: every replica
//! reports its connected proxies ([`report`]), and the leader aggregates the reports into each
//! Envoy's `status.xds` and `ConfigAccepted` condition ([`status`]).

pub mod isolate;
pub mod report;
pub mod status;
