//! Clusters: one EDS cluster per backend, its endpoints served by EDS over the ADS stream under
//! the cluster's own name, speaking the backend's HTTP: HTTP/1.1 (Envoy's default) or HTTP/2
//! with prior knowledge ([`ir::BackendProtocol`]).

use crate::envoy::{
    Address, Cluster, ClusterLoadAssignment, ConfigSource, DiscoveryType, Duration, EdsClusterConfig,
    LbPolicy, ProtocolOptions,
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
        typed_extension_protocol_options: match backend.protocol {
            // TCP (a TLS passthrough's backends): no HTTP options at all.
            ir::BackendProtocol::Http1 | ir::BackendProtocol::Tcp => None,
            ir::BackendProtocol::Http2 => Some(ProtocolOptions::http2()),
        },
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn backend(protocol: ir::BackendProtocol) -> ir::Backend {
        ir::Backend { name: "shop/grpc/8081".into(), endpoints: Vec::new(), protocol }
    }

    /// An h2c backend's cluster speaks HTTP/2 with prior knowledge; any other keeps Envoy's
    /// HTTP/1.1 (no protocol options at all).
    #[test]
    fn an_h2c_backend_gets_http2_with_prior_knowledge() {
        let h2c = serde_json::to_value(cluster(&backend(ir::BackendProtocol::Http2))).unwrap();
        assert_eq!(
            h2c["typed_extension_protocol_options"],
            json!({"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}}}})
        );
        let http1 = serde_json::to_value(cluster(&backend(ir::BackendProtocol::Http1))).unwrap();
        assert!(http1.get("typed_extension_protocol_options").is_none(), "{http1}");
    }
}
