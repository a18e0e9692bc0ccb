//! Serving a router on a TCP listener, plain or over TLS, with every connection bounded: the
//! webhook port and the operations port both run on this.
//!
//! - **A cap on open connections, and room made at the cap.** At the cap the accept loop holds
//!   one accepted connection unserved (further clients wait in the kernel's backlog instead of
//!   costing a file descriptor each) and, while it waits, asks one open connection at a time to
//!   close (see "Making room" below). However idle connections hold the slots, a new client is
//!   served within about two seconds, well inside the API server's `timeoutSeconds: 5`; slots
//!   held by requests in flight free up within the request deadline.
//! - **Deadlines on every phase.** The TLS handshake; a new connection's first request; a
//!   request's headers once their first byte arrived (HTTP/1.1); every write (a client that
//!   stops reading is cut off instead of pinning its response); idleness; and a graceful close
//!   the client does not complete (an HTTP/2 client that never reads never answers the ping
//!   after GOAWAY) is cut after [`CLOSE_GRACE`] once nothing is in flight or being written.
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
//! **Making room at the cap.** A connection with a request in flight is never chosen, nor one
//! that had one less than [`HOARDING`] (a second) ago. Of the others, in this order, the oldest
//! first:
//!
//! 1. connections that never sent a request (TLS handshakes included), and HTTP/1.1 request
//!    heads begun and not finished: the API server writes its request as soon as it has
//!    connected, in one piece, so only a client hoarding connections loses these;
//! 2. idle HTTP/2 connections, closed with GOAWAY: a client retries elsewhere whatever the
//!    server did not take, so nothing fails;
//! 3. idle HTTP/1.1 connections, the longest idle first, closed at once.
//!
//! The third is the pooled-connection race of the bullet above, taken on purpose: without it,
//! 128 keep-alive connections that each sent one request hold every slot for 120 s, and every
//! Foo and Envoy write fails meanwhile (the API server gives up after 5 s). With it, the race
//! can only happen while every slot is taken and another client waits, and it is kept small: a
//! connection is closed only then, one per waiting client, only when no hoarder or idle
//! HTTP/2 connection is left, after re-checking just before closing that no request byte has
//! arrived, and it is the longest-idle one: Go's transport reuses its most recently used idle
//! connection, so the one idle longest is the one a pool is least likely to pick next. A client
//! that reused a connection within the last second never loses it.
//!
//! Our own accept loop rather than axum-server's: it gives no way to cap connections before
//! accepting or to close one connection (idle) gracefully, and hyper's own
//! `header_read_timeout` also runs while a keep-alive connection waits for its next request,
//! which would cut the API server's pooled connections after 5 s.

pub mod metrics;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior, Sleep, sleep_until, timeout};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

pub use self::metrics::ConnectionMetrics;

/// Bounds on the connections of one server.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// Connections open at once; at the cap, a new client waits while room is made (see the
    /// module docs).
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
    pub metrics: ConnectionMetrics,
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
        roster: Roster::default(),
    });
    let slots = Arc::new(Semaphore::new(options.limits.max_connections.max(1)));
    let mut connections = JoinSet::new();
    loop {
        // Reaped as they end, so the set holds only open connections.
        while connections.try_join_next().is_some() {}
        let (tcp, peer) = tokio::select! {
            biased;
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Typically EMFILE: back off instead of spinning.
                    tracing::warn!(server = options.name, %error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // At the cap this client waits here, accepted and not yet served: the one whose
        // waiting makes room (the module docs); the clients after it wait in the backlog.
        let Some(slot) = take_slot(&slots, &mut connections, &shared, &stop).await else { break };
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
    metrics: ConnectionMetrics,
    name: &'static str,
    /// The open connections, one of which closes when a client waits at the cap.
    roster: Roster,
}

/// How often the accept loop, at the cap with a client waiting, looks for a connection to
/// close (when the one asked before has gone, or none could be asked yet).
const MAKING_ROOM_REPEAT: Duration = Duration::from_millis(250);
/// How long a connection must have had no request in flight (or have gone without its first
/// request, or have been reading a request head) before it may be closed to make room.
const HOARDING: Duration = Duration::from_secs(1);
/// How long a graceful close may take once nothing is in flight or waiting to be written: a
/// client that reads answers the ping after GOAWAY within a round trip.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// A connection slot; at the cap, waits for one while asking connections to make room (one
/// at a time), and reaps ending connections meanwhile. `None` once `stop` is cancelled.
async fn take_slot(
    slots: &Arc<Semaphore>,
    connections: &mut JoinSet<()>,
    shared: &Shared,
    stop: &CancellationToken,
) -> Option<OwnedSemaphorePermit> {
    if let Ok(slot) = slots.clone().try_acquire_owned() {
        return Some(slot);
    }
    let mut looking = tokio::time::interval(MAKING_ROOM_REPEAT);
    looking.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => return None,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            slot = slots.clone().acquire_owned() => return slot.ok(),
            _ = looking.tick() => shared.roster.make_room(Instant::now()),
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
    let _listed = shared.roster.list(&activity);
    let io = Monitored::new(tcp, activity.clone(), limits.write_timeout);
    let reason = match &shared.tls {
        None => drive(io, false, shared, &activity, shutdown).await,
        Some(acceptor) => match timeout(limits.handshake_timeout, handshake(acceptor, io, &activity)).await {
            Ok(Ok(tls)) => {
                let http2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                drive(tls, http2, shared, &activity, shutdown).await
            }
            Ok(Err(Handshake::Failed(error))) => {
                tracing::debug!(server = shared.name, %peer, %error, "TLS handshake failed");
                Closed::Handshake
            }
            Ok(Err(Handshake::Evicted)) => Closed::Evicted,
            Err(_) => Closed::Handshake,
        },
    };
    tracing::debug!(server = shared.name, %peer, reason = reason.as_str(), "connection closed");
    shared.metrics.connection_closed(shared.name, reason.as_str());
}

/// Why a TLS handshake did not complete.
enum Handshake {
    Failed(io::Error),
    /// Still going after [`HOARDING`] while a client waited at the cap (a real client
    /// completes it in milliseconds).
    Evicted,
}

/// The TLS handshake, given up when asked to make room.
async fn handshake(
    acceptor: &TlsAcceptor,
    io: Monitored,
    activity: &Activity,
) -> Result<TlsStream<Monitored>, Handshake> {
    let accepting = acceptor.accept(io);
    tokio::pin!(accepting);
    loop {
        tokio::select! {
            result = &mut accepting => return result.map_err(Handshake::Failed),
            () = activity.eviction.notified() => {
                if activity.accept_eviction().is_some() {
                    return Err(Handshake::Evicted);
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
    /// Closed to make room for a client waiting at the cap.
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

/// The deadlines `supervise` enforces.
#[derive(Clone, Copy, Debug)]
struct Policy {
    http2: bool,
    idle: Duration,
    header_read: Option<Duration>,
    first_request: Duration,
}

/// Polls the connection to its end, closing it gracefully when it idles too long, the server
/// drains and stops, or a client waiting at the cap needs its slot; at once when a request's
/// headers take too long; and cutting a graceful close the client does not complete.
///
/// Requests do not wake it: it looks at the connection's [`Activity`] when its next deadline
/// comes (a deadline that moved later meanwhile is slept on again), and only a request head
/// that must be cut before then wakes it early. So a request costs no extra poll of the
/// connection's task, no timer re-registration and no re-registration with the shutdown
/// tokens (which every connection shares).
async fn supervise<C: GracefulConnection>(
    connection: C,
    activity: &Activity,
    policy: Policy,
    shutdown: Shutdown,
) -> Closed {
    tokio::pin!(connection);
    // Created once: each creation registers with its token or the timer.
    let drain = shutdown.drain.cancelled();
    let stop = shutdown.stop.cancelled();
    let eviction = activity.eviction.notified();
    let looking = sleep_until(Instant::now());
    tokio::pin!(drain, stop, eviction, looking);
    // Why the connection is closing gracefully, and since when.
    let mut closing: Option<(Closed, Instant)> = None;
    let mut draining = false;
    loop {
        let check = match closing {
            None => activity.next_check(policy),
            Some((_, since)) => activity.close_deadline(since),
        };
        if looking.deadline() != check {
            looking.as_mut().reset(check);
        }
        activity.will_look_at(check);
        tokio::select! {
            result = connection.as_mut() => {
                return match (closing, result) {
                    (Some((reason, _)), _) => reason,
                    (None, Ok(())) => Closed::Peer,
                    (None, Err(error)) if is_timeout(&error) => Closed::WriteTimeout,
                    (None, Err(_)) => Closed::Error,
                };
            }
            () = &mut drain, if !draining && closing.is_none() => {
                draining = true;
                if policy.http2 {
                    connection.as_mut().graceful_shutdown();
                    closing = Some((Closed::Shutdown, Instant::now()));
                } else {
                    // Closing an idle HTTP/1.1 connection now could race a request; the next
                    // answer says `Connection: close` instead.
                    activity.close_after_next_response();
                }
            }
            () = &mut stop, if closing.is_none() => {
                connection.as_mut().graceful_shutdown();
                closing = Some((Closed::Shutdown, Instant::now()));
            }
            () = activity.head_begun.notified() => {}
            () = &mut eviction, if closing.is_none() => {
                eviction.set(activity.eviction.notified());
                match activity.accept_eviction() {
                    // Half a request head: nothing to finish, and hyper would wait for the rest.
                    Some(Vacancy { kind: VacancyKind::StalledHead, .. }) => return Closed::Evicted,
                    Some(_) => {
                        connection.as_mut().graceful_shutdown();
                        closing = Some((Closed::Evicted, Instant::now()));
                    }
                    None => {}
                }
            }
            () = &mut looking => match closing {
                None => match activity.expired(policy) {
                    Some(Closed::HeaderTimeout) => return Closed::HeaderTimeout,
                    Some(reason) => {
                        connection.as_mut().graceful_shutdown();
                        closing = Some((reason, Instant::now()));
                    }
                    None => {}
                },
                Some((reason, since)) => {
                    if activity.close_overdue(since) {
                        return reason;
                    }
                }
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

/// The open connections, for the accept loop to choose one to close when a client waits at
/// the cap. Locked when a connection opens or ends and while making room, never per request.
#[derive(Default)]
struct Roster(Mutex<Vec<Arc<Activity>>>);

impl Roster {
    fn lock(&self) -> MutexGuard<'_, Vec<Arc<Activity>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lists a connection while the returned guard lives.
    fn list(&self, activity: &Arc<Activity>) -> Listed<'_> {
        self.lock().push(activity.clone());
        Listed { roster: self, activity: activity.clone() }
    }

    /// Asks the connection best lost (see [`Vacancy`]) to close, unless one asked before is
    /// still on its way out: one connection per waiting client.
    fn make_room(&self, now: Instant) {
        let listed = self.lock();
        if listed.iter().any(|activity| activity.leaving()) {
            return;
        }
        let best = listed
            .iter()
            .filter_map(|activity| Some((activity.vacancy(now)?, activity)))
            .min_by_key(|(vacancy, _)| *vacancy);
        if let Some((_, activity)) = best {
            activity.ask_to_leave();
        }
    }
}

/// A connection's place in the [`Roster`].
struct Listed<'a> {
    roster: &'a Roster,
    activity: Arc<Activity>,
}

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        let mut listed = self.roster.lock();
        if let Some(index) = listed.iter().position(|activity| Arc::ptr_eq(activity, &self.activity)) {
            listed.swap_remove(index);
        }
    }
}

/// What closing a connection would cost, cheapest first: by kind (see the module docs), then
/// the one that has been in that state longest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Vacancy {
    kind: VacancyKind,
    since: Instant,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum VacancyKind {
    /// No request yet (the TLS handshake may still run).
    Silent,
    /// HTTP/1.1: a request head begun and not finished.
    StalledHead,
    /// HTTP/2 without a stream: GOAWAY, and the client retries elsewhere.
    IdleHttp2,
    /// HTTP/1.1 between requests: closing it may race a request (see the module docs).
    IdleHttp1,
}

/// What a connection is doing, shared by its I/O (bytes arriving), its requests (begun and
/// answered) and its supervisor, and read by the accept loop making room at the cap. Times
/// are milliseconds since `epoch`.
struct Activity {
    epoch: Instant,
    in_flight: AtomicUsize,
    /// When the last request ended (or the connection opened).
    idle_since: AtomicU64,
    /// When the first byte of a request head arrived; [`NEVER`] when none is pending.
    reading_since: AtomicU64,
    /// Whether any request has begun.
    served: AtomicBool,
    /// Serving HTTP/1.1 (not yet during the handshake): bytes arriving on an idle connection
    /// start a request head (HTTP/2 connections carry pings and window updates while idle),
    /// and closing an idle one may race a request.
    http1: AtomicBool,
    /// HTTP/1.1: the time a request head may take, in milliseconds.
    head_limit: AtomicU64,
    /// When the supervisor looks next; a head begun now that must be cut sooner wakes it.
    wake_at: AtomicU64,
    /// Answers say `Connection: close` (the server is draining).
    closing: AtomicBool,
    /// A write waits on the client to read; [`Monitored`] sets it only when a write blocks.
    write_blocked: AtomicBool,
    /// When a blocked write last went through; [`NEVER`] before.
    write_resumed: AtomicU64,
    /// Asked to close to make room, until it ends or declines.
    evicting: AtomicBool,
    /// Wakes the supervisor (or the handshake) when asked to close to make room.
    eviction: Notify,
    /// Wakes the supervisor when a request head begins that must be cut before it would
    /// look next: about once per header allowance at most, not once per request.
    head_begun: Notify,
}

const NEVER: u64 = u64::MAX;

impl Activity {
    fn new() -> Self {
        Self {
            epoch: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            reading_since: AtomicU64::new(NEVER),
            served: AtomicBool::new(false),
            http1: AtomicBool::new(false),
            head_limit: AtomicU64::new(NEVER),
            wake_at: AtomicU64::new(NEVER),
            closing: AtomicBool::new(false),
            write_blocked: AtomicBool::new(false),
            write_resumed: AtomicU64::new(NEVER),
            evicting: AtomicBool::new(false),
            eviction: Notify::new(),
            head_begun: Notify::new(),
        }
    }

    fn close_after_next_response(&self) {
        self.closing.store(true, Ordering::Relaxed);
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(NEVER - 1)
    }

    fn at(&self, millis: u64) -> Instant {
        self.epoch + Duration::from_millis(millis)
    }

    /// Serving HTTP/1.1, whose request heads must arrive within `head_limit`.
    fn serving_http1(&self, head_limit: Duration) {
        let millis = u64::try_from(head_limit.as_millis()).unwrap_or(NEVER);
        self.head_limit.store(millis, Ordering::Relaxed);
        self.http1.store(true, Ordering::Relaxed);
    }

    /// The supervisor looks next at `when`.
    fn will_look_at(&self, when: Instant) {
        let millis = u64::try_from(when.saturating_duration_since(self.epoch).as_millis()).unwrap_or(NEVER);
        self.wake_at.store(millis, Ordering::Relaxed);
    }

    /// Bytes arrived.
    fn on_read(&self) {
        if self.http1.load(Ordering::Relaxed)
            && self.in_flight.load(Ordering::Acquire) == 0
            && self.reading_since.load(Ordering::Relaxed) == NEVER
        {
            let now = self.now();
            self.reading_since.store(now, Ordering::Relaxed);
            let cut_at = now.saturating_add(self.head_limit.load(Ordering::Relaxed));
            if self.wake_at.load(Ordering::Relaxed) > cut_at {
                self.head_begun.notify_one();
            }
        }
    }

    /// A request's headers were read: it is handed to the router.
    fn begin(self: &Arc<Self>) -> InFlight {
        self.served.store(true, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.reading_since.store(NEVER, Ordering::Relaxed);
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
            && reading != NEVER
        {
            return self.at(reading) + limit;
        }
        let idle = if self.served.load(Ordering::Relaxed) { policy.idle } else { policy.first_request };
        (self.at(self.idle_since.load(Ordering::Relaxed)) + idle).min(far)
    }

    /// The deadline that passed, if any.
    fn expired(&self, policy: Policy) -> Option<Closed> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let now = Instant::now();
        let reading = self.reading_since.load(Ordering::Relaxed);
        if let Some(limit) = policy.header_read
            && reading != NEVER
        {
            return (now >= self.at(reading) + limit).then_some(Closed::HeaderTimeout);
        }
        let idle = if self.served.load(Ordering::Relaxed) { policy.idle } else { policy.first_request };
        (now >= self.at(self.idle_since.load(Ordering::Relaxed)) + idle).then_some(Closed::Idle)
    }

    /// What closing this connection to make room would cost; `None` while a request is in
    /// flight or the connection had one (or opened, or began a head) under [`HOARDING`] ago.
    fn vacancy(&self, now: Instant) -> Option<Vacancy> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let reading = self.reading_since.load(Ordering::Relaxed);
        let (kind, since) = if reading != NEVER {
            (VacancyKind::StalledHead, self.at(reading))
        } else if !self.served.load(Ordering::Relaxed) {
            (VacancyKind::Silent, self.epoch)
        } else if self.http1.load(Ordering::Relaxed) {
            (VacancyKind::IdleHttp1, self.at(self.idle_since.load(Ordering::Relaxed)))
        } else {
            (VacancyKind::IdleHttp2, self.at(self.idle_since.load(Ordering::Relaxed)))
        };
        (now.saturating_duration_since(since) >= HOARDING).then_some(Vacancy { kind, since })
    }

    fn ask_to_leave(&self) {
        self.evicting.store(true, Ordering::Relaxed);
        self.eviction.notify_one();
    }

    /// Asked to make room and not serving a request meanwhile: it will be gone shortly.
    fn leaving(&self) -> bool {
        self.evicting.load(Ordering::Relaxed) && self.in_flight.load(Ordering::Acquire) == 0
    }

    /// Asked to make room: whether it still may, checked again now (a request may have begun
    /// since it was chosen), and how; declining lets the accept loop choose another.
    fn accept_eviction(&self) -> Option<Vacancy> {
        let vacancy = self.vacancy(Instant::now());
        if vacancy.is_none() {
            self.evicting.store(false, Ordering::Relaxed);
        }
        vacancy
    }

    /// When a graceful close begun at `since` is overdue: [`CLOSE_GRACE`] after it began, after
    /// the last request ended and after the last blocked write went through. Until then the
    /// client may still finish it; a request or a blocked write postpones it (the request
    /// deadline and the write timeout bound those).
    fn close_deadline(&self, since: Instant) -> Instant {
        if self.in_flight.load(Ordering::Acquire) > 0 || self.write_blocked.load(Ordering::Relaxed) {
            return Instant::now() + CLOSE_GRACE;
        }
        let mut quiet = since.max(self.at(self.idle_since.load(Ordering::Relaxed)));
        let resumed = self.write_resumed.load(Ordering::Relaxed);
        if resumed != NEVER {
            quiet = quiet.max(self.at(resumed));
        }
        quiet + CLOSE_GRACE
    }

    fn close_overdue(&self, since: Instant) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
            && !self.write_blocked.load(Ordering::Relaxed)
            && Instant::now() >= self.close_deadline(since)
    }

    fn write_blocks(&self) {
        self.write_blocked.store(true, Ordering::Relaxed);
    }

    fn write_resumes(&self) {
        self.write_resumed.store(self.now(), Ordering::Relaxed);
        self.write_blocked.store(false, Ordering::Relaxed);
    }
}

/// One request in flight; its end (the response body dropped, sent or not) makes the
/// connection idle again when it was the last. The supervisor sees it when it next looks.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        activity.idle_since.store(activity.now(), Ordering::Relaxed);
        activity.in_flight.fetch_sub(1, Ordering::AcqRel);
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
                if self.write_deadline.take().is_some() {
                    self.activity.write_resumes();
                }
                Poll::Ready(result)
            }
            Poll::Pending => {
                let timeout = self.write_timeout;
                let deadline = self.write_deadline.get_or_insert_with(|| {
                    self.activity.write_blocks();
                    Box::pin(tokio::time::sleep(timeout))
                });
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
        activity.serving_http1(Duration::from_secs(5));
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
        activity.serving_http1(Duration::from_secs(5));
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

    #[tokio::test(start_paused = true)]
    async fn only_a_head_to_cut_before_the_supervisor_looks_wakes_it() {
        let activity = Arc::new(Activity::new());
        activity.serving_http1(Duration::from_secs(5));
        let woken = || {
            let notified = activity.head_begun.notified();
            futures::pin_mut!(notified);
            notified.enable()
        };
        // Requests end and begin while it looks again within the header allowance: no wake.
        activity.will_look_at(Instant::now() + Duration::from_secs(5));
        drop(activity.begin());
        activity.on_read();
        assert!(!woken(), "the supervisor looks in time anyway");
        drop(activity.begin());
        // Idle, it sleeps until the idle deadline: a head begun now must be cut sooner.
        activity.will_look_at(Instant::now() + Duration::from_secs(120));
        activity.on_read();
        assert!(woken());
        assert_eq!(activity.next_check(policy()), Instant::now() + Duration::from_secs(5));
    }

    fn http1_served() -> Arc<Activity> {
        let activity = Arc::new(Activity::new());
        activity.serving_http1(Duration::from_secs(5));
        drop(activity.begin());
        activity
    }

    fn http2_served() -> Arc<Activity> {
        let activity = Arc::new(Activity::new());
        drop(activity.begin());
        activity
    }

    fn asked(activities: &[&Arc<Activity>]) -> Vec<bool> {
        activities.iter().map(|activity| activity.evicting.load(Ordering::Relaxed)).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn room_is_made_by_the_cheapest_connection_one_at_a_time() {
        let roster = Roster::default();
        let older_http1 = http1_served();
        let _l1 = roster.list(&older_http1);
        tokio::time::advance(Duration::from_millis(10)).await;
        let http1 = http1_served();
        let _l2 = roster.list(&http1);
        let http2 = http2_served();
        let l3 = roster.list(&http2);
        let silent = Arc::new(Activity::new());
        let l4 = roster.list(&silent);
        let busy = http2_served();
        let _request = busy.begin();
        let _l5 = roster.list(&busy);
        let all = [&older_http1, &http1, &http2, &silent, &busy];

        roster.make_room(Instant::now());
        assert_eq!(asked(&all), [false; 5], "nothing idle for a second yet");

        tokio::time::advance(HOARDING).await;
        roster.make_room(Instant::now());
        assert_eq!(
            asked(&all),
            [false, false, false, true, false],
            "first, the one that never sent a request"
        );
        roster.make_room(Instant::now());
        assert_eq!(asked(&all), [false, false, false, true, false], "one at a time: it is still leaving");
        assert!(silent.accept_eviction().is_some());
        drop(l4);

        roster.make_room(Instant::now());
        assert_eq!(asked(&all), [false, false, true, true, false], "then idle HTTP/2: GOAWAY");
        drop(l3);

        roster.make_room(Instant::now());
        assert_eq!(asked(&all), [true, false, true, true, false], "then the longest-idle HTTP/1.1");
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_asked_to_make_room_declines_once_a_request_began() {
        let roster = Roster::default();
        let activity = http1_served();
        let _listed = roster.list(&activity);
        tokio::time::advance(HOARDING).await;
        roster.make_room(Instant::now());
        assert!(activity.leaving());
        // A request arrives before the supervisor acts on the request to leave.
        activity.on_read();
        assert_eq!(activity.accept_eviction(), None, "a request head is arriving");
        assert!(!activity.leaving(), "declined: the accept loop may choose another");
        let request = activity.begin();
        assert_eq!(activity.vacancy(Instant::now() + HOARDING), None, "never while a request runs");
        drop(request);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_request_head_makes_room_like_a_silent_connection() {
        let activity = http1_served();
        tokio::time::advance(Duration::from_secs(30)).await;
        activity.on_read();
        assert_eq!(activity.vacancy(Instant::now()), None, "a head may take a moment");
        tokio::time::advance(HOARDING).await;
        let vacancy = activity.vacancy(Instant::now()).unwrap();
        assert_eq!(vacancy.kind, VacancyKind::StalledHead);
        assert!(vacancy < http1_served().vacancy(Instant::now() + HOARDING).unwrap());
    }

    #[tokio::test(start_paused = true)]
    async fn a_graceful_close_is_cut_once_quiet_for_the_grace() {
        let activity = http2_served();
        let began = Instant::now();
        assert_eq!(activity.close_deadline(began), began + CLOSE_GRACE);
        let request = activity.begin();
        tokio::time::advance(CLOSE_GRACE * 3).await;
        assert!(!activity.close_overdue(began), "a request in flight finishes first");
        drop(request);
        activity.write_blocks();
        tokio::time::advance(CLOSE_GRACE * 3).await;
        assert!(!activity.close_overdue(began), "an answer being written finishes first");
        activity.write_resumes();
        let resumed = Instant::now();
        assert_eq!(activity.close_deadline(began), resumed + CLOSE_GRACE);
        tokio::time::advance(CLOSE_GRACE).await;
        assert!(activity.close_overdue(began));
    }
}

/// Making room at the cap, on a real TLS server on loopback: whatever holds the slots, a new
/// client is served within the API server's 5 s; a request in flight is never cut.
#[cfg(test)]
mod at_the_cap {
    use std::sync::Arc;
    use std::time::Duration;

    use axum::Router;
    use axum::routing::get;
    use bytes::Bytes;
    use http_body_util::{BodyExt, Empty};
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use rustls::pki_types::ServerName;
    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::Semaphore;
    use tokio_rustls::TlsConnector;
    use tokio_rustls::client::TlsStream;

    use prometheus_client::registry::Registry;

    use super::{ConnectionLimits, ConnectionMetrics, ServerOptions, Shutdown, serve};
    use crate::certs::serving::{self, CertOptions, CertPaths, ReloadingCert};

    /// The API server's `timeoutSeconds`: a new client must be served within it.
    const API_SERVER_TIMEOUT: Duration = Duration::from_secs(5);

    struct Server {
        addr: std::net::SocketAddr,
        client: Arc<rustls::ClientConfig>,
        /// The registry holding the connection families.
        metrics: Registry,
        /// `GET /held` answers once it gets a permit from here.
        release: Arc<Semaphore>,
        _dir: tempfile::TempDir,
        _task: tokio::task::JoinHandle<()>,
    }

    async fn start(max_connections: usize) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let options = CertOptions {
            service_name: "hook".into(),
            namespace: "ops".into(),
            days: 1,
            extra_names: Vec::new(),
        };
        let generated = serving::generate(&options).unwrap();
        serving::write(dir.path(), &generated, false).unwrap();
        let certs = ReloadingCert::load(CertPaths::in_dir(dir.path())).unwrap();
        let release = Arc::new(Semaphore::new(0));
        let gate = release.clone();
        let app = Router::new().route("/", get(|| async { "ok" })).route(
            "/held",
            get(move || {
                let gate = gate.clone();
                async move {
                    let _permit = gate.acquire().await;
                    "released"
                }
            }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut metrics = Registry::with_prefix("envoy_operator");
        let connections = ConnectionMetrics::register(&mut metrics);
        let options = ServerOptions {
            name: "webhook",
            limits: ConnectionLimits { max_connections, ..ConnectionLimits::webhook() },
            tls: Some(serving::server_config(certs).unwrap()),
            metrics: connections,
            grace: Duration::from_secs(1),
        };
        let task = tokio::spawn(serve(listener, app, options, Shutdown::default()));
        let mut roots = rustls::RootCertStore::empty();
        for cert in crate::certs::pem::certificates(generated.ca_pem.as_bytes()).unwrap() {
            roots.add(cert).unwrap();
        }
        let client = rustls::ClientConfig::builder_with_provider(serving::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Server { addr, client: Arc::new(client), metrics, release, _dir: dir, _task: task }
    }

    impl Server {
        async fn connect(&self, alpn: &[u8]) -> TlsStream<TcpStream> {
            let mut config = (*self.client).clone();
            config.alpn_protocols = vec![alpn.to_vec()];
            let tcp = TcpStream::connect(self.addr).await.unwrap();
            let name = ServerName::try_from("localhost").unwrap();
            TlsConnector::from(Arc::new(config)).connect(name, tcp).await.expect("TLS handshake")
        }

        /// An HTTP/1.1 keep-alive connection; the returned sender keeps it open.
        async fn http1(&self) -> hyper::client::conn::http1::SendRequest<Empty<Bytes>> {
            let stream = self.connect(b"http/1.1").await;
            let (sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
            tokio::spawn(connection);
            sender
        }

        async fn http2(&self) -> hyper::client::conn::http2::SendRequest<Empty<Bytes>> {
            let stream = self.connect(b"h2").await;
            assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
            let (sender, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                    .await
                    .unwrap();
            tokio::spawn(connection);
            sender
        }

        fn closed(&self, reason: &str) -> u64 {
            let prefix = format!(
                "envoy_operator_http_connections_closed_total{{server=\"webhook\",reason=\"{reason}\"}} "
            );
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &self.metrics).unwrap();
            text.lines().find_map(|line| line.strip_prefix(&prefix)?.parse().ok()).unwrap_or(0)
        }

        /// A new client's `GET /`, from connecting to the answer, within the API server's
        /// timeout.
        async fn new_client_is_served(&self) {
            let served = tokio::time::timeout(API_SERVER_TIMEOUT, async {
                let mut sender = self.http1().await;
                get_ok(&mut sender, "/").await
            })
            .await;
            assert_eq!(
                served.ok().as_deref(),
                Some("ok"),
                "a new client served within {API_SERVER_TIMEOUT:?}"
            );
        }
    }

    fn request(uri: &str) -> hyper::Request<Empty<Bytes>> {
        hyper::Request::get(uri).header("host", "localhost").body(Empty::new()).unwrap()
    }

    async fn get_ok(
        sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
        path: &str,
    ) -> String {
        let response = sender.send_request(request(path)).await.unwrap();
        assert_eq!(response.status(), 200);
        String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
    }

    async fn cap_held_by_idle_http1(cap: usize) {
        let server = start(cap).await;
        let mut held = Vec::new();
        for _ in 0..cap {
            let mut sender = server.http1().await;
            assert_eq!(get_ok(&mut sender, "/").await, "ok");
            held.push(sender);
        }
        server.new_client_is_served().await;
        assert!(server.closed("evicted") >= 1);
    }

    #[tokio::test]
    async fn idle_http1_keep_alive_connections_make_room() {
        cap_held_by_idle_http1(8).await;
    }

    #[tokio::test]
    async fn idle_http1_keep_alive_connections_make_room_at_the_real_cap() {
        cap_held_by_idle_http1(ConnectionLimits::webhook().max_connections).await;
    }

    #[tokio::test]
    async fn http2_connections_that_never_read_make_room() {
        let server = start(8).await;
        let mut held = Vec::new();
        for _ in 0..8 {
            let mut stream = server.connect(b"h2").await;
            assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
            // The client preface and an empty SETTINGS frame; then nothing is ever read, so
            // the server's GOAWAY and its ping are never answered.
            stream.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").await.unwrap();
            stream.flush().await.unwrap();
            held.push(stream);
        }
        server.new_client_is_served().await;
        assert!(server.closed("evicted") >= 1);
    }

    #[tokio::test]
    async fn idle_http2_connections_make_room() {
        let server = start(8).await;
        let mut held = Vec::new();
        for _ in 0..8 {
            let mut sender = server.http2().await;
            let response = sender.send_request(request("https://localhost/")).await.unwrap();
            assert_eq!(response.status(), 200);
            held.push(sender);
        }
        server.new_client_is_served().await;
        assert!(server.closed("evicted") >= 1);
    }

    #[tokio::test]
    async fn a_connection_with_a_request_in_flight_is_never_evicted() {
        let server = start(2).await;
        // Both slots serve a request that runs until released.
        let mut in_flight = Vec::new();
        for _ in 0..2 {
            let mut sender = server.http1().await;
            in_flight.push(tokio::spawn(async move {
                let answer = get_ok(&mut sender, "/held").await;
                (answer, sender)
            }));
        }
        let waiting = tokio::spawn({
            let (addr, client) = (server.addr, server.client.clone());
            async move {
                let tcp = TcpStream::connect(addr).await.unwrap();
                let mut config = (*client).clone();
                config.alpn_protocols = vec![b"http/1.1".to_vec()];
                let name = ServerName::try_from("localhost").unwrap();
                TlsConnector::from(Arc::new(config)).connect(name, tcp).await.unwrap()
            }
        });
        // Long past the point where an idle connection would have made room.
        tokio::time::sleep(super::HOARDING + super::CLOSE_GRACE + Duration::from_millis(500)).await;
        assert!(!waiting.is_finished(), "no slot while every connection has a request in flight");
        assert!(in_flight.iter().all(|request| !request.is_finished()));
        assert_eq!(server.closed("evicted"), 0);

        // Released, both requests are answered on their connections.
        server.release.add_permits(2);
        for request in in_flight {
            let (answer, _sender) =
                tokio::time::timeout(API_SERVER_TIMEOUT, request).await.expect("answered").unwrap();
            assert_eq!(answer, "released");
        }
        // Now idle, one of them makes room for the client that waited.
        tokio::time::timeout(API_SERVER_TIMEOUT, waiting)
            .await
            .expect("the waiting client got a slot")
            .unwrap();
    }
}
