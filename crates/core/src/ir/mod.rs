//! The intermediate representation of a fleet: what its proxies should do, said once, between
//! the route APIs and Envoy's configuration (after Envoy Gateway's `internal/ir`, smaller).
//! Every route kind meets here, through the route model ([`crate::route`], read by the doors
//! of [`crate::translate`]); Envoy's resources are rendered from it ([`crate::xds`]).
//!
//! A fleet is listeners → virtual hosts → routes → backends, each list in a deterministic
//! order. Every type is `Eq`: an unchanged IR means nothing to push.
//!
//! - [`domain`]: hostnames, and which host of a virtual host a route's hostname covers;
//! - [`route`]: a route's match, what it does with the request, and the backends it forwards to.
//!
//! A mesh sidecar's fleet (all the sidecars of a namespace) has one listener, its outbound
//! capture ([`Outbound`]).

pub mod domain;
mod print;
pub mod route;
mod validate;

use std::net::IpAddr;

use serde::Serialize;

pub use self::domain::Domain;
pub use self::route::{
    Action, Forward, Fraction, Header, HeaderChanges, Mirror, PathMatch, PathModifier, Redirect, Route,
    StringMatch, UnresolvedAnswer, ValueMatch, WeightedBackend,
};

/// What one fleet's proxies serve.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Fleet {
    /// Sorted by name.
    pub listeners: Vec<Listener>,
    /// Every backend a route of the fleet forwards to, sorted by name, each once.
    pub backends: Vec<Backend>,
    /// Every certificate a TLS server of the fleet presents, sorted by name, each once:
    /// delivered to the proxies over SDS, never written anywhere.
    pub secrets: Vec<TlsSecret>,
}

/// A listener: one port of the fleet's proxies, serving plain HTTP ([`Listener::virtual_hosts`]),
/// HTTPS when [`Listener::tls_servers`] is not empty, or TLS passed through untouched when
/// [`Listener::passthrough`] is not empty (at most one of the three on a listener).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Listener {
    /// Unique in the fleet: the Envoy's port name.
    pub name: String,
    /// The port the proxies bind, on every address.
    pub port: u16,
    /// Whether each request is logged (one JSON line on the proxy's standard output).
    pub access_log: bool,
    /// Plain HTTP: one per domain of the routes attached to the listener, sorted by domain.
    /// None: every request is answered 404. Empty when the listener terminates TLS.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub virtual_hosts: Vec<VirtualHost>,
    /// HTTPS: the servers sharing the port, chosen by the name the client asks for (SNI),
    /// sorted by name. Empty for plain HTTP.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tls_servers: Vec<TlsServer>,
    /// TLS passthrough: where each connection goes, chosen by the name the client asks for
    /// (SNI), sorted by name. A name no server claims is refused: there is nothing to fall
    /// back to that could read the connection.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub passthrough: Vec<PassthroughServer>,
    /// A mesh sidecar's capture of its pod's outbound connections: `Some` makes the listener
    /// take connections redirected to its port with their original destination kept, and
    /// route those to a Service port a mesh route takes ([`Outbound::services`]) as HTTP; any
    /// other destination passes through untouched. Nothing else on the listener then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outbound: Option<Outbound>,
}

/// What a mesh sidecar does with its pod's outbound connections (Gateway API's GAMMA).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Outbound {
    /// The Service ports mesh routes take, sorted by name: each is chosen by a connection's
    /// original destination (one of the Service's cluster IPs and its port), never by the
    /// request's Host.
    pub services: Vec<OutboundService>,
}

/// The requests sent to one Service port, routed by the mesh routes that take it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OutboundService {
    /// Unique in the listener: `<namespace>/<service>/<port>`.
    pub name: String,
    /// The Service's cluster IPs, sorted, never empty.
    pub addresses: Vec<IpAddr>,
    pub port: u16,
    /// One virtual host of [`Domain::Any`]: whatever the Host, a request sent to the Service
    /// is the Service's.
    pub virtual_hosts: Vec<VirtualHost>,
}

/// The TLS connections of a passthrough listener asking for some names, sent whole (TLS and
/// all, undecrypted) to backends by weight: a TLSRoute's rule on a Gateway listener.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PassthroughServer {
    /// Unique in the listener: `<namespace>/<route>`.
    pub name: String,
    /// The SNI names it takes, sorted, each once, never empty; no two servers of a listener
    /// share one (Envoy refuses alike filter chains).
    pub server_names: Vec<Domain>,
    /// Backends of [`BackendProtocol::Tcp`], each once, weights above 0.
    pub backends: Vec<WeightedBackend>,
    /// The total weight of the backendRefs that do not resolve: their share of the connections
    /// is closed, as Gateway API asks. Never 0 when there is no backend.
    #[serde(skip_serializing_if = "is_zero")]
    pub unresolved_weight: u32,
}

fn is_zero(weight: &u32) -> bool {
    *weight == 0
}

/// One HTTPS server of a listener (a Gateway listener with `protocol: HTTPS` and `tls.mode:
/// Terminate`): the certificates it presents to clients asking for its hostname, and the
/// virtual hosts it serves once TLS is terminated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TlsServer {
    /// Unique in the listener (the Gateway listener's name).
    pub name: String,
    /// The SNI names it serves (`shop.example.com`, `*.example.com`); `Domain::Any` serves
    /// every name no other server of the listener claims, and clients sending none.
    pub server_name: Domain,
    /// Names of [`Fleet::secrets`], at least one.
    pub certificates: Vec<String>,
    /// As [`Listener::virtual_hosts`].
    pub virtual_hosts: Vec<VirtualHost>,
}

/// A certificate chain and its private key, in PEM: a `kubernetes.io/tls` Secret's `tls.crt`
/// and `tls.key`. `Debug` never prints the key.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct TlsSecret {
    /// Unique in the fleet, and stable while the Secret exists: `<namespace>/<secret>`.
    pub name: String,
    #[serde(serialize_with = "print::byte_count")]
    pub certificate_chain: String,
    #[serde(serialize_with = "print::redacted")]
    pub private_key: String,
}

impl std::fmt::Debug for TlsSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSecret")
            .field("name", &self.name)
            .field("certificate_chain", &format_args!("{} bytes", self.certificate_chain.len()))
            .field("private_key", &format_args!("<redacted>"))
            .finish()
    }
}

/// The routes of one domain of a listener.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VirtualHost {
    pub domain: Domain,
    /// In Gateway API's order of precedence: the first that matches a request takes it.
    pub routes: Vec<Route>,
}

/// Where requests can be forwarded: one Service port, and its ready endpoints.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Backend {
    /// Unique, and stable while the Service port exists: `<namespace>/<service>/<port>`, with
    /// `/h2c` after it for [`BackendProtocol::Http2`], `/tcp` for [`BackendProtocol::Tcp`].
    pub name: String,
    /// How the proxies speak to it; HTTP/1.1 is not printed.
    #[serde(skip_serializing_if = "BackendProtocol::is_http1")]
    pub protocol: BackendProtocol,
    /// Sorted, each once. None: requests for the backend are answered 503.
    pub endpoints: Vec<Endpoint>,
}

/// The HTTP the proxies speak to a backend's endpoints, whatever the client spoke to the proxy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendProtocol {
    /// HTTP/1.1, Envoy's default upstream protocol (and the WebSocket upgrades it carries).
    #[default]
    Http1,
    /// HTTP/2 in cleartext with prior knowledge, no upgrade from HTTP/1.1 (h2c): a GRPCRoute's
    /// backends, and a Service port's `appProtocol: kubernetes.io/h2c`.
    Http2,
    /// Bytes, not requests: the backends of a TLS passthrough (a TLSRoute's), which see the
    /// client's TLS untouched.
    Tcp,
}

impl BackendProtocol {
    pub fn is_http1(&self) -> bool {
        *self == Self::Http1
    }
}

/// A ready endpoint of a backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Endpoint {
    pub ip: IpAddr,
    pub port: u16,
}
