//! `EnvoyRoute` (`example.com/v1`): HTTP routing for Envoy fleets, shaped like Gateway API's
//! `HTTPRoute` so its users recognise every field. A route attaches to Envoys of its namespace
//! (`parentRefs`, optionally to one listener by port name), matches requests by host, path,
//! headers, query parameters and method, and sends them to Services of its namespace, possibly
//! modified, or answers with a redirect.
//!
//! The schema carries Gateway API's validation (list sizes, path syntax, filter combinations)
//! as OpenAPI keywords and CEL rules; the rule engine ([`crate::rules::route`]) enforces the
//! same, and a little more (regular expressions must compile, one action per header name).

// Several `printcolumn(...)` entries repeat `type_ = …` by design.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::patterns::{
    API_GROUP, DNS1123_SUBDOMAIN, GATEWAY_DURATION, HEADER_NAME, HEADER_VALUE, HOSTNAME, IANA_SVC_NAME, KIND,
    REPLACEMENT_PATH,
};

/// Most parents a route may name (Gateway API's limit).
pub const MAX_PARENT_REFS: usize = 32;
/// Most hostnames a route may list.
pub const MAX_HOSTNAMES: usize = 16;
/// Most rules a route may have.
pub const MAX_RULES: usize = 16;
/// Most matches one rule may have.
pub const MAX_MATCHES_PER_RULE: usize = 64;
/// Most matches all rules of a route may have together.
pub const MAX_MATCHES_PER_ROUTE: usize = 128;
/// Most entries of the other lists: filters, backends, header and query matches, header
/// modifications.
pub const MAX_LIST_ITEMS: usize = 16;
/// Largest backend weight.
pub const MAX_WEIGHT: i32 = 1_000_000;
/// Longest path value (match, redirect or rewrite).
pub const MAX_PATH_LENGTH: usize = 1024;

/// The CEL rule holding all rules of a route to [`MAX_MATCHES_PER_ROUTE`] matches. CEL cannot
/// sum over a list, so the sum is spelt out for each of the (at most 16) rules, as Gateway
/// API's CRD does; a rule without `matches` has one (the default).
pub const TOTAL_MATCHES_RULE: &str = concat!(
    "(self.size() > 0 ? (has(self[0].matches) ? self[0].matches.size() : 1) : 0)",
    " + (self.size() > 1 ? (has(self[1].matches) ? self[1].matches.size() : 1) : 0)",
    " + (self.size() > 2 ? (has(self[2].matches) ? self[2].matches.size() : 1) : 0)",
    " + (self.size() > 3 ? (has(self[3].matches) ? self[3].matches.size() : 1) : 0)",
    " + (self.size() > 4 ? (has(self[4].matches) ? self[4].matches.size() : 1) : 0)",
    " + (self.size() > 5 ? (has(self[5].matches) ? self[5].matches.size() : 1) : 0)",
    " + (self.size() > 6 ? (has(self[6].matches) ? self[6].matches.size() : 1) : 0)",
    " + (self.size() > 7 ? (has(self[7].matches) ? self[7].matches.size() : 1) : 0)",
    " + (self.size() > 8 ? (has(self[8].matches) ? self[8].matches.size() : 1) : 0)",
    " + (self.size() > 9 ? (has(self[9].matches) ? self[9].matches.size() : 1) : 0)",
    " + (self.size() > 10 ? (has(self[10].matches) ? self[10].matches.size() : 1) : 0)",
    " + (self.size() > 11 ? (has(self[11].matches) ? self[11].matches.size() : 1) : 0)",
    " + (self.size() > 12 ? (has(self[12].matches) ? self[12].matches.size() : 1) : 0)",
    " + (self.size() > 13 ? (has(self[13].matches) ? self[13].matches.size() : 1) : 0)",
    " + (self.size() > 14 ? (has(self[14].matches) ? self[14].matches.size() : 1) : 0)",
    " + (self.size() > 15 ? (has(self[15].matches) ? self[15].matches.size() : 1) : 0)",
    " <= 128"
);

/// Prefix of the CEL rules on a path match that hold for `Exact` and `PathPrefix` values only
/// (an absent type is `PathPrefix`, an absent value `/`).
macro_rules! exact_or_prefix_path {
    ($condition:literal) => {
        concat!("!has(self.value) || (has(self.type) && self.type == 'RegularExpression') || ", $condition)
    };
}

/// The CEL condition "the rule has exactly one match and it is a `PathPrefix` match", for an
/// object stored without defaults (no matches, no path or no type all mean `PathPrefix /`).
macro_rules! one_prefix_match {
    () => {
        "(!has(self.matches) || size(self.matches) == 0 || (size(self.matches) == 1 && (!has(self.matches[0].path) || !has(self.matches[0].path.type) || self.matches[0].path.type == 'PathPrefix')))"
    };
}

/// An EnvoyRoute sends HTTP requests that reach the Envoys it names (`spec.parentRefs`) to
/// Services of its namespace, as Gateway API's HTTPRoute does for Gateways: matched by host
/// (`spec.hostnames`), path, headers, query parameters and method (`spec.rules[].matches`),
/// modified or redirected on the way (`spec.rules[].filters`), and split between backends by
/// weight (`spec.rules[].backendRefs`).
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "EnvoyRoute",
    namespaced,
    status = "EnvoyRouteStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "er",
    category = "envoy-operator",
    doc = "An EnvoyRoute routes HTTP requests reaching Envoy fleets to Services, like Gateway API's HTTPRoute.",
    printcolumn(
        name = "Hostnames",
        type_ = "string",
        json_path = ".status.summary.hostnames",
        description = "Hostnames the route matches, comma-separated; * for every host"
    ),
    printcolumn(
        name = "Parents",
        type_ = "string",
        json_path = ".status.summary.parents",
        description = "The Envoys (and listeners: envoy/port-name) the route attaches to, comma-separated"
    ),
    printcolumn(
        name = "Accepted",
        type_ = "string",
        json_path = ".status.summary.accepted",
        description = "How many of the route's parentRefs accepted it, of how many (2/3)"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct EnvoyRouteSpec {
    /// The Envoys of this namespace the route attaches to, each optionally to one of its
    /// listeners (`sectionName`: the name of one of the Envoy's `spec.ports`). At most 32;
    /// when an Envoy is named more than once, every reference to it names a different
    /// listener.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[x_kube(
        validation = Rule::new("self.all(p1, self.all(p2, p1.name == p2.name ? has(p1.sectionName) == has(p2.sectionName) : true))").message("sectionName must be specified when parentRefs includes 2 or more references to the same parent"),
        validation = Rule::new("self.all(p1, self.exists_one(p2, p1.name == p2.name && (has(p1.sectionName) ? (has(p2.sectionName) && p1.sectionName == p2.sectionName) : !has(p2.sectionName))))").message("sectionName must be unique when parentRefs includes 2 or more references to the same parent")
    )]
    pub parent_refs: Vec<ParentReference>,

    /// Hostnames the `Host` header must match (its port ignored), e.g. `shop.example.com`, or
    /// `*.example.com` for any subdomain (not `example.com` itself). Without hostnames the
    /// route matches every host. Where several routes match a host, the one with the most
    /// specific hostname is tried first. At most 16, lowercase, no IP addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 1, max = 253), regex(pattern = HOSTNAME)))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub hostnames: Vec<String>,

    /// Rules: which requests (`matches`), what to do to them (`filters`) and where to send
    /// them (`backendRefs`). At most 16, with at most 128 matches in all. Defaults to one
    /// rule that matches every request and, having no backends, answers 500.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[x_kube(validation = Rule::new(TOTAL_MATCHES_RULE).message("While 16 rules and 64 matches per rule are allowed, the total number of matches across all rules in a route must be less than 128"))]
    pub rules: Vec<RouteRule>,
}

/// An Envoy the route attaches to.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "camelCase")]
pub struct ParentReference {
    /// Name of an Envoy in the route's namespace.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS1123_SUBDOMAIN))]
    pub name: String,

    /// Name of one of the Envoy's `spec.ports`: the route attaches to that listener only.
    /// Without it, to every listener of the Envoy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 15), regex(pattern = IANA_SVC_NAME))]
    pub section_name: Option<String>,
}

/// One rule of a route.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("(has(self.backendRefs) && size(self.backendRefs) > 0) ? (!has(self.filters) || self.filters.all(f, !has(f.requestRedirect))) : true").message("RequestRedirect filter must not be used together with backendRefs"),
    validation = Rule::new(concat!("(has(self.filters) && self.filters.exists(f, has(f.requestRedirect) && has(f.requestRedirect.path) && f.requestRedirect.path.type == 'ReplacePrefixMatch' && has(f.requestRedirect.path.replacePrefixMatch))) ? ", one_prefix_match!(), " : true")).message("When using RequestRedirect filter with path.replacePrefixMatch, exactly one PathPrefix match must be specified"),
    validation = Rule::new(concat!("(has(self.filters) && self.filters.exists(f, has(f.urlRewrite) && has(f.urlRewrite.path) && f.urlRewrite.path.type == 'ReplacePrefixMatch' && has(f.urlRewrite.path.replacePrefixMatch))) ? ", one_prefix_match!(), " : true")).message("When using URLRewrite filter with path.replacePrefixMatch, exactly one PathPrefix match must be specified")
)]
pub struct RouteRule {
    /// Conditions a request must meet; the rule applies when any one match is met. Defaults to
    /// one match on the path prefix `/` (every request). At most 64.
    ///
    /// Across every route attached to a listener, requests try matches in Gateway API's
    /// order: routes with a more specific matching hostname first; then `Exact` paths, then
    /// `RegularExpression` paths, then `PathPrefix` paths by length, longest first; then
    /// matches with a method; with more header matches; with more query parameter matches;
    /// then the oldest route, then the route first by name; then the rule and match that come
    /// first in the route.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub matches: Vec<RouteMatch>,

    /// What to do to matching requests before sending them on (`RequestHeaderModifier`,
    /// `URLRewrite`) or instead (`RequestRedirect`). At most one filter of each type;
    /// `RequestRedirect` and `URLRewrite` exclude each other.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[x_kube(
        validation = Rule::new("!(self.exists(f, f.type == 'RequestRedirect') && self.exists(f, f.type == 'URLRewrite'))").message("May specify either httpRouteFilterRequestRedirect or httpRouteFilterRequestRewrite, but not both"),
        validation = Rule::new("self.filter(f, f.type == 'RequestHeaderModifier').size() <= 1").message("RequestHeaderModifier filter cannot be repeated"),
        validation = Rule::new("self.filter(f, f.type == 'RequestRedirect').size() <= 1").message("RequestRedirect filter cannot be repeated"),
        validation = Rule::new("self.filter(f, f.type == 'URLRewrite').size() <= 1").message("URLRewrite filter cannot be repeated")
    )]
    pub filters: Vec<RouteFilter>,

    /// Services of this namespace that matching requests go to, shared by weight. A backend
    /// that does not resolve (no such Service or port) gets its share answered with 500, as
    /// does a rule without backends (and without a redirect). At most 16.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub backend_refs: Vec<BackendRef>,

    /// Timeouts of matching requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<RouteTimeouts>,
}

/// Conditions on a request; all of them must hold.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouteMatch {
    /// The request path. Defaults to the path prefix `/` (every path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathMatch>,

    /// Headers the request must have, by name (case-insensitive). At most 16.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub headers: Vec<HeaderMatch>,

    /// Query parameters the request must have, by name (case-sensitive). At most 16.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub query_params: Vec<QueryParamMatch>,

    /// The request method, e.g. `GET`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<HttpMethod>,
}

/// How the request path is matched.
// Gateway API's rules, each saying something no other says: a `#` is left to the character
// rule, and an empty value to the absolute-path rule, so a bad value gets one error per fault.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new(exact_or_prefix_path!("self.value.startsWith('/')")).message("value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']"),
    validation = Rule::new(exact_or_prefix_path!("!self.value.contains('//')")).message("must not contain '//' when type one of ['Exact', 'PathPrefix']"),
    validation = Rule::new(exact_or_prefix_path!("!self.value.contains('/./')")).message("must not contain '/./' when type one of ['Exact', 'PathPrefix']"),
    validation = Rule::new(exact_or_prefix_path!("!self.value.contains('/../')")).message("must not contain '/../' when type one of ['Exact', 'PathPrefix']"),
    validation = Rule::new(exact_or_prefix_path!("!self.value.contains('%2f')")).message("must not contain '%2f' when type one of ['Exact', 'PathPrefix']"),
    validation = Rule::new(exact_or_prefix_path!("!self.value.contains('%2F')")).message("must not contain '%2F' when type one of ['Exact', 'PathPrefix']"),
    validation = Rule::new(exact_or_prefix_path!("!self.value.endsWith('/..')")).message("must not end with '/..' when type one of ['Exact', 'PathPrefix']"),
    validation = Rule::new(exact_or_prefix_path!("!self.value.endsWith('/.')")).message("must not end with '/.' when type one of ['Exact', 'PathPrefix']"),
    validation = Rule::new(exact_or_prefix_path!("self.value == '' || self.value.matches(r\"\"\"^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$\"\"\")")).message("must only contain valid characters (matching ^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$) for types ['Exact', 'PathPrefix']")
)]
pub struct PathMatch {
    /// `Exact` (the whole path, case-sensitive), `PathPrefix` (whole path segments: `/foo`
    /// matches `/foo` and `/foo/bar`, not `/foobar`; a trailing `/` is ignored) or
    /// `RegularExpression` (RE2 syntax, the whole path). Defaults to `PathPrefix`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub match_type: Option<PathMatchType>,

    /// The path (absolute, for `Exact` and `PathPrefix`) or regular expression. Defaults to
    /// `/`. At most 1024 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub value: Option<String>,
}

/// How a path is matched.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PathMatchType {
    Exact,
    #[default]
    PathPrefix,
    RegularExpression,
}

/// How a header or query parameter value is matched.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ValueMatchType {
    #[default]
    Exact,
    RegularExpression,
}

/// A header the request must have.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HeaderMatch {
    /// `Exact` (case-sensitive) or `RegularExpression` (RE2 syntax, the whole value).
    /// Defaults to `Exact`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub match_type: Option<ValueMatchType>,

    /// Name of the header, case-insensitive.
    #[schemars(length(min = 1, max = 256), regex(pattern = HEADER_NAME))]
    pub name: String,

    /// The value to match.
    #[schemars(length(min = 1, max = 4096))]
    pub value: String,
}

/// A query parameter the request must have.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct QueryParamMatch {
    /// `Exact` (case-sensitive) or `RegularExpression` (RE2 syntax, the whole value).
    /// Defaults to `Exact`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub match_type: Option<ValueMatchType>,

    /// Name of the query parameter, case-sensitive.
    #[schemars(length(min = 1, max = 256), regex(pattern = HEADER_NAME))]
    pub name: String,

    /// The value to match.
    #[schemars(length(min = 1, max = 1024))]
    pub value: String,
}

/// An HTTP method.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    Get,
    Head,
    Post,
    Put,
    Delete,
    Connect,
    Options,
    Trace,
    Patch,
}

impl HttpMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Head => "HEAD",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Delete => "DELETE",
            Self::Connect => "CONNECT",
            Self::Options => "OPTIONS",
            Self::Trace => "TRACE",
            Self::Patch => "PATCH",
        }
    }
}

/// A step applied to matching requests. `type` names the step and the field of the same name
/// configures it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!(has(self.requestHeaderModifier) && self.type != 'RequestHeaderModifier')").message("filter.requestHeaderModifier must be nil if the filter.type is not RequestHeaderModifier"),
    validation = Rule::new("!(!has(self.requestHeaderModifier) && self.type == 'RequestHeaderModifier')").message("filter.requestHeaderModifier must be specified for RequestHeaderModifier filter.type"),
    validation = Rule::new("!(has(self.requestRedirect) && self.type != 'RequestRedirect')").message("filter.requestRedirect must be nil if the filter.type is not RequestRedirect"),
    validation = Rule::new("!(!has(self.requestRedirect) && self.type == 'RequestRedirect')").message("filter.requestRedirect must be specified for RequestRedirect filter.type"),
    validation = Rule::new("!(has(self.urlRewrite) && self.type != 'URLRewrite')").message("filter.urlRewrite must be nil if the filter.type is not URLRewrite"),
    validation = Rule::new("!(!has(self.urlRewrite) && self.type == 'URLRewrite')").message("filter.urlRewrite must be specified for URLRewrite filter.type")
)]
pub struct RouteFilter {
    /// `RequestHeaderModifier`, `RequestRedirect` or `URLRewrite`.
    #[serde(rename = "type")]
    pub filter_type: FilterType,

    /// Headers to set, add or remove before the request is sent on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_header_modifier: Option<HeaderModifier>,

    /// Answer with a redirect instead of sending the request on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_redirect: Option<RequestRedirect>,

    /// Rewrite the host and path before the request is sent on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_rewrite: Option<UrlRewrite>,
}

/// The kinds of filter.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FilterType {
    #[default]
    RequestHeaderModifier,
    RequestRedirect,
    #[serde(rename = "URLRewrite")]
    UrlRewrite,
}

impl FilterType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RequestHeaderModifier => "RequestHeaderModifier",
            Self::RequestRedirect => "RequestRedirect",
            Self::UrlRewrite => "URLRewrite",
        }
    }
}

/// Header changes. A header name may appear in only one of `set`, `add` and `remove`; the
/// `Host` header is changed by a URLRewrite filter's `hostname` instead.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HeaderModifier {
    /// Headers to set, replacing any value the request has. At most 16.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    #[x_kube(validation = Rule::new("self.all(h, h.name.lowerAscii() != 'host')").message("the Host header cannot be set here: use a URLRewrite filter's hostname"))]
    pub set: Vec<HttpHeader>,

    /// Headers to add, after any value the request has. At most 16.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    #[x_kube(validation = Rule::new("self.all(h, h.name.lowerAscii() != 'host')").message("the Host header cannot be added here: use a URLRewrite filter's hostname"))]
    pub add: Vec<HttpHeader>,

    /// Names of headers to remove. At most 16.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 1, max = 256), regex(pattern = HEADER_NAME)))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    #[x_kube(validation = Rule::new("self.all(n, n.lowerAscii() != 'host')").message("the Host header cannot be removed"))]
    pub remove: Vec<String>,
}

/// A header name and value.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HttpHeader {
    /// Name of the header, case-insensitive.
    #[schemars(length(min = 1, max = 256), regex(pattern = HEADER_NAME))]
    pub name: String,

    /// Value of the header: printable ASCII, words separated by a single space or tab.
    #[schemars(length(min = 1, max = 4096), regex(pattern = HEADER_VALUE))]
    pub value: String,
}

/// A redirect answered instead of sending the request on. Every part not given keeps the
/// request's.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RequestRedirect {
    /// `http` or `https`. A new scheme without a `port` drops the port from the location
    /// when the request's was the old scheme's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<RedirectScheme>,

    /// Hostname of the location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS1123_SUBDOMAIN))]
    pub hostname: Option<String>,

    /// Path of the location: the whole path replaced (`ReplaceFullPath`), or the part the
    /// rule's `PathPrefix` match matched (`ReplacePrefixMatch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathModifier>,

    /// Port of the location, 1 to 65535.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,

    /// 301 (moved permanently) or 302 (found). Defaults to 302.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = [301, 302]))]
    pub status_code: Option<i32>,
}

/// The scheme of a redirect.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum RedirectScheme {
    Http,
    Https,
}

impl RedirectScheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
        }
    }
}

/// A new path for a redirect or rewrite.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.type == 'ReplaceFullPath' ? has(self.replaceFullPath) : true").message("replaceFullPath must be specified when type is set to 'ReplaceFullPath'"),
    validation = Rule::new("has(self.replaceFullPath) ? self.type == 'ReplaceFullPath' : true").message("type must be 'ReplaceFullPath' when replaceFullPath is set"),
    validation = Rule::new("self.type == 'ReplacePrefixMatch' ? has(self.replacePrefixMatch) : true").message("replacePrefixMatch must be specified when type is set to 'ReplacePrefixMatch'"),
    validation = Rule::new("has(self.replacePrefixMatch) ? self.type == 'ReplacePrefixMatch' : true").message("type must be 'ReplacePrefixMatch' when replacePrefixMatch is set")
)]
pub struct PathModifier {
    /// `ReplaceFullPath` or `ReplacePrefixMatch`.
    #[serde(rename = "type")]
    pub modifier_type: PathModifierType,

    /// The new path, e.g. `/v2/login`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024), regex(pattern = REPLACEMENT_PATH))]
    pub replace_full_path: Option<String>,

    /// What replaces the matched prefix, in whole path segments: with a match on `/foo`,
    /// `/xyz` makes `/foo/bar` `/xyz/bar`, and `` or `/` makes it `/bar`. Only for a rule with
    /// exactly one match, of type `PathPrefix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024), regex(pattern = REPLACEMENT_PATH))]
    pub replace_prefix_match: Option<String>,
}

/// The kinds of path modification.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PathModifierType {
    #[default]
    ReplaceFullPath,
    ReplacePrefixMatch,
}

/// A rewrite of the request before it is sent on.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UrlRewrite {
    /// The new `Host` header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS1123_SUBDOMAIN))]
    pub hostname: Option<String>,

    /// The new path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathModifier>,
}

/// A backend: a port of a Service in the route's namespace, and its share of the requests.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("((has(self.group) && self.group != '') || (has(self.kind) && self.kind != 'Service')) || has(self.port)").message("Must have port for Service reference"))]
pub struct BackendRef {
    /// API group of the backend. Defaults to `""` (the core group); only Services are
    /// supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253), regex(pattern = API_GROUP))]
    pub group: Option<String>,

    /// Kind of the backend. Defaults to `Service`, the only kind supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), regex(pattern = KIND))]
    pub kind: Option<String>,

    /// Name of the Service.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS1123_SUBDOMAIN))]
    pub name: String,

    /// The Service's port (`spec.ports[].port`, not the target port), 1 to 65535. Required
    /// for a Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,

    /// Share of the rule's requests: weight / sum of the rule's weights. 0 sends none.
    /// Defaults to 1; at most 1000000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 1000000))]
    pub weight: Option<i32>,
}

/// Timeouts of a rule's requests.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouteTimeouts {
    /// Longest time to answer a request, from its start to the end of the response, e.g.
    /// `10s`, `1m30s`, `500ms`; `0s` for none. Without it, Envoy's default of 15 seconds
    /// applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = GATEWAY_DURATION))]
    pub request: Option<String>,
    /// Longest time one attempt to the backend may take, from sending the request to the end
    /// of the backend's response, e.g. `500ms`; `0s` for none. At most `request` (unless that
    /// is `0s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = GATEWAY_DURATION))]
    pub backend_request: Option<String>,
}

/// What the Envoys the route names made of it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EnvoyRouteStatus {
    /// One entry per Envoy (and listener) the route names, written by the controller that
    /// runs it: whether the route is attached (`Accepted`) and whether its backends resolve
    /// (`ResolvedRefs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub parents: Vec<RouteParentStatus>,

    /// `parents` and the spec summed up as text, for `kubectl get` (a printer column shows only
    /// the first of many values, and a list as JSON). Written with `parents`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<RouteSummary>,
}

/// A route's status as `kubectl get envoyroute` prints it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RouteSummary {
    /// How many of the route's parentRefs accepted it, of how many: `2/3` (one Envoy refused
    /// it, or does not exist).
    pub accepted: String,

    /// The parentRefs, comma-separated: `edge`, or `edge/http` for a listener (`sectionName`).
    pub parents: String,

    /// `spec.hostnames`, comma-separated; `*` when the route matches every host.
    pub hostnames: String,
}

/// The route's status with respect to one parent reference.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouteParentStatus {
    /// The reference of `spec.parentRefs` this entry is about.
    pub parent_ref: ParentReference,

    /// The controller that wrote this entry, e.g. `example.com/envoy-operator`.
    #[schemars(length(min = 1, max = 253))]
    pub controller_name: String,

    /// `Accepted` and `ResolvedRefs`, each with the `observedGeneration` it was computed for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::patterns::PATH_CHARACTERS;

    #[test]
    fn the_total_matches_rule_sums_every_rule() {
        let mut expected: Vec<String> = (0..MAX_RULES)
            .map(|i| {
                format!("(self.size() > {i} ? (has(self[{i}].matches) ? self[{i}].matches.size() : 1) : 0)")
            })
            .collect();
        let last = expected.pop().unwrap_or_default();
        let expected = format!("{} + {last} <= {MAX_MATCHES_PER_ROUTE}", expected.join(" + "));
        assert_eq!(TOTAL_MATCHES_RULE, expected);
    }

    #[test]
    fn the_path_character_rule_uses_the_shared_pattern() {
        let schema = serde_json::to_string(&<PathMatch as schemars::JsonSchema>::json_schema(
            &mut schemars::SchemaGenerator::default(),
        ))
        .unwrap();
        let quoted = serde_json::to_string(PATH_CHARACTERS).unwrap();
        let inner = &quoted[1..quoted.len() - 1];
        assert!(
            schema.contains(&format!("self.value.matches(r\\\"\\\"\\\"{inner}\\\"\\\"\\\")")),
            "{schema}"
        );
    }
}
