//! Clusters: one EDS cluster per backend, its endpoints served by EDS over the ADS stream under
//! the cluster's own name.

use crate::envoy::{
    Address, Cluster, ClusterLoadAssignment, ConfigSource, DiscoveryType, Duration, EdsClusterConfig,
    LbPolicy,
};
use crate::ir;

/// How long Envoy waits for a connection to an endpoint.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

pub fn cluster(backend: &ir::Backend) -> Cluster {
    Cluster {
        name: backend.name.clone(),
        discovery_type: DiscoveryType::Eds,
        connect_timeout: CONNECT_TIMEOUT,
        lb_policy: Some(LbPolicy::RoundRobin),
        typed_extension_protocol_options: None,
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: ConfigSource::ads(),
            service_name: backend.name.clone(),
        }),
        load_assignment: None,
        transport_socket: None,
    }
}

/// The backend's endpoints. No endpoints is a valid assignment: Envoy answers 503.
pub fn cluster_load_assignment(backend: &ir::Backend) -> ClusterLoadAssignment {
    let addresses = backend
        .endpoints
        .iter()
        .map(|endpoint| Address::socket(endpoint.ip.to_string(), u32::from(endpoint.port)));
    ClusterLoadAssignment::of(backend.name.clone(), addresses)
}
