//! Connection hygiene on a real TLS server on loopback: idle connections are closed (HTTP/1.1
//! after its allowance, HTTP/2 with GOAWAY), a client that never reads its answers is cut off
//! instead of pinning them, the number of connections is capped, and stalled streams or
//! bodies do not hold up anyone else. Each test bounds the behaviour with small limits and
//! checks the outcome; the hang guards are never assertions about speed.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use envoy_operator::certs::serving::{self, CertOptions, CertPaths, ReloadingCert};
use envoy_operator::net::ConnectionLimits;
use envoy_operator::operator::metrics::OperatorMetrics;
use envoy_operator::webhook::review::{AdmissionRequest, AdmissionResponse};
use envoy_operator::webhook::router::{Endpoint, Limits, standard_endpoints};
use envoy_operator::webhook::serve::{WebhookConfig, WebhookServer};
use http_body_util::StreamBody;
use hyper::Request;
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{fixture, response_of};
use crate::tls::{client_config, connect, http1, post, send1};

const HANG_GUARD: Duration = Duration::from_secs(30);

struct Server {
    addr: SocketAddr,
    ca: String,
    metrics: OperatorMetrics,
    _dir: TempDir,
    _task: tokio::task::JoinHandle<()>,
}

/// Answers with a 1 MiB patch: big enough that a client that does not read fills the socket.
fn answers_big(request: &AdmissionRequest) -> AdmissionResponse {
    AdmissionResponse::allow_with_patch_json(&request.uid, vec![b' '; 1 << 20])
}

async fn serve(connections: ConnectionLimits, limits: Limits) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let options = CertOptions {
        service_name: "envoy-operator-webhook".into(),
        namespace: "envoy-operator".into(),
        days: 1,
        extra_names: Vec::new(),
    };
    let generated = serving::generate(&options).unwrap();
    serving::write(dir.path(), &generated, false).unwrap();
    let certs = ReloadingCert::load(CertPaths::in_dir(dir.path())).unwrap();
    let metrics = OperatorMetrics::new();
    let mut endpoints = standard_endpoints();
    endpoints.push(Endpoint::new("/big", answers_big));
    let config = WebhookConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        endpoints,
        limits,
        connections,
        drain: Duration::ZERO,
        metrics: metrics.webhook.clone(),
        connection_metrics: metrics.connections.clone(),
        ..WebhookConfig::default()
    };
    let server = WebhookServer::bind(config, certs).unwrap();
    let addr = server.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let _ = server.run(std::future::pending()).await;
    });
    Server { addr, ca: generated.ca_pem, metrics, _dir: dir, _task: task }
}

fn closed(metrics: &OperatorMetrics, reason: &str) -> u64 {
    let prefix =
        format!("envoy_operator_http_connections_closed_total{{server=\"webhook\",reason=\"{reason}\"}} ");
    metrics.encode().lines().find_map(|line| line.strip_prefix(&prefix)?.parse().ok()).unwrap_or(0)
}

async fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "waited {HANG_GUARD:?} for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn quick(limits: ConnectionLimits) -> ConnectionLimits {
    ConnectionLimits {
        first_request_timeout: Duration::from_millis(300),
        http1_idle_timeout: Duration::from_millis(300),
        http2_idle_timeout: Duration::from_millis(300),
        ..limits
    }
}

#[tokio::test]
async fn an_idle_http1_connection_is_closed_after_its_allowance() {
    let server = serve(quick(ConnectionLimits::webhook()), Limits::default()).await;
    let stream = connect(server.addr, client_config(&[&server.ca], &[b"http/1.1"])).await;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    let connection = tokio::spawn(connection);
    assert_eq!(send1(&mut sender, post("/validate", fixture("foo-create-validate.json"))).await.0, 200);
    // Idle now: the server closes the connection; the client sees it end cleanly.
    let ended =
        tokio::time::timeout(HANG_GUARD, connection).await.expect("the server closed the idle connection");
    assert!(ended.unwrap().is_ok());
    eventually("the close counted as idle", || closed(&server.metrics, "idle") == 1).await;
}

#[test]
fn the_http1_idle_allowance_outlasts_the_api_servers_pooling() {
    // Go's http.Transport keeps idle connections 90 s: the server must not close them first.
    assert!(ConnectionLimits::webhook().http1_idle_timeout > Duration::from_secs(90));
}

#[tokio::test]
async fn a_connection_that_never_sends_a_request_is_closed() {
    let server = serve(quick(ConnectionLimits::webhook()), Limits::default()).await;
    let mut stream = connect(server.addr, client_config(&[&server.ca], &[b"http/1.1"])).await;
    let mut buffer = Vec::new();
    let read = tokio::time::timeout(HANG_GUARD, stream.read_to_end(&mut buffer)).await;
    assert!(read.is_ok(), "the server never closed the silent connection");
    eventually("the close counted as idle", || closed(&server.metrics, "idle") == 1).await;
}

#[tokio::test]
async fn an_idle_http2_connection_gets_goaway() {
    let server = serve(quick(ConnectionLimits::webhook()), Limits::default()).await;
    let stream = connect(server.addr, client_config(&[&server.ca], &[b"h2"])).await;
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.unwrap();
    let connection = tokio::spawn(connection);
    let response =
        sender.send_request(post("https://localhost/validate", fixture("foo-create-validate.json"))).await;
    assert_eq!(response.unwrap().status(), 200);
    let ended = tokio::time::timeout(HANG_GUARD, connection).await.expect("GOAWAY ended the connection");
    assert!(ended.unwrap().is_ok(), "a graceful end");
    eventually("the close counted as idle", || closed(&server.metrics, "idle") == 1).await;
}

#[tokio::test]
async fn a_client_that_does_not_read_its_answers_is_cut_off() {
    let limits =
        ConnectionLimits { write_timeout: Duration::from_millis(300), ..ConnectionLimits::webhook() };
    let server = serve(limits, Limits::default()).await;
    let mut stream = connect(server.addr, client_config(&[&server.ca], &[b"http/1.1"])).await;
    let body = fixture("foo-create-validate.json");
    let request = format!(
        "POST /big HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    // Requests, pipelined, and never a byte read: each answer is over a MiB.
    let writing = async {
        for _ in 0..64 {
            stream.write_all(request.as_bytes()).await?;
            stream.write_all(&body).await?;
        }
        std::future::pending::<std::io::Result<()>>().await
    };
    tokio::select! {
        // The server stops reading too; the writes may fail once it closes.
        _ = writing => {}
        () = eventually("the connection cut off", || closed(&server.metrics, "write_timeout") == 1) => {}
    }
    eventually("the connection cut off", || closed(&server.metrics, "write_timeout") == 1).await;
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_for_a_slot() {
    let limits = ConnectionLimits { max_connections: 2, ..ConnectionLimits::webhook() };
    let server = serve(limits, Limits::default()).await;
    let config = client_config(&[&server.ca], &[b"http/1.1"]);
    // Two connections that each served a review just now: a connection used within the last
    // second is never closed to make room, so the third waits for one to go.
    let mut first = http1(connect(server.addr, config.clone()).await).await;
    let mut second = http1(connect(server.addr, config.clone()).await).await;
    for sender in [&mut first, &mut second] {
        assert_eq!(send1(sender, post("/validate", fixture("foo-create-validate.json"))).await.0, 200);
    }
    let third = tokio::spawn(connect(server.addr, config.clone()));
    // The third TCP connection waits: no handshake while two recently used ones are open.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!third.is_finished(), "a third connection was accepted beyond the cap of two");
    drop(first);
    let third = tokio::time::timeout(HANG_GUARD, third).await.expect("accepted once a slot is free").unwrap();
    let mut sender = http1(third).await;
    assert_eq!(send1(&mut sender, post("/validate", fixture("foo-create-validate.json"))).await.0, 200);
}

#[tokio::test]
async fn at_the_cap_connections_that_never_sent_a_request_make_room() {
    let limits = ConnectionLimits { max_connections: 2, ..ConnectionLimits::webhook() };
    let server = serve(limits, Limits::default()).await;
    let config = client_config(&[&server.ca], &[b"http/1.1"]);
    // Two hoarders: connected, then silent (their first-request allowance is 10 s).
    let hoarders = [connect(server.addr, config.clone()).await, connect(server.addr, config.clone()).await];
    let mut sender = http1(connect(server.addr, config).await).await;
    let (status, body) = send1(&mut sender, post("/validate", fixture("foo-create-validate.json"))).await;
    assert_eq!((status, response_of(&body)["allowed"].clone()), (200, serde_json::json!(true)));
    eventually("a hoarder evicted", || closed(&server.metrics, "evicted") >= 1).await;
    drop(hoarders);
}

#[tokio::test]
async fn stalled_http2_streams_hold_up_nobody_else() {
    // One connection opens as many streams as it may and never finishes their bodies; the
    // bodies are read under the request deadline, before any review slot is taken.
    let limits = Limits { request_timeout: Duration::from_secs(20), max_concurrent: 1, ..Limits::default() };
    let server = serve(ConnectionLimits::webhook(), limits).await;
    let stream = connect(server.addr, client_config(&[&server.ca], &[b"h2"])).await;
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let mut stalled = Vec::new();
    let mut feeds = Vec::new();
    for _ in 0..ConnectionLimits::webhook().http2_max_concurrent_streams {
        let (feed, frames) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::convert::Infallible>>(1);
        let body = StreamBody::new(tokio_stream(frames));
        let request = Request::post("https://localhost/validate")
            .header("content-type", "application/json")
            .header("content-length", "100000")
            .body(body)
            .unwrap();
        let mut sender = sender.clone();
        stalled.push(tokio::spawn(async move { sender.send_request(request).await }));
        feeds.push(feed);
    }
    // Meanwhile a review on another connection is answered.
    let mut other = http1(connect(server.addr, client_config(&[&server.ca], &[b"http/1.1"])).await).await;
    let (status, body) = send1(&mut other, post("/validate", fixture("foo-create-validate.json"))).await;
    assert_eq!((status, response_of(&body)["allowed"].clone()), (200, serde_json::json!(true)));
    assert!(stalled.iter().all(|s| !s.is_finished()), "the stalled streams still wait for their bodies");
    drop(feeds);
}

fn tokio_stream<T>(mut receiver: tokio::sync::mpsc::Receiver<T>) -> impl futures::Stream<Item = T> {
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}

#[tokio::test]
async fn a_slow_body_holds_no_review_slot() {
    let limits = Limits { max_concurrent: 1, inline_review_bytes: 0, ..Limits::default() };
    let server = serve(ConnectionLimits::webhook(), limits).await;
    let config = client_config(&[&server.ca], &[b"http/1.1"]);
    let mut slow = connect(server.addr, config.clone()).await;
    slow.write_all(b"POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 5000\r\n\r\n{")
        .await
        .unwrap();
    slow.flush().await.unwrap();
    // The only review slot is free for the next request.
    let mut sender = http1(connect(server.addr, config).await).await;
    let (status, body) = send1(&mut sender, post("/validate", fixture("foo-create-validate.json"))).await;
    assert_eq!((status, response_of(&body)["allowed"].clone()), (200, serde_json::json!(true)));
}
