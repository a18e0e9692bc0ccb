//! A route: one match of one rule of a route object (an EnvoyRoute's rule × match), what it
//! does with the requests it matches, and where it sends them. Values are those of Gateway
//! API's HTTPRoute, defaulted and checked: how Envoy is told to do it is the rendering's
//! business.

use std::time::Duration;

use serde::Serialize;

/// One match and what to do with the requests it matches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Route {
    /// Unique in the fleet, for logs and statistics: `<namespace>/<route>/rule/<i>/match/<j>`.
    pub name: String,
    pub path: PathMatch,
    /// An HTTP method (`GET`), or any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Headers that must match, at most one per name (lowercase).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<ValueMatch>,
    /// Query parameters that must match, at most one per name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub query_params: Vec<ValueMatch>,
    /// Changes to the request's headers before it goes on.
    #[serde(skip_serializing_if = "HeaderChanges::is_empty")]
    pub request_headers: HeaderChanges,
    /// Changes to the response's headers before the client gets it (Gateway API's
    /// `ResponseHeaderModifier`).
    #[serde(skip_serializing_if = "HeaderChanges::is_empty")]
    pub response_headers: HeaderChanges,
    pub action: Action,
}

/// What a request's path must be.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathMatch {
    Exact(String),
    /// In whole segments: `/foo` (or `/foo/`) matches `/foo` and `/foo/x`, not `/foobar`.
    Prefix(String),
    /// An RE2 regular expression matching the whole path.
    RegularExpression(String),
}

/// A header's or query parameter's name and what its value must be.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ValueMatch {
    pub name: String,
    pub value: StringMatch,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StringMatch {
    Exact(String),
    /// An RE2 regular expression matching the whole value.
    RegularExpression(String),
}

/// Gateway API's `RequestHeaderModifier` or `ResponseHeaderModifier`; names lowercase.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HeaderChanges {
    /// The header with this value only.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub set: Vec<Header>,
    /// Another value for the header.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub add: Vec<Header>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

impl HeaderChanges {
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.add.is_empty() && self.remove.is_empty()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Header {
    pub name: String,
    pub value: String,
}

/// What a route does with the requests it matches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Forward(Forward),
    Redirect(Redirect),
}

/// Forward to backends, by weight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Forward {
    /// The backends that resolve, each once (their weights summed) in the order of the rule,
    /// each with a weight above 0. None: every request is answered 500.
    pub backends: Vec<WeightedBackend>,
    /// The total weight of the backendRefs that do not resolve: their share of the requests
    /// is answered [`Forward::unresolved_answer`], as Gateway API asks.
    pub unresolved_weight: u32,
    /// What a request for no backend is answered: 500 for HTTP, 503 for gRPC (which Envoy
    /// tells a gRPC client as `UNAVAILABLE`, GRPCRoute's word for it). 500 is not printed.
    #[serde(skip_serializing_if = "UnresolvedAnswer::is_internal_error")]
    pub unresolved_answer: UnresolvedAnswer,
    /// How long a request may take; zero: without a limit. None: the proxy's default.
    #[serde(serialize_with = "super::print::duration", skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// How long one attempt to a backend may take (Gateway API's `timeouts.backendRequest`);
    /// zero: without a limit. None: as long as the request may.
    #[serde(serialize_with = "super::print::duration", skip_serializing_if = "Option::is_none")]
    pub backend_timeout: Option<Duration>,
    /// The `Host` the backend sees instead of the request's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_rewrite: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_rewrite: Option<PathModifier>,
    /// Backends that get a copy of the requests too (Gateway API's `RequestMirror`), in the
    /// order of the rule; their answers are dropped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<Mirror>,
}

/// The status a request for a backend that does not resolve is answered with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnresolvedAnswer {
    /// 500, HTTPRoute's.
    #[default]
    InternalError,
    /// 503: gRPC's `UNAVAILABLE`, GRPCRoute's.
    Unavailable,
    /// Closed unanswered: a TLSRoute's connections, which the proxies never read.
    Closed,
}

impl UnresolvedAnswer {
    pub fn is_internal_error(&self) -> bool {
        *self == Self::InternalError
    }

    pub fn status(self) -> u16 {
        match self {
            Self::InternalError => 500,
            // Closed never reaches an HTTP route; were it to, 503 says the same.
            Self::Unavailable | Self::Closed => 503,
        }
    }
}

/// A backend ([`super::Backend`], by name) that gets a copy of a share of the requests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mirror {
    pub backend: String,
    /// The share of the requests copied. None: every request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share: Option<Fraction>,
}

/// `numerator` of every `denominator` (at least 1, and at least `numerator`): Gateway API's
/// `percent` (of 100) or `fraction`, as given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Fraction {
    pub numerator: u32,
    pub denominator: u32,
}

impl Fraction {
    pub fn percent(percent: u32) -> Self {
        Self { numerator: percent, denominator: 100 }
    }
}

/// A backend ([`super::Backend`], by name) and its share of the requests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WeightedBackend {
    pub backend: String,
    pub weight: u32,
    /// Changes to the headers of the requests sent to this backend (Gateway API's
    /// `RequestHeaderModifier` on a backendRef), after the route's own.
    #[serde(skip_serializing_if = "HeaderChanges::is_empty")]
    pub request_headers: HeaderChanges,
    /// Changes to the headers of this backend's responses (`ResponseHeaderModifier` on a
    /// backendRef), after the route's own.
    #[serde(skip_serializing_if = "HeaderChanges::is_empty")]
    pub response_headers: HeaderChanges,
}

impl WeightedBackend {
    /// `weight` of the requests to `backend`, their headers as the route leaves them.
    pub fn new(backend: impl Into<String>, weight: u32) -> Self {
        Self {
            backend: backend.into(),
            weight,
            request_headers: HeaderChanges::default(),
            response_headers: HeaderChanges::default(),
        }
    }

    /// Whether the backend changes headers of its own.
    pub fn changes_headers(&self) -> bool {
        !self.request_headers.is_empty() || !self.response_headers.is_empty()
    }
}

/// A new path: Gateway API's `HTTPPathModifier`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathModifier {
    ReplaceFullPath(String),
    /// The part of the path the route's [`PathMatch`] matched, replaced by this.
    ReplacePrefixMatch(String),
}

/// Answer with a redirect: Gateway API's `RequestRedirect`, what is not given kept from the
/// request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Redirect {
    /// `http` or `https`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathModifier>,
    /// 301 or 302.
    pub status_code: u16,
}
