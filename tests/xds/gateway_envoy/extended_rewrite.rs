//! Extended features of the upstream conformance suite (`sigs.k8s.io/gateway-api` v1.3,
//! `conformance/tests`, profile `GATEWAY-HTTP`) that the suite checks on the backend's side, as
//! its echo server reports the request it received: `URLRewrite` of the Host and of the path
//! (with a `RequestHeaderModifier` beside it), and the request and backend timeouts of a rule. Each test is
//! named after the one it reproduces, with its route: as in `conformance`, the golden input of
//! the translation (`crates/core/tests/testdata/golden/gateway/<case>.in.yaml`, through
//! [`golden_route`](super::suite::golden_route), which adapts namespaces and the backend port
//! 8080 to ours, 80), each test naming its case.
//!
//! Our backends play the echo server: asked with testkit's `ECHO_HEADER`, one answers with what
//! it received (path, Host, headers), and a `delay` query parameter (`?delay=1s`, as the
//! suite's) makes it answer late.

use envoy_operator_testkit::backend::{ECHO_HEADER, Echo};
use envoy_operator_testkit::fleet_world::free_port;
use serde_json::Value;

use super::client::{self, Answer};
use super::extended::serving;
use super::suite::{Backends, golden_route};
use crate::support::{CONVERGE, envoy, eventually};

/// The headers the suite expects a backend to see through the `RequestHeaderModifier` its
/// routes put beside a rewrite (set one header, add two, remove one; values joined with `,`, as
/// the suite joins them), and the one it must not see.
const MODIFIED_HEADERS: [(&str, &str); 3] = [
    ("X-Header-Add", "header-val-1"),
    ("X-Header-Add-Append", "append-val-1,header-val-2"),
    ("X-Header-Set", "set-overwrites-values"),
];
const REMOVED_HEADER: &str = "X-Header-Remove";

/// What the backend should have received, as the suite's `ExpectedRequest` says it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Seen<'a> {
    pub(super) backend: &'a str,
    pub(super) path: &'a str,
    /// The Host, when the suite names one.
    pub(super) host: Option<&'a str>,
    pub(super) headers: &'a [(&'a str, &'a str)],
    pub(super) absent: &'a [&'a str],
}

impl Seen<'_> {
    /// Where `echo` differs from what should have been seen, if anywhere.
    fn mismatch(&self, echo: &Echo) -> Option<String> {
        let mut differences = Vec::new();
        if echo.name != self.backend {
            differences.push(format!("backend {:?}", echo.name));
        }
        if echo.path != self.path {
            differences.push(format!("path {:?}", echo.path));
        }
        if self.host.is_some_and(|host| echo.host.as_deref() != Some(host)) {
            differences.push(format!("Host {:?}", echo.host));
        }
        for (name, value) in self.headers {
            let seen = echo.header(name);
            if seen.as_deref() != Some(*value) {
                differences.push(format!("{name}: {seen:?}"));
            }
        }
        for name in self.absent {
            if let Some(seen) = echo.header(name) {
                differences.push(format!("{name} present: {seen:?}"));
            }
        }
        (!differences.is_empty()).then(|| differences.join(", "))
    }
}

/// What a backend saw, in a line: its name, the path, the Host and the suite's headers.
fn observed(echo: &Echo) -> String {
    let headers: Vec<String> = MODIFIED_HEADERS
        .iter()
        .map(|(name, _)| *name)
        .chain([REMOVED_HEADER])
        .filter_map(|name| echo.header(name).map(|value| format!("{name}: {value}")))
        .collect();
    format!("{} saw {} (Host {:?}) {headers:?}", echo.name, echo.path, echo.host)
}

/// A GET of `path` with `Host: host` and `headers` to the proxy's `port`, asking the backend for
/// an echo: what it received, when one answered (200).
pub(super) async fn echoed(
    port: u16,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<Echo, String> {
    let mut headers = headers.to_vec();
    headers.push((ECHO_HEADER, "1"));
    let answer = client::get_with(port, host, path, &headers).await?;
    if answer.status != 200 {
        return Err(format!("answered {answer:?}"));
    }
    serde_json::from_str(&answer.body).map_err(|error| format!("no echo ({error}): {answer:?}"))
}

/// Waits until a GET of `path` with `Host: host` and `headers` reaches a backend that saw what
/// `expected` says; returns what it saw.
pub(super) async fn until_seen(
    port: u16,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
    expected: Seen<'_>,
) -> Echo {
    let what = format!("GET {host}{path} {headers:?} received as {expected:?}");
    eventually(&what, CONVERGE, || async {
        let echo = echoed(port, host, path, headers).await?;
        match expected.mismatch(&echo) {
            None => Ok(echo),
            Some(mismatch) => Err(format!("received with {mismatch}: {echo:?}")),
        }
    })
    .await
}

/// `HTTPRouteRewriteHost` (feature `HTTPRouteHostRewrite`): a route for `rewrite.example` whose
/// rules rewrite the Host to `one.example.org` (under `/one`), `example.org` (every other
/// path) and `test.example.org` beside the suite's header modifier; the path is kept. Route:
/// golden case `httproute-rewrite-host`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_rewrite_host() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let port = free_port().port();
    let route = golden_route("httproute-rewrite-host", "rewrite-host");
    let (world, proxy) = serving(&backends.services(), port, route).await;

    let seen = |backend, path, host| Seen { backend, path, host: Some(host), headers: &[], absent: &[] };
    let sent_headers = [("X-Header-Remove", "remove-val"), ("X-Header-Add-Append", "append-val-1")];
    let cases = [
        ("/one", &[][..], seen("infra-backend-v1", "/one", "one.example.org")),
        ("/two", &[], seen("infra-backend-v2", "/two", "example.org")),
        (
            "/rewrite-host-and-modify-headers",
            &sent_headers,
            Seen {
                headers: &MODIFIED_HEADERS,
                absent: &[REMOVED_HEADER],
                ..seen("infra-backend-v2", "/rewrite-host-and-modify-headers", "test.example.org")
            },
        ),
    ];
    for (path, headers, expected) in cases {
        let echo = until_seen(port, "rewrite.example", path, headers, expected).await;
        println!("GET {path}: {}", observed(&echo));
    }
    drop(proxy);
    world.stop().await;
}

/// `HTTPRouteRewritePath` (feature `HTTPRoutePathRewrite`): `ReplacePrefixMatch` keeps the rest
/// of the path after the matched prefix (`/` as the replacement strips the prefix, and leaves
/// `/` when nothing follows it), `ReplaceFullPath` replaces all of it; both beside the suite's
/// header modifier. The Host is the Gateway's address, as the suite's client sends it. Route:
/// golden case `httproute-rewrite-path`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_rewrite_path() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let port = free_port().port();
    let v1 = "infra-backend-v1";
    let route = golden_route("httproute-rewrite-path", "rewrite-path");
    let (world, proxy) = serving(&backends.services(), port, route).await;

    let seen = |path| Seen { backend: v1, path, host: None, headers: &[], absent: &[] };
    let modified = |path| Seen { headers: &MODIFIED_HEADERS, absent: &[REMOVED_HEADER], ..seen(path) };
    let sent_headers = [
        ("X-Header-Remove", "remove-val"),
        ("X-Header-Add-Append", "append-val-1"),
        ("X-Header-Set", "set-val"),
    ];
    let cases = [
        ("/prefix/one/two", &[][..], seen("/one/two")),
        ("/strip-prefix/three", &[], seen("/three")),
        ("/strip-prefix", &[], seen("/")),
        ("/full/one/two", &[], seen("/one")),
        ("/full/rewrite-path-and-modify-headers/test", &sent_headers, modified("/test")),
        ("/prefix/rewrite-path-and-modify-headers/one", &sent_headers, modified("/prefix/one")),
    ];
    let gateway_address = format!("127.0.0.1:{port}");
    for (path, headers, expected) in cases {
        let echo = until_seen(port, &gateway_address, path, headers, expected).await;
        println!("GET {path}: {}", observed(&echo));
    }
    drop(proxy);
    world.stop().await;
}

/// Waits until a GET of `path` (Host: the Gateway's address) is answered with `status`;
/// returns the answer.
async fn until_status(port: u16, path: &str, status: u16) -> Answer {
    let what = format!("GET {path} answered {status}");
    eventually(&what, CONVERGE, || async {
        let answer = client::get(port, &format!("127.0.0.1:{port}"), path).await?;
        if answer.status == status { Ok(answer) } else { Err(format!("answered {answer:?}")) }
    })
    .await
}

/// Each forwarding route of the route configurations in Envoy's
/// `/config_dump?resource=dynamic_route_configs` (its `match`, as JSON text) with its
/// `timeout`, if set.
fn route_timeouts(config_dump: &Value) -> Vec<(String, Option<String>)> {
    let route_configs = config_dump["configs"].as_array().into_iter().flatten();
    let hosts =
        route_configs.flat_map(|r| r["route_config"]["virtual_hosts"].as_array().into_iter().flatten());
    let routes = hosts.flat_map(|h| h["routes"].as_array().into_iter().flatten());
    routes
        .filter(|route| route.get("route").is_some())
        .map(|route| (route["match"].to_string(), route["route"]["timeout"].as_str().map(str::to_owned)))
        .collect()
}

/// `HTTPRouteTimeoutRequest` (feature `HTTPRouteRequestTimeout`; upstream file
/// `httproute-timeout-request.go`): a rule with `timeouts.request` 500ms answers a backend that
/// answers at once (200) and one that answers after 1s with 504 from the proxy; a rule with
/// `0s` (no timeout) waits for the latter (200), and Envoy's route has timeout `0s` (off) rather
/// than none (its default, 15s). Ours answers the 504 itself, body `upstream request timeout`.
/// (Earlier versions of the suite have the first two cases only; later ones add the `0s` rule
/// and its case, reproduced here too. Its backend is `infra-backend-v1`, which delays on
/// `?delay=`.) Route: golden case `httproute-timeout-request`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_timeout_request() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let port = free_port().port();
    let route = golden_route("httproute-timeout-request", "request-timeout");
    let (world, proxy) = serving(&backends.services(), port, route).await;

    let cases = [
        ("/request-timeout", 200),
        ("/request-timeout?delay=1s", 504),
        ("/disable-request-timeout?delay=1s", 200),
    ];
    for (path, status) in cases {
        let answer = until_status(port, path, status).await;
        if status == 200 {
            assert_eq!(answer.body, "infra-backend-v1", "GET {path}");
        }
        println!("GET {path}: {} {:?}", answer.status, answer.body);
    }
    // `0s` is no timeout at all, not Envoy's default of 15s (which a 1s delay would not reach).
    let timeouts = route_timeouts(&proxy.admin_json("/config_dump?resource=dynamic_route_configs").await);
    println!("Envoy's routes' timeouts: {timeouts:?}");
    for (path, timeout) in [("/request-timeout", "0.500s"), ("/disable-request-timeout", "0s")] {
        let quoted = format!("\"{path}\"");
        let found: Vec<_> = timeouts.iter().filter(|(route, _)| route.contains(&quoted)).collect();
        assert!(!found.is_empty(), "no route for {path}: {timeouts:?}");
        assert!(found.iter().all(|(_, t)| t.as_deref() == Some(timeout)), "{path}: {found:?}");
    }
    drop(proxy);
    world.stop().await;
}

/// `HTTPRouteTimeoutBackendRequest` (feature `HTTPRouteBackendTimeout`; upstream file
/// `httproute-timeout-backend-request.go`): a rule with `timeouts.backendRequest` 500ms answers
/// a backend that answers at once (200) and one that answers after 1s with 504 from the proxy
/// (the suite's two cases); a rule with `0s` waits for the latter (200). Envoy bounds the
/// attempt (`retry_policy.per_try_timeout`, no retries), and with no `request` timeout the
/// route's own bound is the backend's (`0s`: off, not Envoy's default of 15s). Route: golden
/// case `httproute-timeout-backend-request`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_timeout_backend_request() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let port = free_port().port();
    let route = golden_route("httproute-timeout-backend-request", "backend-request-timeout");
    let (world, proxy) = serving(&backends.services(), port, route).await;

    let cases = [
        ("/backend-timeout", 200),
        ("/backend-timeout?delay=1s", 504),
        ("/disabled-backend-timeout?delay=1s", 200),
    ];
    for (path, status) in cases {
        let answer = until_status(port, path, status).await;
        if status == 200 {
            assert_eq!(answer.body, "infra-backend-v1", "GET {path}");
        }
        println!("GET {path}: {} {:?}", answer.status, answer.body);
    }
    let dump = proxy.admin_json("/config_dump?resource=dynamic_route_configs").await;
    let timeouts = route_timeouts(&dump);
    println!("Envoy's routes' timeouts: {timeouts:?}");
    for (path, timeout) in [("/backend-timeout", "0.500s"), ("/disabled-backend-timeout", "0s")] {
        let quoted = format!("\"{path}\"");
        let found: Vec<_> = timeouts.iter().filter(|(route, _)| route.contains(&quoted)).collect();
        assert!(!found.is_empty(), "no route for {path}: {timeouts:?}");
        assert!(found.iter().all(|(_, t)| t.as_deref() == Some(timeout)), "{path}: {found:?}");
    }
    let dumped = dump.to_string();
    assert!(dumped.contains("\"per_try_timeout\":\"0.500s\""), "the attempt's bound: {dumped}");
    drop(proxy);
    world.stop().await;
}
