//! Serving an axum router over HTTP/1.1 and HTTP/2, plain or over TLS (ALPN), on the accept
//! loop: the webhook and operations ports.

use std::future::Future;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinSet;
use tokio::time::timeout;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::accept::{Accept, accept_loop};
use super::activity::{Activity, InFlight};
use super::deadlines::{Closed, Policy};
use super::limits::ConnectionLimits;
use super::metrics::ConnectionMetrics;
use super::monitored::Monitored;
use super::serve_config::ServeConfig;
use super::slots::{AtCapacity, Slots};
use super::supervise::supervise;
use super::tls::{HandshakeError, handshake};

/// What only the HTTP servers use.
#[derive(Clone, Debug, Default)]
pub struct Http {
    /// TLS with ALPN (`h2`, `http/1.1`); plain HTTP/1.1 when `None`.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Where the server's connections are counted.
    pub metrics: ConnectionMetrics,
}

impl ServeConfig<Http> {
    /// An HTTP server's: at the cap it makes room, and after a failed accept it waits 50 ms.
    pub fn http(
        name: &'static str,
        limits: ConnectionLimits,
        server: Http,
        shutdown_grace: Duration,
    ) -> Self {
        Self {
            name,
            limits,
            at_capacity: AtCapacity::MakeRoom,
            accept_retry: Duration::from_millis(50),
            shutdown_grace,
            server,
        }
    }
}

/// The two steps of a graceful shutdown (see `net`'s docs). Cancelling `stop` alone implies
/// the drain.
#[derive(Clone, Debug, Default)]
pub struct Shutdown {
    pub drain: CancellationToken,
    pub stop: CancellationToken,
}

/// Serves `app` on `listener` until `shutdown.stop` is cancelled, then shuts down gracefully
/// (see `net`'s docs) and returns.
pub async fn serve(listener: TcpListener, app: Router, config: ServeConfig<Http>, shutdown: Shutdown) {
    let shared = Arc::new(Shared {
        app,
        tls: config.server.tls.clone().map(TlsAcceptor::from),
        slots: Slots::new(config.limits.max_connections, config.at_capacity),
        config: config.clone(),
    });
    let mut server =
        HttpConnections { shared: shared.clone(), shutdown: shutdown.clone(), open: JoinSet::new() };
    accept_loop(&listener, &config, &shared.slots, shutdown.stop.cancelled(), &mut server).await;
    drop(listener);
    let mut connections = server.open;
    let grace = config.shutdown_grace;
    let finished = timeout(grace, async { while connections.join_next().await.is_some() {} }).await;
    if finished.is_err() {
        tracing::warn!(
            server = config.name,
            open = connections.len(),
            grace = ?grace,
            "connections still busy after the grace period: dropping them"
        );
        connections.shutdown().await;
    }
}

struct Shared {
    app: Router,
    tls: Option<TlsAcceptor>,
    slots: Slots,
    config: ServeConfig<Http>,
}

/// The HTTP server's side of the accept loop: each connection served on a task of its own.
struct HttpConnections {
    shared: Arc<Shared>,
    shutdown: Shutdown,
    /// The open connections, waited for (up to the grace period) on shutdown.
    open: JoinSet<()>,
}

impl Accept for HttpConnections {
    async fn accepted(
        &mut self,
        tcp: TcpStream,
        peer: SocketAddr,
        slot: OwnedSemaphorePermit,
    ) -> ControlFlow<()> {
        // Reaped as they end, so the set holds only open connections.
        while self.open.try_join_next().is_some() {}
        let (shared, shutdown) = (self.shared.clone(), self.shutdown.clone());
        self.open.spawn(async move {
            let _slot = slot;
            connection(tcp, peer, &shared, shutdown).await;
        });
        ControlFlow::Continue(())
    }

    /// Only for a server configured to refuse at the cap (none is: they make room).
    fn refused(&mut self, peer: SocketAddr) {
        tracing::debug!(server = self.shared.config.name, %peer, "refusing a connection: at the connection limit");
    }
}

/// Counts the connection in the open-connections gauge while alive.
struct Open<'a>(&'a ServeConfig<Http>);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.server.metrics.connection_opened(self.0.name, -1);
    }
}

async fn connection(tcp: TcpStream, peer: SocketAddr, shared: &Shared, shutdown: Shutdown) {
    let config = &shared.config;
    config.server.metrics.connection_opened(config.name, 1);
    let _open = Open(config);
    let limits = &config.limits;
    let activity = Arc::new(Activity::new());
    let _listed = shared.slots.list(&activity);
    let io = Monitored::new(tcp, activity.clone(), limits.write_timeout);
    let reason = match &shared.tls {
        None => drive(io, false, shared, &activity, shutdown).await,
        Some(acceptor) => match timeout(limits.handshake_timeout, handshake(acceptor, io, &activity)).await {
            Ok(Ok(tls)) => {
                let http2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                drive(tls, http2, shared, &activity, shutdown).await
            }
            Ok(Err(HandshakeError::Failed(error))) => {
                tracing::debug!(server = config.name, %peer, %error, "TLS handshake failed");
                Closed::Handshake
            }
            Ok(Err(HandshakeError::Evicted)) => Closed::Evicted,
            Err(_) => Closed::Handshake,
        },
    };
    tracing::debug!(server = config.name, %peer, reason = reason.as_str(), "connection closed");
    config.server.metrics.connection_closed(config.name, reason.as_str());
}

/// Serves HTTP/1.1 or HTTP/2 on an established connection until it ends.
async fn drive<I>(io: I, http2: bool, shared: &Shared, activity: &Arc<Activity>, shutdown: Shutdown) -> Closed
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let limits = &shared.config.limits;
    let service = Tracked { app: shared.app.clone(), activity: activity.clone() };
    let io = TokioIo::new(io);
    if http2 {
        let mut builder = limits.http2_server();
        builder
            .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
            .max_send_buf_size(limits.max_header_bytes.max(64 * 1024));
        let policy = Policy {
            http2: true,
            idle: limits.http2_idle_timeout,
            header_read: None,
            first_request: limits.first_request_timeout,
        };
        supervise(builder.serve_connection(io, service), activity, policy, shutdown).await
    } else {
        // Request heads are timed by `supervise` (hyper's own timer also runs between
        // keep-alive requests, see the module docs).
        activity.serving_http1(limits.header_read_timeout);
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(None)
            .keep_alive(true)
            .max_buf_size(limits.max_header_bytes.max(8192));
        let policy = Policy {
            http2: false,
            idle: limits.http1_idle_timeout,
            header_read: Some(limits.header_read_timeout),
            first_request: limits.first_request_timeout,
        };
        supervise(builder.serve_connection(io, service), activity, policy, shutdown).await
    }
}

/// The router as a hyper service that records each request's begin and end.
#[derive(Clone)]
pub(super) struct Tracked {
    app: Router,
    activity: Arc<Activity>,
}

impl hyper::service::Service<http::Request<Incoming>> for Tracked {
    type Response = http::Response<TrackedBody>;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn call(&self, request: http::Request<Incoming>) -> Self::Future {
        let in_flight = self.activity.begin();
        let app = self.app.clone();
        Box::pin(async move {
            let mut response = match app.oneshot(request.map(Body::new)).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            if in_flight.activity().closing() {
                response
                    .headers_mut()
                    .insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
            }
            Ok(response.map(|body| TrackedBody { body, _in_flight: in_flight }))
        })
    }
}

/// A response body that ends its request when dropped.
pub(super) struct TrackedBody {
    body: Body,
    _in_flight: InFlight,
}

impl hyper::body::Body for TrackedBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}
