//! The e2e harness is `envoy_operator_testkit::e2e`; the operator it starts in-process (the same
//! `operator::run` as `envoy-operator run`) is `envoy_operator_harness`'s.

pub use envoy_operator_harness::{in_cluster, in_cluster_watching_all};
pub use envoy_operator_testkit::e2e::*;
