//! GRPCRoute over a real Envoy: the upstream conformance suite's `GATEWAY-GRPC` core tests
//! (v1.3.0, `conformance/tests/grpcroute-*.go`), each named after the test it reproduces, with
//! the routes of the golden inputs (`golden_grpc_routes`), gRPC calls through the proxy to echo
//! backends that speak HTTP/2 only ([`grpc_echo`]), asserting what the suite asserts: which
//! backend answered, or the gRPC status (`UNIMPLEMENTED` where no route matches). The backends
//! answer with their names where the suite's echo server answers with its pod's.

use std::collections::BTreeMap;

use envoy_operator_testkit::fleet_world::free_port;
use serde_json::{Value, json};
use tonic::Code;

use super::grpc_echo::{self, GrpcBackend, Reply};
use super::suite::{GATEWAY, golden_grpc_routes, same_namespace_gateway};
use super::world::{GatewayWorld, gateway, gateway_api_at};
use crate::support::backend::Backend;
use crate::support::{CONVERGE, envoy, eventually};

/// The suite's three gRPC backends.
struct GrpcBackends([GrpcBackend; 3], Backend);

impl GrpcBackends {
    async fn start() -> Self {
        GrpcBackends(
            [
                GrpcBackend::start("grpc-infra-backend-v1").await,
                GrpcBackend::start("grpc-infra-backend-v2").await,
                GrpcBackend::start("grpc-infra-backend-v3").await,
            ],
            // The world's own EnvoyRoute fleet needs an HTTP backend; it plays no part here.
            Backend::start("infra-backend-v1").await,
        )
    }

    /// The world with these backends, `gateway` and the GRPCRoutes of golden case `case`.
    async fn world(&self, gateway: (String, Value), case: &str) -> GatewayWorld {
        let mut objects: Vec<(String, Value)> = self.0.iter().flat_map(GrpcBackend::objects).collect();
        objects.push(gateway);
        objects.extend(golden_grpc_routes(case));
        GatewayWorld::start(&[(self.1.name.as_str(), &self.1)], &objects).await
    }
}

/// What a call should be answered with.
#[derive(Clone, Copy, Debug)]
enum Expect<'a> {
    /// OK, from this backend.
    By(&'a str),
    /// This gRPC status, from the proxy.
    Code(Code),
}

impl Expect<'_> {
    fn check(self, reply: Result<Reply, String>) -> Result<(), String> {
        let reply = reply?;
        let met = match self {
            Expect::By(backend) => reply.code == Code::Ok && reply.served_by() == Some(backend),
            Expect::Code(code) => reply.code == code,
        };
        if met {
            Ok(())
        } else {
            Err(format!("expected {self:?}, answered {:?} by {:?}", reply.code, reply.served_by()))
        }
    }
}

/// Waits until a call of `method` with `authority` and `metadata` is answered as `expected`.
async fn until_called(
    port: u16,
    authority: &str,
    method: &str,
    metadata: &[(&str, &str)],
    expected: Expect<'_>,
) {
    let what = format!("{method} to {authority} {metadata:?} answered {expected:?}");
    eventually(&what, CONVERGE, || async {
        expected.check(grpc_echo::call(port, authority, method, metadata).await)
    })
    .await;
}

/// `GRPCExactMethodMatching`: `Echo` goes to v1, `EchoTwo` to v2, and `EchoThree`, which no
/// rule matches, is answered `UNIMPLEMENTED` by the proxy (Envoy's 404 as a gRPC status).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_exact_method_matching() {
    if !envoy::available() {
        return;
    }
    let backends = GrpcBackends::start().await;
    let port = free_port().port();
    let world = backends.world(same_namespace_gateway(port), "grpcroute-exact-method-matching").await;
    world.until_kind_accepted_as_the_suite_checks("grpcroutes", "exact-matching", GATEWAY).await;
    let _proxy = world.proxy(GATEWAY).await;
    until_called(port, "example.com", "Echo", &[], Expect::By("grpc-infra-backend-v1")).await;
    until_called(port, "example.com", "EchoTwo", &[], Expect::By("grpc-infra-backend-v2")).await;
    until_called(port, "example.com", "EchoThree", &[], Expect::Code(Code::Unimplemented)).await;
    world.stop().await;
}

/// `GRPCRouteHeaderMatching`: the suite's eleven calls, by metadata.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_route_header_matching() {
    if !envoy::available() {
        return;
    }
    let backends = GrpcBackends::start().await;
    let port = free_port().port();
    let world = backends.world(same_namespace_gateway(port), "grpcroute-header-matching").await;
    world.until_kind_accepted_as_the_suite_checks("grpcroutes", "grpc-header-matching", GATEWAY).await;
    let _proxy = world.proxy(GATEWAY).await;
    let (v1, v2) = (Expect::By("grpc-infra-backend-v1"), Expect::By("grpc-infra-backend-v2"));
    let unimplemented = Expect::Code(Code::Unimplemented);
    let cases: [(&[(&str, &str)], Expect); 11] = [
        (&[("version", "one")], v1),
        (&[("version", "two")], v2),
        (&[("version", "two"), ("color", "orange")], v1),
        (&[("version", "two"), ("color", "blue")], v2),
        (&[("color", "orange")], unimplemented),
        (&[("some-other-header", "one")], unimplemented),
        (&[("color", "blue")], v1),
        (&[("color", "green")], v1),
        (&[("color", "red")], v2),
        (&[("color", "yellow")], v2),
        (&[("color", "purple")], unimplemented),
    ];
    for (metadata, expected) in cases {
        until_called(port, "example.com", "Echo", metadata, expected).await;
    }
    world.stop().await;
}

/// `GRPCRouteListenerHostnameMatching`: four listeners on one port (`bar.com`, `foo.bar.com`,
/// `*.bar.com`, `*.foo.com`), a route on each of the first two and one on the last two; the
/// `:authority` picks the most specific listener, and one no listener takes is `UNIMPLEMENTED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_route_listener_hostname_matching() {
    if !envoy::available() {
        return;
    }
    let backends = GrpcBackends::start().await;
    let port = free_port().port();
    let listener = |name: &str, hostname: &str| {
        json!({"name": name, "port": port, "protocol": "HTTP", "hostname": hostname,
               "allowedRoutes": {"namespaces": {"from": "Same"}}})
    };
    let name = "grpcroute-listener-hostname-matching";
    let listeners = json!([
        listener("listener-1", "bar.com"),
        listener("listener-2", "foo.bar.com"),
        listener("listener-3", "*.bar.com"),
        listener("listener-4", "*.foo.com"),
    ]);
    let world = backends.world(gateway(name, listeners), name).await;
    let _proxy = world.proxy(name).await;
    let cases = [
        ("bar.com", Expect::By("grpc-infra-backend-v1")),
        ("foo.bar.com", Expect::By("grpc-infra-backend-v2")),
        ("baz.bar.com", Expect::By("grpc-infra-backend-v3")),
        ("boo.bar.com", Expect::By("grpc-infra-backend-v3")),
        ("multiple.prefixes.bar.com", Expect::By("grpc-infra-backend-v3")),
        ("multiple.prefixes.foo.com", Expect::By("grpc-infra-backend-v3")),
        ("foo.com", Expect::Code(Code::Unimplemented)),
        ("no.matching.host", Expect::Code(Code::Unimplemented)),
    ];
    for (authority, expected) in cases {
        until_called(port, authority, "Echo", &[], expected).await;
    }
    world.stop().await;
}

/// `GRPCRouteWeight`: backends weighted 70, 30 and 0 share 500 calls within 5% of 70/30, the
/// last getting none (the suite tries 10 samples; 5 here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_route_weight() {
    if !envoy::available() {
        return;
    }
    const CALLS: usize = 500;
    const TOLERANCE: f64 = 0.05;
    const SAMPLES: usize = 5;
    let backends = GrpcBackends::start().await;
    let port = free_port().port();
    let world = backends.world(same_namespace_gateway(port), "grpcroute-weight").await;
    let _proxy = world.proxy(GATEWAY).await;
    until_called(port, "example.com", "Echo", &[], Expect::By("grpc-infra-backend-v1")).await;
    until_called(port, "example.com", "Echo", &[], Expect::By("grpc-infra-backend-v2")).await;
    let mut last = BTreeMap::new();
    for _ in 0..SAMPLES {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for _ in 0..CALLS {
            let reply = grpc_echo::call(port, "example.com", "Echo", &[]).await.expect("a reply");
            let backend = reply.served_by().unwrap_or_else(|| panic!("answered {:?}", reply.code));
            *counts.entry(backend.to_owned()).or_default() += 1;
        }
        assert_eq!(counts.get("grpc-infra-backend-v3"), None, "the backend weighted 0 got calls: {counts:?}");
        let share = |backend: &str| counts.get(backend).copied().unwrap_or_default() as f64 / CALLS as f64;
        if (share("grpc-infra-backend-v1") - 0.7).abs() <= TOLERANCE
            && (share("grpc-infra-backend-v2") - 0.3).abs() <= TOLERANCE
        {
            world.stop().await;
            return;
        }
        last = counts;
    }
    panic!("{SAMPLES} samples of {CALLS} calls, none within {TOLERANCE} of 70/30; the last: {last:?}");
}

/// The operator's own: a backend that does not resolve is answered `UNAVAILABLE` (GRPCRoute's
/// word for it, Envoy's 503), and a `RequestHeaderModifier` is seen by the backend; the route
/// is accepted with `ResolvedRefs` False.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_route_unresolved_backend_is_unavailable_and_headers_are_modified() {
    if !envoy::available() {
        return;
    }
    let backends = GrpcBackends::start().await;
    let port = free_port().port();
    let route = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
        "metadata": {"name": "own", "namespace": envoy_operator_testkit::fleet_world::NS},
        "spec": {"parentRefs": [{"name": GATEWAY}],
            "rules": [
                {"matches": [{"method": {"service": grpc_echo::SERVICE, "method": "Echo"}}],
                 "filters": [{"type": "RequestHeaderModifier",
                              "requestHeaderModifier": {"set": [{"name": "X-Header-Set", "value": "set-overwrites-values"}],
                                                        "add": [{"name": "X-Header-Add", "value": "add-appends-values"}],
                                                        "remove": ["X-Header-Remove"]}}],
                 "backendRefs": [{"name": "grpc-infra-backend-v1", "port": 80}]},
                {"matches": [{"method": {"service": grpc_echo::SERVICE, "method": "EchoTwo"}}],
                 "backendRefs": [{"name": "no-such-backend", "port": 80}]}]}});
    let mut objects: Vec<(String, Value)> = backends.0.iter().flat_map(GrpcBackend::objects).collect();
    objects.push(same_namespace_gateway(port));
    objects.push((gateway_api_at("grpcroutes", "own"), route));
    let world = GatewayWorld::start(&[(backends.1.name.as_str(), &backends.1)], &objects).await;
    world
        .until_route_condition(
            &gateway_api_at("grpcroutes", "own"),
            (GATEWAY, None),
            ("ResolvedRefs", "False", "BackendNotFound"),
        )
        .await;
    let _proxy = world.proxy(GATEWAY).await;
    until_called(port, "example.com", "EchoTwo", &[], Expect::Code(Code::Unavailable)).await;
    let metadata = [("x-header-set", "original"), ("x-header-add", "original"), ("x-header-remove", "gone")];
    until_called(port, "example.com", "Echo", &metadata, Expect::By("grpc-infra-backend-v1")).await;
    let reply = grpc_echo::call(port, "example.com", "Echo", &metadata).await.expect("a reply");
    assert_eq!(reply.header("x-header-set"), ["set-overwrites-values"]);
    assert_eq!(reply.header("x-header-add"), ["original", "add-appends-values"]);
    assert!(reply.header("x-header-remove").is_empty(), "removed");
    world.stop().await;
}

/// The operator's own: a GRPCRoute the proxy rejects although the rules accept it (a method
/// regex past the program size of a proxy keeping Envoy's default limit, as in `rejected`) is
/// found from the NACK and left out alone: its status says `Accepted: False` with Envoy's
/// words, and the other GRPCRoute keeps being served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_route_the_proxy_rejects_is_left_out_alone() {
    if !envoy::available() {
        return;
    }
    let backends = GrpcBackends::start().await;
    let port = free_port().port();
    let grpc_route = |name: &str, method: Value, backend: &str| {
        (
            gateway_api_at("grpcroutes", name),
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
                   "metadata": {"name": name, "namespace": envoy_operator_testkit::fleet_world::NS},
                   "spec": {"parentRefs": [{"name": GATEWAY}],
                            "rules": [{"matches": [{"method": method}],
                                       "backendRefs": [{"name": backend, "port": 80}]}]}}),
        )
    };
    let mut objects: Vec<(String, Value)> = backends.0.iter().flat_map(GrpcBackend::objects).collect();
    objects.push(same_namespace_gateway(port));
    objects.push(grpc_route(
        "good",
        json!({"service": grpc_echo::SERVICE, "method": "EchoTwo"}),
        "grpc-infra-backend-v2",
    ));
    let world = GatewayWorld::start(&[(backends.1.name.as_str(), &backends.1)], &objects).await;
    let _proxy = world
        .proxy_with(GATEWAY, |bootstrap| {
            bootstrap["layered_runtime"]["layers"][0]["static_layer"]["re2.max_program_size.error_level"] =
                json!(100);
        })
        .await;
    until_called(port, "example.com", "EchoTwo", &[], Expect::By("grpc-infra-backend-v2")).await;

    let (bad_at, bad) = grpc_route(
        "bad",
        json!({"type": "RegularExpression", "service": "[a-z.]{200}", "method": "Echo"}),
        "grpc-infra-backend-v1",
    );
    world.api.put(&bad_at, bad);
    world.until_route_condition(&bad_at, (GATEWAY, None), ("Accepted", "False", "UnsupportedValue")).await;
    let status = world.api.get(&bad_at).expect("the route")["status"].to_string();
    assert!(status.contains("program size"), "Envoy's words in the route's status: {status}");
    until_called(port, "example.com", "EchoTwo", &[], Expect::By("grpc-infra-backend-v2")).await;
    until_called(port, "example.com", "Echo", &[], Expect::Code(Code::Unimplemented)).await;
    world.stop().await;
}
