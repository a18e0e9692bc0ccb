//! TLSRoute over a real Envoy: the upstream conformance suite's `GATEWAY-TLS` core test
//! `TLSRouteSimpleSameNamespace` (v1.3.0, `conformance/tests/tlsroute-simple-same-namespace.go`)
//! and the operator's passthrough by SNI. Two TLS backends on loopback, each with its own
//! certificate; a TLS client asking the passthrough listener for a name must complete its
//! handshake with the backend of that name's route (the certificate it presents proves which,
//! and so does its answer, its name): the proxy never decrypts. A name no route serves is
//! closed.

use std::net::SocketAddr;
use std::sync::Arc;

use envoy_operator_testkit::fleet_world::{NS, at, free_port};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::client::{Authority, Issued};
use super::world::{GatewayWorld, condition, gateway};
use crate::support::backend::Backend;
use crate::support::{CONVERGE, envoy, eventually};

const GATEWAY: &str = "gateway-tlsroute";
const TLS_ROUTES: &str = "gateway.networking.k8s.io/v1alpha2";

/// A TLS server on loopback presenting `issued`, answering any HTTP request with its name.
struct TlsBackend {
    name: String,
    address: SocketAddr,
    issued: Issued,
    task: tokio::task::JoinHandle<()>,
}

impl TlsBackend {
    async fn start(name: &str, issued: Issued) -> Self {
        let chain = CertificateDer::pem_slice_iter(issued.chain_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .expect("the chain");
        let key = PrivateKeyDer::from_pem_slice(issued.key_pem.as_bytes()).expect("the key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("a certificate and its key");
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let address = listener.local_addr().expect("its address");
        let answer = name.to_owned();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, answer) = (acceptor.clone(), answer.clone());
                tokio::spawn(async move {
                    let Ok(mut stream) = acceptor.accept(tcp).await else { return };
                    // One request, read up to the end of its head (bounded: a test's GET).
                    let mut head = Vec::new();
                    let mut buffer = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
                        match stream.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buffer[..n]),
                        }
                    }
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                        answer.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        TlsBackend { name: name.to_owned(), address, issued, task }
    }

    /// Its Service (port 443) and EndpointSlice (its loopback port) in [`NS`].
    fn objects(&self) -> [(String, Value); 2] {
        let name = &self.name;
        [
            (
                at("v1", "services", name),
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS},
                       "spec": {"ports": [{"name": "tls", "port": 443, "targetPort": "tls"}]}}),
            ),
            (
                at("discovery.k8s.io/v1", "endpointslices", &format!("{name}-1")),
                json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                       "metadata": {"name": format!("{name}-1"), "namespace": NS,
                                    "labels": {"kubernetes.io/service-name": name}},
                       "addressType": "IPv4",
                       "ports": [{"name": "tls", "port": self.address.port(), "protocol": "TCP"}],
                       "endpoints": [{"addresses": [self.address.ip().to_string()], "conditions": {"ready": true}}]}),
            ),
        ]
    }
}

impl Drop for TlsBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A TLSRoute `name` of [`NS`] on [`GATEWAY`] for `hostnames`, to `backends` (name, weight).
fn tls_route(name: &str, hostnames: &[&str], backends: &[(&str, u32)]) -> (String, Value) {
    let backend_refs: Vec<Value> = backends
        .iter()
        .map(|(backend, weight)| json!({"name": backend, "port": 443, "weight": weight}))
        .collect();
    (
        at(TLS_ROUTES, "tlsroutes", name),
        json!({"apiVersion": TLS_ROUTES, "kind": "TLSRoute", "metadata": {"name": name, "namespace": NS},
               "spec": {"parentRefs": [{"name": GATEWAY}], "hostnames": hostnames,
                        "rules": [{"backendRefs": backend_refs}]}}),
    )
}

/// The suite's Gateway: one TLS passthrough listener for `*.example.com` taking TLSRoutes.
fn passthrough_gateway(port: u16) -> (String, Value) {
    gateway(
        GATEWAY,
        json!([{"name": "https", "port": port, "protocol": "TLS", "hostname": "*.example.com",
                "allowedRoutes": {"namespaces": {"from": "Same"}, "kinds": [{"kind": "TLSRoute"}]},
                "tls": {"mode": "Passthrough"}}]),
    )
}

/// Waits until TLSRoute `route` is accepted as the suite's `GatewayAndTLSRoutesMustBeAccepted`
/// requires: one parent, the operator's, `Accepted` True.
async fn until_accepted(world: &GatewayWorld, route: &str) {
    let what = format!("TLSRoute {route} accepted by Gateway {GATEWAY}");
    world
        .until_object(&what, &at(TLS_ROUTES, "tlsroutes", route), |route| {
            let parents = route["status"]["parents"].as_array().cloned().unwrap_or_default();
            let [parent] = parents.as_slice() else { return false };
            parent["parentRef"]["name"] == GATEWAY
                && condition(&parent["conditions"], "Accepted")
                    == Some(("True".to_owned(), "Accepted".to_owned()))
        })
        .await;
}

/// Until a TLS connection to the proxy asking for `sni` completes its handshake with
/// `backend` (its certificate) and is answered by it.
async fn until_reached(ca: &Authority, port: u16, sni: &str, backend: &TlsBackend) {
    let what = format!("a TLS connection for {sni} through the proxy reaches {}", backend.name);
    eventually(&what, CONVERGE, || async {
        let (presented, answer) = ca.get(port, sni, sni, "/").await?;
        if presented != backend.issued.der {
            return Err(format!("the certificate presented for {sni} is not {}'s", backend.name));
        }
        match answer.body == backend.name {
            true => Ok(()),
            false => Err(format!("answered by {:?}, not {}", answer.body, backend.name)),
        }
    })
    .await;
}

/// Two backends, for `a.example.com` and `b.example.com`, their certificates from one CA.
async fn backends(ca: &Authority) -> (TlsBackend, TlsBackend) {
    (
        TlsBackend::start("tls-backend-a", ca.issue(&["a.example.com", "abc.example.com"])).await,
        TlsBackend::start("tls-backend-b", ca.issue(&["b.example.com"])).await,
    )
}

/// `TLSRouteSimpleSameNamespace`: a TLSRoute for `abc.example.com` on the suite's passthrough
/// listener; a TLS request asking for that name reaches the backend, TLS end to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_route_simple_same_namespace() {
    if !envoy::available() {
        return;
    }
    let ca = Authority::new();
    let (a, _b) = backends(&ca).await;
    let port = free_port().port();
    // FleetWorld's own EnvoyRoute fleet needs an HTTP backend; it plays no part here.
    let edge = Backend::start("infra-backend-v1").await;
    let mut objects: Vec<(String, Value)> = a.objects().into();
    objects.push(passthrough_gateway(port));
    objects.push(tls_route("gateway-conformance-infra-test", &["abc.example.com"], &[(&a.name, 1)]));
    let world = GatewayWorld::start_experimental(&[(edge.name.as_str(), &edge)], &objects).await;
    until_accepted(&world, "gateway-conformance-infra-test").await;
    let _proxy = world.proxy(GATEWAY).await;
    until_reached(&ca, port, "abc.example.com", &a).await;
    world.stop().await;
}

/// Passthrough by SNI: `a.example.com` reaches backend A, `b.example.com` backend B (its own
/// route), and a name no route serves (`c.example.com`, under the listener's wildcard) is
/// closed before any handshake completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_passthrough_chooses_the_backend_by_sni_and_closes_unknown_names() {
    if !envoy::available() {
        return;
    }
    let ca = Authority::new();
    let (a, b) = backends(&ca).await;
    let port = free_port().port();
    let edge = Backend::start("infra-backend-v1").await;
    let mut objects: Vec<(String, Value)> = a.objects().into_iter().chain(b.objects()).collect();
    objects.push(passthrough_gateway(port));
    objects.push(tls_route("to-a", &["a.example.com"], &[(&a.name, 1)]));
    objects.push(tls_route("to-b", &["b.example.com"], &[(&b.name, 1)]));
    let world = GatewayWorld::start_experimental(&[(edge.name.as_str(), &edge)], &objects).await;
    until_accepted(&world, "to-a").await;
    until_accepted(&world, "to-b").await;
    let _proxy = world.proxy(GATEWAY).await;
    until_reached(&ca, port, "a.example.com", &a).await;
    until_reached(&ca, port, "b.example.com", &b).await;
    let unknown = ca.get(port, "c.example.com", "c.example.com", "/").await;
    assert!(
        unknown.is_err(),
        "a name no route serves must not reach a backend: {:?}",
        unknown.map(|(_, a)| a.body)
    );
    world.stop().await;
}
