//! Making room at the cap, on a real TLS server on loopback: whatever holds the slots, a new
//! client is served within the API server's 5 s; a request in flight is never cut.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use prometheus_client::registry::Registry;

use super::{ConnectionLimits, ConnectionMetrics, Http, ServeConfig, Shutdown, serve};
use crate::certs::serving::{self, CertOptions, CertPaths, ReloadingCert};

/// The API server's `timeoutSeconds`: a new client must be served within it.
const API_SERVER_TIMEOUT: Duration = Duration::from_secs(5);

struct Server {
    addr: std::net::SocketAddr,
    client: Arc<rustls::ClientConfig>,
    /// The registry holding the connection families.
    metrics: Registry,
    /// `GET /held` answers once it gets a permit from here.
    release: Arc<Semaphore>,
    _dir: tempfile::TempDir,
    _task: tokio::task::JoinHandle<()>,
}

async fn start(max_connections: usize) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let options = CertOptions {
        service_name: "hook".into(),
        namespace: "ops".into(),
        days: 1,
        extra_names: Vec::new(),
    };
    let generated = serving::generate(&options).unwrap();
    serving::write(dir.path(), &generated, false).unwrap();
    let certs = ReloadingCert::load(CertPaths::in_dir(dir.path())).unwrap();
    let release = Arc::new(Semaphore::new(0));
    let gate = release.clone();
    let app = Router::new().route("/", get(|| async { "ok" })).route(
        "/held",
        get(move || {
            let gate = gate.clone();
            async move {
                let _permit = gate.acquire().await;
                "released"
            }
        }),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut metrics = Registry::with_prefix("envoy_operator");
    let connections = ConnectionMetrics::register(&mut metrics);
    let options = ServeConfig::http(
        "webhook",
        ConnectionLimits { max_connections, ..ConnectionLimits::webhook() },
        Http { tls: Some(serving::server_config(certs).unwrap()), metrics: connections },
        Duration::from_secs(1),
    );
    let task = tokio::spawn(serve(listener, app, options, Shutdown::default()));
    let mut roots = rustls::RootCertStore::empty();
    for cert in crate::certs::pem::certificates(generated.ca_pem.as_bytes()).unwrap() {
        roots.add(cert).unwrap();
    }
    let client = rustls::ClientConfig::builder_with_provider(serving::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Server { addr, client: Arc::new(client), metrics, release, _dir: dir, _task: task }
}

impl Server {
    async fn connect(&self, alpn: &[u8]) -> TlsStream<TcpStream> {
        let mut config = (*self.client).clone();
        config.alpn_protocols = vec![alpn.to_vec()];
        let tcp = TcpStream::connect(self.addr).await.unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        TlsConnector::from(Arc::new(config)).connect(name, tcp).await.expect("TLS handshake")
    }

    /// An HTTP/1.1 keep-alive connection; the returned sender keeps it open.
    async fn http1(&self) -> hyper::client::conn::http1::SendRequest<Empty<Bytes>> {
        let stream = self.connect(b"http/1.1").await;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(connection);
        sender
    }

    async fn http2(&self) -> hyper::client::conn::http2::SendRequest<Empty<Bytes>> {
        let stream = self.connect(b"h2").await;
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let (sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.unwrap();
        tokio::spawn(connection);
        sender
    }

    fn closed(&self, reason: &str) -> u64 {
        let prefix = format!(
            "envoy_operator_http_connections_closed_total{{server=\"webhook\",reason=\"{reason}\"}} "
        );
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.metrics).unwrap();
        text.lines().find_map(|line| line.strip_prefix(&prefix)?.parse().ok()).unwrap_or(0)
    }

    /// A new client's `GET /`, from connecting to the answer, within the API server's
    /// timeout.
    async fn new_client_is_served(&self) {
        let served = tokio::time::timeout(API_SERVER_TIMEOUT, async {
            let mut sender = self.http1().await;
            get_ok(&mut sender, "/").await
        })
        .await;
        assert_eq!(served.ok().as_deref(), Some("ok"), "a new client served within {API_SERVER_TIMEOUT:?}");
    }
}

fn request(uri: &str) -> hyper::Request<Empty<Bytes>> {
    hyper::Request::get(uri).header("host", "localhost").body(Empty::new()).unwrap()
}

async fn get_ok(sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>, path: &str) -> String {
    let response = sender.send_request(request(path)).await.unwrap();
    assert_eq!(response.status(), 200);
    String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
}

async fn cap_held_by_idle_http1(cap: usize) {
    let server = start(cap).await;
    let mut held = Vec::new();
    for _ in 0..cap {
        let mut sender = server.http1().await;
        assert_eq!(get_ok(&mut sender, "/").await, "ok");
        held.push(sender);
    }
    server.new_client_is_served().await;
    assert!(server.closed("evicted") >= 1);
}

#[tokio::test]
async fn idle_http1_keep_alive_connections_make_room() {
    cap_held_by_idle_http1(8).await;
}

#[tokio::test]
async fn idle_http1_keep_alive_connections_make_room_at_the_real_cap() {
    cap_held_by_idle_http1(ConnectionLimits::webhook().max_connections).await;
}

#[tokio::test]
async fn http2_connections_that_never_read_make_room() {
    let server = start(8).await;
    let mut held = Vec::new();
    for _ in 0..8 {
        let mut stream = server.connect(b"h2").await;
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        // The client preface and an empty SETTINGS frame; then nothing is ever read, so
        // the server's GOAWAY and its ping are never answered.
        stream.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").await.unwrap();
        stream.flush().await.unwrap();
        held.push(stream);
    }
    server.new_client_is_served().await;
    assert!(server.closed("evicted") >= 1);
}

#[tokio::test]
async fn idle_http2_connections_make_room() {
    let server = start(8).await;
    let mut held = Vec::new();
    for _ in 0..8 {
        let mut sender = server.http2().await;
        let response = sender.send_request(request("https://localhost/")).await.unwrap();
        assert_eq!(response.status(), 200);
        held.push(sender);
    }
    server.new_client_is_served().await;
    assert!(server.closed("evicted") >= 1);
}

#[tokio::test]
async fn a_connection_with_a_request_in_flight_is_never_evicted() {
    let server = start(2).await;
    // Both slots serve a request that runs until released.
    let mut in_flight = Vec::new();
    for _ in 0..2 {
        let mut sender = server.http1().await;
        in_flight.push(tokio::spawn(async move {
            let answer = get_ok(&mut sender, "/held").await;
            (answer, sender)
        }));
    }
    let waiting = tokio::spawn({
        let (addr, client) = (server.addr, server.client.clone());
        async move {
            let tcp = TcpStream::connect(addr).await.unwrap();
            let mut config = (*client).clone();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            let name = ServerName::try_from("localhost").unwrap();
            TlsConnector::from(Arc::new(config)).connect(name, tcp).await.unwrap()
        }
    });
    // Long past the point where an idle connection would have made room.
    tokio::time::sleep(super::slots::HOARDING + super::deadlines::CLOSE_GRACE + Duration::from_millis(500))
        .await;
    assert!(!waiting.is_finished(), "no slot while every connection has a request in flight");
    assert!(in_flight.iter().all(|request| !request.is_finished()));
    assert_eq!(server.closed("evicted"), 0);

    // Released, both requests are answered on their connections.
    server.release.add_permits(2);
    for request in in_flight {
        let (answer, _sender) =
            tokio::time::timeout(API_SERVER_TIMEOUT, request).await.expect("answered").unwrap();
        assert_eq!(answer, "released");
    }
    // Now idle, one of them makes room for the client that waited.
    tokio::time::timeout(API_SERVER_TIMEOUT, waiting).await.expect("the waiting client got a slot").unwrap();
}
