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

use super::service::AdsService;
use super::tls::{Handshake, incoming, server_config};

/// How connections are secured.
#[derive(Clone)]
pub enum Transport {
    /// TLS with the certificate the resolver picks per handshake: replacing what it returns
    /// rotates the certificate without a restart.
    Tls(Arc<dyn ResolvesServerCert>),
    /// No encryption: for tests and benchmarks on loopback only.
    Plaintext,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::Tls(_) => "Tls",
            Transport::Plaintext => "Plaintext",
        })
    }
}

/// How to serve.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub transport: Transport,
    /// Time a client has to complete the TLS handshake.
    pub handshake_timeout: Duration,
    /// Open connections beyond which new ones are closed at once.
    pub max_connections: usize,
    /// Concurrent streams per connection (Envoy opens one ADS stream per connection).
    pub max_concurrent_streams: u32,
    /// HTTP/2 PING interval, and how long an answer may take before the connection is closed:
    /// a proxy that vanished without closing its connection is noticed.
    pub keepalive_interval: Duration,
    pub keepalive_timeout: Duration,
    /// After shutdown, how long connections may take to close before `serve` returns anyway.
    pub shutdown_grace: Duration,
}

impl ServeConfig {
    pub fn new(transport: Transport) -> Self {
        Self {
            transport,
            handshake_timeout: Duration::from_secs(10),
            max_connections: 20_000,
            max_concurrent_streams: 16,
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(10),
        }
    }
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
    let handshake = match &config.transport {
        Transport::Tls(resolver) => Handshake::Tls {
            acceptor: TlsAcceptor::from(server_config(resolver.clone())?),
            timeout: config.handshake_timeout,
        },
        Transport::Plaintext => Handshake::Plaintext,
    };
    if let Ok(address) = listener.local_addr() {
        info!(%address, transport = ?config.transport, "serving xDS");
    }
    let connections = incoming(listener, handshake, config.max_connections);
    let streams_end = CancellationToken::new();
    let signal = {
        let streams_end = streams_end.clone();
        async move {
            shutdown.await;
            info!("xDS server shutting down");
            streams_end.cancel();
        }
    };
    let server = Server::builder()
        .http2_keepalive_interval(Some(config.keepalive_interval))
        .http2_keepalive_timeout(Some(config.keepalive_timeout))
        .max_concurrent_streams(Some(config.max_concurrent_streams))
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
