//! Serving the ADS service on a listener: TLS (or plaintext, for tests and benchmarks), HTTP/2
//! keepalive, per-connection stream and connection caps, and a graceful shutdown that ends
//! every stream (Envoy reconnects, to this or another replica) and drains connections within a
//! grace period.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use h2::server::WriteBudget;
use rustls::server::ResolvesServerCert;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use super::accept::{Handshake, incoming, server_config};
use super::connection::Serving;
use super::reading_budget::ReadingBudget;
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
    /// Bytes the transport may hold of what clients send while it reads it, all connections
    /// together ([`ReadingBudget`]).
    pub reading_budget: ReadingBudget,
    /// Bytes connections may hold while they write, all together ([`writing_budget`]).
    pub writing_budget: WriteBudget,
    /// Bytes streams may hold of requests not taken, all connections together
    /// ([`over_window_budget`]).
    pub over_window_budget: usize,
}

impl ServeConfig {
    /// The operator's settings for `transport`: a client finds the cap (sized from this
    /// process's limits) refused at once, and a failed accept is retried after 100 ms.
    pub fn new(transport: Transport) -> Self {
        Self::sized_for(transport, memory_limit())
    }

    /// The same, sized for `memory_limit` (the Deployment's 512 MiB where `None`) rather than
    /// this process's: the connection cap and the receive budget.
    pub fn sized_for(transport: Transport, memory_limit: Option<u64>) -> Self {
        Self {
            name: "xds",
            limits: ConnectionLimits {
                // Beyond it, new connections are closed at once.
                max_connections: connection_cap(memory_limit, open_files_limit()),
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
            server: Grpc {
                transport,
                receive_budget: ReceiveBudget::new(receive_budget(memory_limit)),
                reading_budget: ReadingBudget::new(reading_budget(memory_limit)),
                writing_budget: WriteBudget::new(writing_budget(memory_limit), WRITE_IN_FLIGHT),
                over_window_budget: over_window_budget(memory_limit),
            },
        }
    }
}

/// Concurrent streams per connection: Envoy keeps one ADS stream per connection, and a stream
/// the server ends is closed on both sides before Envoy opens the next on the same connection
/// (`tests/xds/xds_envoy.rs`, with Envoy's own counters: no stream refused, no second
/// connection).
pub const MAX_STREAMS_PER_CONNECTION: u32 = 1;
/// Requests being received, all connections together ([`ReceiveBudget`]), at the Deployment's
/// memory limit: room for over 250 of Envoy's largest request (its first, about 60 KB) at once.
/// Another limit gets its share ([`receive_budget`]).
pub const RECEIVE_BUDGET: usize = 16 * 1024 * 1024;
/// HTTP/2 flow control: how much a client may send before the server reads it, per connection
/// and per stream, once the client has acknowledged the server's settings (before, HTTP/2's
/// default of 65,535 bytes). What a stream holds of it not taken is the shared budget's
/// ([`over_window_budget`]), so it is small to let few streams hold much of that: Envoy's
/// requests are a few hundred bytes but the first (61,228 bytes), which may come within the
/// default window before Envoy acknowledges this one, and otherwise takes a window update every
/// 2 KiB (h2 updates the window once half of it was taken).
pub const CONNECTION_WINDOW: u32 = 4 * 1024;
pub const STREAM_WINDOW: u32 = 4 * 1024;
/// The largest header list a client may send, decoded, by HTTP/2's count (a field is 32 bytes
/// and its name and value; hyper's default is 16 KiB): Envoy 1.40's ADS requests carry 458
/// (measured: its pseudo-headers, `te`, `content-type`, `x-envoy-internal` and
/// `x-forwarded-for`), so this leaves room for four times that.
pub const MAX_HEADER_LIST_BYTES: u32 = 2 * 1024;
/// The largest header block (HPACK-encoded, in a HEADERS frame and its CONTINUATION frames)
/// a client may send: beyond it the connection ends before h2 buffers it. Envoy 1.40's first
/// ADS request's block is 139 bytes (measured with the operator's bootstrap).
pub const MAX_HEADER_BLOCK_BYTES: usize = 4 * 1024;
/// What rustls may hold of records to send while the client does not read (its default is
/// 64 KiB); writes go on in pieces of this size.
pub const TLS_SEND_BUFFER: usize = 4 * 1024;
/// What a connection holds at rest with its stream beyond the shared budgets, measured (dhat,
/// `examples/xds_load`: 12.0 KiB with 1,000 connections of Envoy-sized first requests, of
/// 14.8 KiB live, the rest the stream's types and subscribed names, which the subscription
/// budget has; README, "The xDS port's memory budget"), with a thousand bytes for the
/// allocator's own: h2's connection and stream state with its buffers let go while the
/// connection waits (vendor/h2), rustls' session without a read buffer (vendor/rustls), the
/// tasks (the connection's, hyper's for the stream, the stream's) and the stream's response
/// queue, where its proxy differs from its snapshot (`plan/held.rs`), its tracker record, and
/// the accept wrapper.
const CONNECTION_AT_REST: usize = 13 * 1024;
/// What the kernel holds for a connection and charges to the process's memory cgroup: its
/// socket's inode, file, dentry and epoll entry (1,344 bytes by their slab objects; measured
/// 1.5 KiB a connection charged to a cgroup v1 with `examples/xds_load`) and, where the kernel
/// charges an accepted socket to the cgroup that accepts it, the TCP socket itself (2,368
/// bytes). What its socket buffers hold is not counted: nothing at rest, and up to their sizes
/// while a client sends more than the server reads, or reads less than it sends (README, "The
/// xDS port's memory budget").
const KERNEL_PER_CONNECTION: usize = 4 * 1024;
/// The HPACK table size the xDS port advertises for what clients send, and holds the decoder to
/// from the connection's start (`vendor/h2`): none. An ADS stream's headers come once, in a
/// block of 139 bytes from Envoy, so a table saves nothing, while one of the protocol's 4,096
/// octets is 13 KiB a connection could fill for its life. A client that indexed a header
/// before it took the setting in and then referred to it has its connection ended; Envoy, one
/// stream a connection, does not (`tests/xds/xds_envoy.rs`). h2 keeps no table of what the
/// server sends either (`vendor/h2`), so neither side's is counted.
pub const HPACK_TABLE_BYTES: u32 = 0;
/// What h2 holds of requests that the connection's stream has not taken (a stream waiting for
/// its client to read its responses takes none), beyond the shared budget, which has all of
/// the data itself ([`over_window_budget`]): the 4 slots of h2's buffer of received frames that
/// a first frame reserves (248 bytes each).
const RECEIVED_NOT_TAKEN: usize = 4 * 248;
/// What a connection holds while it writes, counted in the writing budget ([`writing_budget`],
/// `h2::server::WriteBudget`) while it writes rather than for every connection, since one that
/// has written and flushed everything holds none of it (`vendor/h2` lets its write buffer go
/// then, and rustls has sent every record): h2's write buffer (4 KiB, allocated when a frame
/// is buffered), grown by at most the largest frame the server writes, a stream's trailers
/// ([`super::grpc::MAX_TRAILERS_FRAME_BYTES`]; a response's DATA over h2's chain threshold is
/// written from its own buffer, not copied into it), and records to send ([`TLS_SEND_BUFFER`],
/// and a record's header and tag). A connection whose client does not read holds it until the
/// keepalive ends the connection.
pub const WRITE_IN_FLIGHT: usize =
    H2_WRITE_BUFFER + super::grpc::MAX_TRAILERS_FRAME_BYTES + TLS_SEND_BUFFER + 5 + 17;
/// h2's write buffer as `vendor/h2` reserves it.
const H2_WRITE_BUFFER: usize = 4 * 1024;
/// What reading holds of what a client sends, counted in the reading budget
/// ([`reading_budget`], [`super::ReadingBudget`]) while a connection reads rather than for
/// every connection, since a connection whose reads are at rest holds none of it:
/// - h2's read buffer: a frame in part (16 KiB and its header at most: HTTP/2's smallest frame
///   limit, which the server keeps), and what h2 cannot decode yet of a header block (the
///   connection ends beyond [`MAX_HEADER_BLOCK_BYTES`], `framing.rs`; h2 itself would keep up
///   to 6 frames of 16 KiB), and HPACK's scratch buffer for a Huffman-coded string while it is
///   decoded (8/5 of the block at most; `vendor/h2` keeps none between strings);
/// - rustls: a TLS record being received (18,437 bytes at most, in a buffer it holds only while
///   it reads: vendor/rustls), and the plaintext of one record that h2 has not read (16 KiB: h2
///   reads no more while it cannot write).
pub const READ_IN_FLIGHT: usize = 16 * 1024 + 9 + MAX_HEADER_BLOCK_BYTES + HPACK_SCRATCH + 18_437 + 16 * 1024;
/// HPACK's scratch for the longest Huffman-coded string a header block can hold.
const HPACK_SCRATCH: usize = MAX_HEADER_BLOCK_BYTES * 8 / 5 + 1;
/// What a stream adds to what it holds at rest, beyond the shared budgets (its types and
/// subscribed names: `SUBSCRIPTION_BUDGET`; a request being received: [`RECEIVE_BUDGET`];
/// Envoy's NACK explanations: [`nack_budget`]): its queue's responses while the client does not
/// take them (a type's next waits for its ACK, so one for each of the 5 types served, each a
/// boxed `Push`, 152 bytes, of references to the snapshot's resources until the connection
/// encodes it, and the queue's node for it, 16),
/// and what a client can add to its record in the tracker for each type served: the ACKed and
/// NACKed versions, a NACK's note when its explanation is not kept, and the entries holding
/// them, 2 KiB for all of them (a NACK of a type never sent is not kept).
const STREAM_STATE: usize = 1024 + 2 * 1024;
/// The worst a connection costs beyond the shared budgets (what reading holds,
/// [`READ_IN_FLIGHT`]; what writing holds, [`WRITE_IN_FLIGHT`]; requests being received,
/// [`RECEIVE_BUDGET`]; what h2 holds of them not taken, [`over_window_budget`]; types
/// and subscriptions, [`super::stream`]'s; NACK explanations, [`nack_budget`]): what it holds
/// at rest (no HPACK table: [`HPACK_TABLE_BYTES`]), what the kernel holds for it, h2's slots
/// for requests not taken ([`RECEIVED_NOT_TAKEN`]) and what its stream adds. A request's decoded
/// headers are not counted here: they live only while the connection's task takes them
/// (`connection.rs`), one connection per runtime thread at once, up to 11 KiB each (http's
/// `HeaderMap` holds a list of [`MAX_HEADER_LIST_BYTES`] in up to 10,904 bytes, measured).
/// Not counted: the responses a client that stops reading leaves in the connection (one per
/// type of each stream: a type's next response waits for its ACK), which are its fleet's
/// snapshot, the operator's data, not the client's.
pub const WORST_CASE_PER_CONNECTION: usize = CONNECTION_AT_REST
    + KERNEL_PER_CONNECTION
    + RECEIVED_NOT_TAKEN
    + MAX_STREAMS_PER_CONNECTION as usize * STREAM_STATE;
/// Memory left to everything but the xDS port: the webhook's worst case (README, "Memory
/// budget"), the caches, the runtime and the allocator.
pub const RESERVED_MEMORY: u64 = 192 * 1024 * 1024;
/// The memory limit assumed where the process has none: the Deployment's.
pub const DEFAULT_MEMORY_LIMIT: u64 = 512 * 1024 * 1024;
/// File descriptors left to everything but the xDS port: the webhook's connections, the API
/// client's, the listeners, and files.
const RESERVED_FILES: u64 = 1024;

/// How many xDS connections may be open: as many as fit at their worst in what the memory
/// limit leaves the xDS port beside its shared budgets, no more than the subscription budget
/// has room for, and never so many that the rest of the process runs out of file descriptors.
pub fn connection_cap(memory_limit: Option<u64>, open_files_limit: u64) -> usize {
    let for_xds = memory_limit.unwrap_or(DEFAULT_MEMORY_LIMIT).saturating_sub(RESERVED_MEMORY);
    let shared = (reading_budget(memory_limit)
        + writing_budget(memory_limit)
        + receive_budget(memory_limit)
        + over_window_budget(memory_limit)
        + subscription_budget(memory_limit)
        + nack_budget(memory_limit)) as u64;
    let by_memory = for_xds.saturating_sub(shared) / WORST_CASE_PER_CONNECTION as u64;
    let by_subscriptions = (subscription_budget(memory_limit) / FLEET_STREAM_SUBSCRIPTIONS) as u64;
    let by_files = open_files_limit.saturating_sub(RESERVED_FILES);
    usize::try_from(by_memory.min(by_subscriptions).min(by_files)).unwrap_or(usize::MAX).max(1)
}

/// What the subscriptions of a fleet's stream take from [`subscription_budget`]: its 4 types
/// (576 bytes each and its type URL) and a dozen names (measured with `examples/xds_load`,
/// which prints it). The cap admits no more connections than the budget has room for such
/// streams: from about 525 MiB of limit, the shared budgets growing with it, memory alone
/// would admit more.
const FLEET_STREAM_SUBSCRIPTIONS: usize = 4_038;

/// What reading may hold of what clients send, all connections together, under `memory_limit`
/// (512 MiB assumed without one): a thirty-second of it, 16 MiB at the Deployment's limit,
/// room for 271 connections reading at once ([`READ_IN_FLIGHT`] each). A connection reads
/// for the milliseconds a request takes to arrive, and one that finds the budget taken waits
/// its turn.
pub fn reading_budget(memory_limit: Option<u64>) -> usize {
    usize::try_from(memory_limit.unwrap_or(DEFAULT_MEMORY_LIMIT) / 32).unwrap_or(usize::MAX)
}

/// What writing may hold, all connections together, under `memory_limit` (512 MiB assumed
/// without one): a thirty-second of it, 16 MiB at the Deployment's limit, room for 1,463
/// connections writing at once ([`WRITE_IN_FLIGHT`] each). A connection writes for the
/// moments its socket takes a response, and one that finds the budget taken waits its turn.
pub fn writing_budget(memory_limit: Option<u64>) -> usize {
    usize::try_from(memory_limit.unwrap_or(DEFAULT_MEMORY_LIMIT) / 32).unwrap_or(usize::MAX)
}

/// What requests being received may take, all connections together, under `memory_limit`
/// (512 MiB assumed without one): a thirty-second of it, 16 MiB at the Deployment's limit. In
/// proportion, like [`subscription_budget`]: the many proxies a larger limit admits reconnect
/// together after a restart, each with a first request of about 60 KB, and a stream that finds
/// the budget full is refused and retries later.
pub fn receive_budget(memory_limit: Option<u64>) -> usize {
    usize::try_from(memory_limit.unwrap_or(DEFAULT_MEMORY_LIMIT) / 32).unwrap_or(usize::MAX)
}

/// What streams may hold of requests they have not taken, all connections together, under
/// `memory_limit` (512 MiB assumed without one): a thirty-second of it, 16 MiB at the
/// Deployment's limit. A stream holds what came of a request until its task takes it
/// (milliseconds, unless its client does not read its responses), up to the window the server
/// advertises ([`STREAM_WINDOW`]), or HTTP/2's default (65,535 bytes) until the client
/// acknowledges it, and Envoy's first request (61,228 bytes) may come before: room for 274 such
/// requests not taken at once, 256 streams holding all the default window allows. A stream
/// whose data finds the budget spent is reset (`vendor/h2`, `h2::server::set_over_window_budget`,
/// with no allowance: `set_over_window_allowance(0)`) and its client opens another; none was in
/// `examples/xds_load`'s sync of 10,000 proxies at the Deployment's limit.
pub fn over_window_budget(memory_limit: Option<u64>) -> usize {
    usize::try_from(memory_limit.unwrap_or(DEFAULT_MEMORY_LIMIT) / 32).unwrap_or(usize::MAX)
}

/// What every stream's subscriptions together may take under `memory_limit` (512 MiB assumed
/// without one): five sixty-fourths of it, 40 MiB at the Deployment's limit, room for the
/// subscriptions of a fleet's stream (four types and a dozen names) on every connection memory
/// admits there (10,387 such streams, 10,157 connections). In proportion, so that a larger
/// limit, which admits more connections ([`connection_cap`]), also has room for their streams'
/// subscriptions.
pub fn subscription_budget(memory_limit: Option<u64>) -> usize {
    usize::try_from(memory_limit.unwrap_or(DEFAULT_MEMORY_LIMIT) / 64 * 5).unwrap_or(usize::MAX)
}

/// What the tracker may keep of Envoy's NACK explanations, all streams together, under
/// `memory_limit` (512 MiB assumed without one): a sixty-fourth of it, 8 MiB at the
/// Deployment's limit, room for 7,900 explanations of the longest kept (1 KiB and the note of
/// its cut) at once. A stream may have one for each type it was sent; beyond the budget its
/// NACKs are recorded with a note in their place.
pub fn nack_budget(memory_limit: Option<u64>) -> usize {
    usize::try_from(memory_limit.unwrap_or(DEFAULT_MEMORY_LIMIT) / 64).unwrap_or(usize::MAX)
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
    // h2's, for the process: only a connection advertising a window under HTTP/2's default,
    // as this one does, draws on it (the webhook's advertises more).
    h2::server::set_over_window_budget(config.server.over_window_budget);
    // All that streams hold of requests not taken is the budget's, not only what is beyond the
    // window: counted for every connection, it would be the window's size each.
    h2::server::set_over_window_allowance(0);
    let connections = incoming(
        listener,
        handshake,
        config.clone(),
        config.server.reading_budget.clone(),
        service.metrics(),
    );
    let streams_end = CancellationToken::new();
    let serving = Arc::new(Serving::new(
        service.with_shutdown(streams_end.clone()).into_grpc(),
        &config.limits,
        config.server.receive_budget.clone(),
        config.server.writing_budget.clone(),
    ));
    let mut incoming = connections.connections;
    // Each connection on a task of its own, waited for on shutdown.
    let open = TaskTracker::new();
    let closing = CancellationToken::new();
    let server = async {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                connection = incoming.recv() => {
                    let Some(connection) = connection else { break };
                    open.spawn(serving.clone().serve(connection, closing.clone()));
                }
            }
        }
        info!("xDS server shutting down");
        // The accept loop ends (closing the listening socket) once nothing receives.
        drop(incoming);
        streams_end.cancel();
        closing.cancel();
        open.close();
        open.wait().await;
    };
    let grace_over = async {
        streams_end.cancelled().await;
        tokio::time::sleep(config.shutdown_grace).await;
    };
    tokio::select! {
        () = server => {}
        () = grace_over => {
            warn!(grace = ?config.shutdown_grace, "xDS connections still open after the grace period; leaving them");
        }
    }
    connections.accept_loop.abort();
    // The loop's end drops the listener; waiting for it frees the port for a restart.
    let _ = connections.accept_loop.await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_cap_fits_every_connection_at_its_worst_in_what_the_limit_leaves_xds() {
        let cap = connection_cap(None, u64::MAX) as u64;
        let shared = (reading_budget(None)
            + writing_budget(None)
            + receive_budget(None)
            + over_window_budget(None)
            + subscription_budget(None)
            + nack_budget(None)) as u64;
        assert_eq!(receive_budget(None), RECEIVE_BUDGET);
        assert_eq!(nack_budget(None), super::super::stream::NACK_BUDGET);
        // What reading holds, shared: room for 271 connections reading at once.
        assert_eq!((reading_budget(None), reading_budget(None) / READ_IN_FLIGHT), (16 << 20, 271));
        // What writing holds, shared: room for 1,463 connections writing at once.
        let writing = ServeConfig::sized_for(Transport::Plaintext, None).server.writing_budget;
        assert_eq!((writing.available(), writing.writers()), (16 << 20, 1463));
        assert_eq!(writing_budget(None) / WRITE_IN_FLIGHT, 1463);
        assert_eq!(subscription_budget(None), super::super::stream::SUBSCRIPTION_BUDGET);
        // What streams hold of requests not taken, shared: room for 256 streams holding the most
        // a client may send before it acknowledges the window, 274 holding Envoy's first
        // request.
        assert_eq!(over_window_budget(None) / 65_535, 256);
        assert_eq!(over_window_budget(None) / 61_228, 274);
        let for_xds = DEFAULT_MEMORY_LIMIT - RESERVED_MEMORY - shared;
        let worst = WORST_CASE_PER_CONNECTION as u64;
        assert!(cap * worst <= for_xds && (cap + 1) * worst > for_xds);
        // The figures README gives ("The xDS port's memory budget"): memory admits 10,157; the
        // subscription budget has room for 10,387 fleet streams.
        assert_eq!((cap, WORST_CASE_PER_CONNECTION), (10_157, 21_472));
        assert_eq!(subscription_budget(None) / FLEET_STREAM_SUBSCRIPTIONS, 10_387);
        // A larger limit admits more connections and has room for their streams'
        // subscriptions (a fleet's stream of 4 types and a dozen names takes 4,038 bytes,
        // `examples/xds_load`); from about 525 MiB, that room is what bounds the cap.
        for mib in [256u64, 512, 524, 526, 640, 1024, 4096, 16384] {
            let limit = Some(mib << 20);
            let (cap, room) =
                (connection_cap(limit, u64::MAX), subscription_budget(limit) / FLEET_STREAM_SUBSCRIPTIONS);
            assert!(room >= cap, "{mib} MiB");
            assert_eq!(cap == room, mib >= 525, "{mib} MiB: cap {cap}, room for {room} streams");
        }
        // The open files limit bounds it too.
        assert_eq!(connection_cap(None, 1024 + 100), 100);
    }
}
