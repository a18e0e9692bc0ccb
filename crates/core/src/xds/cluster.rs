//! Clusters: one EDS cluster per backend, its endpoints served by EDS over the ADS stream under
//! the cluster's own name.

use crate::envoy::{
    Address, Cluster, ClusterLoadAssignment, ConfigSource, DiscoveryType, Duration, EdsClusterConfig, Empty,
    ExplicitHttpConfig, HttpProtocolOptions, LbPolicy, ProtocolOptions,
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
        typed_extension_protocol_options: protocol_options(backend.protocol),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: ConfigSource::ads(),
            service_name: backend.name.clone(),
        }),
        load_assignment: None,
        transport_socket: None,
    }
}

/// Envoy speaks HTTP/1.1 to a cluster unless told otherwise; HTTP/2 is said explicitly (no
/// ALPN to negotiate it over cleartext), as Envoy Gateway does for gRPC backends.
fn protocol_options(protocol: ir::BackendProtocol) -> Option<ProtocolOptions> {
    match protocol {
        // TCP (a TLS passthrough's backends): no HTTP options at all.
        ir::BackendProtocol::Http1 | ir::BackendProtocol::Tcp => None,
        ir::BackendProtocol::Http2 => Some(ProtocolOptions {
            http: HttpProtocolOptions {
                explicit_http_config: ExplicitHttpConfig { http2_protocol_options: Empty {} },
            },
        }),
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn backend(protocol: ir::BackendProtocol) -> ir::Backend {
        ir::Backend { name: "shop/grpc/8080/h2c".into(), protocol, endpoints: Vec::new() }
    }

    #[test]
    fn http2_backends_are_clusters_told_to_speak_http2() {
        let options = |protocol| {
            serde_json::to_value(cluster(&backend(protocol))).unwrap()["typed_extension_protocol_options"]
                .clone()
        };
        assert_eq!(options(ir::BackendProtocol::Http1), serde_json::Value::Null, "Envoy's default, HTTP/1.1");
        assert_eq!(
            options(ir::BackendProtocol::Http2)["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]["explicit_http_config"],
            json!({"http2_protocol_options": {}})
        );
    }
}
