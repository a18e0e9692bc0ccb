//! Stream state machine tests: the service driven directly with in-memory request streams.
//!
//! The runtime's clock is paused, so "nothing more is sent" is checked deterministically: a
//! wait for the next response times out only once every task is idle (time then jumps ahead),
//! which happens only if the stream task has nothing left to send.

mod delta;
mod fuzzing;
mod limits;
mod secrets;
mod sotw;

use std::fmt::Debug;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::Any;
use envoy_types::pb::google::rpc::Status as RpcStatus;
use futures::StreamExt;
use prost::Message;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::Status;

// Paths are relative (`super::`), so the modules can move under another module unchanged.
use super::{cache, metrics, plan, resource, service, stream, tracker};

use super::cache::{FleetKey, SnapshotCache};
use super::metrics::{NoMetrics, XdsMetrics};
use super::service::{AdsConfig, AdsService, ResponseStream};
use super::snapshot::Snapshot;
use super::tracker::Tracker;
use envoy_operator_testkit::xds::resources::{
    eds_cluster, endpoints, http_listener, prefix_route, route_config,
};

pub(crate) const FLEET: &str = "ns/edge";
pub(crate) const OTHER_FLEET: &str = "ns/other";

pub(crate) fn address(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

pub(crate) struct Fixture {
    pub cache: SnapshotCache,
    pub tracker: Tracker,
    pub service: AdsService,
}

/// A service whose authorizer admits nodes whose `cluster` names a known fleet.
pub(crate) fn fixture() -> Fixture {
    fixture_with(Arc::new(NoMetrics))
}

pub(crate) fn fixture_with(metrics: Arc<dyn XdsMetrics>) -> Fixture {
    fixture_configured(metrics, AdsConfig::default())
}

pub(crate) fn fixture_configured(metrics: Arc<dyn XdsMetrics>, config: AdsConfig) -> Fixture {
    let cache = SnapshotCache::new();
    let tracker = Tracker::new();
    let service = AdsService::builder(cache.clone(), |node: &Node, _peer: Option<SocketAddr>| {
        match node.cluster.as_str() {
            FLEET | OTHER_FLEET => Ok(FleetKey::from(node.cluster.as_str())),
            other => {
                Err(Status::permission_denied(format!("node {} claims unknown fleet {other:?}", node.id)))
            }
        }
    })
    .tracker(tracker.clone())
    .metrics(metrics)
    .config(config)
    .build();
    Fixture { cache, tracker, service }
}

pub(crate) fn node(id: &str, fleet: &str) -> Option<Node> {
    Some(Node { id: id.into(), cluster: fleet.into(), ..Default::default() })
}

pub(crate) fn nack_detail(message: &str) -> Option<RpcStatus> {
    Some(RpcStatus { code: 3, message: message.into(), details: Vec::new() })
}

/// A listener `http` on port 10000 using route configuration `routes`, the given routes, and an
/// EDS cluster per (name, port) with one endpoint on that port.
pub(crate) fn snapshot(
    routes: Vec<envoy_types::pb::envoy::config::route::v3::Route>,
    clusters: &[(&str, u16)],
) -> Snapshot {
    let mut builder = Snapshot::builder();
    builder
        .add_listener(&http_listener("http", address(10000), "routes"), ["routes".to_owned()])
        .add(&route_config("routes", routes));
    for (name, port) in clusters {
        builder.add(&eds_cluster(name)).add(&endpoints(name, &[address(*port)]));
    }
    builder.build().expect("a consistent snapshot")
}

/// Routes `/` to `cluster`, with clusters `a` (port 1) and `b` (port 2).
pub(crate) fn two_clusters_routing_to(cluster: &str) -> Snapshot {
    snapshot(vec![prefix_route("/", cluster)], &[("a", 1), ("b", 2)])
}

pub(crate) fn decode<T: Message + Default>(any: &Any) -> T {
    T::decode(any.value.as_slice()).expect("a decodable resource")
}

/// The client end of an in-memory stream.
pub(crate) struct Client<Req, Resp> {
    requests: mpsc::UnboundedSender<Result<Req, Status>>,
    responses: ResponseStream<Resp>,
}

impl<Req, Resp: Debug> Client<Req, Resp> {
    pub fn open(
        open: impl FnOnce(UnboundedReceiverStream<Result<Req, Status>>) -> ResponseStream<Resp>,
    ) -> Self {
        let (requests, rx) = mpsc::unbounded_channel();
        Self { requests, responses: open(UnboundedReceiverStream::new(rx)) }
    }

    pub fn send(&self, request: Req) {
        assert!(self.requests.send(Ok(request)).is_ok(), "the stream task is gone");
    }

    /// Hands the stream an error, as tonic does for a request it cannot decode.
    pub fn send_error(&self, status: Status) {
        assert!(self.requests.send(Err(status)).is_ok(), "the stream task is gone");
    }

    /// The next response; fails the test if the stream ends or stays silent.
    pub async fn next(&mut self) -> Resp {
        match tokio::time::timeout(Duration::from_secs(60), self.responses.next()).await {
            Ok(Some(Ok(response))) => response,
            Ok(Some(Err(status))) => panic!("the stream failed: {status:?}"),
            Ok(None) => panic!("the stream ended"),
            Err(_) => panic!("no response came"),
        }
    }

    /// The status the stream ends with.
    pub async fn failure(&mut self) -> Status {
        match tokio::time::timeout(Duration::from_secs(60), self.responses.next()).await {
            Ok(Some(Err(status))) => status,
            other => panic!("expected the stream to fail, got {other:?}"),
        }
    }

    /// Asserts the server has nothing more to send now.
    pub async fn assert_silent(&mut self) {
        if let Ok(response) = tokio::time::timeout(Duration::from_secs(60), self.responses.next()).await {
            panic!("expected no response, got {response:?}");
        }
    }

    /// Waits for the stream's end (its task has then finished).
    pub async fn assert_ended(&mut self) {
        match tokio::time::timeout(Duration::from_secs(60), self.responses.next()).await {
            Ok(None) => {}
            other => panic!("expected the stream to end, got {other:?}"),
        }
    }

    /// Closes the request side, as a proxy going away does.
    pub fn hang_up(self) {}
}
