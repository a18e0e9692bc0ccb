//! Serving a router on a TCP listener, plain or over TLS, with every connection bounded: the
//! webhook port and the operations port both run on this.
//!
//! - **A cap on open connections.** The accept loop takes a slot before it accepts, so at the
//!   cap new clients wait in the kernel's backlog instead of costing a file descriptor each.
//!   While it waits, connections that never sent a request (and handshakes in progress) for
//!   over a second are closed to make room: the API server sends its request as soon as it has
//!   connected, so only a client hoarding connections loses them.
//! - **Deadlines on every phase.** The TLS handshake; a new connection's first request; a
//!   request's headers once their first byte arrived (HTTP/1.1); every write (a client that
//!   stops reading is cut off instead of pinning its response); and idleness.
//! - **Idle connections closed, at a pace the API server tolerates.** Its webhook client keeps
//!   idle HTTP/1.1 connections up to 90 s (Go's `IdleConnTimeout`) and may send a request at the
//!   very moment a server closes one: that request fails, and with `failurePolicy: Fail` so does
//!   the user's write. So an HTTP/1.1 connection that served requests is closed only after
//!   [`ConnectionLimits::http1_idle_timeout`] (120 s), longer than the client's own. HTTP/2 has a
//!   graceful close (GOAWAY: the client retries what the server did not take), so idle HTTP/2
//!   connections go sooner, and keep-alive pings find dead peers.
//! - **Graceful shutdown in two steps.** While [`Shutdown::drain`] runs, the server still
//!   accepts and answers (the API server may keep sending until it has seen the endpoint go),
//!   but HTTP/2 connections get GOAWAY and HTTP/1.1 answers carry `Connection: close`, so
//!   clients move on without a race. When [`Shutdown::stop`] follows, the listener closes,
//!   every connection is asked to finish, and what still runs after the grace period is dropped.
//!
//! Our own accept loop rather than axum-server's: it gives no way to cap connections before
//! accepting or to close one connection (idle) gracefully, and hyper's own
//! `header_read_timeout` also runs while a keep-alive connection waits for its next request,
//! which would cut the API server's pooled connections after 5 s.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep, sleep_until, timeout};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::ops::metrics::Metrics;

/// Bounds on the connections of one server.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Connections open at once; at the cap, accepting waits for one to close.
    pub max_connections: usize,
    /// Time to complete the TLS handshake.
    pub handshake_timeout: Duration,
    /// Time from accepting a connection to its first request: a client that connects and
    /// says nothing does not get the long keep-alive allowance.
    pub first_request_timeout: Duration,
    /// HTTP/1.1: time from the first byte of a request to the end of its headers.
    pub header_read_timeout: Duration,
    /// Time one write may stay blocked (the client not reading) before the connection is cut.
    pub write_timeout: Duration,
    /// HTTP/1.1: an idle keep-alive connection is closed after this long; longer than the API
    /// server's 90 s, so the client always closes first (see the module docs).
    pub http1_idle_timeout: Duration,
    /// HTTP/2: a connection without streams this long gets a graceful GOAWAY.
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
    /// HTTP/1.1: the read buffer (headers must fit in it); HTTP/2: the header list size.
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
}

/// How one server is told apart in metrics and logs.
#[derive(Clone)]
pub struct ServerOptions {
    /// `webhook` or `operations`: the metrics label.
    pub name: &'static str,
    pub limits: ConnectionLimits,
    /// TLS with ALPN (`h2`, `http/1.1`); plain HTTP/1.1 when `None`.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub metrics: Metrics,
    /// After `stop`, how long connections may take to finish before they are dropped.
    pub grace: Duration,
}

/// The two steps of a graceful shutdown (see the module docs). Cancelling `stop` alone
/// implies the drain.
#[derive(Clone, Debug, Default)]
pub struct Shutdown {
    pub drain: CancellationToken,
    pub stop: CancellationToken,
}

/// Serves `app` on `listener` until `shutdown.stop` is cancelled, then shuts down gracefully
/// (see the module docs) and returns.
pub async fn serve(listener: TcpListener, app: Router, options: ServerOptions, shutdown: Shutdown) {
    let stop = shutdown.stop.clone();
    let shared = Arc::new(Shared {
        app,
        tls: options.tls.clone().map(TlsAcceptor::from),
        limits: options.limits,
        metrics: options.metrics.clone(),
        name: options.name,
        pressure: Notify::new(),
    });
    let slots = Arc::new(Semaphore::new(options.limits.max_connections.max(1)));
    let mut connections = JoinSet::new();
    loop {
        let Some(slot) = take_slot(&slots, &mut connections, &shared, &stop).await else { break };
        let (tcp, peer) = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Typically EMFILE: back off instead of spinning; the slot is released.
                    tracing::warn!(server = options.name, %error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let (shared, shutdown) = (shared.clone(), shutdown.clone());
        connections.spawn(async move {
            let _slot = slot;
            connection(tcp, peer, &shared, shutdown).await;
        });
    }
    drop(listener);
    let finished = timeout(options.grace, async { while connections.join_next().await.is_some() {} }).await;
    if finished.is_err() {
        tracing::warn!(
            server = options.name,
            open = connections.len(),
            grace = ?options.grace,
            "connections still busy after the grace period: dropping them"
        );
        connections.shutdown().await;
    }
}

struct Shared {
    app: Router,
    tls: Option<TlsAcceptor>,
    limits: ConnectionLimits,
    metrics: Metrics,
    name: &'static str,
    /// Woken while the accept loop waits for a slot: hoarded connections close.
    pressure: Notify,
}

/// How often the accept loop, at the cap, asks hoarded connections to close.
const PRESSURE_REPEAT: Duration = Duration::from_millis(250);
/// How long a connection may go without its first request (or handshake) before it counts as
/// hoarded while the server is at its cap.
const HOARDING: Duration = Duration::from_secs(1);

/// A connection slot; at the cap, waits for one while asking hoarded connections to close,
/// and reaps finished connections meanwhile. `None` once `stop` is cancelled.
async fn take_slot(
    slots: &Arc<Semaphore>,
    connections: &mut JoinSet<()>,
    shared: &Shared,
    stop: &CancellationToken,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    if let Ok(slot) = slots.clone().try_acquire_owned() {
        return Some(slot);
    }
    let mut asking = tokio::time::interval(PRESSURE_REPEAT);
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return None,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            slot = slots.clone().acquire_owned() => return slot.ok(),
            _ = asking.tick() => shared.pressure.notify_waiters(),
        }
    }
}

/// Counts the connection in the open-connections gauge while alive.
struct Open<'a>(&'a Shared);

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.metrics.connection_opened(self.0.name, -1);
    }
}

async fn connection(tcp: TcpStream, peer: SocketAddr, shared: &Shared, shutdown: Shutdown) {
    shared.metrics.connection_opened(shared.name, 1);
    let _open = Open(shared);
    let _ = tcp.set_nodelay(true);
    let limits = &shared.limits;
    let activity = Arc::new(Activity::new());
    let io = Monitored::new(tcp, activity.clone(), limits.write_timeout);
    let reason = match &shared.tls {
        None => drive(io, false, shared, &activity, shutdown).await,
        Some(acceptor) => {
            match timeout(limits.handshake_timeout, handshake(acceptor, io, &shared.pressure)).await {
                Ok(Ok(tls)) => {
                    let http2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                    drive(tls, http2, shared, &activity, shutdown).await
                }
                Ok(Err(error)) => {
                    tracing::debug!(server = shared.name, %peer, %error, "TLS handshake failed");
                    Closed::Handshake
                }
                Err(_) => Closed::Handshake,
            }
        }
    };
    tracing::debug!(server = shared.name, %peer, reason = reason.as_str(), "connection closed");
    shared.metrics.connection_closed(shared.name, reason.as_str());
}

/// The TLS handshake; given up when the server is at its cap and it has taken over
/// [`HOARDING`] (a real client completes it in milliseconds).
async fn handshake(
    acceptor: &TlsAcceptor,
    io: Monitored,
    pressure: &Notify,
) -> io::Result<tokio_rustls::server::TlsStream<Monitored>> {
    let started = Instant::now();
    let accepting = acceptor.accept(io);
    tokio::pin!(accepting);
    loop {
        tokio::select! {
            result = &mut accepting => return result,
            () = pressure.notified() => {
                if started.elapsed() >= HOARDING {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "handshake too slow while at the connection cap"));
                }
            }
        }
    }
}

/// Why a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Closed {
    /// The client closed it (or it ended after a graceful close the client completed).
    Peer,
    Idle,
    HeaderTimeout,
    WriteTimeout,
    Handshake,
    Shutdown,
    /// Closed to make room while the server was at its cap (it never sent a request).
    Evicted,
    Error,
}

impl Closed {
    fn as_str(self) -> &'static str {
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

/// A hyper connection that can be asked to finish gracefully.
trait GracefulConnection: Future<Output = Result<(), hyper::Error>> {
    fn graceful_shutdown(self: Pin<&mut Self>);
}

impl<I> GracefulConnection for http1::Connection<TokioIo<I>, Tracked>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    fn graceful_shutdown(self: Pin<&mut Self>) {
        http1::Connection::graceful_shutdown(self)
    }
}

impl<I> GracefulConnection for http2::Connection<TokioIo<I>, Tracked, TokioExecutor>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    fn graceful_shutdown(self: Pin<&mut Self>) {
        http2::Connection::graceful_shutdown(self)
    }
}

/// Serves HTTP/1.1 or HTTP/2 on an established connection until it ends.
async fn drive<I>(io: I, http2: bool, shared: &Shared, activity: &Arc<Activity>, shutdown: Shutdown) -> Closed
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let limits = &shared.limits;
    let service = Tracked { app: shared.app.clone(), activity: activity.clone() };
    let io = TokioIo::new(io);
    if http2 {
        let mut builder = http2::Builder::new(TokioExecutor::new());
        builder
            .timer(TokioTimer::new())
            .max_concurrent_streams(limits.http2_max_concurrent_streams)
            .initial_stream_window_size(limits.http2_stream_window)
            .initial_connection_window_size(limits.http2_connection_window)
            .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
            .max_send_buf_size(limits.max_header_bytes.max(64 * 1024))
            .keep_alive_interval(limits.http2_keep_alive_interval)
            .keep_alive_timeout(limits.http2_keep_alive_timeout);
        let policy = Policy {
            http2: true,
            idle: limits.http2_idle_timeout,
            header_read: None,
            first_request: limits.first_request_timeout,
        };
        supervise(builder.serve_connection(io, service), activity, policy, shutdown, &shared.pressure).await
    } else {
        // Request heads are timed by `supervise` (hyper's own timer also runs between
        // keep-alive requests, see the module docs).
        activity.track_request_heads();
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
        supervise(builder.serve_connection(io, service), activity, policy, shutdown, &shared.pressure).await
    }
}

/// The deadlines `supervise` enforces.
#[derive(Clone, Copy, Debug)]
struct Policy {
    http2: bool,
    idle: Duration,
    header_read: Option<Duration>,
    first_request: Duration,
}

/// Polls the connection to its end, closing it gracefully when it idles too long or the
/// server drains and stops, and at once when a request's headers take too long.
async fn supervise<C: GracefulConnection>(
    connection: C,
    activity: &Activity,
    policy: Policy,
    shutdown: Shutdown,
    pressure: &Notify,
) -> Closed {
    tokio::pin!(connection);
    let mut closing = None;
    let mut draining = false;
    loop {
        let check = activity.next_check(policy);
        tokio::select! {
            result = connection.as_mut() => {
                return match (closing, result) {
                    (Some(reason), _) => reason,
                    (None, Ok(())) => Closed::Peer,
                    (None, Err(error)) if is_timeout(&error) => Closed::WriteTimeout,
                    (None, Err(_)) => Closed::Error,
                };
            }
            () = shutdown.drain.cancelled(), if !draining && closing.is_none() => {
                draining = true;
                if policy.http2 {
                    connection.as_mut().graceful_shutdown();
                    closing = Some(Closed::Shutdown);
                } else {
                    // Closing an idle HTTP/1.1 connection now could race a request; the next
                    // answer says `Connection: close` instead.
                    activity.close_after_next_response();
                }
            }
            () = shutdown.stop.cancelled(), if closing.is_none() => {
                connection.as_mut().graceful_shutdown();
                closing = Some(Closed::Shutdown);
            }
            () = activity.changed.notified(), if closing.is_none() => {}
            () = pressure.notified(), if closing.is_none() => {
                if activity.hoarding() {
                    connection.as_mut().graceful_shutdown();
                    closing = Some(Closed::Evicted);
                }
            }
            () = sleep_until(check), if closing.is_none() => match activity.expired(policy) {
                Some(Closed::HeaderTimeout) => return Closed::HeaderTimeout,
                Some(reason) => {
                    connection.as_mut().graceful_shutdown();
                    closing = Some(reason);
                }
                None => {}
            },
        }
    }
}

/// Whether a connection error came from a write that timed out (see [`Monitored`]).
fn is_timeout(error: &hyper::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(io) = current.downcast_ref::<io::Error>()
            && io.kind() == io::ErrorKind::TimedOut
        {
            return true;
        }
        source = current.source();
    }
    false
}

/// What a connection is doing, shared by its I/O (bytes arriving), its requests (begun and
/// answered) and its supervisor. Times are milliseconds since `epoch`.
struct Activity {
    epoch: Instant,
    in_flight: AtomicUsize,
    /// When the last request ended (or the connection opened).
    idle_since: AtomicU64,
    /// When the first byte of a request head arrived; [`NOT_READING`] when none is pending.
    reading_since: AtomicU64,
    /// Whether any request has begun.
    served: AtomicBool,
    /// HTTP/1.1 only: bytes arriving on an idle connection start a request head. (HTTP/2
    /// connections carry pings and window updates while idle.)
    track_heads: AtomicBool,
    /// Answers say `Connection: close` (the server is draining).
    closing: AtomicBool,
    /// Wakes the supervisor when a deadline may have moved.
    changed: Notify,
}

const NOT_READING: u64 = u64::MAX;

impl Activity {
    fn new() -> Self {
        Self {
            epoch: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            reading_since: AtomicU64::new(NOT_READING),
            served: AtomicBool::new(false),
            track_heads: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            changed: Notify::new(),
        }
    }

    fn close_after_next_response(&self) {
        self.closing.store(true, Ordering::Relaxed);
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
    }

    fn at(&self, millis: u64) -> Instant {
        self.epoch + Duration::from_millis(millis)
    }

    fn track_request_heads(&self) {
        self.track_heads.store(true, Ordering::Relaxed);
    }

    /// Bytes arrived.
    fn on_read(&self) {
        if self.track_heads.load(Ordering::Relaxed)
            && self.in_flight.load(Ordering::Acquire) == 0
            && self.reading_since.load(Ordering::Relaxed) == NOT_READING
        {
            self.reading_since.store(self.now(), Ordering::Relaxed);
            self.changed.notify_one();
        }
    }

    /// A request's headers were read: it is handed to the router.
    fn begin(self: &Arc<Self>) -> InFlight {
        self.served.store(true, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.reading_since.store(NOT_READING, Ordering::Relaxed);
        InFlight(self.clone())
    }

    /// When the supervisor should look again.
    fn next_check(&self, policy: Policy) -> Instant {
        let far = Instant::now() + Duration::from_secs(3600);
        if self.in_flight.load(Ordering::Acquire) > 0 {
            // Requests answer within their own deadlines; look again once they may be done.
            return Instant::now() + policy.header_read.unwrap_or(Duration::from_secs(5));
        }
        let reading = self.reading_since.load(Ordering::Relaxed);
        if let Some(limit) = policy.header_read
            && reading != NOT_READING
        {
            return self.at(reading) + limit;
        }
        let idle = if self.served.load(Ordering::Relaxed) { policy.idle } else { policy.first_request };
        (self.at(self.idle_since.load(Ordering::Relaxed)) + idle).min(far)
    }

    /// Whether the connection holds a slot without ever having sent a request, for over
    /// [`HOARDING`].
    fn hoarding(&self) -> bool {
        !self.served.load(Ordering::Relaxed)
            && self.in_flight.load(Ordering::Acquire) == 0
            && self.reading_since.load(Ordering::Relaxed) == NOT_READING
            && self.epoch.elapsed() >= HOARDING
    }

    /// The deadline that passed, if any.
    fn expired(&self, policy: Policy) -> Option<Closed> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let now = Instant::now();
        let reading = self.reading_since.load(Ordering::Relaxed);
        if let Some(limit) = policy.header_read
            && reading != NOT_READING
        {
            return (now >= self.at(reading) + limit).then_some(Closed::HeaderTimeout);
        }
        let idle = if self.served.load(Ordering::Relaxed) { policy.idle } else { policy.first_request };
        (now >= self.at(self.idle_since.load(Ordering::Relaxed)) + idle).then_some(Closed::Idle)
    }
}

/// One request in flight; its end (the response body dropped, sent or not) makes the
/// connection idle again when it was the last.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        activity.idle_since.store(activity.now(), Ordering::Relaxed);
        activity.in_flight.fetch_sub(1, Ordering::AcqRel);
        activity.changed.notify_one();
    }
}

/// The router as a hyper service that records each request's begin and end.
#[derive(Clone)]
struct Tracked {
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
            if in_flight.0.closing.load(Ordering::Relaxed) {
                response
                    .headers_mut()
                    .insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
            }
            Ok(response.map(|body| TrackedBody { body, _in_flight: in_flight }))
        })
    }
}

/// A response body that ends its request when dropped.
struct TrackedBody {
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

/// The TCP stream with its activity recorded and a deadline on every write: a write that
/// stays blocked for `write_timeout` (the client not reading) fails with `TimedOut`.
struct Monitored {
    tcp: TcpStream,
    activity: Arc<Activity>,
    write_timeout: Duration,
    write_deadline: Option<Pin<Box<Sleep>>>,
}

impl Monitored {
    fn new(tcp: TcpStream, activity: Arc<Activity>, write_timeout: Duration) -> Self {
        Self { tcp, activity, write_timeout, write_deadline: None }
    }

    /// Runs a write-side operation under the write deadline.
    fn timed<T>(
        &mut self,
        cx: &mut Context<'_>,
        operation: impl FnOnce(Pin<&mut TcpStream>, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match operation(Pin::new(&mut self.tcp), cx) {
            Poll::Ready(result) => {
                self.write_deadline = None;
                Poll::Ready(result)
            }
            Poll::Pending => {
                let timeout = self.write_timeout;
                let deadline =
                    self.write_deadline.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                match deadline.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client did not read the response in time",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl AsyncRead for Monitored {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.tcp).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.on_read();
        }
        result
    }
}

impl AsyncWrite for Monitored {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        self.timed(cx, |tcp, cx| tcp.poll_write(cx, data))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.timed(cx, |tcp, cx| tcp.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.timed(cx, AsyncWrite::poll_flush)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.timed(cx, AsyncWrite::poll_shutdown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy {
            http2: false,
            idle: Duration::from_secs(120),
            header_read: Some(Duration::from_secs(5)),
            first_request: Duration::from_secs(10),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_connection_gets_the_first_request_allowance_then_the_idle_one() {
        let activity = Arc::new(Activity::new());
        activity.track_request_heads();
        let opened = Instant::now();
        assert_eq!(activity.next_check(policy()), opened + Duration::from_secs(10));
        assert_eq!(activity.expired(policy()), None);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(activity.expired(policy()), Some(Closed::Idle));

        let request = activity.begin();
        assert_eq!(activity.expired(policy()), None, "never while a request runs");
        drop(request);
        let ended = Instant::now();
        assert_eq!(activity.next_check(policy()), ended + Duration::from_secs(120));
        tokio::time::advance(Duration::from_secs(119)).await;
        assert_eq!(activity.expired(policy()), None, "an API server keeps idle connections 90 s");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(activity.expired(policy()), Some(Closed::Idle));
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_head_must_arrive_whole_in_time() {
        let activity = Arc::new(Activity::new());
        activity.track_request_heads();
        drop(activity.begin());
        tokio::time::advance(Duration::from_secs(30)).await;
        activity.on_read();
        let started = Instant::now();
        assert_eq!(activity.next_check(policy()), started + Duration::from_secs(5));
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(activity.expired(policy()), Some(Closed::HeaderTimeout));
        // Once the head is read the request runs; its end makes the connection idle again.
        drop(activity.begin());
        assert_eq!(activity.expired(policy()), None);
    }

    #[tokio::test(start_paused = true)]
    async fn http2_idles_by_streams_not_bytes() {
        let activity = Arc::new(Activity::new());
        let policy = Policy { idle: Duration::from_secs(60), header_read: None, ..policy() };
        drop(activity.begin());
        tokio::time::advance(Duration::from_secs(30)).await;
        activity.on_read(); // a ping
        assert_eq!(activity.expired(policy), None);
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(activity.expired(policy), Some(Closed::Idle));
    }
}
