//! Envoy v3 bootstrap configuration, built from typed structs (never string templates). Used
//! by the Envoy reconciler (the fleet's ConfigMap) and by the sidecar injector (inline
//! `--config-yaml`), so both run the same configuration.
//!
//! Every bootstrap has the admin interface on 127.0.0.1 and a readiness listener on
//! [`READINESS_PORT`] that forwards only `GET /ready` to the admin interface: the kubelet
//! probes the pod IP, which the loopback-bound admin interface cannot be reached on. With an
//! xDS server, a static cluster for it (STRICT_DNS, HTTP/2) carries ADS for listeners and
//! clusters.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::api::envoy::{ADMIN_PORT, READINESS_PORT};

/// The xDS server a bootstrap points at: an Envoy's defaulted `spec.xds` (see
/// [`crate::rules::envoy::EffectiveEnvoy`]), a pod annotation or the injector's default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdsTarget {
    pub cluster_name: String,
    pub host: String,
    pub port: u16,
}

/// Builds the bootstrap for a proxy that takes its configuration from `xds`, or an
/// admin-only bootstrap without one.
pub fn bootstrap(xds: Option<&XdsTarget>) -> Bootstrap {
    let mut clusters = vec![Cluster::static_loopback(ADMIN_CLUSTER, ADMIN_PORT as u16)];
    let dynamic_resources = xds.map(|xds| {
        clusters.push(Cluster::xds(xds));
        DynamicResources {
            ads_config: ApiConfigSource {
                api_type: "GRPC",
                transport_api_version: "V3",
                set_node_on_first_message_only: true,
                grpc_services: vec![GrpcService {
                    envoy_grpc: EnvoyGrpc { cluster_name: xds.cluster_name.clone() },
                }],
            },
            lds_config: ConfigSource::ads(),
            cds_config: ConfigSource::ads(),
        }
    });
    Bootstrap {
        admin: Admin { address: Address::socket("127.0.0.1", ADMIN_PORT as u16) },
        static_resources: StaticResources { listeners: vec![Listener::readiness()], clusters },
        dynamic_resources,
    }
}

/// Name of the static cluster that points at the admin interface.
pub const ADMIN_CLUSTER: &str = "envoy_admin";

impl Bootstrap {
    /// The bootstrap as YAML, the form stored in ConfigMaps and read by `envoy -c`.
    pub fn to_yaml(&self) -> String {
        // Plain structs of strings and numbers always serialize.
        serde_saphyr::to_string(self).unwrap_or_default()
    }

    /// The bootstrap as one line of JSON (valid YAML too), for `envoy --config-yaml`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A short, stable hash of the configuration, for pod-template annotations and status.
    pub fn hash(&self) -> String {
        let digest = Sha256::digest(self.to_json().as_bytes());
        digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
    }
}

/// `envoy.config.bootstrap.v3.Bootstrap`, the parts this operator sets.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bootstrap {
    pub admin: Admin,
    pub static_resources: StaticResources,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dynamic_resources: Option<DynamicResources>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Admin {
    pub address: Address,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Address {
    pub socket_address: SocketAddress,
}

impl Address {
    fn socket(address: &str, port_value: u16) -> Self {
        Self { socket_address: SocketAddress { address: address.to_owned(), port_value } }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SocketAddress {
    pub address: String,
    pub port_value: u16,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StaticResources {
    pub listeners: Vec<Listener>,
    pub clusters: Vec<Cluster>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Listener {
    pub name: String,
    pub address: Address,
    pub filter_chains: Vec<FilterChain>,
}

impl Listener {
    /// `0.0.0.0:9902`, routing exactly `/ready` to the admin interface.
    fn readiness() -> Self {
        let route = Route {
            r#match: RouteMatch { path: "/ready".to_owned() },
            route: RouteAction { cluster: ADMIN_CLUSTER.to_owned() },
        };
        let manager = HttpConnectionManager {
            type_url: "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            stat_prefix: "readiness".to_owned(),
            route_config: RouteConfiguration {
                virtual_hosts: vec![VirtualHost {
                    name: "readiness".to_owned(),
                    domains: vec!["*".to_owned()],
                    routes: vec![route],
                }],
            },
            http_filters: vec![HttpFilter {
                name: "envoy.filters.http.router".to_owned(),
                typed_config: TypedConfig {
                    type_url: "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router",
                },
            }],
        };
        Self {
            name: "readiness".to_owned(),
            address: Address::socket("0.0.0.0", READINESS_PORT as u16),
            filter_chains: vec![FilterChain {
                filters: vec![NetworkFilter {
                    name: "envoy.filters.network.http_connection_manager".to_owned(),
                    typed_config: manager,
                }],
            }],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FilterChain {
    pub filters: Vec<NetworkFilter>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NetworkFilter {
    pub name: String,
    pub typed_config: HttpConnectionManager,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HttpConnectionManager {
    #[serde(rename = "@type")]
    pub type_url: &'static str,
    pub stat_prefix: String,
    pub route_config: RouteConfiguration,
    pub http_filters: Vec<HttpFilter>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RouteConfiguration {
    pub virtual_hosts: Vec<VirtualHost>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VirtualHost {
    pub name: String,
    pub domains: Vec<String>,
    pub routes: Vec<Route>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Route {
    pub r#match: RouteMatch,
    pub route: RouteAction,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RouteMatch {
    pub path: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RouteAction {
    pub cluster: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HttpFilter {
    pub name: String,
    pub typed_config: TypedConfig,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TypedConfig {
    #[serde(rename = "@type")]
    pub type_url: &'static str,
}

/// `envoy.config.cluster.v3.Cluster`, the parts this operator sets.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cluster {
    pub name: String,
    pub r#type: &'static str,
    pub connect_timeout: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub typed_extension_protocol_options: Option<ProtocolOptions>,
    pub load_assignment: LoadAssignment,
}

impl Cluster {
    fn static_loopback(name: &str, port: u16) -> Self {
        Self {
            name: name.to_owned(),
            r#type: "STATIC",
            connect_timeout: "1s",
            typed_extension_protocol_options: None,
            load_assignment: LoadAssignment::single(name, "127.0.0.1", port),
        }
    }

    /// The xDS server's cluster: resolved by DNS (STRICT_DNS), spoken to over HTTP/2 (gRPC).
    fn xds(xds: &XdsTarget) -> Self {
        Self {
            name: xds.cluster_name.clone(),
            r#type: "STRICT_DNS",
            connect_timeout: "5s",
            typed_extension_protocol_options: Some(ProtocolOptions {
                http: HttpProtocolOptions {
                    type_url: "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                    explicit_http_config: ExplicitHttpConfig { http2_protocol_options: Empty {} },
                },
            }),
            load_assignment: LoadAssignment::single(&xds.cluster_name, &xds.host, xds.port),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProtocolOptions {
    #[serde(rename = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions")]
    pub http: HttpProtocolOptions,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HttpProtocolOptions {
    #[serde(rename = "@type")]
    pub type_url: &'static str,
    pub explicit_http_config: ExplicitHttpConfig,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExplicitHttpConfig {
    pub http2_protocol_options: Empty,
}

/// An empty message (`{}`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Empty {}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadAssignment {
    pub cluster_name: String,
    pub endpoints: Vec<LocalityEndpoints>,
}

impl LoadAssignment {
    fn single(cluster_name: &str, host: &str, port: u16) -> Self {
        Self {
            cluster_name: cluster_name.to_owned(),
            endpoints: vec![LocalityEndpoints {
                lb_endpoints: vec![LbEndpoint {
                    endpoint: Endpoint { address: Address::socket(host, port) },
                }],
            }],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LocalityEndpoints {
    pub lb_endpoints: Vec<LbEndpoint>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LbEndpoint {
    pub endpoint: Endpoint,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Endpoint {
    pub address: Address,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DynamicResources {
    pub ads_config: ApiConfigSource,
    pub lds_config: ConfigSource,
    pub cds_config: ConfigSource,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ApiConfigSource {
    pub api_type: &'static str,
    pub transport_api_version: &'static str,
    pub set_node_on_first_message_only: bool,
    pub grpc_services: Vec<GrpcService>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GrpcService {
    pub envoy_grpc: EnvoyGrpc,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EnvoyGrpc {
    pub cluster_name: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConfigSource {
    pub ads: Empty,
    pub resource_api_version: &'static str,
}

impl ConfigSource {
    fn ads() -> Self {
        Self { ads: Empty {}, resource_api_version: "V3" }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::manifest::parse_documents;

    fn xds() -> XdsTarget {
        XdsTarget { cluster_name: "xds_cluster".into(), host: "xds-service.default".into(), port: 19000 }
    }

    /// Parses the YAML form back, as Envoy would read it.
    fn parsed(bootstrap: &Bootstrap) -> Value {
        let documents = parse_documents(&bootstrap.to_yaml());
        assert_eq!(documents.len(), 1);
        documents.into_iter().next().unwrap().content.unwrap()
    }

    fn cluster<'a>(config: &'a Value, name: &str) -> &'a Value {
        let clusters = config["static_resources"]["clusters"].as_array().unwrap();
        clusters.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no cluster {name}"))
    }

    #[test]
    fn xds_bootstrap_structure() {
        let config = parsed(&bootstrap(Some(&xds())));
        assert_eq!(
            config["admin"]["address"]["socket_address"],
            json!({"address": "127.0.0.1", "port_value": 9901})
        );

        let xds_cluster = cluster(&config, "xds_cluster");
        assert_eq!(xds_cluster["type"], "STRICT_DNS");
        assert_eq!(
            xds_cluster["typed_extension_protocol_options"]["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
                ["explicit_http_config"]["http2_protocol_options"],
            json!({})
        );
        let endpoint = &xds_cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"];
        assert_eq!(
            endpoint["address"]["socket_address"],
            json!({"address": "xds-service.default", "port_value": 19000})
        );

        let dynamic = &config["dynamic_resources"];
        assert_eq!(dynamic["ads_config"]["api_type"], "GRPC");
        assert_eq!(dynamic["ads_config"]["transport_api_version"], "V3");
        assert_eq!(dynamic["ads_config"]["grpc_services"][0]["envoy_grpc"]["cluster_name"], "xds_cluster");
        for source in ["lds_config", "cds_config"] {
            assert_eq!(dynamic[source], json!({"ads": {}, "resource_api_version": "V3"}));
        }
    }

    #[test]
    fn readiness_listener_exposes_only_ready() {
        let config = parsed(&bootstrap(None));
        let listener = &config["static_resources"]["listeners"][0];
        assert_eq!(listener["address"]["socket_address"]["port_value"], 9902);
        let manager = &listener["filter_chains"][0]["filters"][0]["typed_config"];
        let routes = manager["route_config"]["virtual_hosts"][0]["routes"].as_array().unwrap();
        assert_eq!(routes.len(), 1);
        assert_eq!(routes[0]["match"], json!({"path": "/ready"}));
        assert_eq!(routes[0]["route"]["cluster"], ADMIN_CLUSTER);
        let admin = cluster(&config, ADMIN_CLUSTER);
        assert_eq!(
            admin["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]
                ["address"],
            "127.0.0.1"
        );
    }

    #[test]
    fn admin_only_without_xds() {
        let config = parsed(&bootstrap(None));
        assert!(config.get("dynamic_resources").is_none());
        assert_eq!(config["static_resources"]["clusters"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn json_and_yaml_forms_agree() {
        let config = bootstrap(Some(&xds()));
        let from_json: Value = serde_json::from_str(&config.to_json()).unwrap();
        assert_eq!(from_json, parsed(&config));
    }

    #[test]
    fn hash_follows_the_configuration() {
        let one = bootstrap(Some(&xds()));
        assert_eq!(one.hash(), bootstrap(Some(&xds())).hash());
        assert_eq!(one.hash().len(), 16);
        let moved = XdsTarget { port: 19001, ..xds() };
        assert_ne!(one.hash(), bootstrap(Some(&moved)).hash());
        assert_ne!(one.hash(), bootstrap(None).hash());
    }
}
