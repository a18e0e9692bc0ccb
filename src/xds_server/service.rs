//! The ADS gRPC service: both RPCs of `envoy.service.discovery.v3.AggregatedDiscoveryService`,
//! each stream run by its own task (`stream.rs`), and the authorization hook that binds a
//! stream to one fleet.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use envoy_types::pb::envoy::config::core::v3::{ControlPlane, Node};
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use futures::Stream;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

use super::cache::{FleetKey, SnapshotCache};
use super::delta::Delta;
use super::metrics::{NoMetrics, XdsMetrics};
use super::sotw::Sotw;
use super::stream::{StreamContext, Wire, run};
use super::tracker::{StreamId, Tracker};

/// Decides which fleet a proxy belongs to, from the node of its first request and its address.
/// A stream only ever receives the snapshot of the key returned here. Refuse with
/// `Status::permission_denied` and a message saying why: the stream ends with it, and Envoy
/// logs it and retries with backoff.
pub trait Authorizer: Send + Sync + 'static {
    fn authorize(&self, node: &Node, peer: Option<SocketAddr>) -> Result<FleetKey, Status>;
}

impl<F> Authorizer for F
where
    F: Fn(&Node, Option<SocketAddr>) -> Result<FleetKey, Status> + Send + Sync + 'static,
{
    fn authorize(&self, node: &Node, peer: Option<SocketAddr>) -> Result<FleetKey, Status> {
        self(node, peer)
    }
}

/// Tuning of the service.
#[derive(Clone, Debug)]
pub struct AdsConfig {
    /// Responses queued per stream before its task waits for the connection to take them.
    pub response_buffer: usize,
    /// Sent as `control_plane.identifier` in every response (Envoy shows it in config dumps).
    pub control_plane_id: Option<String>,
}

impl Default for AdsConfig {
    fn default() -> Self {
        Self { response_buffer: 4, control_plane_id: None }
    }
}

/// What every stream task shares.
pub(crate) struct Shared {
    pub cache: SnapshotCache,
    pub tracker: Tracker,
    pub metrics: Arc<dyn XdsMetrics>,
    pub authorizer: Arc<dyn Authorizer>,
    pub control_plane: Option<ControlPlane>,
    response_buffer: usize,
    next_stream: AtomicU64,
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
            response_buffer: self.config.response_buffer.max(1),
            next_stream: AtomicU64::new(1),
        };
        AdsService { shared: Arc::new(shared), shutdown: CancellationToken::new() }
    }
}

/// Responses of one stream, as tonic sends them.
pub type ResponseStream<T> = ReceiverStream<Result<T, Status>>;

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

    pub fn cache(&self) -> &SnapshotCache {
        &self.shared.cache
    }

    pub fn tracker(&self) -> &Tracker {
        &self.shared.tracker
    }

    /// The tonic service, e.g. to add to a router next to other services. [`super::serve`]
    /// uses it too, and also ends every stream when it shuts down.
    pub fn into_grpc(self) -> AggregatedDiscoveryServiceServer<AdsService> {
        AggregatedDiscoveryServiceServer::new(self)
    }

    /// This service, with its streams ending when `shutdown` is cancelled.
    pub(crate) fn with_shutdown(&self, shutdown: CancellationToken) -> Self {
        Self { shared: self.shared.clone(), shutdown }
    }

    /// Runs a state-of-the-world stream over any request stream.
    pub(crate) fn open_sotw<S>(
        &self,
        requests: S,
        peer: Option<SocketAddr>,
    ) -> ResponseStream<DiscoveryResponse>
    where
        S: Stream<Item = Result<DiscoveryRequest, Status>> + Unpin + Send + 'static,
    {
        self.open::<Sotw, S>(requests, peer)
    }

    /// Runs a delta stream over any request stream.
    pub(crate) fn open_delta<S>(
        &self,
        requests: S,
        peer: Option<SocketAddr>,
    ) -> ResponseStream<DeltaDiscoveryResponse>
    where
        S: Stream<Item = Result<DeltaDiscoveryRequest, Status>> + Unpin + Send + 'static,
    {
        self.open::<Delta, S>(requests, peer)
    }

    fn open<W: Wire, S>(&self, requests: S, peer: Option<SocketAddr>) -> ResponseStream<W::Response>
    where
        S: Stream<Item = Result<W::Request, Status>> + Unpin + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(self.shared.response_buffer);
        let context = StreamContext {
            id: StreamId(self.shared.next_stream.fetch_add(1, Ordering::Relaxed)),
            peer,
            shared: self.shared.clone(),
            shutdown: self.shutdown.clone(),
        };
        tokio::spawn(run::<W, S>(context, requests, tx));
        ReceiverStream::new(rx)
    }
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for AdsService {
    type StreamAggregatedResourcesStream = ResponseStream<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = ResponseStream<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let peer = request.remote_addr();
        Ok(Response::new(self.open_sotw(request.into_inner(), peer)))
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        let peer = request.remote_addr();
        Ok(Response::new(self.open_delta(request.into_inner(), peer)))
    }
}
