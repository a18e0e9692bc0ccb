//! Serving the ADS service on a listener: TLS (or plaintext, for tests and benchmarks), HTTP/2
//! keepalive, per-connection stream and connection caps, and a graceful shutdown that ends
//! every stream (Envoy reconnects, to this or another replica) and drains connections within a
//! grace period.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rustls::server::ResolvesServerCert;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tonic::transport::Server;
use tracing::{info, warn};

use super::accept::{Handshake, incoming, server_config};
use super::receive_budget::ReceiveBudget;
use super::service::AdsService;
use crate::certs::client_auth::ClientTrust;
use crate::net::{AtCapacity, ConnectionLimits};

/// How connections are secured.
#[derive(Clone)]
pub enum Transport {
    /// TLS with the certificate the resolver picks per handshake (replacing what it returns
    /// rotates the certificate without a restart), and clients proving their fleet with a
    /// certificate `clients` accepts: what the operator serves.
    MutualTls { certificate: Arc<dyn ResolvesServerCert>, clients: Arc<ClientTrust> },
    /// TLS without client certificates: for tests and benchmarks.
    Tls(Arc<dyn ResolvesServerCert>),
    /// No encryption: for tests and benchmarks on loopback only.
    Plaintext,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::MutualTls { .. } => "MutualTls",
            Transport::Tls(_) => "Tls",
            Transport::Plaintext => "Plaintext",
        })
    }
}

/// How to serve: `net`'s configuration, shared with the webhook and operations ports, with the
/// xDS server's own part. Of the [`ConnectionLimits`], xDS reads the connection cap, the handshake timeout and the
/// HTTP/2 settings; its `http2_idle_timeout` closes a connection that carries no stream.
pub type ServeConfig = crate::net::ServeConfig<Grpc>;

/// What only the xDS server uses.
#[derive(Clone, Debug)]
pub struct Grpc {
    pub transport: Transport,
    /// Bytes of requests being received, all connections together ([`ReceiveBudget`]).
    pub receive_budget: ReceiveBudget,
}

impl ServeConfig {
    /// The operator's settings for `transport`: a client finds the cap (sized from this
    /// process's limits) refused at once, and a failed accept is retried after 100 ms.
    pub fn new(transport: Transport) -> Self {
        Self {
            name: "xds",
            limits: ConnectionLimits {
                // Beyond it, new connections are closed at once.
                max_connections: connection_cap(memory_limit(), open_files_limit()),
                handshake_timeout: Duration::from_secs(10),
                // A connection without a stream this long is closed.
                http2_idle_timeout: Duration::from_secs(30),
                // A proxy that vanished without closing its connection is noticed.
                http2_keep_alive_interval: Duration::from_secs(30),
                http2_keep_alive_timeout: Duration::from_secs(10),
                http2_max_concurrent_streams: MAX_STREAMS_PER_CONNECTION,
                http2_stream_window: STREAM_WINDOW,
                http2_connection_window: CONNECTION_WINDOW,
                // The HTTP/1.1 and request-head bounds, which the xDS port does not read.
                ..ConnectionLimits::webhook()
            },
            at_capacity: AtCapacity::Refuse,
            accept_retry: Duration::from_millis(100),
            shutdown_grace: Duration::from_secs(10),
            server: Grpc { transport, receive_budget: ReceiveBudget::new(RECEIVE_BUDGET) },
        }
    }
}

/// Concurrent streams per connection: Envoy keeps one ADS stream per connection; a second lets
/// a new stream open while the server still counts the one that just ended.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 2;
/// Requests being received, all connections together ([`ReceiveBudget`]): room for over 250
/// of Envoy's largest request (its first, about 60 KB) at once.
pub const RECEIVE_BUDGET: usize = 16 * 1024 * 1024;
/// HTTP/2 flow control: how much a client may send before the server reads it, per connection
/// and per stream. Requests are small; a larger one only waits for a window update.
pub const CONNECTION_WINDOW: u32 = 32 * 1024;
pub const STREAM_WINDOW: u32 = 32 * 1024;
/// rustls' record buffers and hyper/h2's frame buffers of one connection, measured high.
const TRANSPORT_BUFFERS: usize = 64 * 1024;
/// A stream's own state beyond what the shared budgets count, at most: its task and its queue
/// of responses (shared snapshot data; a few KiB), its per-type state (at most 32 type URLs of
/// 256 bytes: 8 KiB) and its record in the tracker (an ACKed version and a NACK of at most
/// 1,024 characters, up to 4 bytes each, for each of the 4 types served: about 17 KiB; a NACK
/// of a type never sent is not kept).
const STREAM_STATE: usize = 32 * 1024;
/// The worst a connection costs beyond the shared budgets (requests being received,
/// [`RECEIVE_BUDGET`]; subscriptions, [`super::stream`]'s): its buffers, its receive window and
/// its streams' state.
pub const WORST_CASE_PER_CONNECTION: usize =
    TRANSPORT_BUFFERS + CONNECTION_WINDOW as usize + MAX_STREAMS_PER_CONNECTION as usize * STREAM_STATE;
/// Memory left to everything but the xDS port: the webhook's worst case (README, "Memory
/// budget"), the caches, the runtime and the allocator.
pub const RESERVED_MEMORY: u64 = 192 * 1024 * 1024;
/// The memory limit assumed where the process has none: the Deployment's.
pub const DEFAULT_MEMORY_LIMIT: u64 = 512 * 1024 * 1024;
/// File descriptors left to everything but the xDS port: the webhook's connections, the API
/// client's, the listeners, and files.
const RESERVED_FILES: u64 = 1024;

/// How many xDS connections may be open: as many as fit at their worst in what the memory
/// limit leaves the xDS port beside its shared budgets, and never so many that the rest of the
/// process runs out of file descriptors.
pub fn connection_cap(memory_limit: Option<u64>, open_files_limit: u64) -> usize {
    let for_xds = memory_limit.unwrap_or(DEFAULT_MEMORY_LIMIT).saturating_sub(RESERVED_MEMORY);
    let shared = (RECEIVE_BUDGET + super::stream::SUBSCRIPTION_BUDGET) as u64;
    let by_memory = for_xds.saturating_sub(shared) / WORST_CASE_PER_CONNECTION as u64;
    let by_files = open_files_limit.saturating_sub(RESERVED_FILES);
    usize::try_from(by_memory.min(by_files)).unwrap_or(usize::MAX).max(1)
}

/// The process's memory limit: its cgroup's (`memory.max` of cgroup v2, `memory.limit_in_bytes`
/// of v1); `None` without one.
pub fn memory_limit() -> Option<u64> {
    ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
        .iter()
        .find_map(|file| std::fs::read_to_string(file).ok())
        .and_then(|limit| limit.trim().parse().ok())
        // cgroup v1 says "no limit" with a number near u64::MAX.
        .filter(|limit| *limit < 1 << 50)
}

/// The process's soft limit on open files (`RLIMIT_NOFILE`), read from `/proc/self/limits`;
/// 1024, the usual default, where it cannot be read.
pub fn open_files_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            let line = limits.lines().find(|line| line.starts_with("Max open files"))?;
            line.split_whitespace().nth(3)?.parse().ok()
        })
        .unwrap_or(1024)
}

/// Errors of serving.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("building the TLS configuration: {0}")]
    Tls(#[from] rustls::Error),

    #[error("serving gRPC: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Serves `service` on `listener` until `shutdown` completes, then ends every stream (with
/// `UNAVAILABLE`) and waits up to the grace period for connections to close. The listening
/// socket is closed when this returns.
pub async fn serve(
    listener: TcpListener,
    service: AdsService,
    config: ServeConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    let transport = &config.server.transport;
    let handshake = match transport {
        Transport::MutualTls { certificate, clients } => Handshake::Tls {
            acceptor: TlsAcceptor::from(server_config(certificate.clone(), Some(clients.clone()))?),
            identities: true,
        },
        Transport::Tls(resolver) => Handshake::Tls {
            acceptor: TlsAcceptor::from(server_config(resolver.clone(), None)?),
            identities: false,
        },
        Transport::Plaintext => Handshake::Plaintext,
    };
    if let Ok(address) = listener.local_addr() {
        info!(%address, transport = ?transport, "serving xDS");
    }
    let connections = incoming(listener, handshake, config.clone(), service.metrics());
    let streams_end = CancellationToken::new();
    let signal = {
        let streams_end = streams_end.clone();
        async move {
            shutdown.await;
            info!("xDS server shutting down");
            streams_end.cancel();
        }
    };
    let limits = &config.limits;
    let server = Server::builder()
        .layer(config.server.receive_budget.clone())
        .http2_keepalive_interval(Some(limits.http2_keep_alive_interval))
        .http2_keepalive_timeout(Some(limits.http2_keep_alive_timeout))
        .max_concurrent_streams(Some(limits.http2_max_concurrent_streams))
        .initial_connection_window_size(Some(limits.http2_connection_window))
        .initial_stream_window_size(Some(limits.http2_stream_window))
        .serve_with_incoming_shutdown(
            service.with_shutdown(streams_end.clone()).into_grpc(),
            connections.connections,
            signal,
        );
    let grace_over = async {
        streams_end.cancelled().await;
        tokio::time::sleep(config.shutdown_grace).await;
    };
    let result = tokio::select! {
        result = server => result,
        () = grace_over => {
            warn!(grace = ?config.shutdown_grace, "xDS connections still open after the grace period; leaving them");
            Ok(())
        }
    };
    connections.accept_loop.abort();
    // The loop's end drops the listener; waiting for it frees the port for a restart.
    let _ = connections.accept_loop.await;
    Ok(result?)
}
