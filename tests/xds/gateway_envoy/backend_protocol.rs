//! Gateway API's backend protocols (`HTTPRouteBackendProtocolH2C`,
//! `HTTPRouteBackendProtocolWebSocket`): a Service port's `appProtocol` says what its endpoints
//! speak. The suite's infra-backend-v1 has three ports (`conformance/base/manifests.yaml`): 8080
//! plain, 8081 `kubernetes.io/h2c`, 8082 `kubernetes.io/ws`; here the first is 80 (ours), and
//! each port's endpoint is a server of its protocol on loopback. Routes: the golden inputs
//! `httproute-backend-protocol-h2c` and `httproute-backend-protocol-ws`.

use envoy_operator_testkit::fleet_world::{NS, at_in, free_port};
use serde_json::{Value, json};

use super::protocols::{self, OPCODE_BINARY, OPCODE_TEXT, WebSocket};
use super::suite::{GATEWAY, golden_route, same_namespace_gateway};
use super::world::GatewayWorld;
use crate::support::backend::Backend;
use crate::support::{CONVERGE, envoy, eventually};

const INFRA_BACKEND_V1: &str = "infra-backend-v1";

/// The suite's infra-backend-v1 Service with its three ports, and the EndpointSlice whose one
/// endpoint (loopback) serves `first`, `h2c` and `ws` on their own ports.
fn infra_backend_v1(first: u16, h2c: u16, ws: u16) -> [(String, Value); 2] {
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": INFRA_BACKEND_V1, "namespace": NS},
        "spec": {"ports": [
            {"name": "first-port", "protocol": "TCP", "port": 80, "targetPort": "first-port"},
            {"name": "second-port", "protocol": "TCP", "appProtocol": "kubernetes.io/h2c", "port": 8081, "targetPort": "second-port"},
            {"name": "third-port", "protocol": "TCP", "appProtocol": "kubernetes.io/ws", "port": 8082, "targetPort": "third-port"}]}});
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "infra-backend-v1-1", "namespace": NS,
                     "labels": {"kubernetes.io/service-name": INFRA_BACKEND_V1}},
        "addressType": "IPv4",
        "ports": [{"name": "first-port", "port": first, "protocol": "TCP"},
                  {"name": "second-port", "port": h2c, "protocol": "TCP", "appProtocol": "kubernetes.io/h2c"},
                  {"name": "third-port", "port": ws, "protocol": "TCP", "appProtocol": "kubernetes.io/ws"}],
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}]});
    [
        (at_in(NS, "v1", "services", INFRA_BACKEND_V1), service),
        (at_in(NS, "discovery.k8s.io/v1", "endpointslices", "infra-backend-v1-1"), slice),
    ]
}

/// A world serving golden `case`'s route `name` on [`GATEWAY`] (listening on `port`), once
/// the route is accepted as the suite checks, with infra-backend-v1's ports served by
/// `first`, `h2c` and `ws`; and the Gateway's proxy. (The world's own backend list holds
/// another Service: infra-backend-v1 is the test's.)
async fn serving(
    case: &str,
    name: &str,
    port: u16,
    (first, h2c, ws): (u16, u16, u16),
) -> (GatewayWorld, super::world::Proxy, Backend) {
    let other = Backend::start("infra-backend-v2").await;
    let mut objects = vec![same_namespace_gateway(port), golden_route(case, name)];
    objects.extend(infra_backend_v1(first, h2c, ws));
    let world = GatewayWorld::start(&[(other.name.as_str(), &other)], &objects).await;
    world.until_accepted_as_the_suite_checks(name, GATEWAY).await;
    let proxy = world.proxy(GATEWAY).await;
    (world, proxy, other)
}

/// `HTTPRouteBackendProtocolH2C` (feature `HTTPRouteBackendProtocolH2C`): a request in HTTP/2
/// with prior knowledge (the suite's client) to a route whose backend port is
/// `kubernetes.io/h2c` reaches the backend, which speaks HTTP/2 only and saw HTTP/2. The
/// suite asserts 200 from infra-backend-v1; that the backend received HTTP/2 (not HTTP/1.1
/// that it would refuse) is the point of the feature.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_backend_protocol_h2c() {
    if !envoy::available() {
        return;
    }
    let first = Backend::start(INFRA_BACKEND_V1).await;
    let h2c = protocols::h2c_server(INFRA_BACKEND_V1).await;
    let ws = protocols::websocket_echo_server().await;
    let port = free_port().port();
    let ports = (first.address.port(), h2c.address.port(), ws.address.port());
    let (world, proxy, _other) =
        serving("httproute-backend-protocol-h2c", "backend-protocol-h2c", port, ports).await;

    let answer = eventually("GET / in h2c answered by the h2c backend", CONVERGE, || async {
        match protocols::h2c_get(port, "/").await? {
            (200, body) => Ok(body),
            other => Err(format!("answered {other:?}")),
        }
    })
    .await;
    assert_eq!(answer, "infra-backend-v1 HTTP/2.0", "the backend received HTTP/2");
    drop(proxy);
    world.stop().await;
}

/// `HTTPRouteBackendProtocolWebSocket` (feature `HTTPRouteBackendProtocolWebSocket`): a
/// WebSocket upgrade of `/ws` to a route whose backend port is `kubernetes.io/ws` is answered
/// 101 by the backend (its `Sec-WebSocket-Accept`), and a text then a binary message (the
/// suite's) come back echoed through the proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_backend_protocol_websocket() {
    if !envoy::available() {
        return;
    }
    let first = Backend::start(INFRA_BACKEND_V1).await;
    let h2c = protocols::h2c_server(INFRA_BACKEND_V1).await;
    let ws = protocols::websocket_echo_server().await;
    let port = free_port().port();
    let ports = (first.address.port(), h2c.address.port(), ws.address.port());
    let (world, proxy, _other) =
        serving("httproute-backend-protocol-ws", "backend-protocol-ws", port, ports).await;

    let host = format!("127.0.0.1:{port}");
    eventually("a WebSocket through the proxy echoes text and binary messages", CONVERGE, || async {
        let mut socket = WebSocket::connect(port, &host, "/ws").await?;
        let text = socket.round_trip(OPCODE_TEXT, b"Websocket Support!").await?;
        if text != (OPCODE_TEXT, b"Websocket Support!".to_vec()) {
            return Err(format!("text echoed as {text:?}"));
        }
        let binary = socket.round_trip(OPCODE_BINARY, &[1, 2, 3, 4, 5, 6, 7]).await?;
        if binary != (OPCODE_BINARY, vec![1, 2, 3, 4, 5, 6, 7]) {
            return Err(format!("binary echoed as {binary:?}"));
        }
        Ok(())
    })
    .await;
    drop(proxy);
    world.stop().await;
}
