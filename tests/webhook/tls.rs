//! A real TLS server on 127.0.0.1:0 with generated certificates and a client that trusts
//! the generated CA: HTTP/1.1 and HTTP/2, a certificate swap while serving, panics, shutdown.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use envoy_operator::certs::serving::{self, CertOptions, CertPaths, ReloadingCert};
use envoy_operator::net::ConnectionLimits;
use envoy_operator::webhook::review::{AdmissionRequest, AdmissionResponse};
use envoy_operator::webhook::router::{Endpoint, Readiness, standard_endpoints};
use envoy_operator::webhook::serve::{ServeError, WebhookConfig, WebhookServer};
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tempfile::TempDir;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::common::{fixture, patch_of, response_of};

/// Guards against hangs; never part of an assertion about speed.
const HANG_GUARD: Duration = Duration::from_secs(20);

struct Running {
    addr: SocketAddr,
    dir: TempDir,
    readiness: Readiness,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ServeError>>,
}

fn generate_into(dir: &Path, force: bool) -> serving::GeneratedCerts {
    let options = CertOptions {
        service_name: "envoy-operator-webhook".into(),
        namespace: "envoy-operator".into(),
        days: 1,
        extra_names: Vec::new(),
    };
    let certs = serving::generate(&options).unwrap();
    serving::write(dir, &certs, force).unwrap();
    certs
}

fn panics(_: &AdmissionRequest) -> AdmissionResponse {
    panic!("a bug in a handler")
}

async fn start() -> Running {
    start_with(|config| config).await
}

async fn start_with(adjust: impl FnOnce(WebhookConfig) -> WebhookConfig) -> Running {
    let dir = tempfile::tempdir().unwrap();
    generate_into(dir.path(), false);
    let certs = ReloadingCert::load(CertPaths::in_dir(dir.path())).unwrap();
    let mut endpoints = standard_endpoints();
    endpoints.push(Endpoint::new("/panic", panics));
    let config = WebhookConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        endpoints,
        reload_interval: Duration::from_millis(50),
        drain: Duration::ZERO,
        shutdown_grace: Duration::from_secs(60),
        ..WebhookConfig::default()
    };
    let server = WebhookServer::bind(adjust(config), certs).unwrap();
    let addr = server.local_addr().unwrap();
    let readiness = server.readiness();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));
    Running { addr, dir, readiness, stop: Some(stop), task }
}

pub(crate) fn client_config(ca_pems: &[&str], alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for pem in ca_pems {
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
    }
    let mut config = rustls::ClientConfig::builder_with_provider(serving::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

pub(crate) async fn connect(addr: SocketAddr, config: Arc<rustls::ClientConfig>) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    TlsConnector::from(config).connect(name, tcp).await.expect("TLS handshake")
}

fn peer_cert(stream: &TlsStream<TcpStream>) -> Vec<u8> {
    stream.get_ref().1.peer_certificates().expect("a server certificate")[0].to_vec()
}

fn pem_der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap().to_vec()
}

pub(crate) type Http1 = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

pub(crate) async fn http1(stream: TlsStream<TcpStream>) -> Http1 {
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    sender
}

pub(crate) fn post(uri: &str, body: Vec<u8>) -> Request<Full<Bytes>> {
    Request::post(uri)
        .header("content-type", "application/json")
        .header("host", "localhost")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

pub(crate) async fn send1(sender: &mut Http1, request: Request<Full<Bytes>>) -> (u16, Vec<u8>) {
    sender.ready().await.unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status().as_u16();
    (status, response.into_body().collect().await.unwrap().to_bytes().to_vec())
}

#[tokio::test]
async fn http1_keep_alive_reviews_over_tls() {
    let server = start().await;
    let ca = std::fs::read_to_string(server.dir.path().join(serving::CA_FILE)).unwrap();
    let stream = connect(server.addr, client_config(&[&ca], &[b"http/1.1"])).await;
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let mut sender = http1(stream).await;

    let (status, body) =
        send1(&mut sender, post("/mutate?timeout=10s", fixture("foo-create-sparse-mutate.json"))).await;
    assert_eq!(status, 200);
    assert!(patch_of(&response_of(&body)).is_some());
    assert!(server.readiness.is_ready());
    // Same connection, next review.
    let (status, body) =
        send1(&mut sender, post("/validate?timeout=10s", fixture("foo-create-invalid-validate.json"))).await;
    assert_eq!(status, 200);
    assert_eq!(response_of(&body)["status"]["code"], 422);
    stop(server).await;
}

#[tokio::test]
async fn http2_is_negotiated_by_alpn() {
    let server = start().await;
    let ca = std::fs::read_to_string(server.dir.path().join(serving::CA_FILE)).unwrap();
    let stream = connect(server.addr, client_config(&[&ca], &[b"h2", b"http/1.1"])).await;
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let request = post("https://localhost/validate?timeout=10s", fixture("envoy-create-validate.json"));
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(response_of(&body)["allowed"], true);
    stop(server).await;
}

#[tokio::test]
async fn a_certificate_swap_reaches_new_handshakes_and_spares_open_connections() {
    let server = start().await;
    let old_ca = std::fs::read_to_string(server.dir.path().join(serving::CA_FILE)).unwrap();
    let old_cert = pem_der(&std::fs::read_to_string(server.dir.path().join(serving::CERT_FILE)).unwrap());

    // A keep-alive connection made with the first certificate.
    let stream = connect(server.addr, client_config(&[&old_ca], &[b"http/1.1"])).await;
    assert_eq!(peer_cert(&stream), old_cert);
    let mut established = http1(stream).await;
    assert_eq!(send1(&mut established, post("/validate", fixture("foo-create-validate.json"))).await.0, 200);

    // Rotate: a new CA and serving certificate, written over the files while serving.
    let new = generate_into(server.dir.path(), true);
    let new_cert = pem_der(&new.cert_pem);
    assert_ne!(new_cert, old_cert);
    let trusting_both = client_config(&[&old_ca, &new.ca_pem], &[b"http/1.1"]);
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    let fresh = loop {
        let stream = connect(server.addr, trusting_both.clone()).await;
        if peer_cert(&stream) == new_cert {
            break stream;
        }
        assert!(tokio::time::Instant::now() < deadline, "the new certificate was never served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    // The new connection works, trusting only the new CA too...
    let mut fresh = http1(fresh).await;
    assert_eq!(send1(&mut fresh, post("/validate", fixture("envoy-create-validate.json"))).await.0, 200);
    let only_new = connect(server.addr, client_config(&[&new.ca_pem], &[b"http/1.1"])).await;
    assert_eq!(peer_cert(&only_new), new_cert);
    // ...and the connection established before the swap keeps serving.
    let (status, body) =
        send1(&mut established, post("/mutate", fixture("foo-create-sparse-mutate.json"))).await;
    assert_eq!(status, 200);
    assert!(patch_of(&response_of(&body)).is_some());
    stop(server).await;
}

#[tokio::test]
async fn a_broken_certificate_update_keeps_the_old_certificate() {
    let server = start().await;
    let ca = std::fs::read_to_string(server.dir.path().join(serving::CA_FILE)).unwrap();
    let cert = pem_der(&std::fs::read_to_string(server.dir.path().join(serving::CERT_FILE)).unwrap());
    std::fs::write(server.dir.path().join(serving::CERT_FILE), "not a certificate").unwrap();
    // Several reload intervals pass; handshakes keep getting the loaded certificate.
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(60)).await;
        let stream = connect(server.addr, client_config(&[&ca], &[b"http/1.1"])).await;
        assert_eq!(peer_cert(&stream), cert);
    }
    stop(server).await;
}

#[tokio::test]
async fn a_panic_answers_500_and_the_connection_and_server_keep_serving() {
    let server = start().await;
    let ca = std::fs::read_to_string(server.dir.path().join(serving::CA_FILE)).unwrap();
    let mut sender = http1(connect(server.addr, client_config(&[&ca], &[b"http/1.1"])).await).await;
    let (status, _) = send1(&mut sender, post("/panic", fixture("foo-create-validate.json"))).await;
    assert_eq!(status, 500);
    let (status, body) = send1(&mut sender, post("/validate", fixture("foo-create-validate.json"))).await;
    assert_eq!(status, 200);
    assert_eq!(response_of(&body)["allowed"], true);
    let mut other = http1(connect(server.addr, client_config(&[&ca], &[b"http/1.1"])).await).await;
    assert_eq!(send1(&mut other, post("/validate", fixture("foo-create-validate.json"))).await.0, 200);
    stop(server).await;
}

#[tokio::test]
async fn shutdown_closes_idle_keep_alive_connections_without_waiting_for_the_grace_period() {
    let server = start().await;
    let ca = std::fs::read_to_string(server.dir.path().join(serving::CA_FILE)).unwrap();
    let stream = connect(server.addr, client_config(&[&ca], &[b"http/1.1"])).await;
    let (mut idle, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    let connection = tokio::spawn(connection);
    assert_eq!(send1(&mut idle, post("/validate", fixture("foo-create-validate.json"))).await.0, 200);
    let readiness = server.readiness.clone();
    assert!(readiness.is_ready());
    // The grace period is 60 s; an idle connection must not hold the server that long.
    stop(server).await;
    assert!(!readiness.is_ready());
    let closed =
        tokio::time::timeout(HANG_GUARD, connection).await.expect("the server closed the idle connection");
    assert!(closed.unwrap().is_ok(), "closed cleanly");
}

/// Triggers shutdown and waits for `run` to return (bounded against hangs).
async fn stop(mut server: Running) {
    if let Some(stop) = server.stop.take() {
        let _ = stop.send(());
    }
    tokio::time::timeout(HANG_GUARD, &mut server.task)
        .await
        .expect("the server stops promptly")
        .expect("the server task did not panic")
        .expect("the server ran without error");
}

#[tokio::test]
async fn shutdown_lets_a_request_in_flight_finish() {
    use futures::StreamExt;
    use http_body_util::StreamBody;
    use hyper::body::Frame;

    let mut server = start().await;
    let ca = std::fs::read_to_string(server.dir.path().join(serving::CA_FILE)).unwrap();
    let stream = connect(server.addr, client_config(&[&ca], &[b"http/1.1"])).await;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);

    // The body arrives in two parts; shutdown begins between them.
    let (parts, receiver) = tokio::sync::mpsc::channel::<Bytes>(2);
    let body = StreamBody::new(
        tokio_stream_of(receiver).map(|chunk| Ok::<_, std::convert::Infallible>(Frame::data(chunk))),
    );
    let review = fixture("foo-create-sparse-mutate.json");
    let (first, second) = review.split_at(review.len() / 2);
    let request = Request::post("/mutate")
        .header("content-type", "application/json")
        .header("content-length", review.len())
        .body(body)
        .unwrap();
    let in_flight = tokio::spawn(sender.send_request(request));
    parts.send(Bytes::copy_from_slice(first)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    let _ = server.stop.take().unwrap().send(());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!server.readiness.is_ready(), "not ready once shutting down");
    parts.send(Bytes::copy_from_slice(second)).await.unwrap();
    drop(parts);

    let response = tokio::time::timeout(HANG_GUARD, in_flight).await.unwrap().unwrap().unwrap();
    assert_eq!(response.status(), 200);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(patch_of(&response_of(&body)).is_some());
    stop(server).await;
}

fn tokio_stream_of(mut receiver: tokio::sync::mpsc::Receiver<Bytes>) -> impl futures::Stream<Item = Bytes> {
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let server = start_with(|config| WebhookConfig {
        connections: ConnectionLimits {
            header_read_timeout: Duration::from_millis(200),
            ..config.connections
        },
        ..config
    })
    .await;
    let ca = std::fs::read_to_string(server.dir.path().join(serving::CA_FILE)).unwrap();
    let mut stream = connect(server.addr, client_config(&[&ca], &[b"http/1.1"])).await;
    stream.write_all(b"POST /validate HTTP/1.1\r\nhost: localhost\r\n").await.unwrap();
    stream.flush().await.unwrap();
    // The server closes the connection; reading ends (EOF or reset) instead of hanging.
    let mut buffer = Vec::new();
    let read = tokio::time::timeout(HANG_GUARD, stream.read_to_end(&mut buffer)).await;
    assert!(read.is_ok(), "the server never closed the connection");
    stop(server).await;
}

#[tokio::test]
async fn certificate_rotations_under_load_fail_no_request() {
    let server = start().await;
    let first_ca = std::fs::read_to_string(server.dir.path().join(serving::CA_FILE)).unwrap();
    // The sets the certificate is rotated through; clients trust every CA (as the webhook
    // configuration's caBundle does during a rotation's overlap).
    let options = CertOptions {
        service_name: "envoy-operator-webhook".into(),
        namespace: "envoy-operator".into(),
        days: 1,
        extra_names: Vec::new(),
    };
    let rotations: Vec<serving::GeneratedCerts> =
        (0..4).map(|_| serving::generate(&options).unwrap()).collect();
    let mut cas: Vec<&str> = vec![first_ca.as_str()];
    cas.extend(rotations.iter().map(|r| r.ca_pem.as_str()));
    let trusting = client_config(&cas, &[b"http/1.1"]);

    const WORKERS: usize = 4;
    const REQUESTS: usize = 150;
    let addr = server.addr;
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let trusting = trusting.clone();
            tokio::spawn(async move {
                let mut failures = Vec::new();
                let mut sender: Option<Http1> = None;
                for i in 0..REQUESTS {
                    // A fresh handshake every tenth request, so handshakes race the swaps.
                    if i % 10 == 0 {
                        sender = None;
                    }
                    if sender.is_none() {
                        let connected = async {
                            let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
                            let name = ServerName::try_from("localhost").unwrap();
                            let stream = TlsConnector::from(trusting.clone())
                                .connect(name, tcp)
                                .await
                                .map_err(|e| format!("handshake: {e}"))?;
                            Ok::<_, String>(http1(stream).await)
                        };
                        match connected.await {
                            Ok(connection) => sender = Some(connection),
                            Err(error) => {
                                failures.push(error);
                                continue;
                            }
                        }
                    }
                    let connection = sender.as_mut().unwrap();
                    let outcome = async {
                        connection.ready().await.map_err(|e| e.to_string())?;
                        let response = connection
                            .send_request(post("/validate", fixture("foo-create-validate.json")))
                            .await
                            .map_err(|e| e.to_string())?;
                        Ok::<_, String>(response.status().as_u16())
                    };
                    match outcome.await {
                        Ok(200) => {}
                        Ok(status) => failures.push(format!("HTTP {status}")),
                        Err(error) => {
                            failures.push(error);
                            sender = None;
                        }
                    }
                }
                failures
            })
        })
        .collect();

    for rotation in &rotations {
        tokio::time::sleep(Duration::from_millis(100)).await;
        serving::write(server.dir.path(), rotation, true).unwrap();
    }
    let mut failures = Vec::new();
    for worker in workers {
        failures.extend(tokio::time::timeout(HANG_GUARD, worker).await.expect("workers finish").unwrap());
    }
    assert!(
        failures.is_empty(),
        "{} of {} requests failed: {failures:?}",
        failures.len(),
        WORKERS * REQUESTS
    );

    // The last rotation is what new handshakes get.
    let last = pem_der(&rotations.last().unwrap().cert_pem);
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while peer_cert(&connect(addr, trusting.clone()).await) != last {
        assert!(tokio::time::Instant::now() < deadline, "the last certificate was never served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop(server).await;
}
