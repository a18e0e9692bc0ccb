//! The bounds on one server's connections: how many, and how long each phase may take. One
//! type for every port; the xDS port, which speaks only HTTP/2 through tonic, reads the cap,
//! the handshake timeout and the HTTP/2 fields, and leaves the rest (marked "HTTP servers").

use std::time::Duration;

use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioTimer};

/// Bounds on the connections of one server.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Connections open at once; what a new client finds at the cap is the server's
    /// [`AtCapacity`](super::AtCapacity).
    pub max_connections: usize,
    /// Time to complete the TLS handshake.
    pub handshake_timeout: Duration,
    /// HTTP servers: time from accepting a connection to its first request: a client that
    /// connects and says nothing does not get the long keep-alive allowance.
    pub first_request_timeout: Duration,
    /// HTTP/1.1: time from the first byte of a request to the end of its headers.
    pub header_read_timeout: Duration,
    /// HTTP servers: time one write may stay blocked (the client not reading) before the
    /// connection is cut.
    pub write_timeout: Duration,
    /// HTTP/1.1: an idle keep-alive connection is closed after this long; longer than the API
    /// server's 90 s, so the client always closes first (see the module docs).
    pub http1_idle_timeout: Duration,
    /// HTTP/2: a connection without streams this long gets a graceful GOAWAY (the xDS port
    /// closes it).
    pub http2_idle_timeout: Duration,
    /// HTTP/2: keep-alive pings, and how long to wait for the answer before closing.
    pub http2_keep_alive_interval: Duration,
    pub http2_keep_alive_timeout: Duration,
    /// HTTP/2: streams open at once on one connection.
    pub http2_max_concurrent_streams: u32,
    /// HTTP/2: flow-control windows, i.e. request data the server buffers before the handler
    /// reads it: per stream and per connection.
    pub http2_stream_window: u32,
    pub http2_connection_window: u32,
    /// HTTP servers: the HTTP/1.1 read buffer (headers must fit in it), the HTTP/2 header list
    /// size.
    pub max_header_bytes: usize,
}

impl ConnectionLimits {
    /// The webhook port: the API server's connections (a handful per API server) and nobody
    /// else's, once the NetworkPolicy in `deploy/` applies.
    pub fn webhook() -> Self {
        Self {
            max_connections: 128,
            handshake_timeout: Duration::from_secs(5),
            first_request_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(5),
            http1_idle_timeout: Duration::from_secs(120),
            http2_idle_timeout: Duration::from_secs(60),
            http2_keep_alive_interval: Duration::from_secs(20),
            http2_keep_alive_timeout: Duration::from_secs(10),
            http2_max_concurrent_streams: 32,
            http2_stream_window: 128 * 1024,
            http2_connection_window: 256 * 1024,
            max_header_bytes: 64 * 1024,
        }
    }

    /// The operations port: Prometheus and the kubelet's probes, a few connections at a time.
    pub fn operations() -> Self {
        Self { max_connections: 32, ..Self::webhook() }
    }

    /// hyper's HTTP/2 server under these limits' streams, windows and keepalive; each port adds
    /// its header bounds.
    pub(crate) fn http2_server(&self) -> http2::Builder<TokioExecutor> {
        let mut builder = http2::Builder::new(TokioExecutor::new());
        builder
            .timer(TokioTimer::new())
            .max_concurrent_streams(self.http2_max_concurrent_streams)
            .initial_stream_window_size(self.http2_stream_window)
            .initial_connection_window_size(self.http2_connection_window)
            .keep_alive_interval(self.http2_keep_alive_interval)
            .keep_alive_timeout(self.http2_keep_alive_timeout);
        builder
    }
}
