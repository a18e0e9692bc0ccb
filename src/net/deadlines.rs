//! The deadlines a connection's supervisor enforces, and why connections end.

use std::time::Duration;

/// How long a graceful close may take once nothing is in flight or waiting to be written: a
/// client that reads answers the ping after GOAWAY within a round trip.
pub(super) const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// The deadlines `supervise` enforces.
#[derive(Clone, Copy, Debug)]
pub(super) struct Policy {
    pub(super) http2: bool,
    pub(super) idle: Duration,
    pub(super) header_read: Option<Duration>,
    pub(super) first_request: Duration,
}

/// Why a connection ended: the `reason` label of `http_connections_closed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Closed {
    /// The client closed it (or it ended after a graceful close the client completed).
    Peer,
    Idle,
    HeaderTimeout,
    WriteTimeout,
    Handshake,
    Shutdown,
    /// Closed to make room for a client waiting at the cap.
    Evicted,
    Error,
}

impl Closed {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Peer => "peer",
            Self::Idle => "idle",
            Self::HeaderTimeout => "header_timeout",
            Self::WriteTimeout => "write_timeout",
            Self::Handshake => "handshake",
            Self::Shutdown => "shutdown",
            Self::Evicted => "evicted",
            Self::Error => "error",
        }
    }
}
