//! Clusters (CDS) and their endpoints (EDS, or inline in a static cluster).

use serde::Serialize;

use super::any::{Packable, packed};
use super::core::{Address, ConfigSource, Duration, Empty};
use super::tls::TransportSocket;
use super::type_urls;

/// `envoy.config.cluster.v3.Cluster`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Cluster {
    pub name: String,
    /// A member of the oneof `cluster_discovery_type`.
    #[serde(rename = "type")]
    pub discovery_type: DiscoveryType,
    pub connect_timeout: Duration,
    /// Envoy's default (round robin) when not set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lb_policy: Option<LbPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub typed_extension_protocol_options: Option<ProtocolOptions>,
    /// Where an [`DiscoveryType::Eds`] cluster's endpoints come from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eds_cluster_config: Option<EdsClusterConfig>,
    /// The endpoints of a [`DiscoveryType::Static`] or [`DiscoveryType::StrictDns`] cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_assignment: Option<ClusterLoadAssignment>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport_socket: Option<TransportSocket>,
}

impl Packable for Cluster {
    const TYPE_URL: &'static str = type_urls::CLUSTER;
}

/// `envoy.config.cluster.v3.Cluster.DiscoveryType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DiscoveryType {
    Static,
    /// The load assignment's hosts resolved by DNS, every address an endpoint.
    StrictDns,
    Eds,
    /// Each connection goes where it was first headed (the original destination a listener's
    /// [`OriginalDst`](super::listener::OriginalDst) restored): a mesh sidecar's pass-through.
    OriginalDst,
}

/// `envoy.config.cluster.v3.Cluster.LbPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LbPolicy {
    RoundRobin,
    /// The cluster picks the host itself ([`DiscoveryType::OriginalDst`] requires it).
    ClusterProvided,
}

/// `envoy.config.cluster.v3.Cluster.EdsClusterConfig`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EdsClusterConfig {
    pub eds_config: ConfigSource,
    pub service_name: String,
}

/// The map `typed_extension_protocol_options` of a [`Cluster`], by extension name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ProtocolOptions {
    #[serde(rename = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions", serialize_with = "packed")]
    pub http: HttpProtocolOptions,
}

/// `envoy.extensions.upstreams.http.v3.HttpProtocolOptions`, with the oneof
/// `upstream_protocol_options` set to `explicit_http_config`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HttpProtocolOptions {
    pub explicit_http_config: ExplicitHttpConfig,
}

impl Packable for HttpProtocolOptions {
    const TYPE_URL: &'static str = type_urls::HTTP_PROTOCOL_OPTIONS;
}

impl ProtocolOptions {
    /// HTTP/2 to the cluster's endpoints, with prior knowledge (no ALPN, no upgrade): h2c in
    /// cleartext, or over the cluster's TLS.
    pub fn http2() -> Self {
        Self {
            http: HttpProtocolOptions {
                explicit_http_config: ExplicitHttpConfig { http2_protocol_options: Empty {} },
            },
        }
    }
}

/// `envoy.extensions.upstreams.http.v3.HttpProtocolOptions.ExplicitHttpConfig`, always HTTP/2
/// (the oneof `protocol_config` set to `http2_protocol_options`, all defaults).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExplicitHttpConfig {
    pub http2_protocol_options: Empty,
}

/// `envoy.config.endpoint.v3.ClusterLoadAssignment`. No endpoints is a valid assignment:
/// Envoy answers 503 for the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClusterLoadAssignment {
    pub cluster_name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<LocalityLbEndpoints>,
}

impl Packable for ClusterLoadAssignment {
    const TYPE_URL: &'static str = type_urls::CLUSTER_LOAD_ASSIGNMENT;
}

impl ClusterLoadAssignment {
    /// `cluster_name`'s endpoints at `addresses`, in one locality (none without addresses).
    pub fn of(cluster_name: impl Into<String>, addresses: impl IntoIterator<Item = Address>) -> Self {
        let lb_endpoints: Vec<LbEndpoint> =
            addresses.into_iter().map(|address| LbEndpoint { endpoint: Endpoint { address } }).collect();
        Self {
            cluster_name: cluster_name.into(),
            endpoints: if lb_endpoints.is_empty() {
                Vec::new()
            } else {
                vec![LocalityLbEndpoints { lb_endpoints }]
            },
        }
    }
}

/// `envoy.config.endpoint.v3.LocalityLbEndpoints`, without a locality.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LocalityLbEndpoints {
    pub lb_endpoints: Vec<LbEndpoint>,
}

/// `envoy.config.endpoint.v3.LbEndpoint`, with the oneof `host_identifier` set to `endpoint`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LbEndpoint {
    pub endpoint: Endpoint,
}

/// `envoy.config.endpoint.v3.Endpoint`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Endpoint {
    pub address: Address,
}
