//! Serving the router over TLS: HTTP/1.1 and HTTP/2 (ALPN), TLS 1.2+, the certificate
//! reloaded from its files while serving, header and handshake timeouts, and a graceful
//! shutdown that finishes requests in flight and closes idle keep-alive connections.
//!
//! Embeddable: `envoy-operator webhook` runs it alone, and the operator's `run` command can
//! run it next to the controllers with its own shutdown signal.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum_server::accept::NoDelayAcceptor;
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use envoy_operator_core::names;
use hyper_util::rt::TokioTimer;
use tokio_util::task::AbortOnDropHandle;

use super::router::{Endpoint, Limits, Readiness, router, standard_endpoints};
use crate::ops::metrics::Metrics;
use crate::tls::{ReloadingCert, TlsError, server_config};

/// How to serve.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Address to listen on, e.g. `0.0.0.0:8443` (port 0 picks a free port).
    pub listen: SocketAddr,
    /// The admission endpoints to serve.
    pub endpoints: Vec<Endpoint>,
    pub limits: Limits,
    /// How often the certificate files are checked for a change.
    pub reload_interval: Duration,
    /// Time a client has to send a request's headers (HTTP/1.1) once it starts one, so
    /// idle slow clients cannot hold connections.
    pub header_read_timeout: Duration,
    /// Time a client has to complete the TLS handshake.
    pub handshake_timeout: Duration,
    /// On shutdown, how long requests in flight may take before connections are dropped.
    pub shutdown_grace: Duration,
    /// Where admission answers are counted.
    pub metrics: Metrics,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], names::WEBHOOK_PORT)),
            endpoints: standard_endpoints(),
            limits: Limits::default(),
            reload_interval: Duration::from_secs(5),
            header_read_timeout: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(15),
            metrics: Metrics::new(),
        }
    }
}

/// Errors of serving.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("listening on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },

    #[error(transparent)]
    Tls(#[from] TlsError),

    #[error("serving: {0}")]
    Serve(std::io::Error),
}

impl ServeError {
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Bind { .. } => "bind",
            Self::Tls(error) => error.metric_label(),
            Self::Serve(_) => "serve",
        }
    }
}

/// A webhook server bound to its address, ready to run.
pub struct WebhookServer {
    listener: std::net::TcpListener,
    config: ServeConfig,
    certs: Arc<ReloadingCert>,
    readiness: Readiness,
}

impl WebhookServer {
    /// Binds the listening socket. `certs` is already loaded, so the server can answer
    /// handshakes as soon as it runs.
    pub fn bind(config: ServeConfig, certs: Arc<ReloadingCert>) -> Result<Self, ServeError> {
        let addr = config.listen;
        let bind_error = |source| ServeError::Bind { addr, source };
        let listener = std::net::TcpListener::bind(addr).map_err(bind_error)?;
        listener.set_nonblocking(true).map_err(bind_error)?;
        Ok(Self { listener, config, certs, readiness: Readiness::default() })
    }

    /// The bound address (the real port when `listen` had port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, ServeError> {
        self.listener.local_addr().map_err(|source| ServeError::Bind { addr: self.config.listen, source })
    }

    /// Ready from when [`run`](Self::run) starts serving until shutdown begins; the same
    /// flag `/readyz` reports.
    pub fn readiness(&self) -> Readiness {
        self.readiness.clone()
    }

    /// Serves until `shutdown` completes, then stops accepting, lets requests in flight
    /// finish (up to the grace period) and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), ServeError> {
        let Self { listener, config, certs, readiness } = self;
        let local_addr = listener.local_addr().ok();
        let app = router(&config.endpoints, readiness.clone(), config.limits, config.metrics.clone());
        let tls = RustlsConfig::from_config(server_config(certs.clone())?);
        let acceptor =
            RustlsAcceptor::new(tls).handshake_timeout(config.handshake_timeout).acceptor(NoDelayAcceptor);

        let handle = axum_server::Handle::new();
        let mut server = axum_server::from_tcp(listener)
            .map_err(|source| ServeError::Bind { addr: config.listen, source })?
            .acceptor(acceptor)
            .handle(handle.clone());
        let http = server.http_builder();
        http.http1().timer(TokioTimer::new()).header_read_timeout(config.header_read_timeout);
        http.http2().timer(TokioTimer::new()).max_concurrent_streams(config.limits.max_concurrent as u32);

        // Both helpers end with the server, also when this future is dropped.
        let reload = AbortOnDropHandle::new(tokio::spawn(certs.clone().watch(config.reload_interval)));
        let grace = config.shutdown_grace;
        let stopper = {
            let readiness = readiness.clone();
            AbortOnDropHandle::new(tokio::spawn(async move {
                shutdown.await;
                readiness.set(false);
                tracing::info!(grace = ?grace, "webhook shutting down: finishing requests in flight");
                handle.graceful_shutdown(Some(grace));
            }))
        };

        readiness.set(true);
        tracing::info!(
            addr = ?local_addr,
            cert = %certs.paths().cert.display(),
            endpoints = ?config.endpoints.iter().map(|e| e.path).collect::<Vec<_>>(),
            "webhook serving"
        );
        let result = server.serve(app.into_make_service()).await.map_err(ServeError::Serve);
        readiness.set(false);
        reload.abort();
        stopper.abort();
        tracing::info!("webhook stopped");
        result
    }
}

/// Binds and serves until `shutdown`: the whole server in one call.
pub async fn serve(
    config: ServeConfig,
    certs: Arc<ReloadingCert>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    WebhookServer::bind(config, certs)?.run(shutdown).await
}
