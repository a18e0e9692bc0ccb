//! The serving side without Envoy: connection cap, handshake deadline, TLS with ALPN h2 and the
//! peer address reaching the authorizer, graceful shutdown; and what a client gets for gRPC
//! framing no real client sends (raw HTTP/2): a status, never a silent end.

use crate::support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use envoy_operator::xds::server::resource::type_url::CLUSTER;
use envoy_operator::xds::server::{
    AdsConfig, AdsService, FleetKey, NoMetrics, READ_IN_FLIGHT, ReadingBudget, ServeConfig, Snapshot,
    SnapshotCache, Transport, WRITE_IN_FLIGHT, XdsMetrics,
};
use envoy_operator_testkit::h2_frame::{Frames, PREFACE, frame, setting};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DeltaDiscoveryResponse};
use futures::FutureExt;
use h2::server::WriteBudget;
use prost::Message;
use support::certs::pki;
use support::control_plane::ControlPlane;
use support::resources::{eds_cluster, endpoints};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::Code;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

const FLEET: &str = "ns/edge";

fn any_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// A service admitting every node into FLEET, remembering the peers it saw.
fn service(peers: Arc<Mutex<Vec<Option<SocketAddr>>>>) -> AdsService {
    service_with(peers, AdsConfig::default(), Arc::new(NoMetrics))
}

fn service_with(
    peers: Arc<Mutex<Vec<Option<SocketAddr>>>>,
    config: AdsConfig,
    metrics: Arc<dyn XdsMetrics>,
) -> AdsService {
    let cache = SnapshotCache::new();
    let mut builder = Snapshot::builder();
    builder.add(&eds_cluster("a")).add(&endpoints("a", &[SocketAddr::from(([127, 0, 0, 1], 1))]));
    cache.set(FLEET, builder.build().expect("a snapshot"));
    AdsService::builder(cache, move |_: &Node, peer: Option<SocketAddr>| {
        peers.lock().expect("the peers").push(peer);
        Ok(FleetKey::from(FLEET))
    })
    .config(config)
    .metrics(metrics)
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

/// Whether the server closes `stream` (EOF or reset) within 30 s, whatever it sends before.
async fn closed_by_server(mut stream: TcpStream) -> bool {
    let mut buffer = [0u8; 64];
    let closed = async { while let Ok(1..) = stream.read(&mut buffer).await {} };
    tokio::time::timeout(Duration::from_secs(30), closed).await.is_ok()
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
    config.limits.max_connections = 1;
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
    config.limits.handshake_timeout = Duration::from_millis(200);
    let plane = ControlPlane::start_with(any_port(), service(Arc::default()), config).await;
    let silent = TcpStream::connect(plane.address).await.expect("a connection");
    assert!(closed_by_server(silent).await);
    plane.stop().await;
}

/// Counts what the reading budget reports.
#[derive(Default)]
struct ReadingEvents {
    waited: AtomicUsize,
    held_too_long: AtomicUsize,
}

impl XdsMetrics for ReadingEvents {
    fn reading_waited(&self) {
        self.waited.fetch_add(1, Ordering::SeqCst);
    }

    fn reading_held_too_long(&self) {
        self.held_too_long.fetch_add(1, Ordering::SeqCst);
    }
}

impl ReadingEvents {
    fn counts(&self) -> (usize, usize) {
        (self.waited.load(Ordering::SeqCst), self.held_too_long.load(Ordering::SeqCst))
    }
}

/// A plaintext server whose transport may hold what one connection reads, at once
/// ([`ReadingBudget`]), closing a connection that holds it for `hold` without coming to rest;
/// with its budget and what it reports of it.
async fn one_reader(hold: Duration) -> (ControlPlane, ReadingBudget, Arc<ReadingEvents>) {
    let mut config = ServeConfig::new(Transport::Plaintext);
    let budget = ReadingBudget::new(READ_IN_FLIGHT).with_hold_timeout(hold);
    config.server.reading_budget = budget.clone();
    let events = Arc::new(ReadingEvents::default());
    let service = service_with(Arc::default(), AdsConfig::default(), events.clone());
    (ControlPlane::start_with(any_port(), service, config).await, budget, events)
}

/// Waits until `budget` has `bytes` free.
async fn budget_free(budget: &ReadingBudget, bytes: usize, what: &str) {
    support::eventually(what, support::CONVERGE, || async {
        (budget.available() == bytes).then_some(()).ok_or(format!("{} bytes free", budget.available()))
    })
    .await;
}

async fn channel(address: SocketAddr) -> Channel {
    Endpoint::from_shared(format!("http://{address}"))
        .expect("an endpoint")
        .connect()
        .await
        .expect("a channel")
}

/// A client that sent HTTP/2's preface and then half a frame header, and stopped: rustls and
/// h2 would hold the frame in part.
async fn stopped_mid_frame(address: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(address).await.expect("a connection");
    stream.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04").await.expect("the bytes sent");
    stream
}

#[tokio::test]
async fn connections_beyond_the_reading_budget_wait_for_a_reader_to_come_to_rest() {
    let (plane, budget, events) = one_reader(Duration::from_secs(600)).await;
    let address = plane.address;
    let within = |what: &'static str| async move {
        let answer = tokio::time::timeout(support::CONVERGE, first_response(channel(address).await)).await;
        answer.unwrap_or_else(|_| panic!("{what}: no response within {:?}", support::CONVERGE))
    };
    // A proxy whose stream stays open: between its requests its reads are at rest, holding
    // nothing of the budget...
    let (requests, rx) = mpsc::unbounded_channel();
    let node = Node { id: "pod-open".into(), ..Default::default() };
    requests
        .send(DeltaDiscoveryRequest { node: Some(node), type_url: CLUSTER.into(), ..Default::default() })
        .expect("the first request queued");
    let mut open = AggregatedDiscoveryServiceClient::new(channel(address).await)
        .delta_aggregated_resources(UnboundedReceiverStream::new(rx))
        .await
        .expect("a stream")
        .into_inner();
    open.message().await.expect("a response").expect("the stream open");
    // ...so others read in turn.
    assert_eq!(within("a proxy beside an idle one").await, Ok(1));

    // A client stopped mid-frame holds all of it, and a proxy arriving then waits.
    let stopped = stopped_mid_frame(address).await;
    budget_free(&budget, 0, "the stopped client holding the reading budget").await;
    let waiting = tokio::spawn(within("a proxy once the stopped client left"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiting.is_finished(), "a proxy read while another connection held the whole reading budget");
    // The client leaves: its reservation goes back and the proxy is served.
    drop(stopped);
    assert_eq!(waiting.await.expect("the waiting proxy"), Ok(1));
    let (waited, held_too_long) = events.counts();
    assert!(
        waited >= 1 && held_too_long == 0,
        "the proxy's wait counted, no connection closed: {:?}",
        events.counts()
    );
    assert!(open.message().now_or_never().is_none(), "the open stream still open, nothing new sent");
    drop(requests);
    plane.stop().await;
}

#[tokio::test]
async fn a_connection_holding_the_reading_budget_without_coming_to_rest_is_closed() {
    let (plane, budget, events) = one_reader(Duration::from_millis(300)).await;
    let stopped = stopped_mid_frame(plane.address).await;
    assert!(closed_by_server(stopped).await, "a client stopped mid-frame is closed after the hold timeout");
    budget_free(&budget, READ_IN_FLIGHT, "the reading budget given back").await;
    assert_eq!(first_response(channel(plane.address).await).await, Ok(1));
    assert_eq!(events.counts().1, 1, "the close counted once");
    plane.stop().await;
}

mod raw {
    //! A gRPC client over plain HTTP/2 that writes the 5-byte message headers itself.

    use std::convert::Infallible;
    use std::net::SocketAddr;
    use std::time::Duration;

    use bytes::Bytes;
    use http_body_util::{BodyExt, StreamBody};
    use hyper::body::{Frame, Incoming};
    use hyper::client::conn::http2::SendRequest;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use tokio::net::TcpStream;
    use tokio::sync::mpsc;
    use tokio_stream::wrappers::UnboundedReceiverStream;

    pub type Body = StreamBody<UnboundedReceiverStream<Result<Frame<Bytes>, Infallible>>>;

    /// One HTTP/2 connection to the server.
    pub async fn connect(address: SocketAddr) -> SendRequest<Body> {
        let tcp = TcpStream::connect(address).await.expect("a connection");
        let (sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
                .await
                .expect("an HTTP/2 connection");
        tokio::spawn(connection);
        sender
    }

    /// An open delta ADS stream: what is written to `body` goes out as the request's DATA.
    pub struct RawStream {
        pub body: Option<mpsc::UnboundedSender<Result<Frame<Bytes>, Infallible>>>,
        response: Incoming,
    }

    /// `grpc-message` is percent-encoded.
    fn percent_decoded(value: &[u8]) -> String {
        let mut decoded = Vec::with_capacity(value.len());
        let mut bytes = value.iter();
        while let Some(&byte) = bytes.next() {
            let hex = |digit: Option<&u8>| char::from(*digit.unwrap_or(&b'?')).to_digit(16);
            match byte {
                b'%' => match (hex(bytes.next()), hex(bytes.next())) {
                    (Some(high), Some(low)) => decoded.push((high * 16 + low) as u8),
                    _ => panic!("a malformed grpc-message"),
                },
                byte => decoded.push(byte),
            }
        }
        String::from_utf8_lossy(&decoded).into_owned()
    }

    impl RawStream {
        pub async fn open(connection: &mut SendRequest<Body>) -> RawStream {
            let (body, rx) = mpsc::unbounded_channel();
            let request = http::Request::post(
                "http://localhost/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources",
            )
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(StreamBody::new(UnboundedReceiverStream::new(rx)))
            .expect("a request");
            let response = connection.send_request(request).await.expect("response headers");
            assert_eq!(response.status(), 200);
            RawStream { body: Some(body), response: response.into_body() }
        }

        pub fn write(&self, bytes: Bytes) {
            let body = self.body.as_ref().expect("the request is still open");
            body.send(Ok(Frame::data(bytes))).expect("the connection takes the request's data");
        }

        /// Ends the request (END_STREAM).
        pub fn finish(&mut self) {
            self.body = None;
        }

        /// The next response message, or the stream's end: its `grpc-status` and message.
        pub async fn next(&mut self) -> Result<Bytes, (i32, String)> {
            let mut data = Vec::new();
            loop {
                let frame = tokio::time::timeout(Duration::from_secs(30), self.response.frame())
                    .await
                    .expect("the server answers in time");
                let Some(frame) = frame else { panic!("the response ended without trailers") };
                let frame = frame.expect("a response frame");
                match frame.into_data() {
                    Ok(bytes) => {
                        data.extend_from_slice(&bytes);
                        if data.len() >= 5 {
                            let length = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
                            if data.len() >= 5 + length {
                                return Ok(Bytes::copy_from_slice(&data[5..5 + length]));
                            }
                        }
                    }
                    Err(frame) => {
                        let trailers = frame.into_trailers().expect("data or trailers");
                        let code = trailers
                            .get("grpc-status")
                            .and_then(|value| value.to_str().ok()?.parse().ok())
                            .expect("a grpc-status");
                        let message = trailers
                            .get("grpc-message")
                            .map(|value| percent_decoded(value.as_bytes()))
                            .unwrap_or_default();
                        return Err((code, message));
                    }
                }
            }
        }

        /// The status the stream ends with; fails on a response message.
        pub async fn status(&mut self) -> (i32, String) {
            match self.next().await {
                Err(status) => status,
                Ok(message) => panic!("expected the stream to end, got a {}-byte message", message.len()),
            }
        }
    }
}

/// A gRPC message header: the compressed flag and the length the message announces.
fn message_header(compressed: bool, announced: u32) -> BytesMut {
    let mut frame = BytesMut::new();
    frame.put_u8(u8::from(compressed));
    frame.put_u32(announced);
    frame
}

fn framed(payload: &[u8]) -> Bytes {
    let mut frame = message_header(false, u32::try_from(payload.len()).expect("a small message"));
    frame.put_slice(payload);
    frame.freeze()
}

fn first_request() -> Vec<u8> {
    let node = Node { id: "pod-0".into(), ..Default::default() };
    DeltaDiscoveryRequest { node: Some(node), type_url: CLUSTER.into(), ..Default::default() }.encode_to_vec()
}

/// A plaintext server with the given service configuration.
async fn plane_with(config: AdsConfig) -> ControlPlane {
    ControlPlane::start(
        any_port(),
        service_with(Arc::default(), config, Arc::new(NoMetrics)),
        Transport::Plaintext,
    )
    .await
}

#[tokio::test]
async fn a_message_over_the_size_limit_is_refused_from_its_header_and_the_connection_stays_usable() {
    let plane = plane_with(AdsConfig::default()).await;
    let mut connection = raw::connect(plane.address).await;
    let mut oversize = raw::RawStream::open(&mut connection).await;
    // Announces 4 MiB − 1 and sends 1 KiB of it: the refusal comes without the rest.
    let mut frame = message_header(false, 4 * 1024 * 1024 - 1);
    frame.put_bytes(0, 1024);
    oversize.write(frame.freeze());
    let (code, message) = oversize.status().await;
    assert_eq!(code, Code::OutOfRange as i32, "{message}");
    assert!(
        message.contains(&format!("the limit is: {}", AdsConfig::default().max_request_bytes)),
        "{message}"
    );

    let mut good = raw::RawStream::open(&mut connection).await;
    good.write(framed(&first_request()));
    let response = good.next().await.expect("a response on the same connection");
    let response = DeltaDiscoveryResponse::decode(response).expect("a delta response");
    assert_eq!(response.resources.len(), 1);
    plane.stop().await;
}

#[tokio::test]
async fn a_half_sent_first_request_ends_with_deadline_exceeded() {
    let config = AdsConfig { first_request_timeout: Duration::from_millis(200), ..AdsConfig::default() };
    let plane = plane_with(config).await;
    let mut connection = raw::connect(plane.address).await;
    let mut stream = raw::RawStream::open(&mut connection).await;
    let mut frame = message_header(false, 1000);
    frame.put_bytes(0, 10);
    stream.write(frame.freeze());
    let (code, message) = stream.status().await;
    assert_eq!(
        (code, message.as_str()),
        (Code::DeadlineExceeded as i32, "no whole request within 200ms of the stream's start")
    );
    plane.stop().await;
}

#[tokio::test]
async fn a_malformed_message_ends_the_stream_with_internal() {
    let plane = plane_with(AdsConfig::default()).await;
    let mut connection = raw::connect(plane.address).await;
    let mut stream = raw::RawStream::open(&mut connection).await;
    // Field 1 with wire type 7, which does not exist.
    stream.write(framed(&[0x0f, 0xff, 0xff]));
    let (code, message) = stream.status().await;
    assert_eq!(code, Code::Internal as i32, "{message}");
    assert!(message.contains("failed to decode"), "{message}");
    plane.stop().await;
}

#[tokio::test]
async fn a_compressed_message_without_an_encoding_ends_the_stream_with_internal() {
    let plane = plane_with(AdsConfig::default()).await;
    let mut connection = raw::connect(plane.address).await;
    let mut stream = raw::RawStream::open(&mut connection).await;
    let request = first_request();
    let mut frame = message_header(true, u32::try_from(request.len()).expect("a small message"));
    frame.put_slice(&request);
    stream.write(frame.freeze());
    let (code, message) = stream.status().await;
    assert_eq!(code, Code::Internal as i32, "{message}");
    assert!(message.contains("compressed-flag but no grpc-encoding"), "{message}");
    plane.stop().await;
}

#[tokio::test]
async fn a_message_cut_short_by_the_end_of_the_request_ends_the_stream_with_internal() {
    let plane = plane_with(AdsConfig::default()).await;
    let mut connection = raw::connect(plane.address).await;
    let mut stream = raw::RawStream::open(&mut connection).await;
    let request = first_request();
    let mut frame = message_header(false, u32::try_from(request.len()).expect("a small message"));
    frame.put_slice(&request[..request.len() / 2]);
    stream.write(frame.freeze());
    stream.finish();
    let (code, message) = stream.status().await;
    assert_eq!(code, Code::Internal as i32, "{message}");
    assert!(message.contains("Unexpected EOF"), "{message}");
    plane.stop().await;
}

/// Each xDS connection writes with a share of the server's writing budget (`vendor/h2`): while
/// the budget's only share is held, a stream's first response waits; given back, it comes.
#[tokio::test]
async fn an_xds_connection_writes_only_with_a_share_of_the_writing_budget() {
    let mut config = ServeConfig::new(Transport::Plaintext);
    config.server.writing_budget = WriteBudget::new(WRITE_IN_FLIGHT, WRITE_IN_FLIGHT);
    let budget = config.server.writing_budget.clone();
    let held = budget.try_take_share().expect("the budget's only share");
    let plane = ControlPlane::start_with(any_port(), service(Arc::default()), config).await;
    let response = tokio::spawn(first_response(channel(plane.address).await));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!response.is_finished(), "answered while the writing budget was held");
    assert!(budget.waited() >= 1, "the connection did not wait for the writing budget");
    drop(held);
    assert_eq!(response.await.expect("the client's task"), Ok(1));
    plane.stop().await;
}

/// The xDS port keeps no HPACK table of what a client sends: it advertises none and holds the
/// decoder to none from the connection's start (`vendor/h2`). A client that indexed a header
/// before it took the setting in (here: one that never acknowledges it) and refers to it has its
/// connection ended (h2 answers a header block it cannot decode with GOAWAY), not its headers
/// mixed up; one that refers only to the static table is answered.
#[tokio::test]
async fn the_xds_port_keeps_no_hpack_table_of_what_a_client_sends() {
    let plane =
        ControlPlane::start_with(any_port(), service(Arc::default()), ServeConfig::new(Transport::Plaintext))
            .await;
    for (second_block_refers_to_it, answered) in [(false, true), (true, false)] {
        let mut client = TcpStream::connect(plane.address).await.expect("a connection");
        client.write_all(PREFACE).await.expect("the preface");
        client.write_all(&frame(0x4, 0, 0, &[])).await.expect("SETTINGS");
        let mut frames = Frames::default();
        let (_, settings) = frames.next_of(&mut client, |kind, flags, _| kind == 0x4 && flags == 0).await;
        assert_eq!(setting(&settings, 0x1), Some(0), "the server's SETTINGS_HEADER_TABLE_SIZE");
        // Stream 1 indexes a header (36 octets by HPACK's count) in the protocol's 4,096.
        let mut block = vec![0x83, 0x86, 0x04, 1, b'/', 0x40, 4];
        block.extend(b"aaaa");
        block.push(4);
        block.extend(b"vvvv");
        client.write_all(&frame(0x1, 0x5, 1, &block)).await.expect("HEADERS");
        // Stream 3 refers to it (the first dynamic index, 62), or to the static table only.
        let mut second = vec![0x83, 0x86, 0x04, 1, b'/'];
        if second_block_refers_to_it {
            second.push(0x80 | 62);
        }
        client.write_all(&frame(0x1, 0x5, 3, &second)).await.expect("HEADERS");
        // GOAWAY, or a frame on stream 3 (its response, or its refusal: one stream at a time).
        let (kind, answer) =
            frames.next_of(&mut client, |kind, _, stream| kind == 0x7 || (stream == 3 && kind != 0x8)).await;
        let went_away = kind == 0x7;
        assert_eq!(
            !went_away, answered,
            "referring to the indexed header: {second_block_refers_to_it}; the server answered stream 3 \
             with a frame of type {kind} ({answer:?})"
        );
        if went_away {
            // Last stream 1, PROTOCOL_ERROR: h2's answer to a header block it cannot decode.
            assert_eq!(answer[..8], [0, 0, 0, 1, 0, 0, 0, 1], "the GOAWAY's last stream and error");
        }
    }
    plane.stop().await;
}

/// Nor of what it sends (`vendor/h2`): its first header block lowers the table the client keeps
/// for it to none, and the next response's block is as long as the first, where a table would
/// have let it refer to the fields the first indexed.
#[tokio::test]
async fn the_xds_port_keeps_no_hpack_table_of_what_it_sends() {
    let plane =
        ControlPlane::start_with(any_port(), service(Arc::default()), ServeConfig::new(Transport::Plaintext))
            .await;
    let mut client = TcpStream::connect(plane.address).await.expect("a connection");
    client.write_all(PREFACE).await.expect("the preface");
    client.write_all(&frame(0x4, 0, 0, &[])).await.expect("SETTINGS");
    let mut frames = Frames::default();
    let mut blocks = Vec::new();
    // Two streams in turn, each for a path the server does not serve: a response of headers
    // only (`grpc-status` 12, `content-type`), on the same connection.
    for stream in [1, 3] {
        client.write_all(&frame(0x1, 0x5, stream, &[0x83, 0x86, 0x04, 1, b'/'])).await.expect("HEADERS");
        let (_, block) = frames.next_of(&mut client, |kind, _, id| kind == 0x1 && id == stream).await;
        blocks.push(block);
    }
    assert_eq!(
        blocks[0].first(),
        Some(&0x20),
        "the first block starts by lowering the table to 0: {:?}",
        blocks[0]
    );
    // As long as the first without its size update, but for a byte of its `date` (a digit's
    // Huffman code is 5 or 6 bits): indexed, `content-type` alone would have taken 1 byte
    // rather than its 14.
    assert!(
        blocks[1].len() + 2 >= blocks[0].len(),
        "the second response's block refers to a table: {:?} after {:?}",
        blocks[1],
        blocks[0]
    );
    plane.stop().await;
}
