//! More cases of the upstream conformance suite (`sigs.k8s.io/gateway-api` v1.3,
//! `conformance/tests`, profile `GATEWAY-HTTP`): path and header matching, redirects, and
//! Services of other types, each test named after the one it reproduces, objects in and traffic
//! out through a real Envoy. As in `conformance`, the routes are the golden inputs of the
//! translation (`crates/core/tests/testdata/golden/gateway/<case>.in.yaml`, through
//! [`golden_route`](super::suite::golden_route)), each test naming its case, except
//! `HTTPRouteServiceTypes`'s, written here with the Services it routes to; the backends answer
//! with their names and ports are free ports of this host.

use envoy_operator_testkit::fleet_world::{NS, at, free_port};
use serde_json::{Value, json};

use super::client::{self, Answer};
use super::suite::{Backends, GATEWAY, defaulted_parent_ref, golden_route, same_namespace_gateway};
use super::world::{Expect, GatewayWorld, gateway_api_at, http_route, until_answered};
use crate::support::backend::Backend;
use crate::support::{CONVERGE, envoy, eventually};

/// A request (path, headers) and what it should be answered with.
type PathCase<'a> = (&'a str, &'a [(&'a str, &'a str)], Expect<'a>);

/// What the suite asks of each route before sending traffic: accepted by [`GATEWAY`] with its
/// parentRef written out (`GatewayAndHTTPRoutesMustBeAccepted`), and `ResolvedRefs` True
/// (`HTTPRouteMustHaveResolvedRefsConditionsTrue`).
async fn until_accepted_and_resolved(world: &GatewayWorld, route: &str) {
    world.until_accepted_as_the_suite_checks(route, GATEWAY).await;
    world
        .until_route_condition(
            &gateway_api_at("httproutes", route),
            (GATEWAY, None),
            ("ResolvedRefs", "True", "ResolvedRefs"),
        )
        .await;
}

/// Starts `run` with `backends` and the Gateway and `route`, then a proxy for the Gateway;
/// each case is then awaited on `port` in turn, with `Host: example.com`.
async fn serve_and_check(
    backends: &[(&str, &Backend)],
    port: u16,
    route: (String, Value),
    cases: &[PathCase<'_>],
) -> GatewayWorld {
    let route_name = route.1["metadata"]["name"].as_str().expect("a named route").to_owned();
    let world = GatewayWorld::start(backends, &[same_namespace_gateway(port), route]).await;
    let proxy = world.proxy(GATEWAY).await;
    until_accepted_and_resolved(&world, &route_name).await;
    for (path, headers, expected) in cases {
        until_answered(port, "example.com", path, headers, *expected).await;
    }
    drop(proxy);
    world
}

/// `HTTPRouteExactPathMatching`: `Exact` paths match the whole path, case-sensitively, a
/// trailing slash included: `/one` and `/two` are served, `/`, `/one/example`, `/two/` and
/// `/Two` are 404. Route: golden case `httproute-exact-path-matching`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_exact_path_matching() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let port = free_port().port();
    let route = golden_route("httproute-exact-path-matching", "exact-matching");
    let not_found = Expect::Status(404);
    let cases: [PathCase; 6] = [
        ("/one", &[], Expect::By("infra-backend-v1")),
        ("/two", &[], Expect::By("infra-backend-v2")),
        ("/", &[], not_found),
        ("/one/example", &[], not_found),
        ("/two/", &[], not_found),
        ("/Two", &[], not_found),
    ];
    serve_and_check(&backends.services(), port, route, &cases).await.stop().await;
}

/// `HTTPRouteHeaderMatching`: five rules matching headers only: a match's headers must all be
/// present (AND), a rule's matches are alternatives (OR), the match with more headers wins
/// over one it includes, and header names match case-insensitively (the route's `version`
/// matches the request's `Version`). Route: golden case `httproute-header-matching`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_header_matching() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let port = free_port().port();
    let route = golden_route("httproute-header-matching", "header-matching");
    let (v1, v2, not_found) =
        (Expect::By("infra-backend-v1"), Expect::By("infra-backend-v2"), Expect::Status(404));
    let cases: [PathCase; 11] = [
        ("/", &[("Version", "one")], v1),
        ("/", &[("Version", "two")], v2),
        ("/", &[("Version", "two"), ("Color", "orange")], v1),
        ("/", &[("Version", "two"), ("Color", "blue")], v2),
        ("/", &[("Color", "orange")], not_found),
        ("/", &[("Some-Other-Header", "one")], not_found),
        ("/", &[("Color", "blue")], v1),
        ("/", &[("Color", "green")], v1),
        ("/", &[("Color", "red")], v2),
        ("/", &[("Color", "yellow")], v2),
        ("/", &[("Color", "purple")], not_found),
    ];
    serve_and_check(&backends.services(), port, route, &cases).await.stop().await;
}

/// `HTTPRoutePathMatchOrder`: `Exact` beats `PathPrefix`, a longer prefix beats a shorter one
/// whatever the rules' order, and prefixes match whole path segments (`/match/prefix/one` is
/// a prefix of `/match/prefix/one/any`). Route: golden case `httproute-path-match-order`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_path_match_order() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let port = free_port().port();
    let route = golden_route("httproute-path-match-order", "path-matching-order");
    let (v1, v2, v3) =
        (Expect::By("infra-backend-v1"), Expect::By("infra-backend-v2"), Expect::By("infra-backend-v3"));
    let cases: [PathCase; 6] = [
        ("/match/exact/one", &[], v3),
        ("/match/exact", &[], v2),
        ("/match", &[], v1),
        ("/match/prefix/one/any", &[], v2),
        ("/match/prefix/any", &[], v1),
        ("/match/any", &[], v3),
    ];
    serve_and_check(&backends.services(), port, route, &cases).await.stop().await;
}

/// `HTTPRouteRedirectHostAndStatus`: a `RequestRedirect` filter answers in place of the
/// backends even when the rule has backendRefs: 302 by default, or its `statusCode`, with a
/// `Location` naming its `hostname` and keeping the request's path. Requests do not follow
/// redirects. Route: golden case `httproute-redirect-host-and-status`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_redirect_host_and_status() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let port = free_port().port();
    let route = golden_route("httproute-redirect-host-and-status", "redirect-host-and-status");
    let world = GatewayWorld::start(&backends.services(), &[same_namespace_gateway(port), route]).await;
    let proxy = world.proxy(GATEWAY).await;
    until_accepted_and_resolved(&world, "redirect-host-and-status").await;

    for (path, status) in [("/hostname-redirect", 302), ("/host-and-status", 301)] {
        let what = format!("GET example.com{path} redirected ({status}) to host example.org, same path");
        eventually(&what, CONVERGE, || async {
            let Answer { status: answered, location, .. } = client::get(port, "example.com", path).await?;
            let location = location.ok_or_else(|| format!("answered {answered} without a Location"))?;
            let (host, location_path) = host_and_path(&location).ok_or_else(|| {
                format!("answered {answered} with a Location not an absolute URL: {location}")
            })?;
            if (answered, host, location_path) == (status, "example.org", path) {
                Ok(())
            } else {
                Err(format!("answered {answered} with Location {location}"))
            }
        })
        .await;
    }
    drop(proxy);
    world.stop().await;
}

/// `HTTPRouteServiceTypes`: backends resolved from a Service's EndpointSlices whatever the
/// Service's type: a headless Service (`clusterIP: None`) with a selector, and selectorless
/// Services (headless or not) whose endpoints are made by hand. Each is reached by an `Exact`
/// path and answers 200 from the backend.
///
/// Where the suite fills in `Endpoints` objects for `manual-endpoints` and
/// `headless-manual-endpoints`, a cluster's EndpointSlice mirroring controller makes
/// EndpointSlices of them; with no controllers in the in-memory API server, this test puts
/// the EndpointSlices those controllers (and, for `headless`, the EndpointSlice controller)
/// would make. The Services' `targetPort` is the backend's port (the suite's 3000), the
/// slices' port name the Services' (`first-port`).
///
/// The route is written here, beside the Services of other types it routes to (and which our
/// backends' Services are not): there is no golden case for this test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_service_types() {
    if !envoy::available() {
        return;
    }
    const SERVICES: [(&str, ServiceType); 5] = [
        ("manual-endpoints", ServiceType::Selectorless),
        ("manual-endpointslices", ServiceType::Selectorless),
        ("headless", ServiceType::HeadlessWithSelector),
        ("headless-manual-endpoints", ServiceType::HeadlessSelectorless),
        ("headless-manual-endpointslices", ServiceType::HeadlessSelectorless),
    ];
    let backend = Backend::start("infra-backend-v1").await;
    let port = free_port().port();
    let rules: Vec<Value> = SERVICES
        .iter()
        .map(|(name, _)| {
            json!({"matches": [{"path": {"type": "Exact", "value": format!("/{name}")}}],
                   "backendRefs": [{"name": name, "port": 8080}]})
        })
        .collect();
    let mut objects = vec![
        same_namespace_gateway(port),
        http_route("service-types", json!({"parentRefs": [defaulted_parent_ref(GATEWAY)], "rules": rules})),
    ];
    for (name, service_type) in SERVICES {
        objects.push(service(name, service_type, &backend));
        objects.push(endpoint_slice(name, service_type, &backend));
    }
    let world = GatewayWorld::start(&[("infra-backend-v1", &backend)], &objects).await;
    let proxy = world.proxy(GATEWAY).await;
    until_accepted_and_resolved(&world, "service-types").await;
    for (name, _) in SERVICES {
        until_answered(port, "example.com", &format!("/{name}"), &[], Expect::By("infra-backend-v1")).await;
    }
    drop(proxy);
    world.stop().await;
}

/// The kinds of Service `HTTPRouteServiceTypes` routes to.
#[derive(Clone, Copy)]
enum ServiceType {
    /// A ClusterIP Service without a selector: its endpoints are made by hand.
    Selectorless,
    /// `clusterIP: None`, selecting the backend's pods.
    HeadlessWithSelector,
    /// `clusterIP: None` without a selector.
    HeadlessSelectorless,
}

/// Service `name` of the suite's shape: port 8080 (`first-port`) to the backend's port.
fn service(name: &str, service_type: ServiceType, backend: &Backend) -> (String, Value) {
    let mut spec = json!({"ports": [{"name": "first-port", "protocol": "TCP", "port": 8080,
                                     "targetPort": backend.address.port()}]});
    match service_type {
        ServiceType::Selectorless => {}
        ServiceType::HeadlessWithSelector => {
            spec["clusterIP"] = json!("None");
            spec["selector"] = json!({"app": "infra-backend-v1"});
        }
        ServiceType::HeadlessSelectorless => spec["clusterIP"] = json!("None"),
    }
    (
        at("v1", "services", name),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS},
               "spec": spec}),
    )
}

/// The EndpointSlice of Service `name` with the backend's address, labelled as whoever would
/// make it in a cluster labels it: by hand for `…-endpointslices`, the mirroring controller
/// for `…-endpoints` (the suite's `Endpoints` objects), the EndpointSlice controller for a
/// Service with a selector.
fn endpoint_slice(name: &str, service_type: ServiceType, backend: &Backend) -> (String, Value) {
    let slice_name = format!("{name}-slice");
    let mut labels = json!({"kubernetes.io/service-name": name});
    let managed_by = match service_type {
        ServiceType::HeadlessWithSelector => Some("endpointslice-controller.k8s.io"),
        _ if name.ends_with("-endpoints") => Some("endpointslicemirroring-controller.k8s.io"),
        _ => None,
    };
    if let Some(manager) = managed_by {
        labels["endpointslice.kubernetes.io/managed-by"] = json!(manager);
    }
    (
        at("discovery.k8s.io/v1", "endpointslices", &slice_name),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": slice_name, "namespace": NS, "labels": labels},
               "addressType": "IPv4",
               "ports": [{"name": "first-port", "port": backend.address.port(), "protocol": "TCP"}],
               "endpoints": [{"addresses": [backend.address.ip().to_string()],
                              "conditions": {"ready": true}}]}),
    )
}

/// The host (without a port) and path of an absolute `http(s)://` URL.
fn host_and_path(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"))?;
    let (authority, path) = rest.find('/').map_or((rest, "/"), |slash| rest.split_at(slash));
    let host = authority.rsplit_once(':').map_or(authority, |(host, _port)| host);
    Some((host, path))
}

#[test]
fn host_and_path_of_locations() {
    assert_eq!(host_and_path("http://example.org:8080/a/b"), Some(("example.org", "/a/b")));
    assert_eq!(host_and_path("https://example.org/x"), Some(("example.org", "/x")));
    assert_eq!(host_and_path("http://example.org"), Some(("example.org", "/")));
    assert_eq!(host_and_path("/relative"), None);
}
