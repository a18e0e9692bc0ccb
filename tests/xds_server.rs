//! The serving side without Envoy: connection cap, handshake deadline, TLS with ALPN h2 and the
//! peer address reaching the authorizer, graceful shutdown.

#[path = "xds_support/mod.rs"]
mod support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use envoy_operator::xds_server::resource::type_url::CLUSTER;
use envoy_operator::xds_server::{AdsService, FleetKey, ServeConfig, Snapshot, SnapshotCache, Transport};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use support::certs::pki;
use support::control_plane::ControlPlane;
use support::resources::{eds_cluster, endpoints};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

const FLEET: &str = "ns/edge";

fn any_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// A service admitting every node into FLEET, remembering the peers it saw.
fn service(peers: Arc<Mutex<Vec<Option<SocketAddr>>>>) -> AdsService {
    let cache = SnapshotCache::new();
    let mut builder = Snapshot::builder();
    builder.add(&eds_cluster("a")).add(&endpoints("a", &[SocketAddr::from(([127, 0, 0, 1], 1))]));
    cache.set(FLEET, builder.build().expect("a snapshot"));
    AdsService::builder(cache, move |_: &Node, peer: Option<SocketAddr>| {
        peers.lock().expect("the peers").push(peer);
        Ok(FleetKey::from(FLEET))
    })
    .build()
}

/// Opens a delta stream on `channel` and returns the first response's resource count.
async fn first_response(channel: Channel) -> Result<usize, String> {
    let (requests, rx) = mpsc::unbounded_channel();
    let node = Node { id: "pod-0".into(), ..Default::default() };
    let first = DeltaDiscoveryRequest { node: Some(node), type_url: CLUSTER.into(), ..Default::default() };
    requests.send(first).map_err(|error| error.to_string())?;
    let mut client = AggregatedDiscoveryServiceClient::new(channel);
    let mut responses = client
        .delta_aggregated_resources(UnboundedReceiverStream::new(rx))
        .await
        .map_err(|status| status.to_string())?
        .into_inner();
    let response = tokio::time::timeout(Duration::from_secs(30), responses.message())
        .await
        .map_err(|_| "no response in time".to_string())?
        .map_err(|status| status.to_string())?
        .ok_or("the stream ended")?;
    Ok(response.resources.len())
}

/// Whether the server closes `stream` (EOF or reset) within 30 s.
async fn closed_by_server(mut stream: TcpStream) -> bool {
    let mut buffer = [0u8; 64];
    matches!(
        tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buffer)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test]
async fn tls_with_h2_reaches_the_service_with_the_peer_address() {
    let pki = pki();
    let peers = Arc::new(Mutex::new(Vec::new()));
    let plane =
        ControlPlane::start(any_port(), service(peers.clone()), Transport::Tls(pki.resolver.clone())).await;
    let tls =
        ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&pki.ca_pem)).domain_name("localhost");
    let channel = Endpoint::from_shared(format!("https://{}", plane.address))
        .expect("an endpoint")
        .tls_config(tls)
        .expect("TLS settings")
        .connect()
        .await
        .expect("a TLS connection");
    assert_eq!(first_response(channel).await, Ok(1));
    let seen = peers.lock().expect("the peers").clone();
    assert!(matches!(seen.as_slice(), [Some(peer)] if peer.ip().is_loopback()), "{seen:?}");
    plane.stop().await;
}

#[tokio::test]
async fn connections_over_the_cap_are_closed_and_a_freed_place_is_reused() {
    let mut config = ServeConfig::new(Transport::Plaintext);
    config.max_connections = 1;
    let plane = ControlPlane::start_with(any_port(), service(Arc::default()), config).await;
    let first = TcpStream::connect(plane.address).await.expect("a connection");
    let second = TcpStream::connect(plane.address).await.expect("a TCP handshake");
    assert!(closed_by_server(second).await, "the second connection is over the cap");
    drop(first);
    // The place frees once the server has seen the first connection close.
    let address = plane.address;
    let resources =
        support::eventually("a stream once the first connection is gone", support::CONVERGE, || async move {
            let endpoint =
                Endpoint::from_shared(format!("http://{address}")).map_err(|error| error.to_string())?;
            first_response(endpoint.connect().await.map_err(|error| error.to_string())?).await
        })
        .await;
    assert_eq!(resources, 1);
    plane.stop().await;
}

#[tokio::test]
async fn a_client_that_never_completes_the_handshake_is_dropped() {
    let mut config = ServeConfig::new(Transport::Tls(pki().resolver));
    config.handshake_timeout = Duration::from_millis(200);
    let plane = ControlPlane::start_with(any_port(), service(Arc::default()), config).await;
    let silent = TcpStream::connect(plane.address).await.expect("a connection");
    assert!(closed_by_server(silent).await);
    plane.stop().await;
}
