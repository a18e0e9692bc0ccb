//! Serving the router over TLS: HTTP/1.1 and HTTP/2 (ALPN), TLS 1.2+, the certificate
//! reloaded from its files while serving, every connection bounded ([`crate::net`]), and a
//! graceful shutdown in two steps: a drain (not ready, still serving, clients told to move
//! on), then a stop that finishes requests in flight within the grace period.
//!
//! Embeddable: `envoy-operator webhook` runs it alone, and the operator's `run` command can
//! run it next to the controllers with its own shutdown signal.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use envoy_operator_core::names;
use tokio_util::task::AbortOnDropHandle;

use super::metrics::WebhookMetrics;
use super::router::{Endpoint, Limits, Readiness, router, standard_endpoints};
use crate::certs::serving::{ReloadingCert, TlsError, server_config};
use crate::net::metrics::ConnectionMetrics;
use crate::net::{self, ConnectionLimits, Http, ServeConfig as NetServeConfig, Shutdown};

/// What the webhook server serves and how: its endpoints, request limits and drain, over the
/// shared accept loop's connection limits (it builds a [`net::ServeConfig`] from them).
#[derive(Clone, Debug)]
pub struct WebhookConfig {
    /// Address to listen on, e.g. `0.0.0.0:8443` (port 0 picks a free port).
    pub listen: SocketAddr,
    /// The admission endpoints to serve.
    pub endpoints: Vec<Endpoint>,
    pub limits: Limits,
    /// Bounds on connections: their number, handshake, header, write and idle deadlines.
    pub connections: ConnectionLimits,
    /// How often the certificate files are checked for a change.
    pub reload_interval: Duration,
    /// On shutdown, how long the server keeps serving while not ready, so that endpoints and
    /// the API server's connections move away before the port closes.
    pub drain: Duration,
    /// Then, how long requests in flight may take before connections are dropped.
    pub shutdown_grace: Duration,
    /// Where admission answers are counted.
    pub metrics: WebhookMetrics,
    /// Where the server's connections are counted.
    pub connection_metrics: ConnectionMetrics,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], names::WEBHOOK_PORT)),
            endpoints: standard_endpoints(),
            limits: Limits::default(),
            connections: ConnectionLimits::webhook(),
            reload_interval: Duration::from_secs(5),
            drain: DEFAULT_DRAIN,
            shutdown_grace: Duration::from_secs(15),
            metrics: WebhookMetrics::default(),
            connection_metrics: ConnectionMetrics::default(),
        }
    }
}

/// The drain on shutdown unless told otherwise: a readiness probe period (5 s in `deploy/`),
/// in which the endpoint goes and the API server stops choosing this replica.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(5);

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
    config: WebhookConfig,
    certs: Arc<ReloadingCert>,
    readiness: Readiness,
}

impl WebhookServer {
    /// Binds the listening socket. `certs` is already loaded, so the server can answer
    /// handshakes as soon as it runs.
    pub fn bind(config: WebhookConfig, certs: Arc<ReloadingCert>) -> Result<Self, ServeError> {
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

    /// Serves until `shutdown` completes, then drains (not ready, still serving) for the drain
    /// period, stops accepting, lets requests in flight finish (up to the grace period) and
    /// returns.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), ServeError> {
        let Self { listener, config, certs, readiness } = self;
        let local_addr = listener.local_addr().ok();
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(|source| ServeError::Bind { addr: config.listen, source })?;
        let app = router(&config.endpoints, readiness.clone(), config.limits, config.metrics.clone());
        let options = NetServeConfig::http(
            "webhook",
            config.connections,
            Http { tls: Some(server_config(certs.clone())?), metrics: config.connection_metrics.clone() },
            config.shutdown_grace,
        );

        // Both helpers end with the server, also when this future is dropped.
        let reload = AbortOnDropHandle::new(tokio::spawn(certs.clone().watch(config.reload_interval)));
        let steps = Shutdown::default();
        let stopper = {
            let (readiness, steps, drain) = (readiness.clone(), steps.clone(), config.drain);
            AbortOnDropHandle::new(tokio::spawn(async move {
                shutdown.await;
                readiness.set(false);
                steps.drain.cancel();
                tracing::info!(drain = ?drain, "webhook draining: not ready, still serving");
                tokio::time::sleep(drain).await;
                tracing::info!("webhook shutting down: finishing requests in flight");
                steps.stop.cancel();
            }))
        };

        readiness.set(true);
        tracing::info!(
            addr = local_addr.map(tracing::field::display),
            cert = %certs.paths().cert.display(),
            endpoints = %config.endpoints.iter().map(|e| e.path).collect::<Vec<_>>().join(","),
            "webhook serving"
        );
        net::serve(listener, app, options, steps).await;
        readiness.set(false);
        reload.abort();
        stopper.abort();
        tracing::info!("webhook stopped");
        Ok(())
    }
}

/// Binds and serves until `shutdown`: the whole server in one call.
pub async fn serve(
    config: WebhookConfig,
    certs: Arc<ReloadingCert>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    WebhookServer::bind(config, certs)?.run(shutdown).await
}
