//! Cases of the upstream conformance suite (`sigs.k8s.io/gateway-api` v1.3, `conformance/tests`,
//! profile `GATEWAY-HTTP`), each test named after the one it reproduces, objects in and traffic
//! out through a real Envoy. The routes are the golden inputs of the translation
//! (`crates/core/tests/testdata/golden/gateway/<case>.in.yaml`, read by
//! [`golden_routes`](super::suite::golden_routes), which adapts them to this world), each test
//! naming its case; the Gateways are the tests' own, on free ports of this host where the suite
//! uses 80 and 443. Two tests keep a route of their own, said in their docs. The backends answer
//! with their names (`infra-backend-v1`, …) where the suite's echo server answers with its pod's.

use std::collections::BTreeMap;

use envoy_operator_testkit::fleet_world::{NS, at_in, free_port, service_with_endpoints};
use serde_json::{Value, json};

use super::client::{self, Authority};
use super::suite::{Backends, GATEWAY, backend_ref, golden_routes};
use super::world::{
    Expect, GatewayWorld, gateway, gateway_api_at, http_route, listener_status, tls_secret, until_answered,
};
use crate::support::backend::Backend;
use crate::support::{CONVERGE, envoy, eventually};

/// A request (Host, path, headers) and what it should be answered with.
type RequestCase<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], Expect<'a>);

fn http_listener(name: &str, port: u16, hostname: &str) -> Value {
    json!({"name": name, "port": port, "protocol": "HTTP", "hostname": hostname,
           "allowedRoutes": {"namespaces": {"from": "Same"}}})
}

/// `HTTPRouteHTTPSListener`: two HTTPS listeners on one port, `https` (no hostname) and
/// `https-with-hostname` (`second-example.org`). The SNI picks the listener, then the Host
/// routes within it: SNI `unknown-example.org` with Host `second-example.org` is 404, since
/// that host's route is attached to the other listener only. Routes: golden case
/// `httproute-https-listener`, whose second route answers from `infra-backend-v2` (as later
/// versions of the suite's manifest have it; earlier ones use v1), so that which route answered
/// shows. (The suite's self-signed certificate for `*` becomes one of a CA for the names used.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_https_listener() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let authority = Authority::new();
    let certificate = authority.issue(&["example.org", "second-example.org", "unknown-example.org"]);
    let port = free_port().port();
    let tls = json!({"mode": "Terminate", "certificateRefs": [{"name": "tls-validity-checks-certificate"}]});
    let world = GatewayWorld::start(
        &backends.services(),
        &[
            tls_secret("tls-validity-checks-certificate", &certificate.chain_pem, &certificate.key_pem),
            gateway(
                "same-namespace-with-https-listener",
                json!([{"name": "https", "port": port, "protocol": "HTTPS", "tls": tls,
                        "allowedRoutes": {"namespaces": {"from": "Same"}}},
                       {"name": "https-with-hostname", "port": port, "protocol": "HTTPS",
                        "hostname": "second-example.org", "tls": tls,
                        "allowedRoutes": {"namespaces": {"from": "Same"}}}]),
            ),
        ]
        .into_iter()
        .chain(golden_routes("httproute-https-listener"))
        .collect::<Vec<_>>(),
    )
    .await;
    let proxy = world.proxy("same-namespace-with-https-listener").await;

    // (SNI, Host, expected), positive cases first: once they pass, the proxy has its listeners.
    let cases = [
        ("example.org", "example.org", Expect::By("infra-backend-v1")),
        ("second-example.org", "second-example.org", Expect::By("infra-backend-v2")),
        ("unknown-example.org", "second-example.org", Expect::Status(404)),
        ("unknown-example.org", "unknown-example.org", Expect::Status(404)),
    ];
    for (sni, host, expected) in cases {
        let what = format!("SNI {sni}, Host {host}: {expected:?} with the Secret's certificate");
        eventually(&what, CONVERGE, || async {
            let (leaf, answer) = authority.get(port, sni, host, "/").await?;
            if leaf != certificate.der {
                return Err("another certificate".to_owned());
            }
            expected.check(Ok(answer))
        })
        .await;
    }
    // `example.org` intersects listener `https` only; the other route names its listener.
    world
        .until_object(
            "both listeners with attachedRoutes 1",
            &gateway_api_at("gateways", "same-namespace-with-https-listener"),
            |gateway| {
                ["https", "https-with-hostname"].iter().all(|listener| {
                    listener_status(gateway, listener).is_some_and(|l| l["attachedRoutes"] == 1)
                })
            },
        )
        .await;
    for listener in ["https", "https-with-hostname"] {
        world
            .until_listener_condition(
                "same-namespace-with-https-listener",
                listener,
                ("Programmed", "True", "Programmed"),
            )
            .await;
    }
    drop(proxy);
    world.stop().await;
}

/// `HTTPRouteListenerHostnameMatching`: four listeners on one port (`bar.com`, `foo.bar.com`,
/// `*.bar.com`, `*.foo.com`), a route on each of the first two and one with two parentRefs to
/// the wildcards: an exact listener hostname beats a wildcard covering it, and a wildcard
/// covers several labels but not its bare parent. Routes: golden case
/// `httproute-listener-hostname-matching` (its Gateway here on a free port).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_listener_hostname_matching() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let port = free_port().port();
    let gateway_name = "httproute-listener-hostname-matching";
    let world = GatewayWorld::start(
        &backends.services(),
        &[gateway(
            gateway_name,
            json!([
                http_listener("listener-1", port, "bar.com"),
                http_listener("listener-2", port, "foo.bar.com"),
                http_listener("listener-3", port, "*.bar.com"),
                http_listener("listener-4", port, "*.foo.com")
            ]),
        )]
        .into_iter()
        .chain(golden_routes("httproute-listener-hostname-matching"))
        .collect::<Vec<_>>(),
    )
    .await;
    let proxy = world.proxy(gateway_name).await;

    let cases = [
        ("bar.com", Expect::By("infra-backend-v1")),
        ("foo.bar.com", Expect::By("infra-backend-v2")),
        ("baz.bar.com", Expect::By("infra-backend-v3")),
        ("boo.bar.com", Expect::By("infra-backend-v3")),
        ("multiple.prefixes.bar.com", Expect::By("infra-backend-v3")),
        ("multiple.prefixes.foo.com", Expect::By("infra-backend-v3")),
        ("foo.com", Expect::Status(404)),
        ("no.matching.host", Expect::Status(404)),
    ];
    for (host, expected) in cases {
        until_answered(port, host, "/", &[], expected).await;
    }
    world
        .until_object(
            "every listener with attachedRoutes 1",
            &gateway_api_at("gateways", gateway_name),
            |gateway| {
                ["listener-1", "listener-2", "listener-3", "listener-4"].iter().all(|listener| {
                    listener_status(gateway, listener).is_some_and(|l| l["attachedRoutes"] == 1)
                })
            },
        )
        .await;
    // The route with two parentRefs has a parent status for each, with its sectionName.
    let route_at = gateway_api_at("httproutes", "backend-v3");
    for section in ["listener-3", "listener-4"] {
        world
            .until_route_condition(&route_at, (gateway_name, Some(section)), ("Accepted", "True", "Accepted"))
            .await;
    }
    drop(proxy);
    world.stop().await;
}

/// `HTTPRouteMatchingAcrossRoutes`: the rules of every route whose hostnames match are ranked
/// together, so the longer prefix of the `*.com` route wins over the `/` of the route naming
/// `example.com` exactly, and the match with more headers wins at equal paths. Routes: golden
/// case `httproute-matching-across-routes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_matching_across_routes() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let port = free_port().port();
    let world = GatewayWorld::start(
        &backends.services(),
        &[gateway(
            GATEWAY,
            json!([{"name": "http", "port": port, "protocol": "HTTP",
                        "allowedRoutes": {"namespaces": {"from": "Same"}}}]),
        )]
        .into_iter()
        .chain(golden_routes("httproute-matching-across-routes"))
        .collect::<Vec<_>>(),
    )
    .await;
    let proxy = world.proxy(GATEWAY).await;

    let (v1, v2) = (Expect::By("infra-backend-v1"), Expect::By("infra-backend-v2"));
    let cases: [RequestCase; 8] = [
        ("example.com", "/", &[], v1),
        ("example.com", "/example", &[], v1),
        ("example.net", "/example", &[], v1),
        ("example.com", "/example", &[("Version", "one")], v1),
        ("example.com", "/v2", &[], v2),
        ("example.com", "/v2/example", &[], v2),
        ("example.net", "/v2", &[], v1),
        ("example.com", "/", &[("Version", "two")], v2),
    ];
    for (host, path, headers, expected) in cases {
        until_answered(port, host, path, headers, expected).await;
    }
    for route in ["matching-part1", "matching-part2"] {
        world.until_accepted_as_the_suite_checks(route, GATEWAY).await;
    }
    drop(proxy);
    world.stop().await;
}

/// `HTTPRouteHostnameIntersection` (its first Gateway): three listeners on one port, five
/// routes whose hostnames intersect them or not. A route serves only the intersection of its
/// hostnames with the listeners' (the port of a Host header ignored), a route intersecting
/// none is `NoMatchingListenerHostname`, and each listener counts the routes it serves. Routes:
/// golden case `httproute-hostname-intersection` (its Gateway here on a free port).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_hostname_intersection() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let port = free_port().port();
    let gateway_name = "httproute-hostname-intersection";
    let world = GatewayWorld::start(
        &backends.services(),
        &[gateway(
            gateway_name,
            json!([
                http_listener("listener-1", port, "very.specific.com"),
                http_listener("listener-2", port, "*.wildcard.io"),
                http_listener("listener-3", port, "*.anotherwildcard.io")
            ]),
        )]
        .into_iter()
        .chain(golden_routes("httproute-hostname-intersection"))
        .collect::<Vec<_>>(),
    )
    .await;
    let proxy = world.proxy(gateway_name).await;

    let (v1, v2, v3) =
        (Expect::By("infra-backend-v1"), Expect::By("infra-backend-v2"), Expect::By("infra-backend-v3"));
    let not_found = Expect::Status(404);
    let cases = [
        ("very.specific.com", "/s1", v1),
        ("very.specific.com:1234", "/s1", v1),
        ("foo.wildcard.io", "/s2", v2),
        ("bar.wildcard.io", "/s2", v2),
        ("foo.bar.wildcard.io", "/s2", v2),
        ("very.specific.com", "/s3", v3),
        ("foo.anotherwildcard.io", "/s4", v1),
        ("bar.anotherwildcard.io", "/s4", v1),
        ("foo.bar.anotherwildcard.io", "/s4", v1),
        ("non.matching.com", "/s1", not_found),
        ("foo.nonmatchingwildcard.io", "/s1", not_found),
        ("foo.wildcard.io", "/s1", not_found),
        ("wildcard.io", "/s2", not_found),
        ("non.matching.com", "/s2", not_found),
        ("foo.specific.com", "/s3", not_found),
        ("non.matching.com", "/s3", not_found),
        ("anotherwildcard.io", "/s4", not_found),
        ("specific.but.wrong.com", "/s5", not_found),
        ("wildcard.io", "/s5", not_found),
    ];
    for (host, path, expected) in cases {
        until_answered(port, host, path, &[], expected).await;
    }

    world
        .until_route_condition(
            &gateway_api_at("httproutes", "no-intersecting-hosts"),
            (gateway_name, None),
            ("Accepted", "False", "NoMatchingListenerHostname"),
        )
        .await;
    let gateway_at = gateway_api_at("gateways", gateway_name);
    world
        .until_object("the listeners' attachedRoutes 2, 1 and 1", &gateway_at, |gateway| {
            [("listener-1", 2), ("listener-2", 1), ("listener-3", 1)].iter().all(|(listener, count)| {
                listener_status(gateway, listener).is_some_and(|l| l["attachedRoutes"] == *count)
            })
        })
        .await;
    drop(proxy);
    world.stop().await;
}

/// `HTTPRouteWeight`: backends weighted 70, 30 and 0 share 500 requests within 5 percentage
/// points of their weights, and the one weighted 0 gets none. Like the suite, which retries a
/// distribution outside the bounds up to ten times, up to five samples are taken. Route: golden
/// case `httproute-weight`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_weight() {
    if !envoy::available() {
        return;
    }
    const REQUESTS: usize = 500;
    const TOLERANCE: f64 = 0.05;
    const SAMPLES: usize = 5;
    let backends = Backends::start().await;
    let port = free_port().port();
    let world = GatewayWorld::start(
        &backends.services(),
        &[gateway(
            GATEWAY,
            json!([{"name": "http", "port": port, "protocol": "HTTP",
                        "allowedRoutes": {"namespaces": {"from": "Same"}}}]),
        )]
        .into_iter()
        .chain(golden_routes("httproute-weight"))
        .collect::<Vec<_>>(),
    )
    .await;
    let proxy = world.proxy(GATEWAY).await;
    // Both weighted backends answer before counting starts: the route and its clusters are in.
    until_answered(port, "example.com", "/", &[], Expect::By("infra-backend-v1")).await;
    until_answered(port, "example.com", "/", &[], Expect::By("infra-backend-v2")).await;

    let mut last = BTreeMap::new();
    for _ in 0..SAMPLES {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for _ in 0..REQUESTS {
            let answer = client::get(port, "example.com", "/").await.expect("an answer");
            let backend = answer.served_by().unwrap_or_else(|| panic!("answered {answer:?}"));
            *counts.entry(backend.to_owned()).or_default() += 1;
        }
        assert_eq!(counts.get("infra-backend-v3"), None, "the backend weighted 0 got requests: {counts:?}");
        let share = |backend: &str| counts.get(backend).copied().unwrap_or_default() as f64 / REQUESTS as f64;
        if (share("infra-backend-v1") - 0.7).abs() <= TOLERANCE
            && (share("infra-backend-v2") - 0.3).abs() <= TOLERANCE
        {
            drop(proxy);
            world.stop().await;
            return;
        }
        last = counts;
    }
    panic!("{SAMPLES} samples of {REQUESTS} requests, none within {TOLERANCE} of 70/30; the last: {last:?}");
}

/// `HTTPRoutePartiallyInvalidViaInvalidReferenceGrant`: a ReferenceGrant naming one Service
/// (`to.name`) of another namespace allows the rule sending to it, not the rule sending to its
/// neighbour: the route is accepted with `ResolvedRefs` False (`RefNotPermitted`), the refused
/// rule answers 500 and the allowed one is served.
///
/// The route and grant stay written here: they are the later upstream manifest's (grant in the
/// app namespace naming `app-backend-v1`, both rules to that namespace), while golden case
/// `httproute-partially-invalid-via-invalid-reference-grant` holds another version (a grant in
/// the wrong namespace, the second rule to `infra-backend-v1`), under which `/` would be
/// answered by `infra-backend-v1` and not by the app namespace's backend this test checks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_partially_invalid_via_invalid_reference_grant() {
    if !envoy::available() {
        return;
    }
    const APP: &str = "gateway-conformance-app-backend";
    let backends = Backends::start().await;
    let (app_v1, app_v2) = (Backend::start("app-backend-v1").await, Backend::start("app-backend-v2").await);
    let port = free_port().port();
    let in_app = |name: &str| json!({"name": name, "namespace": APP, "port": 80});
    let world = GatewayWorld::start(
        &backends.services(),
        &[
            gateway(
                GATEWAY,
                json!([{"name": "http", "port": port, "protocol": "HTTP",
                        "allowedRoutes": {"namespaces": {"from": "Same"}}}]),
            ),
            http_route(
                "invalid-reference-grant",
                json!({"parentRefs": [{"name": "same-namespace"}],
                       "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/v2"}}],
                                  "backendRefs": [in_app("app-backend-v2")]},
                                 {"backendRefs": [in_app("app-backend-v1")]}]}),
            ),
            (
                at_in(APP, "gateway.networking.k8s.io/v1beta1", "referencegrants", "reference-grant"),
                json!({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
                       "metadata": {"name": "reference-grant", "namespace": APP},
                       "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": NS}],
                                "to": [{"group": "", "kind": "Service", "name": "app-backend-v1"}]}}),
            ),
        ],
    )
    .await;
    service_with_endpoints(&world.api, APP, "app-backend-v1", &app_v1);
    service_with_endpoints(&world.api, APP, "app-backend-v2", &app_v2);
    let proxy = world.proxy(GATEWAY).await;

    until_answered(port, "example.com", "/", &[], Expect::By("app-backend-v1")).await;
    until_answered(port, "example.com", "/v2", &[], Expect::Status(500)).await;
    let route_at = gateway_api_at("httproutes", "invalid-reference-grant");
    world.until_route_condition(&route_at, (GATEWAY, None), ("Accepted", "True", "Accepted")).await;
    world
        .until_route_condition(&route_at, (GATEWAY, None), ("ResolvedRefs", "False", "RefNotPermitted"))
        .await;
    drop(proxy);
    world.stop().await;
}

/// `HTTPRouteInvalidBackendRefUnknownKind`: a backendRef of a kind the operator does not know
/// leaves the route accepted with `ResolvedRefs` False (`InvalidKind`), its requests answered
/// 500.
///
/// The route stays written here: besides the suite's rule (here under `/v2`) it has a rule
/// under `/v1` to `infra-backend-v1`, whose answer shows that the proxy serves the route, so
/// that the 500 is the unknown kind's; golden case `httproute-invalid-backendref-unknown-kind`
/// has the suite's one rule only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_invalid_backend_ref_unknown_kind() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let port = free_port().port();
    let world = GatewayWorld::start(
        &backends.services(),
        &[
            gateway(
                GATEWAY,
                json!([{"name": "http", "port": port, "protocol": "HTTP",
                        "allowedRoutes": {"namespaces": {"from": "Same"}}}]),
            ),
            http_route(
                "invalid-backend-ref-unknown-kind",
                json!({"parentRefs": [{"name": "same-namespace"}],
                       "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/v1"}}],
                                  "backendRefs": [backend_ref("infra-backend-v1")]},
                                 {"matches": [{"path": {"type": "PathPrefix", "value": "/v2"}}],
                                  "backendRefs": [{"group": "unknownkind.example.com", "kind": "NonExistent",
                                                   "name": "infra-backend-v2", "port": 80}]}]}),
            ),
        ],
    )
    .await;
    let proxy = world.proxy(GATEWAY).await;

    until_answered(port, "example.com", "/v1", &[], Expect::By("infra-backend-v1")).await;
    until_answered(port, "example.com", "/v2", &[], Expect::Status(500)).await;
    let route_at = gateway_api_at("httproutes", "invalid-backend-ref-unknown-kind");
    world.until_route_condition(&route_at, (GATEWAY, None), ("Accepted", "True", "Accepted")).await;
    world.until_route_condition(&route_at, (GATEWAY, None), ("ResolvedRefs", "False", "InvalidKind")).await;
    drop(proxy);
    world.stop().await;
}
