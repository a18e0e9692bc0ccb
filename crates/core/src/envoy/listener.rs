//! Listeners (LDS) and what they hold: listener filters, filter chains (chosen by the name a
//! TLS client asks for, each terminating TLS with its certificates), the HTTP connection
//! manager, its HTTP filters and access logs.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Serialize, Serializer};

use super::any::{Packable, packed};
use super::core::{Address, ConfigSource};
use super::route::RouteConfiguration;
use super::tls::{DownstreamTlsContext, TransportSocket};
use super::{extension_names, type_urls};

fn is_false(value: &bool) -> bool {
    !*value
}

/// `envoy.config.listener.v3.Listener`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Listener {
    pub name: String,
    pub address: Address,
    /// Run on each new connection before a filter chain is chosen.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub listener_filters: Vec<ListenerFilter>,
    pub filter_chains: Vec<FilterChain>,
}

impl Packable for Listener {
    const TYPE_URL: &'static str = type_urls::LISTENER;
}

impl Listener {
    /// The route configurations Envoy requests over the ADS stream because of this listener
    /// (its HTTP connection managers' RDS names), sorted, each once. The xDS server checks a
    /// snapshot's consistency and orders its pushes by them; it learns them here, from the
    /// model, since the encoded listener hides them in an `Any`.
    pub fn ads_route_configurations(&self) -> Vec<&str> {
        let managers = self.filter_chains.iter().flat_map(|chain| &chain.filters).filter_map(|filter| {
            match &filter.typed_config {
                NetworkFilterConfig::HttpConnectionManager(manager) => Some(manager),
                NetworkFilterConfig::TcpProxy(_) => None,
            }
        });
        let names: BTreeSet<&str> = managers
            .filter_map(|manager| match &manager.route_specifier {
                RouteSpecifier::Rds(rds) if rds.config_source.is_ads() => {
                    Some(rds.route_config_name.as_str())
                }
                _ => None,
            })
            .collect();
        names.into_iter().collect()
    }

    /// The secrets Envoy requests over the ADS stream because of this listener (the
    /// certificates its filter chains present), sorted, each once: like
    /// [`ads_route_configurations`](Self::ads_route_configurations), for the xDS server.
    pub fn ads_secrets(&self) -> Vec<&str> {
        let configs =
            self.filter_chains.iter().filter_map(|chain| chain.transport_socket.as_ref()).flat_map(
                |socket| &socket.typed_config.common_tls_context.tls_certificate_sds_secret_configs,
            );
        let names: BTreeSet<&str> =
            configs.filter(|config| config.is_ads()).map(|config| config.name.as_str()).collect();
        names.into_iter().collect()
    }
}

/// `envoy.config.listener.v3.ListenerFilter`, with the oneof `config_type` set to
/// `typed_config`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ListenerFilter {
    pub name: String,
    pub typed_config: ListenerFilterConfig,
}

impl ListenerFilter {
    /// Reads the TLS ClientHello (SNI, ALPN) so a filter chain can be chosen by server name.
    pub fn tls_inspector() -> Self {
        Self {
            name: extension_names::TLS_INSPECTOR.to_owned(),
            typed_config: ListenerFilterConfig::TlsInspector(TlsInspector {}),
        }
    }

    /// Restores a redirected connection's original destination ([`OriginalDst`]).
    pub fn original_dst() -> Self {
        Self {
            name: extension_names::ORIGINAL_DST.to_owned(),
            typed_config: ListenerFilterConfig::OriginalDst(OriginalDst {}),
        }
    }
}

/// The `google.protobuf.Any` of a listener filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenerFilterConfig {
    TlsInspector(TlsInspector),
    OriginalDst(OriginalDst),
}

impl Serialize for ListenerFilterConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::TlsInspector(inspector) => packed(inspector, serializer),
            Self::OriginalDst(original) => packed(original, serializer),
        }
    }
}

/// `envoy.extensions.filters.listener.original_dst.v3.OriginalDst`, all defaults: a
/// connection redirected to the listener (iptables `REDIRECT`) gets back the destination it
/// was opened to (`SO_ORIGINAL_DST`), which its filter chain is then chosen by.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OriginalDst {}

impl Packable for OriginalDst {
    const TYPE_URL: &'static str = type_urls::ORIGINAL_DST;
}

/// `envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector`, all defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TlsInspector {}

impl Packable for TlsInspector {
    const TYPE_URL: &'static str = type_urls::TLS_INSPECTOR;
}

/// `envoy.config.listener.v3.FilterChain`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FilterChain {
    /// Unique in the listener when set (it names the chain in stats and config dumps).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Which connections the chain takes; `None`: any (that no other chain matches better).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter_chain_match: Option<FilterChainMatch>,
    pub filters: Vec<Filter>,
    /// TLS terminated by the chain; `None`: plain TCP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport_socket: Option<TransportSocket<DownstreamTlsContext>>,
}

impl FilterChain {
    /// A chain for every connection, plain TCP, through `filters`.
    pub fn of(filters: Vec<Filter>) -> Self {
        Self { name: String::new(), filter_chain_match: None, filters, transport_socket: None }
    }
}

/// `envoy.config.listener.v3.FilterChainMatch`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FilterChainMatch {
    /// The connection's destination port (its original one, behind [`OriginalDst`]); `None`:
    /// any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination_port: Option<u32>,
    /// The connection's destination address; empty: any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prefix_ranges: Vec<CidrRange>,
    /// SNI names (`shop.example.com`, `*.example.com`); empty: any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub server_names: Vec<String>,
}

/// `envoy.config.core.v3.CidrRange`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CidrRange {
    pub address_prefix: String,
    pub prefix_len: u32,
}

impl CidrRange {
    /// The range of the one address `ip`.
    pub fn host(ip: std::net::IpAddr) -> Self {
        Self { address_prefix: ip.to_string(), prefix_len: if ip.is_ipv4() { 32 } else { 128 } }
    }
}

/// `envoy.config.listener.v3.Filter`, with the oneof `config_type` set to `typed_config`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Filter {
    pub name: String,
    pub typed_config: NetworkFilterConfig,
}

impl Filter {
    pub fn http_connection_manager(manager: HttpConnectionManager) -> Self {
        Self {
            name: extension_names::HTTP_CONNECTION_MANAGER.to_owned(),
            typed_config: NetworkFilterConfig::HttpConnectionManager(manager),
        }
    }

    pub fn tcp_proxy(proxy: TcpProxy) -> Self {
        Self {
            name: extension_names::TCP_PROXY.to_owned(),
            typed_config: NetworkFilterConfig::TcpProxy(proxy),
        }
    }
}

/// The `google.protobuf.Any` of a network filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetworkFilterConfig {
    HttpConnectionManager(HttpConnectionManager),
    TcpProxy(TcpProxy),
}

impl Serialize for NetworkFilterConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::HttpConnectionManager(manager) => packed(manager, serializer),
            Self::TcpProxy(proxy) => packed(proxy, serializer),
        }
    }
}

/// `envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy`: the connection's bytes to a
/// cluster, or to one of several by weight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TcpProxy {
    pub stat_prefix: String,
    #[serde(flatten)]
    pub cluster_specifier: TcpProxyClusters,
}

impl Packable for TcpProxy {
    const TYPE_URL: &'static str = type_urls::TCP_PROXY;
}

/// The oneof `cluster_specifier` of [`TcpProxy`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TcpProxyClusters {
    Cluster(String),
    WeightedClusters(TcpWeightedClusters),
}

/// `envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.WeightedCluster`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TcpWeightedClusters {
    pub clusters: Vec<TcpClusterWeight>,
}

/// `envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy.WeightedCluster.ClusterWeight`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TcpClusterWeight {
    pub name: String,
    pub weight: u32,
}

/// `envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HttpConnectionManager {
    pub stat_prefix: String,
    #[serde(flatten)]
    pub route_specifier: RouteSpecifier,
    pub http_filters: Vec<HttpFilter>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub access_log: Vec<AccessLog>,
    /// `google.protobuf.BoolValue`: RFC 3986 normalization of the path before routing, so
    /// `/a/../admin` cannot slip past a prefix match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub normalize_path: Option<bool>,
    #[serde(skip_serializing_if = "is_false")]
    pub merge_slashes: bool,
    /// The protocol upgrades let through to the upstream (`websocket`); Envoy refuses the
    /// others (403).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub upgrade_configs: Vec<UpgradeConfig>,
}

/// `envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager.UpgradeConfig`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UpgradeConfig {
    /// The `Upgrade` header's value, case-insensitive (`websocket`).
    pub upgrade_type: String,
}

impl UpgradeConfig {
    pub fn websocket() -> Self {
        Self { upgrade_type: "websocket".to_owned() }
    }
}

impl Packable for HttpConnectionManager {
    const TYPE_URL: &'static str = type_urls::HTTP_CONNECTION_MANAGER;
}

/// The oneof `route_specifier` of [`HttpConnectionManager`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RouteSpecifier {
    /// The route configuration comes by RDS (what the xDS server serves).
    Rds(Rds),
    /// The route configuration inline (a bootstrap's static listener).
    RouteConfig(RouteConfiguration),
}

/// `envoy.extensions.filters.network.http_connection_manager.v3.Rds`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Rds {
    pub config_source: ConfigSource,
    pub route_config_name: String,
}

/// `envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter`, with the oneof
/// `config_type` set to `typed_config`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HttpFilter {
    pub name: String,
    pub typed_config: HttpFilterConfig,
}

impl HttpFilter {
    /// The router, the last HTTP filter: it sends the request where the route says.
    pub fn router() -> Self {
        Self { name: extension_names::ROUTER.to_owned(), typed_config: HttpFilterConfig::Router(Router {}) }
    }
}

/// The `google.protobuf.Any` of an HTTP filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpFilterConfig {
    Router(Router),
}

impl Serialize for HttpFilterConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Router(router) => packed(router, serializer),
        }
    }
}

/// `envoy.extensions.filters.http.router.v3.Router`, all defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Router {}

impl Packable for Router {
    const TYPE_URL: &'static str = type_urls::ROUTER;
}

/// `envoy.config.accesslog.v3.AccessLog`, with the oneof `config_type` set to `typed_config`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AccessLog {
    pub name: String,
    pub typed_config: AccessLogConfig,
}

/// The `google.protobuf.Any` of an access logger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccessLogConfig {
    Stdout(StdoutAccessLog),
}

impl Serialize for AccessLogConfig {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Stdout(stdout) => packed(stdout, serializer),
        }
    }
}

/// `envoy.extensions.access_loggers.stream.v3.StdoutAccessLog`, with the oneof
/// `access_log_format` set to `log_format`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StdoutAccessLog {
    pub log_format: SubstitutionFormatString,
}

impl Packable for StdoutAccessLog {
    const TYPE_URL: &'static str = type_urls::STDOUT_ACCESS_LOG;
}

/// `envoy.config.core.v3.SubstitutionFormatString`, with the oneof `format` set to
/// `json_format` (a `google.protobuf.Struct` whose values are all strings here: a key per
/// field of the log line, its value a format string such as `%RESPONSE_CODE%`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SubstitutionFormatString {
    pub json_format: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::super::core::ConfigSource;
    use super::super::tls::{CommonTlsContext, SdsSecretConfig};
    use super::*;

    fn manager(route_specifier: RouteSpecifier) -> Filter {
        Filter::http_connection_manager(HttpConnectionManager {
            stat_prefix: "http".into(),
            route_specifier,
            http_filters: Vec::new(),
            access_log: Vec::new(),
            normalize_path: None,
            merge_slashes: false,
            upgrade_configs: Vec::new(),
        })
    }

    fn rds(config_source: ConfigSource, name: &str) -> Filter {
        manager(RouteSpecifier::Rds(Rds { config_source, route_config_name: name.into() }))
    }

    #[test]
    fn a_listener_references_the_route_configurations_of_its_connection_managers() {
        let inline = RouteConfiguration {
            name: "inline".into(),
            virtual_hosts: Vec::new(),
            ignore_port_in_host_matching: false,
            validate_clusters: None,
            most_specific_header_mutations_wins: false,
        };
        let listener = Listener {
            name: "http".into(),
            address: Address::socket("0.0.0.0", 8080),
            listener_filters: Vec::new(),
            filter_chains: vec![
                FilterChain::of(vec![rds(ConfigSource::ads(), "b")]),
                FilterChain::of(vec![
                    rds(ConfigSource::ads(), "a"),
                    rds(ConfigSource::ads(), "b"),
                    rds(ConfigSource::watched_file("/etc/envoy/routes.yaml"), "from-a-file"),
                    manager(RouteSpecifier::RouteConfig(inline)),
                ]),
            ],
        };
        assert_eq!(listener.ads_route_configurations(), ["a", "b"]);
        assert!(listener.ads_secrets().is_empty(), "plain chains present no certificate");
    }

    #[test]
    fn a_listener_references_the_certificates_its_chains_present_over_ads() {
        let presenting = |names: &[&str]| {
            let mut certificates: Vec<SdsSecretConfig> =
                names.iter().map(|name| SdsSecretConfig::ads(*name)).collect();
            certificates.push(SdsSecretConfig {
                name: "from-a-file".into(),
                sds_config: ConfigSource::watched_file("/etc/envoy/cert.yaml"),
            });
            FilterChain {
                transport_socket: Some(TransportSocket::downstream_tls(DownstreamTlsContext {
                    common_tls_context: CommonTlsContext {
                        alpn_protocols: Vec::new(),
                        tls_certificate_sds_secret_configs: certificates,
                        validation_context_sds_secret_config: None,
                    },
                })),
                ..FilterChain::of(vec![rds(ConfigSource::ads(), "r")])
            }
        };
        let listener = Listener {
            name: "https".into(),
            address: Address::socket("0.0.0.0", 8443),
            listener_filters: vec![ListenerFilter::tls_inspector()],
            filter_chains: vec![presenting(&["shop/b", "shop/a"]), presenting(&["shop/a"])],
        };
        assert_eq!(listener.ads_secrets(), ["shop/a", "shop/b"]);
        assert_eq!(listener.ads_route_configurations(), ["r"]);
    }
}
