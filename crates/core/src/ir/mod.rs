//! The intermediate representation of a fleet: what its proxies should do, said once, between
//! the route APIs and Envoy's configuration (after Envoy Gateway's `internal/ir`, smaller).
//! EnvoyRoutes are translated into it ([`crate::xds::translate`]); Envoy's resources are
//! rendered from it ([`crate::xds::to_envoy`]). Another route API (Gateway API's HTTPRoute)
//! meets EnvoyRoute here, not in a second copy of the rendering.
//!
//! A fleet is listeners → virtual hosts → routes → backends, each list in a deterministic
//! order. Every type is `Eq`: an unchanged IR means nothing to push.
//!
//! - [`domain`]: hostnames, and which host of a virtual host a route's hostname covers;
//! - [`route`]: a route's match, what it does with the request, and the backends it forwards to.

pub mod domain;
pub mod route;

use std::net::IpAddr;

pub use self::domain::Domain;
pub use self::route::{
    Action, Forward, Header, HeaderChanges, PathMatch, PathModifier, Redirect, Route, StringMatch,
    ValueMatch, WeightedBackend,
};

/// What one fleet's proxies serve.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fleet {
    /// Sorted by name.
    pub listeners: Vec<Listener>,
    /// Every backend a route of the fleet forwards to, sorted by name, each once.
    pub backends: Vec<Backend>,
}

/// An HTTP listener: one port of the fleet's proxies. (HTTPS listeners will add their
/// certificates here, delivered to the proxies over SDS.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// Unique in the fleet: the Envoy's port name.
    pub name: String,
    /// The port the proxies bind, on every address.
    pub port: u16,
    /// Whether each request is logged (one JSON line on the proxy's standard output).
    pub access_log: bool,
    /// One per domain of the routes attached to the listener, sorted by domain. None: every
    /// request is answered 404.
    pub virtual_hosts: Vec<VirtualHost>,
}

/// The routes of one domain of a listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VirtualHost {
    pub domain: Domain,
    /// In Gateway API's order of precedence: the first that matches a request takes it.
    pub routes: Vec<Route>,
}

/// Where requests can be forwarded: one Service port, and its ready endpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backend {
    /// Unique, and stable while the Service port exists: `<namespace>/<service>/<port>`.
    pub name: String,
    /// Sorted, each once. None: requests for the backend are answered 503.
    pub endpoints: Vec<Endpoint>,
}

/// A ready endpoint of a backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    pub ip: IpAddr,
    pub port: u16,
}
