//! How a server accepts and bounds its connections: one type for the webhook, operations and
//! xDS ports, with what only one of them uses in its own part.

use std::time::Duration;

use super::limits::ConnectionLimits;
use super::slots::AtCapacity;

/// How one server serves: what the accept loop and the connections' deadlines need, the same
/// for every port, and `server`: what only this kind of server uses (the HTTP servers' TLS
/// and metrics, the xDS server's transport and receive budget).
#[derive(Clone, Debug)]
pub struct ServeConfig<S> {
    /// `webhook`, `operations` or `xds`: the `server` label of the connection metrics and the
    /// `server` field of log lines.
    pub name: &'static str,
    /// Bounds on the connections: their number, handshake and idle deadlines, HTTP/2 settings.
    pub limits: ConnectionLimits,
    /// What a client finds when every connection slot is taken.
    pub at_capacity: AtCapacity,
    /// After a failed accept (typically EMFILE), how long to wait before the next, instead of
    /// spinning.
    pub accept_retry: Duration,
    /// After shutdown, how long connections may take to finish before they are dropped.
    pub shutdown_grace: Duration,
    /// What only this kind of server uses.
    pub server: S,
}
