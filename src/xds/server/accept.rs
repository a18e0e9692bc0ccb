//! Accepting xDS connections: TCP, then a rustls handshake (TLS 1.2+, ALPN `h2`, the
//! certificate from a resolver the operator can swap at any time, and the client's certificate
//! checked against the fleets' identity CA) run off the accept loop under a deadline, a cap on
//! open connections, and the peer's address and proven identity kept with the connection
//! ([`XdsConnectInfo`]) so the authorizer can see them.
//!
//! A connection also ends on its own: when the client certificate it was accepted with expires
//! (a renewed certificate comes with the proxy's next connection), and when it has carried no
//! stream for the idle timeout (an open socket costs memory and a file descriptor, and a proxy
//! always has its one ADS stream open).
//!
//! A connection reads only with a reservation from the reading budget ([`ReadingBudget`]),
//! taken when its socket has bytes and given back once what it read ends with whole TLS records
//! and HTTP/2 frames (`framing.rs`): rustls and h2 then hold none of its client's bytes.
//!
//! The accept loop, the connection slots (refusing at the cap: a proxy retries, and the cap is
//! set from memory), the handshake and the activity tracking are `net`'s, shared with the
//! webhook port; this module is what only xDS adds: the client's identity, the deadlines a
//! connection ends on by itself, its reading reservations, and the hand-over to the server
//! (`connection.rs`).
//!
//! Hand-written rather than taken from a crate (`tls-listener`, tonic's own TLS): tonic's TLS
//! takes a fixed identity, not a `ResolvesServerCert`, and the connection cap needs a permit
//! that lives exactly as long as the connection, which this wrapper holds.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::{Duration, SystemTime};

use rustls::server::ResolvesServerCert;
use rustls::server::danger::ClientCertVerifier;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio::task::JoinHandle;
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tracing::{debug, warn};

use super::framing::{HeaderBlocks, TlsRecords};
use super::metrics::XdsMetrics;
use super::reading_budget::{ReadingBudget, Reserving};
use crate::certs::client_auth::{PeerIdentity, peer_identity};
use crate::net::ServeConfig;
use crate::net::accept::{Accept, accept_loop};
use crate::net::activity::Activity;
use crate::net::slots::Slots;
use crate::net::tls::{self, HandshakeError, handshake};

/// The rustls configuration of the xDS port: TLS 1.3 and 1.2 with the ring provider, HTTP/2
/// only, and client certificates checked by `clients` (none asked for without).
pub fn server_config(
    resolver: Arc<dyn ResolvesServerCert>,
    clients: Option<Arc<dyn ClientCertVerifier>>,
) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
    tls::server_config(resolver, clients, &[b"h2"])
}

/// How accepted TCP connections become gRPC connections.
pub(crate) enum Handshake {
    /// TLS, within the handshake timeout; with `identities`, a client certificate's identity is
    /// read and one naming no fleet closes the connection.
    Tls {
        acceptor: TlsAcceptor,
        identities: bool,
    },
    Plaintext,
}

/// What the service learns of a connection: its addresses, the fleet its client certificate
/// proved (none without client certificates), and its activity: each stream is a request in
/// flight (`Activity::begin`), counted for idleness.
#[derive(Clone, Debug)]
pub struct XdsConnectInfo {
    pub remote_addr: Option<SocketAddr>,
    pub identity: Option<PeerIdentity>,
    pub(crate) activity: Arc<Activity>,
}

/// When a connection ends on its own: its certificate's expiry, its idle timeout.
struct Deadlines {
    expiry: Option<Pin<Box<Sleep>>>,
    idle: Pin<Box<Sleep>>,
    idle_timeout: Duration,
    activity: Arc<Activity>,
}

impl Deadlines {
    fn new(activity: Arc<Activity>, identity: Option<&PeerIdentity>, idle_timeout: Duration) -> Self {
        let expiry = identity.map(|identity| {
            let left = identity.not_after.duration_since(SystemTime::now()).unwrap_or_default();
            Box::pin(tokio::time::sleep(left))
        });
        Self { expiry, idle: Box::pin(tokio::time::sleep(idle_timeout)), idle_timeout, activity }
    }

    /// Why the connection must end now, if it must. Registers for a wake-up otherwise.
    fn poll_due(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        if let Some(expiry) = &mut self.expiry
            && expiry.as_mut().poll(cx).is_ready()
        {
            return Some(io::Error::new(io::ErrorKind::TimedOut, "the client certificate expired"));
        }
        let deadline = self.activity.idle_deadline(self.idle_timeout, cx.waker())?;
        if self.idle.deadline() != deadline {
            self.idle.as_mut().reset(deadline);
        }
        self.idle
            .as_mut()
            .poll(cx)
            .is_ready()
            .then(|| io::Error::new(io::ErrorKind::TimedOut, "no stream for the idle timeout"))
    }
}

enum Io {
    Tls(Box<TlsStream<TlsRecords<TcpStream>>>),
    Plain(TcpStream),
}

impl Io {
    fn socket(&self) -> &TcpStream {
        match self {
            Io::Tls(stream) => stream.get_ref().0.get_ref(),
            Io::Plain(stream) => stream,
        }
    }

    /// Whether what was read from the socket ends with a whole TLS record: rustls then holds
    /// none in part.
    fn records_at_boundary(&self) -> bool {
        match self {
            Io::Tls(stream) => stream.get_ref().0.at_boundary(),
            Io::Plain(_) => true,
        }
    }
}

/// A connection's part in the reading budget ([`ReadingBudget`]).
struct Reading {
    budget: ReadingBudget,
    metrics: Arc<dyn XdsMetrics>,
    state: ReadState,
    /// When a reservation held since then without the reads coming to rest ends the
    /// connection.
    overdue: Pin<Box<Sleep>>,
}

enum ReadState {
    /// Holding nothing of the client's: a read waits for the socket to have bytes before it
    /// reserves.
    AtRest,
    /// Waiting for a reservation; `waited` once the budget was found taken.
    Reserving { reservation: Reserving, waited: bool },
    /// Reading, with its reservation (given back when dropped).
    Holding { _reservation: OwnedSemaphorePermit },
    /// Held too long: the connection ends, its reservation given back.
    Overdue,
}

impl Reading {
    fn new(budget: ReadingBudget, metrics: Arc<dyn XdsMetrics>) -> Self {
        // The handshake may have read past its end: the first read reserves whatever the
        // socket holds.
        let state = ReadState::Reserving { reservation: budget.reserve(), waited: false };
        let overdue = Box::pin(tokio::time::sleep(budget.hold_timeout()));
        Self { budget, metrics, state, overdue }
    }

    /// Ready once the connection holds its reservation, so it may read; pending while its
    /// socket has no bytes and it is at rest, or while the budget has no room; an error once
    /// it held the reservation for the budget's hold timeout.
    fn poll_reserved(&mut self, cx: &mut Context<'_>, socket: &TcpStream) -> Poll<io::Result<()>> {
        loop {
            match &mut self.state {
                ReadState::AtRest => {
                    ready!(socket.poll_read_ready(cx))?;
                    self.state = ReadState::Reserving { reservation: self.budget.reserve(), waited: false };
                }
                ReadState::Reserving { reservation, waited } => {
                    let Poll::Ready(permit) = reservation.as_mut().poll(cx) else {
                        if !std::mem::replace(waited, true) {
                            self.metrics.reading_waited();
                        }
                        return Poll::Pending;
                    };
                    let permit = permit.map_err(io::Error::other)?;
                    self.overdue.as_mut().reset(Instant::now() + self.budget.hold_timeout());
                    self.state = ReadState::Holding { _reservation: permit };
                }
                ReadState::Holding { .. } | ReadState::Overdue => return Poll::Ready(self.check_overdue(cx)),
            }
        }
    }

    /// An error once the connection held its reservation for the budget's hold timeout without its
    /// reads coming to rest; registers for a wake-up at then otherwise. Checked where the
    /// connection writes too: a client that stops reading stops h2 from reading.
    fn check_overdue(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        let overdue = match self.state {
            ReadState::Holding { .. } => self.overdue.as_mut().poll(cx).is_ready(),
            ReadState::Overdue => true,
            ReadState::AtRest | ReadState::Reserving { .. } => false,
        };
        if !overdue {
            return Ok(());
        }
        if !matches!(self.state, ReadState::Overdue) {
            self.metrics.reading_held_too_long();
            self.state = ReadState::Overdue;
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "reading for {:?} without a whole record, frame or header block",
                self.budget.hold_timeout()
            ),
        ))
    }

    /// The connection's reads are at rest: the reservation goes back.
    fn rest(&mut self) {
        self.state = ReadState::AtRest;
    }
}

/// An accepted connection: its byte stream, what it is known by, its place under the cap, and
/// when it ends on its own.
pub(crate) struct Connection {
    io: Io,
    info: XdsConnectInfo,
    deadlines: Deadlines,
    frames: HeaderBlocks,
    reading: Reading,
    _permit: OwnedSemaphorePermit,
}

impl Connection {
    fn new(io: Io, info: XdsConnectInfo, accepting: &Accepting, permit: OwnedSemaphorePermit) -> Self {
        let deadlines = Deadlines::new(info.activity.clone(), info.identity.as_ref(), accepting.idle_timeout);
        Self {
            io,
            info,
            deadlines,
            frames: HeaderBlocks::new(super::serve::MAX_HEADER_BLOCK_BYTES),
            reading: Reading::new(accepting.reading_budget.clone(), accepting.metrics.clone()),
            _permit: permit,
        }
    }
}

impl Connection {
    /// What the service learns of this connection.
    pub(crate) fn info(&self) -> &XdsConnectInfo {
        &self.info
    }
}

impl AsyncRead for Connection {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // The reader is polled whenever the connection is: ending it here ends the connection.
        if let Some(due) = this.deadlines.poll_due(cx) {
            return Poll::Ready(Err(due));
        }
        ready!(this.reading.poll_reserved(cx, this.io.socket()))?;
        let before = buf.filled().len();
        let read = match &mut this.io {
            Io::Tls(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
            Io::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
        };
        match read {
            Poll::Ready(Ok(())) => this.frames.follow(&buf.filled()[before..])?,
            // Pending means rustls holds no plaintext h2 has not read; with no record, frame
            // or header block in part, nothing of the client's is held until its next bytes.
            Poll::Pending if this.io.records_at_boundary() && this.frames.at_rest() => this.reading.rest(),
            _ => {}
        }
        read
    }
}

impl AsyncWrite for Connection {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.reading.check_overdue(cx)?;
        match &mut this.io {
            Io::Tls(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
            Io::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.reading.check_overdue(cx)?;
        match &mut this.io {
            Io::Tls(stream) => Pin::new(stream.as_mut()).poll_write_vectored(cx, bufs),
            Io::Plain(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Tls(stream) => stream.is_write_vectored(),
            Io::Plain(stream) => stream.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.reading.check_overdue(cx)?;
        match &mut this.io {
            Io::Tls(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
            Io::Plain(stream) => Pin::new(stream).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Tls(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
            Io::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
        }
    }
}

/// Accepted connections, and the task producing them.
pub(crate) struct Incoming {
    pub connections: mpsc::Receiver<Connection>,
    pub accept_loop: JoinHandle<()>,
}

/// Starts accepting on `listener` under `config` (its `server` part is not read here): at most
/// `max_connections` at once, each closed after the HTTP/2 idle timeout without a stream. The
/// accept loop stops (closing the listening socket) once the receiver is dropped.
pub(crate) fn incoming<S: Send + Sync + 'static>(
    listener: TcpListener,
    handshake: Handshake,
    config: ServeConfig<S>,
    reading_budget: ReadingBudget,
    metrics: Arc<dyn XdsMetrics>,
) -> Incoming {
    let (tx, rx) = mpsc::channel(64);
    let accepting = Accepting {
        handshake,
        handshake_timeout: config.limits.handshake_timeout,
        idle_timeout: config.limits.http2_idle_timeout,
        reading_budget,
        tx,
        metrics,
    };
    let accept_loop = tokio::spawn(run(listener, config, Arc::new(accepting)));
    Incoming { connections: rx, accept_loop }
}

type Sender = mpsc::Sender<Connection>;

/// What every accepted connection goes through.
struct Accepting {
    handshake: Handshake,
    handshake_timeout: Duration,
    idle_timeout: Duration,
    reading_budget: ReadingBudget,
    tx: Sender,
    /// Where refused connections are counted: strangers are not logged above debug, so this
    /// is how an operator sees them.
    metrics: Arc<dyn XdsMetrics>,
}

async fn run<S>(listener: TcpListener, config: ServeConfig<S>, accepting: Arc<Accepting>) {
    let slots = Slots::new(config.limits.max_connections, config.at_capacity);
    let tx = accepting.tx.clone();
    let mut connections = XdsConnections(accepting);
    accept_loop(&listener, &config, &slots, tx.closed(), &mut connections).await;
}

/// The xDS server's side of the accept loop: connections handed to the server.
struct XdsConnections(Arc<Accepting>);

impl Accept for XdsConnections {
    async fn accepted(
        &mut self,
        tcp: TcpStream,
        peer: SocketAddr,
        slot: OwnedSemaphorePermit,
    ) -> ControlFlow<()> {
        let accepting = &self.0;
        let info =
            XdsConnectInfo { remote_addr: Some(peer), identity: None, activity: Arc::new(Activity::new()) };
        match &accepting.handshake {
            Handshake::Plaintext => {
                let connection = Connection::new(Io::Plain(tcp), info, accepting, slot);
                if accepting.tx.send(connection).await.is_err() {
                    return ControlFlow::Break(());
                }
            }
            Handshake::Tls { .. } => {
                tokio::spawn(tls_handshake(accepting.clone(), tcp, info, slot));
            }
        }
        ControlFlow::Continue(())
    }

    fn refused(&mut self, peer: SocketAddr) {
        warn!(%peer, "refusing an xDS connection: at the connection limit");
        self.0.metrics.connection_refused("at_capacity");
    }
}

/// Completes the handshake, reads the client's identity, and hands the connection to the
/// server. A client refused here (no valid certificate, or one naming no fleet) costs a debug
/// line: it never reaches a stream, and a stranger retrying must not fill the log.
async fn tls_handshake(
    accepting: Arc<Accepting>,
    tcp: TcpStream,
    mut info: XdsConnectInfo,
    permit: OwnedSemaphorePermit,
) {
    let Handshake::Tls { acceptor, identities } = &accepting.handshake else { return };
    let peer = info.remote_addr;
    let handshake = handshake(acceptor, TlsRecords::new(tcp), &info.activity);
    let mut stream = match tokio::time::timeout(accepting.handshake_timeout, handshake).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(HandshakeError::Failed(error))) => {
            accepting.metrics.connection_refused("handshake");
            return debug!(peer = peer.map(display), %error, "TLS handshake failed");
        }
        // Never asked: the xDS port refuses at the cap instead of making room.
        Ok(Err(HandshakeError::Evicted)) => return,
        Err(_) => {
            accepting.metrics.connection_refused("handshake_timeout");
            return debug!(peer = peer.map(display), "TLS handshake timed out");
        }
    };
    if *identities
        && let Some(end_entity) = stream.get_ref().1.peer_certificates().and_then(|chain| chain.first())
    {
        match peer_identity(end_entity) {
            Ok(identity) => info.identity = Some(identity),
            Err(error) => {
                accepting.metrics.connection_refused("no_fleet");
                return debug!(peer = peer.map(display), %error, "refusing an xDS client");
            }
        }
    }
    // What rustls may hold of records to send while the client does not read (64 KiB by
    // default): the budget counts this.
    stream.get_mut().1.set_buffer_limit(Some(super::serve::TLS_SEND_BUFFER));
    let connection = Connection::new(Io::Tls(Box::new(stream)), info, &accepting, permit);
    // Fails only once the server stopped accepting; the connection is then dropped.
    let _ = accepting.tx.send(connection).await;
}
