//! `envoy-operator run` (`operator::run`) as testkit's [`FleetWorld`](envoy_operator_testkit::fleet_world::FleetWorld)
//! starts it: the control plane of one fleet against the in-memory API server.

pub use envoy_operator_harness::fleet_world_operator as run;
pub use envoy_operator_harness::fleet_world_replica as run_as;
