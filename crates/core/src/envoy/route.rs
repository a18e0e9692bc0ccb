//! Route configurations (RDS): virtual hosts, their routes, each route's match and action.

use serde::Serialize;

use super::any::Packable;
use super::core::{Duration, HeaderValueOption, RegexMatchAndSubstitute, RegexMatcher, StringMatcher};
use super::type_urls;

fn is_false(value: &bool) -> bool {
    !*value
}

/// `envoy.config.route.v3.RouteConfiguration`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RouteConfiguration {
    /// Empty for a route configuration inline in its listener, which needs no name.
    #[serde(skip_serializing_if = "String::is_empty")]
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
    /// Apply the most specific header changes last, so they win: a backend's (its weighted
    /// cluster's) over its route's. Envoy's default is the reverse.
    #[serde(skip_serializing_if = "is_false")]
    pub most_specific_header_mutations_wins: bool,
}

impl Packable for RouteConfiguration {
    const TYPE_URL: &'static str = type_urls::ROUTE_CONFIGURATION;
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
    /// Empty for a route that needs no name in logs and statistics.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(rename = "match")]
    pub route_match: RouteMatch,
    #[serde(flatten)]
    pub action: Action,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub request_headers_to_add: Vec<HeaderValueOption>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub request_headers_to_remove: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub response_headers_to_add: Vec<HeaderValueOption>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub response_headers_to_remove: Vec<String>,
}

impl Route {
    /// A route matching `route_match` that does `action`, changing no header.
    pub fn new(name: impl Into<String>, route_match: RouteMatch, action: Action) -> Self {
        Self {
            name: name.into(),
            route_match,
            action,
            request_headers_to_add: Vec::new(),
            request_headers_to_remove: Vec::new(),
            response_headers_to_add: Vec::new(),
            response_headers_to_remove: Vec::new(),
        }
    }
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

impl RouteMatch {
    /// Exactly this path, nothing else about the request.
    pub fn path(path: impl Into<String>) -> Self {
        Self {
            path_specifier: PathSpecifier::Path(path.into()),
            headers: Vec::new(),
            query_parameters: Vec::new(),
        }
    }
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
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub request_mirror_policies: Vec<RequestMirrorPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_policy: Option<RetryPolicy>,
}

/// `envoy.config.route.v3.RetryPolicy`, as a bound on each attempt only: `num_retries` 0 and
/// no `retry_on`, so there is one attempt, and `per_try_timeout` bounds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RetryPolicy {
    /// `google.protobuf.UInt32Value`.
    pub num_retries: u32,
    pub per_try_timeout: Duration,
}

impl RouteAction {
    /// To `cluster`, nothing else changed.
    pub fn to_cluster(cluster: impl Into<String>) -> Self {
        Self {
            cluster_specifier: ClusterSpecifier::Cluster(cluster.into()),
            cluster_not_found_response_code: None,
            timeout: None,
            prefix_rewrite: None,
            regex_rewrite: None,
            host_rewrite_literal: None,
            request_mirror_policies: Vec::new(),
            retry_policy: None,
        }
    }
}

/// `envoy.config.route.v3.RouteAction.RequestMirrorPolicy`: a copy of the requests goes to
/// `cluster` too, its answer dropped (Envoy appends `-shadow` to the copy's `Host`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RequestMirrorPolicy {
    pub cluster: String,
    /// The share of the requests copied; none: every request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_fraction: Option<RuntimeFractionalPercent>,
}

/// `envoy.config.core.v3.RuntimeFractionalPercent`, without a runtime key: the default is the
/// value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RuntimeFractionalPercent {
    pub default_value: FractionalPercent,
}

/// `envoy.type.v3.FractionalPercent` with the denominator `HUNDRED`: `numerator` percent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FractionalPercent {
    pub numerator: u32,
    pub denominator: FractionalPercentDenominator,
}

/// `envoy.type.v3.FractionalPercent.DenominatorType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FractionalPercentDenominator {
    Hundred,
    TenThousand,
    Million,
}

impl FractionalPercentDenominator {
    pub fn value(self) -> u64 {
        match self {
            Self::Hundred => 100,
            Self::TenThousand => 10_000,
            Self::Million => 1_000_000,
        }
    }
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
    ServiceUnavailable,
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
    /// Header changes of the requests sent to this cluster and of its responses (Gateway API's
    /// filters on a backendRef).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub request_headers_to_add: Vec<HeaderValueOption>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub request_headers_to_remove: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub response_headers_to_add: Vec<HeaderValueOption>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub response_headers_to_remove: Vec<String>,
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
