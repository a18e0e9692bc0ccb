//! An Envoy control plane: the xDS server over gRPC ADS, in both protocol variants (state of
//! the world and delta), serving snapshots of resources built elsewhere. It never decides what
//! a resource contains.
//!
//! - [`SnapshotCache`]: the newest [`Snapshot`] per fleet ([`FleetKey`]); setting one wakes the
//!   fleet's streams, which only ever see the newest.
//! - [`AdsService`]: the gRPC service. The [`Authorizer`] binds each stream, on its first
//!   request, to one fleet; the stream then moves its proxy to that fleet's newest snapshot in
//!   make-before-break order (secrets, clusters and endpoints first, listeners and routes next,
//!   removed clusters last; see `plan.rs`).
//! - [`Tracker`]: connected proxies, ACKed versions and NACKs (Envoy's text) per fleet, with a
//!   [`ChangeFeed`] telling which fleets changed.
//! - [`XdsMetrics`]: hooks for the embedding application's metrics.
//! - [`serve`]: TLS with a hot-swappable certificate and, in production, client certificates
//!   naming the proxy's fleet ([`Transport::MutualTls`], handed to the [`Authorizer`] as the
//!   [`Peer`]'s identity); HTTP/2 keepalive, stream and connection caps (the cap from the
//!   process's limits, [`connection_cap`]), one budget for what the transport holds while
//!   connections read ([`ReadingBudget`]) and one for requests being received
//!   ([`ReceiveBudget`]), connections closed when idle or when their certificate expires,
//!   graceful shutdown.
//!
//! ```no_run
//! use std::net::SocketAddr;
//! use std::sync::Arc;
//!
//! use envoy_types::pb::envoy::config::core::v3::Node;
//! use rustls::server::ResolvesServerCert;
//! use tonic::Status;
//! use envoy_operator::xds::server::{AdsService, FleetKey, ServeConfig, Snapshot, SnapshotCache, Tracker, Transport, serve};
//!
//! # async fn run(
//! #     certificate: Arc<dyn ResolvesServerCert>,
//! #     listener: tokio::net::TcpListener,
//! #     shutdown: impl std::future::Future<Output = ()>,
//! # ) -> Result<(), Box<dyn std::error::Error>> {
//! let cache = SnapshotCache::new();
//! let tracker = Tracker::new();
//! // Which fleet a proxy belongs to, e.g. from its node metadata checked against the
//! // operator's store; refusing ends the stream with PERMISSION_DENIED.
//! let authorize = |node: &Node, _peer: Option<SocketAddr>| match node.cluster.as_str() {
//!     "" => Err(Status::permission_denied(format!("node {} names no fleet", node.id))),
//!     fleet => Ok(FleetKey::from(fleet)),
//! };
//! let service = AdsService::builder(cache.clone(), authorize).tracker(tracker.clone()).build();
//!
//! // The translation layer's output for one fleet (typed envoy-types messages):
//! let mut snapshot = Snapshot::builder();
//! // snapshot.add_listener(&listener, [route_configuration.name.clone()]).add(&route_configuration);
//! // snapshot.add(&cluster).add(&endpoints);
//! let version = cache.set("ns/edge", snapshot.build()?);
//!
//! // The status writer: which proxies are connected, what they applied, what they rejected.
//! let mut changes = tracker.changes();
//! let status_tracker = tracker.clone();
//! tokio::spawn(async move {
//!     loop {
//!         for fleet in changes.changed().await {
//!             let status = status_tracker.fleet_status(&fleet);
//!             // status.proxies.len(), status.acked_version, status.last_nack ...
//!         }
//!     }
//! });
//!
//! serve(listener, service, ServeConfig::new(Transport::Tls(certificate)), shutdown).await?;
//! # Ok(())
//! # }
//! ```

mod accept;
mod authorizer;
mod byte_budget;
mod cache;
mod connection;
mod delta;
mod framing;
mod grpc;
mod metrics;
mod plan;
mod reading_budget;
mod receive_budget;
pub mod resource;
mod serve;
mod service;
mod snapshot;
mod sotw;
mod stream;
mod tracker;

#[cfg(test)]
mod tests;

pub use accept::{XdsConnectInfo, server_config};
pub use authorizer::{Authorizer, Peer};
pub use cache::{FleetKey, SnapshotCache};
pub use grpc::AdsGrpc;
pub use metrics::{NoMetrics, XdsMetrics};
#[doc(hidden)]
pub use plan::fuzzing;
pub use reading_budget::{READ_HOLD_TIMEOUT, ReadingBudget};
pub use receive_budget::ReceiveBudget;
pub use resource::{Reference, Resource, XdsResource};
pub use serve::{
    CONNECTION_WINDOW, DEFAULT_MEMORY_LIMIT, Grpc, MAX_STREAMS_PER_CONNECTION, READ_IN_FLIGHT,
    RECEIVE_BUDGET, RESERVED_MEMORY, STREAM_WINDOW, ServeConfig, ServeError, Transport,
    WORST_CASE_PER_CONNECTION, WRITE_IN_FLIGHT, connection_cap, memory_limit, nack_budget, open_files_limit,
    over_window_budget, reading_budget, receive_budget, serve, subscription_budget, writing_budget,
};
pub use service::{AdsConfig, AdsService, AdsServiceBuilder, MAX_REQUEST_BYTES, ResponseStream};
pub use snapshot::{Describe, Snapshot, SnapshotBuilder, SnapshotError, TypeResources};
pub use stream::NACK_TEXT_NOT_KEPT;
pub use tracker::{
    ChangeFeed, Disconnect, FleetStatus, Nack, Protocol, ProxyNack, ProxyStatus, RECENT_DISCONNECTS,
    StreamId, Tracker, TypeStatus,
};
