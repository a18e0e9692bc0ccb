//! Hooks for the embedding application's metrics (the operator's `xds::metrics::ControlPlaneMetrics`
//! records them in its Prometheus registry). They are called on the stream tasks: keep them cheap
//! and non-blocking.

use std::time::Duration;

use super::cache::FleetKey;
use super::tracker::Protocol;

/// Called as streams come and go and responses are sent and answered. Every method has an
/// empty default, so an implementation picks what it records.
///
/// Durations run from the moment the snapshot being delivered was set in the cache (or from
/// the stream's start, for a proxy that connected after that).
pub trait XdsMetrics: Send + Sync + 'static {
    /// A connection was closed before it could carry a stream: `handshake` (no valid client
    /// certificate, or the TLS handshake failed), `handshake_timeout`, `no_fleet` (a valid
    /// certificate naming no fleet), `at_capacity` (over the connection cap).
    fn connection_refused(&self, _reason: &'static str) {}

    /// A connection found the reading budget ([`super::ReadingBudget`]) taken and waited for
    /// its turn to read.
    fn reading_waited(&self) {}

    /// A connection was closed for holding its reading reservation past the hold timeout
    /// without its reads coming to rest.
    fn reading_held_too_long(&self) {}

    /// A stream was authorized: one more connected proxy.
    fn stream_opened(&self, _fleet: &FleetKey, _protocol: Protocol) {}

    /// An authorized stream ended: one connected proxy fewer.
    fn stream_closed(&self, _fleet: &FleetKey, _protocol: Protocol) {}

    /// A stream was refused by the authorizer, or ended before its first request named a node
    /// (`DEADLINE_EXCEEDED`: no whole request in time; tonic's code: one it could not decode).
    fn stream_refused(&self, _code: tonic::Code) {}

    /// An authorized stream was ended for a request over a limit (`RESOURCE_EXHAUSTED`), invalid
    /// (`INVALID_ARGUMENT`), or that tonic could not decode (its code, e.g. `OUT_OF_RANGE` for
    /// one over the size limit, `INTERNAL` for one cut short).
    fn request_refused(&self, _fleet: &FleetKey, _code: tonic::Code) {}

    /// A response was handed to the connection.
    fn response_sent(&self, _fleet: &FleetKey, _type_url: &str, _since_snapshot: Duration) {}

    /// The proxy ACKed a response.
    fn response_acked(&self, _fleet: &FleetKey, _type_url: &str, _since_snapshot: Duration) {}

    /// The proxy NACKed a response.
    fn response_nacked(&self, _fleet: &FleetKey, _type_url: &str) {}

    /// The proxy has all of a snapshot (every type delivered and ACKed).
    fn snapshot_applied(&self, _fleet: &FleetKey, _since_snapshot: Duration) {}
}

/// Records nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoMetrics;

impl XdsMetrics for NoMetrics {}
