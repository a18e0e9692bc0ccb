//! The ADS gRPC service: both RPCs of `envoy.service.discovery.v3.AggregatedDiscoveryService`,
//! each stream run by its own task (`stream.rs`), bound to one fleet by the [`Authorizer`]
//! (`authorizer.rs`).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use std::pin::Pin;
use std::task::{Context, Poll};

use envoy_types::pb::envoy::config::core::v3::ControlPlane;
#[cfg(test)]
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use futures::Stream;
use futures::StreamExt;
use futures::channel::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use super::accept::XdsConnectInfo;
use super::authorizer::{Authorizer, Peer};
use super::byte_budget::ByteBudget;
use super::cache::SnapshotCache;
#[cfg(test)]
use super::delta::Delta;
use super::grpc::AdsGrpc;
use super::metrics::{NoMetrics, XdsMetrics};
use super::plan::{Push, SubscriptionBudget};
#[cfg(test)]
use super::sotw::Sotw;
use super::stream::{NACK_BUDGET, Reply, SUBSCRIPTION_BUDGET, Shared, StreamContext, Wire, run};
use super::tracker::{StreamId, Tracker};

/// Tuning of the service.
#[derive(Clone, Debug)]
pub struct AdsConfig {
    /// Responses queued per stream before its task waits for the connection to take them
    /// (each a few references to the snapshot's resources until the connection encodes it).
    pub response_buffer: usize,
    /// Sent as `control_plane.identifier` in every response (Envoy shows it in config dumps).
    pub control_plane_id: Option<String>,
    /// The largest request message accepted, in bytes ([`MAX_REQUEST_BYTES`] by default).
    /// Checked against the length a message announces, before any of it is buffered: a
    /// larger one ends its stream with `OUT_OF_RANGE`. It bounds what a stream holds of a
    /// message being received (tonic reserves the announced length). Decoding takes more than
    /// the message for as long as the request is being applied: up to about 170 times as much
    /// for one made of empty submessages (a node's `extensions`, 168 bytes each, 2 on the wire).
    pub max_request_bytes: usize,
    /// How long a new stream may take to deliver its first whole request (15 s by default)
    /// before it ends with `DEADLINE_EXCEEDED`: Envoy sends it at once, so a stream without one
    /// is holding a place (and maybe half a message) for nothing. Later requests have no
    /// deadline, since an ADS stream idles between changes; half of one holds at most
    /// `max_request_bytes`.
    pub first_request_timeout: Duration,
    /// Bytes every stream's subscriptions together may take (40 MiB by default, the share of
    /// the Deployment's 512 MiB; [`super::subscription_budget`] gives a memory limit's).
    pub subscription_budget: usize,
    /// Bytes of Envoy's NACK explanations every stream together may have kept (8 MiB by
    /// default, the share of the Deployment's 512 MiB; [`super::nack_budget`] gives a memory
    /// limit's). Beyond it a NACK is recorded with a note in place of its explanation.
    pub nack_budget: usize,
}

/// The default [`AdsConfig::max_request_bytes`]: 128 KiB. Envoy 1.40's largest request is its
/// first (61,228 bytes: the node lists its 516 extensions); a request naming resources takes
/// about their names' length plus 2 bytes each (a delta reconnect also the versions, plus 6),
/// so a proxy of about 2,000 clusters of 40-byte names fits too. No larger: decoding can take
/// up to about 170 times a message's size (a message packed with empty repeated entries), and
/// each runtime thread may be decoding one.
pub const MAX_REQUEST_BYTES: usize = 128 * 1024;

impl Default for AdsConfig {
    fn default() -> Self {
        Self {
            response_buffer: 4,
            control_plane_id: None,
            max_request_bytes: MAX_REQUEST_BYTES,
            first_request_timeout: Duration::from_secs(15),
            subscription_budget: SUBSCRIPTION_BUDGET,
            nack_budget: NACK_BUDGET,
        }
    }
}

/// The ADS service. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct AdsService {
    shared: Arc<Shared>,
    shutdown: CancellationToken,
}

impl fmt::Debug for AdsService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdsService").field("cache", &self.shared.cache).finish_non_exhaustive()
    }
}

/// Builds an [`AdsService`].
pub struct AdsServiceBuilder {
    cache: SnapshotCache,
    authorizer: Arc<dyn Authorizer>,
    tracker: Tracker,
    metrics: Arc<dyn XdsMetrics>,
    config: AdsConfig,
}

impl AdsServiceBuilder {
    /// Where proxies' connections, ACKs and NACKs are recorded (default: a new tracker).
    pub fn tracker(mut self, tracker: Tracker) -> Self {
        self.tracker = tracker;
        self
    }

    pub fn metrics(mut self, metrics: Arc<dyn XdsMetrics>) -> Self {
        self.metrics = metrics;
        self
    }

    pub fn config(mut self, config: AdsConfig) -> Self {
        self.config = config;
        self
    }

    pub fn build(self) -> AdsService {
        let control_plane =
            self.config.control_plane_id.map(|identifier| ControlPlane { identifier: identifier.clone() });
        let shared = Shared {
            cache: self.cache,
            tracker: self.tracker,
            metrics: self.metrics,
            authorizer: self.authorizer,
            control_plane,
            first_request_timeout: self.config.first_request_timeout,
            subscriptions: SubscriptionBudget::new(self.config.subscription_budget),
            nack_texts: ByteBudget::new(self.config.nack_budget),
            max_request_bytes: self.config.max_request_bytes,
            response_buffer: self.config.response_buffer.max(1),
            next_stream: AtomicU64::new(1),
        };
        AdsService { shared: Arc::new(shared), shutdown: CancellationToken::new() }
    }
}

/// Responses of one stream: each queued as references to the snapshot's resources, made a
/// message of type `T` when taken.
pub struct ResponseStream<T> {
    rx: mpsc::Receiver<Box<Reply>>,
    shared: Arc<Shared>,
    response: fn(Push, Option<&ControlPlane>) -> T,
}

impl<T> fmt::Debug for ResponseStream<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseStream").finish_non_exhaustive()
    }
}

impl<T> Stream for ResponseStream<T> {
    type Item = Result<T, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        this.rx.poll_next_unpin(cx).map(|reply| {
            reply.map(|reply| match *reply {
                Reply::Push(push) => Ok((this.response)(push, this.shared.control_plane.as_ref())),
                Reply::End(status) => Err(status),
            })
        })
    }
}

impl AdsService {
    pub fn builder(cache: SnapshotCache, authorizer: impl Authorizer) -> AdsServiceBuilder {
        AdsServiceBuilder {
            cache,
            authorizer: Arc::new(authorizer),
            tracker: Tracker::new(),
            metrics: Arc::new(NoMetrics),
            config: AdsConfig::default(),
        }
    }

    /// Where the service records its metrics (the server records its connections there too).
    pub(crate) fn metrics(&self) -> Arc<dyn XdsMetrics> {
        self.shared.metrics.clone()
    }

    pub fn cache(&self) -> &SnapshotCache {
        &self.shared.cache
    }

    pub fn tracker(&self) -> &Tracker {
        &self.shared.tracker
    }

    /// Bytes the streams' subscriptions take now of the service's budget (their types and
    /// names: [`AdsConfig::subscription_budget`]).
    pub fn subscriptions_held(&self) -> usize {
        self.shared.subscriptions.used()
    }

    /// The gRPC service, e.g. to add to a tonic router next to other services. [`super::serve`]
    /// uses it too, and also ends every stream when it shuts down.
    /// Requests over [`AdsConfig::max_request_bytes`] are refused from their 5-byte header.
    pub fn into_grpc(self) -> AdsGrpc {
        AdsGrpc::new(self)
    }

    pub(crate) fn max_request_bytes(&self) -> usize {
        self.shared.max_request_bytes
    }

    /// This service, with its streams ending when `shutdown` is cancelled.
    pub(crate) fn with_shutdown(&self, shutdown: CancellationToken) -> Self {
        Self { shared: self.shared.clone(), shutdown }
    }

    /// Runs a state-of-the-world stream over any request stream, from `address` (no identity).
    #[cfg(test)]
    pub(crate) fn open_sotw<S>(
        &self,
        requests: S,
        address: Option<std::net::SocketAddr>,
    ) -> ResponseStream<DiscoveryResponse>
    where
        S: Stream<Item = Result<DiscoveryRequest, Status>> + Unpin + Send + 'static,
    {
        self.open::<Sotw, S>(requests, Peer { address, identity: None }, None)
    }

    /// Runs a delta stream over any request stream, from `address` (no identity).
    #[cfg(test)]
    pub(crate) fn open_delta<S>(
        &self,
        requests: S,
        address: Option<std::net::SocketAddr>,
    ) -> ResponseStream<DeltaDiscoveryResponse>
    where
        S: Stream<Item = Result<DeltaDiscoveryRequest, Status>> + Unpin + Send + 'static,
    {
        self.open::<Delta, S>(requests, Peer { address, identity: None }, None)
    }

    /// Runs a stream of the connection `info` (if it is one of [`super::serve`]'s), counted as
    /// activity of that connection while it runs.
    pub(crate) fn open<W: Wire, S>(
        &self,
        requests: S,
        peer: Peer,
        info: Option<&XdsConnectInfo>,
    ) -> ResponseStream<W::Response>
    where
        S: Stream<Item = Result<W::Request, Status>> + Unpin + Send + 'static,
    {
        // `futures`' channel has room for one more than its buffer for each sender (one).
        let (tx, rx) = mpsc::channel(self.shared.response_buffer - 1);
        let context = StreamContext {
            id: StreamId(self.shared.next_stream.fetch_add(1, Ordering::Relaxed)),
            peer: peer.address,
            identity: peer.identity,
            shared: self.shared.clone(),
            shutdown: self.shutdown.clone(),
        };
        let activity = info.map(|info| info.activity.begin());
        tokio::spawn(async move {
            run::<W, S>(context, requests, tx).await;
            drop(activity);
        });
        ResponseStream { rx, shared: self.shared.clone(), response: W::response }
    }
}
