//! The xDS port's connections as the operator serves them: clients prove their fleet with a
//! client certificate of the identity CA at the TLS handshake, or get no stream at all; a
//! connection ends when its certificate expires, and when it has carried no stream for the idle
//! timeout.

use crate::support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use envoy_operator::certs::identity_ca::IdentityCa;
use envoy_operator::xds::server::resource::type_url::CLUSTER;
use envoy_operator::xds::server::{
    AdsService, Authorizer, FleetKey, Peer, ServeConfig, Snapshot, SnapshotCache, Transport, XdsMetrics,
};
use envoy_operator_core::identity::FleetIdentity;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DeltaDiscoveryResponse};
use support::certs::{TestPki, pki};
use support::control_plane::ControlPlane;
use support::resources::{eds_cluster, endpoints};
use time::OffsetDateTime;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::Streaming;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

const FLEET: &str = "shop/edge";
/// Far beyond anything here should take: a bound against hanging, not a measurement.
const GUARD: Duration = Duration::from_secs(30);

fn any_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// Serves every stream FLEET, remembering the peers it was asked about.
struct Recording(Arc<Mutex<Vec<Peer>>>);

impl Authorizer for Recording {
    fn authorize(&self, _: &Node, peer: &Peer) -> Result<FleetKey, tonic::Status> {
        self.0.lock().expect("the peers").push(peer.clone());
        Ok(FleetKey::from(FLEET))
    }
}

/// Counts the connections refused before a stream, by reason.
#[derive(Default)]
struct Refusals(Mutex<Vec<&'static str>>);

impl XdsMetrics for Refusals {
    fn connection_refused(&self, reason: &'static str) {
        self.0.lock().expect("the refusals").push(reason);
    }
}

fn service(peers: Arc<Mutex<Vec<Peer>>>) -> (AdsService, SnapshotCache) {
    service_counting(peers, Arc::default())
}

fn service_counting(peers: Arc<Mutex<Vec<Peer>>>, refusals: Arc<Refusals>) -> (AdsService, SnapshotCache) {
    let cache = SnapshotCache::new();
    cache.set(FLEET, snapshot("a"));
    (AdsService::builder(cache.clone(), Recording(peers)).metrics(refusals).build(), cache)
}

fn snapshot(cluster: &str) -> Snapshot {
    let mut builder = Snapshot::builder();
    builder.add(&eds_cluster(cluster)).add(&endpoints(cluster, &[SocketAddr::from(([127, 0, 0, 1], 1))]));
    builder.build().expect("a snapshot")
}

/// A TLS channel to `address` trusting the serving CA, presenting `client` (PEM certificate
/// and key) if given.
async fn connect(
    address: SocketAddr,
    pki: &TestPki,
    client: Option<(&str, &str)>,
) -> Result<Channel, String> {
    let mut tls =
        ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&pki.ca_pem)).domain_name("localhost");
    if let Some((cert, key)) = client {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    Endpoint::from_shared(format!("https://{address}"))
        .map_err(|error| error.to_string())?
        .tls_config(tls)
        .map_err(|error| error.to_string())?
        .connect()
        .await
        .map_err(|error| error.to_string())
}

/// Opens a delta stream, waits for its first response and ACKs it, as Envoy does (the server
/// sends a type's next change once its last response is answered); the stream stays open
/// while the returned sender is kept.
async fn open_stream(
    channel: Channel,
) -> Result<(mpsc::UnboundedSender<DeltaDiscoveryRequest>, Streaming<DeltaDiscoveryResponse>), String> {
    let (requests, rx) = mpsc::unbounded_channel();
    let node = Node { id: "edge-0".into(), ..Default::default() };
    let first = DeltaDiscoveryRequest { node: Some(node), type_url: CLUSTER.into(), ..Default::default() };
    requests.send(first).map_err(|error| error.to_string())?;
    let mut responses = AggregatedDiscoveryServiceClient::new(channel)
        .delta_aggregated_resources(UnboundedReceiverStream::new(rx))
        .await
        .map_err(|status| status.to_string())?
        .into_inner();
    match tokio::time::timeout(GUARD, responses.message()).await {
        Ok(Ok(Some(first))) => {
            let ack = DeltaDiscoveryRequest {
                type_url: CLUSTER.into(),
                response_nonce: first.nonce,
                ..Default::default()
            };
            requests.send(ack).map_err(|error| error.to_string())?;
            Ok((requests, responses))
        }
        Ok(Ok(None)) => Err("the stream ended".into()),
        Ok(Err(status)) => Err(status.to_string()),
        Err(_) => Err("no response in time".into()),
    }
}

fn issued(ca: &IdentityCa, namespace: &str, name: &str, validity: time::Duration) -> (String, String) {
    let issued = ca
        .issue_valid_for(&FleetIdentity::new(namespace, name), OffsetDateTime::now_utc(), validity)
        .expect("a client certificate");
    (issued.cert_pem, issued.key_pem)
}

#[tokio::test]
async fn a_client_certificate_proves_the_fleet_the_authorizer_is_told() {
    let pki = pki();
    let peers = Arc::new(Mutex::new(Vec::new()));
    let plane = ControlPlane::start(any_port(), service(peers.clone()).0, pki.mutual_tls()).await;
    let (cert, key) = issued(&pki.identities, "shop", "edge", time::Duration::days(1));
    let channel = connect(plane.address, &pki, Some((&cert, &key))).await.expect("a connection");
    open_stream(channel).await.expect("a stream");
    let seen = peers.lock().expect("the peers").clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].identity, Some(FleetIdentity::new("shop", "edge")));
    assert!(seen[0].address.is_some_and(|address| address.ip().is_loopback()));
    plane.stop().await;
}

#[tokio::test]
async fn a_client_without_a_certificate_of_the_identity_ca_gets_no_stream() {
    let pki = pki();
    let peers = Arc::new(Mutex::new(Vec::new()));
    let refusals = Arc::new(Refusals::default());
    let plane = ControlPlane::start(
        any_port(),
        service_counting(peers.clone(), refusals.clone()).0,
        pki.mutual_tls(),
    )
    .await;
    let stranger = IdentityCa::generate(OffsetDateTime::now_utc()).expect("another CA");
    let (cert, key) = issued(&stranger, "shop", "edge", time::Duration::days(1));
    for client in [None, Some((cert.as_str(), key.as_str()))] {
        let refused = match connect(plane.address, &pki, client).await {
            // TLS 1.3 may finish the client's side of the handshake before the server refuses.
            Ok(channel) => open_stream(channel).await.map(|_| ()),
            Err(error) => Err(error),
        };
        assert!(
            refused.is_err(),
            "a client with {:?} got a stream",
            client.map(|_| "another CA's certificate")
        );
    }
    assert!(peers.lock().expect("the peers").is_empty(), "no stream reached the authorizer");
    // Not logged above debug, but counted: how an operator sees strangers.
    let counted = support::eventually("both refusals counted", support::CONVERGE, || async {
        let counted = refusals.0.lock().expect("the refusals").clone();
        if counted.len() >= 2 { Ok(counted) } else { Err(format!("{counted:?}")) }
    })
    .await;
    assert!(counted.iter().all(|reason| *reason == "handshake"), "{counted:?}");
    plane.stop().await;
}

/// A connection lives no longer than the certificate it was accepted with: a renewed
/// certificate is proven on the next connection.
#[tokio::test]
async fn a_connection_ends_when_its_client_certificate_expires() {
    let pki = pki();
    let plane = ControlPlane::start(any_port(), service(Arc::default()).0, pki.mutual_tls()).await;
    let (cert, key) = issued(&pki.identities, "shop", "edge", time::Duration::seconds(3));
    let channel = connect(plane.address, &pki, Some((&cert, &key))).await.expect("a connection");
    let (_requests, mut responses) =
        open_stream(channel).await.expect("a stream while the certificate is valid");
    let ended = tokio::time::timeout(GUARD, responses.message()).await.expect("the stream ends");
    assert!(!matches!(ended, Ok(Some(_))), "the stream ended, not answered: {ended:?}");
    plane.stop().await;
}

#[tokio::test]
async fn a_connection_without_a_stream_is_closed_after_the_idle_timeout() {
    let mut config = ServeConfig::new(Transport::Plaintext);
    config.limits.http2_idle_timeout = Duration::from_millis(500);
    let plane = ControlPlane::start_with(any_port(), service(Arc::default()).0, config).await;
    let mut silent = TcpStream::connect(plane.address).await.expect("a connection");
    let mut buffer = [0u8; 256];
    // The server's HTTP/2 preface may come first; then the close.
    let closed = tokio::time::timeout(GUARD, async {
        loop {
            match silent.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the idle connection was not closed");
    plane.stop().await;
}

#[tokio::test]
async fn a_connection_with_a_stream_outlives_the_idle_timeout() {
    let mut config = ServeConfig::new(Transport::Plaintext);
    config.limits.http2_idle_timeout = Duration::from_millis(300);
    let peers = Arc::new(Mutex::new(Vec::new()));
    let (service, cache) = service(peers);
    let plane = ControlPlane::start_with(any_port(), service, config).await;
    let channel = Endpoint::from_shared(format!("http://{}", plane.address))
        .expect("an endpoint")
        .connect()
        .await
        .expect("a connection");
    let (_requests, mut responses) = open_stream(channel).await.expect("a stream");
    // Many idle timeouts pass while the stream is open, then a change still reaches it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    cache.set(FLEET, snapshot("b"));
    let pushed = tokio::time::timeout(GUARD, responses.message()).await.expect("a push in time");
    assert!(matches!(pushed, Ok(Some(_))), "the stream is still served: {pushed:?}");
    plane.stop().await;
}
