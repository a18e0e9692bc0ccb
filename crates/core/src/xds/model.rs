//! The Envoy resources the translation produces, as typed structs that serialize to Envoy's own
//! JSON (the proto3 JSON mapping with the protos' field names, `"@type"` on typed configs), so
//! a golden file or `envoy --mode validate` reads them as Envoy would.
//!
//! Only the fields the translation sets are here, one struct per Envoy message, named after it
//! and documented with its full proto name, so converting them to protobuf messages is a
//! field-by-field copy. A proto `oneof` is an enum (flattened into its message, as proto3 JSON
//! writes oneof members as fields of the message); unset scalar and message fields are skipped,
//! as proto3 JSON omits defaults.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Serialize, Serializer};

/// The type URLs of the four resource types the translation serves, as the xDS server names
/// them in its responses (and as `"@type"` names them in typed configs).
pub mod type_urls {
    pub const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
    pub const ROUTE_CONFIGURATION: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
    pub const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    pub const CLUSTER_LOAD_ASSIGNMENT: &str =
        "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
}

fn is_false(value: &bool) -> bool {
    !*value
}

// ---------------------------------------------------------------------------------------------
// Common types

/// `google.protobuf.Duration`. Proto3 JSON writes it as seconds with 0, 3, 6 or 9 fractional
/// digits and an `s` suffix (`"5s"`, `"1.500s"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration {
    pub seconds: i64,
    /// Always in `0..1_000_000_000`.
    pub nanos: i32,
}

impl Duration {
    pub const ZERO: Duration = Duration { seconds: 0, nanos: 0 };

    pub const fn from_secs(seconds: u32) -> Self {
        Self { seconds: seconds as i64, nanos: 0 }
    }

    pub const fn from_millis(millis: u64) -> Self {
        Self { seconds: (millis / 1000) as i64, nanos: ((millis % 1000) * 1_000_000) as i32 }
    }
}

impl From<std::time::Duration> for Duration {
    fn from(duration: std::time::Duration) -> Self {
        Self {
            seconds: i64::try_from(duration.as_secs()).unwrap_or(i64::MAX),
            // Always below 1_000_000_000.
            nanos: duration.subsec_nanos() as i32,
        }
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (seconds, nanos) = (self.seconds, self.nanos);
        match nanos {
            0 => write!(f, "{seconds}s"),
            n if n % 1_000_000 == 0 => write!(f, "{seconds}.{:03}s", n / 1_000_000),
            n if n % 1_000 == 0 => write!(f, "{seconds}.{:06}s", n / 1_000),
            n => write!(f, "{seconds}.{n:09}s"),
        }
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// An empty message, such as `envoy.config.core.v3.AggregatedConfigSource` (`{}`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Empty {}

/// `envoy.config.core.v3.ApiVersion`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ApiVersion {
    V3,
}

/// `envoy.config.core.v3.ConfigSource`, always over the aggregated (ADS) stream: the oneof
/// `config_source_specifier` set to `ads`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConfigSource {
    pub ads: Empty,
    pub resource_api_version: ApiVersion,
}

impl ConfigSource {
    /// The resource comes over the ADS stream the bootstrap opens, in the v3 API.
    pub fn ads() -> Self {
        Self { ads: Empty {}, resource_api_version: ApiVersion::V3 }
    }
}

/// `envoy.config.core.v3.Address`, with the oneof `address` set to `socket_address`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Address {
    pub socket_address: SocketAddress,
}

impl Address {
    pub fn socket(address: impl Into<String>, port_value: u32) -> Self {
        Self { socket_address: SocketAddress { address: address.into(), port_value } }
    }
}

/// `envoy.config.core.v3.SocketAddress` (TCP), with the oneof `port_specifier` set to
/// `port_value`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SocketAddress {
    pub address: String,
    pub port_value: u32,
}

/// `envoy.config.core.v3.HeaderValueOption`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HeaderValueOption {
    pub header: HeaderValue,
    pub append_action: HeaderAppendAction,
}

/// `envoy.config.core.v3.HeaderValue`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HeaderValue {
    pub key: String,
    pub value: String,
}

/// `envoy.config.core.v3.HeaderValueOption.HeaderAppendAction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum HeaderAppendAction {
    /// Another value for the header (Gateway API's `add`).
    AppendIfExistsOrAdd,
    /// The header with this value only (Gateway API's `set`).
    OverwriteIfExistsOrAdd,
}

/// `envoy.type.matcher.v3.RegexMatcher`, with the default engine (Google RE2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RegexMatcher {
    pub regex: String,
}

/// `envoy.type.matcher.v3.RegexMatchAndSubstitute`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RegexMatchAndSubstitute {
    pub pattern: RegexMatcher,
    pub substitution: String,
}

/// `envoy.type.matcher.v3.StringMatcher`: its oneof `match_pattern`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StringMatcher {
    Exact(String),
    SafeRegex(RegexMatcher),
}

// ---------------------------------------------------------------------------------------------
// Listeners (LDS)

/// `envoy.config.listener.v3.Listener`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Listener {
    pub name: String,
    pub address: Address,
    pub filter_chains: Vec<FilterChain>,
}

/// `envoy.config.listener.v3.FilterChain`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FilterChain {
    pub filters: Vec<Filter>,
}

/// `envoy.config.listener.v3.Filter`, with the oneof `config_type` set to `typed_config`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Filter {
    pub name: String,
    pub typed_config: NetworkFilterConfig,
}

/// The `google.protobuf.Any` of a network filter: `"@type"` and the message's fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "@type")]
pub enum NetworkFilterConfig {
    #[serde(
        rename = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
    )]
    HttpConnectionManager(HttpConnectionManager),
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
}

/// The oneof `route_specifier` of [`HttpConnectionManager`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RouteSpecifier {
    /// The route configuration comes by RDS (what the xDS server serves).
    Rds(Rds),
    /// The route configuration inline (a static bootstrap, e.g. to validate a translation).
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

/// The `google.protobuf.Any` of an HTTP filter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "@type")]
pub enum HttpFilterConfig {
    #[serde(rename = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router")]
    Router(Router),
}

/// `envoy.extensions.filters.http.router.v3.Router`, all defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Router {}

/// `envoy.config.accesslog.v3.AccessLog`, with the oneof `config_type` set to `typed_config`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AccessLog {
    pub name: String,
    pub typed_config: AccessLogConfig,
}

/// The `google.protobuf.Any` of an access logger.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "@type")]
pub enum AccessLogConfig {
    #[serde(rename = "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog")]
    Stdout(StdoutAccessLog),
}

/// `envoy.extensions.access_loggers.stream.v3.StdoutAccessLog`, with the oneof
/// `access_log_format` set to `log_format`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StdoutAccessLog {
    pub log_format: SubstitutionFormatString,
}

/// `envoy.config.core.v3.SubstitutionFormatString`, with the oneof `format` set to
/// `json_format` (a `google.protobuf.Struct` whose values are all strings here: a key per
/// field of the log line, its value a format string such as `%RESPONSE_CODE%`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SubstitutionFormatString {
    pub json_format: BTreeMap<String, String>,
}

// ---------------------------------------------------------------------------------------------
// Routes (RDS)

/// `envoy.config.route.v3.RouteConfiguration`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RouteConfiguration {
    pub name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub virtual_hosts: Vec<VirtualHost>,
    /// Pick the virtual host by the `Host` header without its port, as Gateway API asks.
    #[serde(skip_serializing_if = "is_false")]
    pub ignore_port_in_host_matching: bool,
    /// `google.protobuf.BoolValue`. Set to `false` only where the configuration is static:
    /// Envoy then checks by default that every cluster a route names exists, while a route to
    /// a backend that does not resolve deliberately names no existing cluster (and answers 500).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validate_clusters: Option<bool>,
}

/// `envoy.config.route.v3.VirtualHost`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VirtualHost {
    pub name: String,
    pub domains: Vec<String>,
    pub routes: Vec<Route>,
}

/// `envoy.config.route.v3.Route`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Route {
    pub name: String,
    #[serde(rename = "match")]
    pub route_match: RouteMatch,
    #[serde(flatten)]
    pub action: Action,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub request_headers_to_add: Vec<HeaderValueOption>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub request_headers_to_remove: Vec<String>,
}

/// The oneof `action` of [`Route`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Route(RouteAction),
    Redirect(RedirectAction),
    DirectResponse(DirectResponseAction),
}

/// `envoy.config.route.v3.RouteMatch`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RouteMatch {
    #[serde(flatten)]
    pub path_specifier: PathSpecifier,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HeaderMatcher>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub query_parameters: Vec<QueryParameterMatcher>,
}

/// The oneof `path_specifier` of [`RouteMatch`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathSpecifier {
    /// Any path starting with these characters.
    Prefix(String),
    /// Exactly this path (without the query string).
    Path(String),
    SafeRegex(RegexMatcher),
    /// This path, or this path followed by `/` and anything: whole path segments.
    PathSeparatedPrefix(String),
}

/// `envoy.config.route.v3.HeaderMatcher`, with the oneof `header_match_specifier` set to
/// `string_match`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HeaderMatcher {
    pub name: String,
    pub string_match: StringMatcher,
}

/// `envoy.config.route.v3.QueryParameterMatcher`, with the oneof
/// `query_parameter_match_specifier` set to `string_match`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QueryParameterMatcher {
    pub name: String,
    pub string_match: StringMatcher,
}

/// `envoy.config.route.v3.RouteAction`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RouteAction {
    #[serde(flatten)]
    pub cluster_specifier: ClusterSpecifier,
    /// What Envoy answers when the cluster is not there: a backend that does not resolve is
    /// routed to a cluster that does not exist, and Gateway API wants a 500 for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_not_found_response_code: Option<ClusterNotFoundResponseCode>,
    /// Zero disables Envoy's default 15 s route timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_rewrite: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regex_rewrite: Option<RegexMatchAndSubstitute>,
    /// A member of the oneof `host_rewrite_specifier`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_rewrite_literal: Option<String>,
}

/// The oneof `cluster_specifier` of [`RouteAction`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClusterSpecifier {
    Cluster(String),
    WeightedClusters(WeightedCluster),
}

/// `envoy.config.route.v3.RouteAction.ClusterNotFoundResponseCode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ClusterNotFoundResponseCode {
    InternalServerError,
}

/// `envoy.config.route.v3.WeightedCluster`: the total weight is the sum of the weights.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WeightedCluster {
    pub clusters: Vec<ClusterWeight>,
}

/// `envoy.config.route.v3.WeightedCluster.ClusterWeight` (`weight` is a
/// `google.protobuf.UInt32Value`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClusterWeight {
    pub name: String,
    pub weight: u32,
}

/// `envoy.config.route.v3.RedirectAction`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RedirectAction {
    /// A member of the oneof `scheme_rewrite_specifier`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme_redirect: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_redirect: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_redirect: Option<u32>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub path_rewrite_specifier: Option<RedirectPathRewrite>,
    pub response_code: RedirectResponseCode,
}

/// The oneof `path_rewrite_specifier` of [`RedirectAction`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RedirectPathRewrite {
    PathRedirect(String),
    PrefixRewrite(String),
    RegexRewrite(RegexMatchAndSubstitute),
}

/// `envoy.config.route.v3.RedirectAction.RedirectResponseCode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RedirectResponseCode {
    /// 301
    MovedPermanently,
    /// 302
    Found,
}

/// `envoy.config.route.v3.DirectResponseAction`, without a body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DirectResponseAction {
    pub status: u32,
}

// ---------------------------------------------------------------------------------------------
// Clusters (CDS) and endpoints (EDS)

/// `envoy.config.cluster.v3.Cluster`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Cluster {
    pub name: String,
    /// A member of the oneof `cluster_discovery_type`.
    #[serde(rename = "type")]
    pub discovery_type: DiscoveryType,
    pub connect_timeout: Duration,
    pub lb_policy: LbPolicy,
    /// Where an [`DiscoveryType::Eds`] cluster's endpoints come from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eds_cluster_config: Option<EdsClusterConfig>,
    /// The endpoints of a [`DiscoveryType::Static`] cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_assignment: Option<ClusterLoadAssignment>,
}

/// `envoy.config.cluster.v3.Cluster.DiscoveryType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DiscoveryType {
    Static,
    Eds,
}

/// `envoy.config.cluster.v3.Cluster.LbPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LbPolicy {
    RoundRobin,
}

/// `envoy.config.cluster.v3.Cluster.EdsClusterConfig`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EdsClusterConfig {
    pub eds_config: ConfigSource,
    pub service_name: String,
}

/// `envoy.config.endpoint.v3.ClusterLoadAssignment`. No endpoints is a valid assignment:
/// Envoy answers 503 for the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClusterLoadAssignment {
    pub cluster_name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<LocalityLbEndpoints>,
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn durations_serialize_as_proto3_json() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_secs(5), "5s"),
            (Duration::from_millis(1500), "1.500s"),
            (Duration::from_millis(250), "0.250s"),
            (Duration { seconds: 1, nanos: 1_000 }, "1.000001s"),
            (Duration { seconds: 0, nanos: 1 }, "0.000000001s"),
            (std::time::Duration::from_millis(90_500).into(), "90.500s"),
        ];
        for (duration, text) in cases {
            assert_eq!(serde_json::to_value(duration).unwrap(), json!(text), "{duration:?}");
        }
    }

    #[test]
    fn oneofs_are_fields_of_their_message() {
        let route = Route {
            name: "r".into(),
            route_match: RouteMatch {
                path_specifier: PathSpecifier::PathSeparatedPrefix("/api".into()),
                headers: vec![HeaderMatcher {
                    name: "x-env".into(),
                    string_match: StringMatcher::Exact("canary".into()),
                }],
                query_parameters: Vec::new(),
            },
            action: Action::Route(RouteAction {
                cluster_specifier: ClusterSpecifier::Cluster("shop/web/80".into()),
                cluster_not_found_response_code: None,
                timeout: Some(Duration::ZERO),
                prefix_rewrite: None,
                regex_rewrite: None,
                host_rewrite_literal: None,
            }),
            request_headers_to_add: Vec::new(),
            request_headers_to_remove: Vec::new(),
        };
        assert_eq!(
            serde_json::to_value(&route).unwrap(),
            json!({
                "name": "r",
                "match": {"path_separated_prefix": "/api", "headers": [{"name": "x-env", "string_match": {"exact": "canary"}}]},
                "route": {"cluster": "shop/web/80", "timeout": "0s"}
            })
        );
        let redirect = RedirectAction {
            scheme_redirect: Some("https".into()),
            host_redirect: None,
            port_redirect: None,
            path_rewrite_specifier: Some(RedirectPathRewrite::PathRedirect("/new".into())),
            response_code: RedirectResponseCode::MovedPermanently,
        };
        assert_eq!(
            serde_json::to_value(&redirect).unwrap(),
            json!({"scheme_redirect": "https", "path_redirect": "/new", "response_code": "MOVED_PERMANENTLY"})
        );
    }

    #[test]
    fn typed_configs_carry_their_type_url() {
        let filter = HttpFilter {
            name: "envoy.filters.http.router".into(),
            typed_config: HttpFilterConfig::Router(Router {}),
        };
        assert_eq!(
            serde_json::to_value(&filter).unwrap(),
            json!({"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}})
        );
        let manager = NetworkFilterConfig::HttpConnectionManager(HttpConnectionManager {
            stat_prefix: "http".into(),
            route_specifier: RouteSpecifier::Rds(Rds {
                config_source: ConfigSource::ads(),
                route_config_name: "http".into(),
            }),
            http_filters: Vec::new(),
            access_log: Vec::new(),
            normalize_path: None,
            merge_slashes: false,
        });
        assert_eq!(
            serde_json::to_value(&manager).unwrap(),
            json!({
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": "http",
                "rds": {"config_source": {"ads": {}, "resource_api_version": "V3"}, "route_config_name": "http"},
                "http_filters": []
            })
        );
    }

    #[test]
    fn enums_serialize_as_proto_enum_names() {
        let cluster = Cluster {
            name: "shop/web/80".into(),
            discovery_type: DiscoveryType::Eds,
            connect_timeout: Duration::from_secs(5),
            lb_policy: LbPolicy::RoundRobin,
            eds_cluster_config: Some(EdsClusterConfig {
                eds_config: ConfigSource::ads(),
                service_name: "shop/web/80".into(),
            }),
            load_assignment: None,
        };
        assert_eq!(
            serde_json::to_value(&cluster).unwrap(),
            json!({
                "name": "shop/web/80", "type": "EDS", "connect_timeout": "5s", "lb_policy": "ROUND_ROBIN",
                "eds_cluster_config": {"eds_config": {"ads": {}, "resource_api_version": "V3"}, "service_name": "shop/web/80"}
            })
        );
        let option = HeaderValueOption {
            header: HeaderValue { key: "x-a".into(), value: "1".into() },
            append_action: HeaderAppendAction::OverwriteIfExistsOrAdd,
        };
        assert_eq!(serde_json::to_value(&option).unwrap()["append_action"], "OVERWRITE_IF_EXISTS_OR_ADD");
    }
}
