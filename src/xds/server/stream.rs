//! The task behind one ADS stream, whichever the protocol variant: authorize on the first
//! request, then react to requests and snapshot changes, sending what the plan says.
//!
//! One task per stream owns all of the stream's state, so nothing is locked across streams.
//! Responses go through a small bounded channel: a proxy that stops reading stalls its own
//! task only, and when it reads again the task plans from the newest snapshot.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use envoy_operator_core::bounded;
use envoy_operator_core::fleet::report::{MAX_MESSAGE_CHARS, MAX_NODE_CHARS};
use envoy_operator_core::identity::FleetIdentity;
use envoy_types::pb::envoy::config::core::v3::{ControlPlane, Node};
use futures::channel::mpsc;
use futures::future::Either;
use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;
use tonic::Status;
use tracing::{debug, info, warn};

use super::authorizer::{Authorizer, Peer};
use super::byte_budget::{ByteBudget, Charge};
use super::cache::{FleetKey, SnapshotCache};
use super::metrics::XdsMetrics;
use super::plan::{PlanError, Push, Settled, StreamState, SubscriptionBudget};
use super::tracker::{Protocol, StreamId, Tracker};

/// Bytes of subscribed resource names (and types' state) every stream together may hold at the
/// Deployment's memory limit: a stream whose subscriptions would take more ends with
/// `RESOURCE_EXHAUSTED` (each stream also has its own cap, [`super::plan`]'s). Another limit
/// gets its share ([`super::serve::subscription_budget`]).
pub(crate) const SUBSCRIPTION_BUDGET: usize = 40 * 1024 * 1024;

/// A request the server cannot honour; the stream ends with the matching gRPC status.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestError {
    #[error("the first request of a stream must carry the node")]
    MissingNode,

    #[error("the node has an empty id")]
    EmptyNodeId,

    #[error("a request without type_url: on ADS it tells the resource types apart")]
    MissingTypeUrl,

    #[error(transparent)]
    Limit(#[from] PlanError),
}

impl From<RequestError> for Status {
    fn from(error: RequestError) -> Self {
        match error {
            RequestError::Limit(_) => Status::resource_exhausted(error.to_string()),
            _ => Status::invalid_argument(error.to_string()),
        }
    }
}

/// The ACK or NACK a request carried.
#[derive(Debug)]
pub(crate) struct Answer {
    pub type_url: String,
    pub settled: Settled,
    /// The NACK's `error_detail.message`, cut by [`nack_message`].
    pub error: Option<String>,
}

/// A NACK's explanation as the server keeps and logs it: Envoy's text, cut to
/// [`MAX_NACK_BYTES`] (and the note of the cut), since a client can send megabytes of it.
pub(crate) fn nack_message(message: &str) -> String {
    bounded::truncate_bytes(message, MAX_NACK_BYTES).into_owned()
}

/// Bytes of a NACK's explanation kept: `MAX_MESSAGE_CHARS` (1,024), counted in bytes, so a
/// stream's record of its NACKs is bounded in memory whatever the characters' widths.
pub(crate) const MAX_NACK_BYTES: usize = MAX_MESSAGE_CHARS;

/// Bytes of NACK explanations every stream together may have kept in the tracker at the
/// Deployment's memory limit (another limit gets its share: [`super::serve::nack_budget`]).
pub(crate) const NACK_BUDGET: usize = 8 * 1024 * 1024;

/// What the tracker keeps in place of a NACK's explanation when [`NACK_BUDGET`] is spent: the
/// NACK itself is recorded all the same.
pub const NACK_TEXT_NOT_KEPT: &str =
    "(Envoy's explanation was not kept: the server's record of NACK explanations is full)";

/// The NACK explanations the tracker keeps for one stream (its last for each type), charged to
/// the budget all streams share rather than to the connection cap.
struct NackTexts {
    charge: Charge,
    /// Bytes charged for each type's explanation; a NACK comes only for a type sent, so there
    /// are at most as many entries as types served.
    by_type: Vec<(String, usize)>,
}

impl NackTexts {
    fn new(charge: Charge) -> Self {
        Self { charge, by_type: Vec::new() }
    }

    /// What the tracker is to keep of `message`, the explanation of a NACK of `type_url`: the
    /// message, charged in place of the type's previous one, or [`NACK_TEXT_NOT_KEPT`] when
    /// the other streams' explanations leave no room.
    fn keep(&mut self, type_url: &str, message: String) -> String {
        let index = match self.by_type.iter().position(|(kept, _)| kept == type_url) {
            Some(index) => index,
            None => {
                self.by_type.push((type_url.to_owned(), 0));
                self.by_type.len() - 1
            }
        };
        let others = self.charge.bytes() - self.by_type[index].1;
        if self.charge.resize(others + message.len()) {
            self.by_type[index].1 = message.len();
            message
        } else {
            self.charge.resize(others);
            self.by_type[index].1 = 0;
            NACK_TEXT_NOT_KEPT.to_owned()
        }
    }
}

/// What differs between the two protocol variants.
pub(crate) trait Wire: Send + 'static {
    type Request: prost::Message + Default + Send + 'static;
    type Response: prost::Message + Send + 'static;
    const PROTOCOL: Protocol;

    fn node(request: &Self::Request) -> Option<&Node>;

    /// Applies a request's ACK or NACK (returned) and subscription change.
    fn apply(state: &mut StreamState, request: Self::Request) -> Result<Option<Answer>, RequestError>;

    fn response(push: Push, control_plane: Option<&ControlPlane>) -> Self::Response;
}

/// What every stream task shares.
pub(crate) struct Shared {
    pub cache: SnapshotCache,
    pub tracker: Tracker,
    pub metrics: Arc<dyn XdsMetrics>,
    pub authorizer: Arc<dyn Authorizer>,
    pub control_plane: Option<ControlPlane>,
    pub first_request_timeout: Duration,
    pub subscriptions: SubscriptionBudget,
    /// What the tracker keeps of Envoy's NACK explanations, all streams together.
    pub nack_texts: ByteBudget,
    pub(super) max_request_bytes: usize,
    pub(super) response_buffer: usize,
    pub(super) next_stream: AtomicU64,
}

/// Where a stream task starts from.
pub(crate) struct StreamContext {
    pub id: StreamId,
    pub peer: Option<SocketAddr>,
    /// The fleet the connection's client certificate proved, if it carried one.
    pub identity: Option<FleetIdentity>,
    pub shared: Arc<Shared>,
    pub shutdown: CancellationToken,
}

/// What a stream task queues for its client: a response still as the plan made it (references
/// to the snapshot's resources: the connection encodes it when it can send it), or the status
/// ending the stream. Boxed, so a queue's slots (tokio allocates them 32 at a time) take a
/// pointer each.
#[derive(Debug)]
pub(crate) enum Reply {
    Push(Push),
    End(Status),
}

/// Runs the stream to its end. The status ending it is sent once everything the stream held
/// (its state, the decoder with a half-received message) was freed, even if the client never
/// reads it.
///
/// One future owns it all, and what it waits on only once (the first request, its deadline's
/// timer) waits boxed: the task's future is what a stream holds for its life, so it should not
/// keep room for the arguments twice (an `async fn` awaiting another keeps both its own and
/// the callee's copies) or for a timer long gone.
pub(crate) async fn run<W, S>(context: StreamContext, mut requests: S, tx: mpsc::Sender<Box<Reply>>)
where
    W: Wire,
    S: Stream<Item = Result<W::Request, Status>> + Unpin + Send,
{
    let mut outbox = Outbox { tx, shutdown: context.shutdown.clone() };
    let started = Instant::now();
    let ended = match Box::pin(first_request::<W, S>(&context, &mut requests)).await {
        Ok(first) => serve::<W, S>(&context, started, first, &mut requests, &mut outbox).await,
        Err(ended) => ended,
    };
    drop(requests);
    if let Some(status) = ended {
        outbox.close(status).await;
    }
}

/// The stream's first whole request: until then the stream is nobody's, and a client that
/// opens it and sends nothing, or half a message, is not kept waiting for. `Err` with the
/// status ending the stream (none: the client left).
async fn first_request<W, S>(
    context: &StreamContext,
    requests: &mut S,
) -> Result<Box<W::Request>, Option<Status>>
where
    W: Wire,
    S: Stream<Item = Result<W::Request, Status>> + Unpin + Send,
{
    let first_request_timeout = context.shared.first_request_timeout;
    tokio::select! {
        _ = context.shutdown.cancelled() => Err(Some(shutting_down())),
        request = tokio::time::timeout(first_request_timeout, requests.next()) => match request {
            Ok(Some(Ok(request))) => Ok(Box::new(request)),
            Ok(None) => Err(None),
            Ok(Some(Err(status))) => Err(Some(refused_before_authorization(context, status))),
            Err(_) => {
                let status = Status::deadline_exceeded(format!(
                    "no whole request within {first_request_timeout:?} of the stream's start"
                ));
                Err(Some(refused_before_authorization(context, status)))
            }
        },
    }
}

/// Serves the stream from its first request until it ends, with the status to end it with
/// (none: the client left or the fleet's cache went away).
async fn serve<W, S>(
    context: &StreamContext,
    started: Instant,
    first: Box<W::Request>,
    requests: &mut S,
    outbox: &mut Outbox,
) -> Option<Status>
where
    W: Wire,
    S: Stream<Item = Result<W::Request, Status>> + Unpin + Send,
{
    let (key, node_id) = match authorize::<W>(context, &first) {
        Ok(identity) => identity,
        Err(status) => {
            let message = bounded::truncate(status.message(), MAX_MESSAGE_CHARS);
            // An authorizer answers UNAVAILABLE to have the proxy retry (it cannot decide yet):
            // not a warning.
            if status.code() == tonic::Code::Unavailable {
                debug!(peer = context.peer.map(display), code = ?status.code(), %message, "xDS stream refused for now");
            } else {
                warn!(peer = context.peer.map(display), code = ?status.code(), %message, "xDS stream refused");
            }
            context.shared.metrics.stream_refused(status.code());
            return Some(status);
        }
    };
    let mut session = Session::open(context, key, node_id, W::PROTOCOL);
    let mut snapshots = context.shared.cache.subscribe(&session.key);
    let mut state = StreamState::new(W::PROTOCOL, started, context.shared.subscriptions.charge());
    state.set_target(snapshots.borrow_and_update().clone());

    // Requests wait boxed: one is 624 bytes inline (its node among them), and the task's
    // future would keep room for it for the stream's life.
    let mut next = Some(first);
    loop {
        if let Some(request) = next.take() {
            match W::apply(&mut state, *request) {
                Ok(Some(answer)) => session.answered(answer),
                Ok(None) => {}
                Err(error) => {
                    warn!(fleet = %session.key, node = %session.node_id, %error, "ending xDS stream");
                    let status = Status::from(error);
                    session.shared.metrics.request_refused(&session.key, status.code());
                    return Some(status);
                }
            }
        }
        for push in state.plan() {
            session.sending(&push);
            if !outbox.send(push).await {
                return None;
            }
        }
        session.check_applied(&state);

        tokio::select! {
            _ = context.shutdown.cancelled() => return Some(shutting_down()),
            request = requests.next() => match request {
                Some(Ok(request)) => next = Some(Box::new(request)),
                // Undecodable, over the size limit, or cut short: tonic's status says which.
                Some(Err(status)) => {
                    let message = bounded::truncate(status.message(), MAX_MESSAGE_CHARS);
                    debug!(fleet = %session.key, node = %session.node_id, code = ?status.code(), %message, "xDS request refused");
                    session.shared.metrics.request_refused(&session.key, status.code());
                    return Some(status);
                }
                None => return None,
            },
            changed = snapshots.changed() => {
                if changed.is_err() {
                    return None;
                }
                state.set_target(snapshots.borrow_and_update().clone());
            }
        }
    }
}

fn shutting_down() -> Status {
    Status::unavailable("the xDS server is shutting down")
}

/// Records a stream that ends before its first request was read whole.
fn refused_before_authorization(context: &StreamContext, status: Status) -> Status {
    let message = bounded::truncate(status.message(), MAX_MESSAGE_CHARS);
    debug!(peer = context.peer.map(display), code = ?status.code(), %message, "xDS stream ended before its first request");
    context.shared.metrics.stream_refused(status.code());
    status
}

fn authorize<W: Wire>(context: &StreamContext, first: &W::Request) -> Result<(FleetKey, String), Status> {
    let node = W::node(first).ok_or(RequestError::MissingNode)?;
    if node.id.is_empty() {
        return Err(RequestError::EmptyNodeId.into());
    }
    let peer = Peer { address: context.peer, identity: context.identity.clone() };
    let key = context.shared.authorizer.authorize(node, &peer)?;
    // The id is the client's: every log line and the tracker carry it, so it is cut to a bound
    // (a pod name, what ids are, is at most 253 characters).
    Ok((key, bounded::truncate(&node.id, MAX_NODE_CHARS).into_owned()))
}

/// The response side of a stream: sends give up when the server shuts down. A channel of
/// `futures`' rather than tokio's: tokio's takes 800 bytes a stream (its fields padded to
/// cache lines, and a first block of 32 slots), `futures`' 176 at rest (dhat), and a stream
/// keeps one for its life.
struct Outbox {
    tx: mpsc::Sender<Box<Reply>>,
    shutdown: CancellationToken,
}

impl Outbox {
    /// Whether the response was queued (false: the client is gone or the server stopping).
    /// Queued at once unless the queue is full: only then is there a wait, boxed, so the
    /// stream's future keeps no room for one while it waits for requests.
    fn send(&mut self, push: Push) -> impl Future<Output = bool> + '_ {
        match self.tx.try_send(Box::new(Reply::Push(push))) {
            Ok(()) => Either::Left(std::future::ready(true)),
            Err(full) if full.is_full() => Either::Right(Box::pin(self.send_when_room(full.into_inner()))),
            Err(_) => Either::Left(std::future::ready(false)),
        }
    }

    async fn send_when_room(&mut self, reply: Box<Reply>) -> bool {
        self.room().await && self.tx.start_send(reply).is_ok()
    }

    /// Ends the stream with `status`, once the client has taken the responses queued before
    /// it; shutting down does not wait for a client that does not read. Boxed: it happens once.
    async fn close(&mut self, status: Status) {
        Box::pin(async {
            if self.room().await {
                let _ = self.tx.start_send(Box::new(Reply::End(status)));
            }
        })
        .await
    }

    /// Waits for room in the queue (false: the client is gone or the server stopping). Not
    /// `SinkExt::send`, whose flush would also wait for room after the reply is queued.
    async fn room(&mut self) -> bool {
        let tx = &mut self.tx;
        tokio::select! {
            biased;
            ready = std::future::poll_fn(|cx| tx.poll_ready(cx)) => ready.is_ok(),
            _ = self.shutdown.cancelled() => false,
        }
    }
}

/// A stream's life as the tracker and the metrics see it, from authorization to its end.
struct Session {
    key: FleetKey,
    node_id: String,
    id: StreamId,
    protocol: Protocol,
    shared: Arc<Shared>,
    applied: Option<Arc<str>>,
    nack_texts: NackTexts,
}

impl Session {
    fn open(context: &StreamContext, key: FleetKey, node_id: String, protocol: Protocol) -> Self {
        info!(fleet = %key, node = %node_id, peer = context.peer.map(display), protocol = protocol.label(), "xDS stream opened");
        let shared = context.shared.clone();
        shared.tracker.connected(&key, context.id, &node_id, context.peer, protocol);
        shared.metrics.stream_opened(&key, protocol);
        let nack_texts = NackTexts::new(shared.nack_texts.charge());
        Self { key, node_id, id: context.id, protocol, shared, applied: None, nack_texts }
    }

    fn answered(&mut self, answer: Answer) {
        let Answer { type_url, settled, error } = answer;
        match settled {
            Settled::Acked { version, since } => {
                debug!(fleet = %self.key, node = %self.node_id, type_url, %version, "ACK");
                self.shared.tracker.acked(&self.key, self.id, &type_url, &version);
                self.shared.metrics.response_acked(&self.key, &type_url, since.elapsed());
            }
            Settled::Nacked { version } => {
                // Envoy's explanation, already cut to a bound (`nack_message`).
                let message = error.unwrap_or_default();
                warn!(fleet = %self.key, node = %self.node_id, type_url, %version, message = message.as_str(), "NACK");
                let kept = self.nack_texts.keep(&type_url, message);
                self.shared.tracker.nacked(&self.key, self.id, &type_url, &version, &kept);
                self.shared.metrics.response_nacked(&self.key, &type_url);
            }
            Settled::Unknown => {
                debug!(fleet = %self.key, node = %self.node_id, type_url, "answer to an unknown nonce")
            }
        }
    }

    fn sending(&self, push: &Push) {
        debug!(
            fleet = %self.key,
            node = %self.node_id,
            type_url = %push.type_url,
            version = %push.version,
            nonce = push.nonce,
            upserts = push.upserts.len(),
            removals = push.removals.len(),
            "sending"
        );
        self.shared.metrics.response_sent(&self.key, &push.type_url, push.since.elapsed());
    }

    /// Records a newly applied snapshot. The record is sticky: while the proxy works toward a
    /// newer snapshot (or after it rejected one), it still runs the last one it applied.
    fn check_applied(&mut self, state: &StreamState) {
        let Some(applied) = state.synced_version() else { return };
        if self.applied.as_ref() == Some(&applied) {
            return;
        }
        debug!(fleet = %self.key, node = %self.node_id, version = %applied, "snapshot applied");
        if let Some(since) = state.target_since() {
            self.shared.metrics.snapshot_applied(&self.key, since.elapsed());
        }
        self.shared.tracker.applied(&self.key, self.id, &applied);
        self.applied = Some(applied);
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        info!(fleet = %self.key, node = %self.node_id, "xDS stream closed");
        self.shared.tracker.disconnected(&self.key, self.id);
        self.shared.metrics.stream_closed(&self.key, self.protocol);
        self.shared.cache.release(&self.key);
    }
}
