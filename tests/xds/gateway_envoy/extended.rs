//! Extended features of the upstream conformance suite (`sigs.k8s.io/gateway-api` v1.3,
//! `conformance/tests`, profile `GATEWAY-HTTP`), each test named after the one it reproduces,
//! with its route and requests: method and query parameter matching, and redirects of path,
//! scheme and port, read from the `Location` the proxy sends without following it. As in
//! `conformance`, the routes are the golden inputs of the translation
//! (`crates/core/tests/testdata/golden/gateway/<case>.in.yaml`, through
//! [`golden_route`](super::suite::golden_route)), each test naming its case; but for
//! `http_route_redirect_port_and_scheme`'s, said in its doc. The tests the suite checks on the backend's side (rewrites, request
//! timeouts) are in `extended_rewrite`.
//!
//! Each request names the Host `127.0.0.1:<listener port>`, as the suite's client names the
//! Gateway's address.

use envoy_operator_testkit::fleet_world::free_port;
use serde_json::{Value, json};

use super::client::{self, Answer};
use super::suite::{Backends, GATEWAY, defaulted_parent_ref, golden_route, same_namespace_gateway};
use super::world::{GatewayWorld, Proxy, http_route};
use crate::support::backend::Backend;
use crate::support::{CONVERGE, envoy, eventually};

/// A request: method, path (with its query) and extra headers.
#[derive(Clone, Copy, Debug)]
struct Request<'a> {
    method: &'a str,
    path: &'a str,
    headers: &'a [(&'a str, &'a str)],
}

fn request<'a>(method: &'a str, path: &'a str, headers: &'a [(&'a str, &'a str)]) -> Request<'a> {
    Request { method, path, headers }
}

/// A redirect's `Location` split as the suite's Go client splits it (`url.Parse`): the port is
/// `None` when the URL names none.
#[derive(Debug, PartialEq, Eq)]
struct Location {
    scheme: String,
    host: String,
    port: Option<u16>,
    path: String,
}

impl Location {
    fn parse(location: &str) -> Result<Location, String> {
        let (scheme, rest) =
            location.split_once("://").ok_or_else(|| format!("no scheme in {location:?}"))?;
        let (authority, path) = rest.find('/').map_or((rest, "/"), |slash| rest.split_at(slash));
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => {
                (host, Some(port.parse().map_err(|_| format!("port {port:?} in {location:?}"))?))
            }
            None => (authority, None),
        };
        Ok(Location { scheme: scheme.to_owned(), host: host.to_owned(), port, path: path.to_owned() })
    }
}

/// One backend, for tests whose routes only redirect: the world needs one for its own fleet.
async fn lone_backend() -> Backend {
    Backend::start("infra-backend-v1").await
}

/// Route `name` on [`GATEWAY`] (parentRef defaulted as a real API server stores it) with `rules`.
fn route_on_gateway(name: &str, rules: Value) -> (String, Value) {
    http_route(
        name,
        json!({"parentRefs": [defaulted_parent_ref(GATEWAY)],
               "rules": rules}),
    )
}

/// A world whose Gateway [`GATEWAY`] listens on `port` with `route` on it, once the route is
/// accepted as the suite checks, and the Gateway's proxy.
pub(super) async fn serving(
    services: &[(&str, &Backend)],
    port: u16,
    route: (String, Value),
) -> (GatewayWorld, Proxy) {
    let name = route.1["metadata"]["name"].as_str().unwrap_or_default().to_owned();
    let world = GatewayWorld::start(services, &[same_namespace_gateway(port), route]).await;
    world.until_accepted_as_the_suite_checks(&name, GATEWAY).await;
    let proxy = world.proxy(GATEWAY).await;
    (world, proxy)
}

fn prefix(value: &str) -> Value {
    json!({"type": "PathPrefix", "value": value})
}

/// `request` sent to the proxy's `port` on loopback with `Host: 127.0.0.1:<port>`, as the
/// suite's client sends it to the Gateway's address, on its own connection.
async fn send(port: u16, request: Request<'_>) -> Result<Answer, String> {
    client::request(port, request.method, &format!("127.0.0.1:{port}"), request.path, request.headers).await
}

/// What a request should be answered with.
#[derive(Clone, Copy, Debug)]
enum Expect<'a> {
    /// 200, from this backend.
    By(&'a str),
    /// This status from the proxy itself.
    Status(u16),
}

/// Waits until `request` is answered as `expected`.
async fn until_answered(port: u16, request: Request<'_>, expected: Expect<'_>) {
    let what = format!("{request:?} answered {expected:?}");
    eventually(&what, CONVERGE, || async {
        let reply = send(port, request).await?;
        let met = match expected {
            Expect::By(backend) => reply.status == 200 && reply.body == backend,
            Expect::Status(status) => reply.status == status,
        };
        if met { Ok(()) } else { Err(format!("answered {reply:?}")) }
    })
    .await;
}

/// The port a redirect's `Location` may name.
#[derive(Clone, Copy, Debug)]
enum PortRule {
    /// Exactly this one (the filter's `port`).
    Exactly(u16),
    /// The scheme's well-known port (`http`: 80, `https`: 443), printed or omitted: what the
    /// suite's `CompareRoundTrip` allows when a test names no port.
    WellKnown,
    /// The listener's, kept: what `HTTPRouteRedirectPortAndScheme` requires of a redirect
    /// naming neither scheme nor port on its listener on 8080.
    Listener,
    /// The listener's or none: what the suite's check allows on its own listener (on 80, the
    /// `http` scheme's well-known port) when a test names no port; ours is on a free port.
    ListenerOrNone,
}

/// What a redirect should carry, as the suite's `RedirectRequest` checks it: the host only when
/// named, the scheme the request's (`http`) unless named, the path the request's unless named.
#[derive(Clone, Copy, Debug)]
struct Redirect<'a> {
    status: u16,
    scheme: &'a str,
    host: Option<&'a str>,
    port: PortRule,
    path: Option<&'a str>,
}

impl Redirect<'_> {
    /// A 302 naming nothing else.
    const FOUND: Redirect<'static> =
        Redirect { status: 302, scheme: "http", host: None, port: PortRule::ListenerOrNone, path: None };

    fn accepts(&self, status: u16, location: &Location, (listener_port, request_path): (u16, &str)) -> bool {
        let port_met = match self.port {
            PortRule::Exactly(port) => location.port == Some(port),
            PortRule::WellKnown => match self.scheme {
                "http" => matches!(location.port, None | Some(80)),
                "https" => matches!(location.port, None | Some(443)),
                _ => location.port.is_none(),
            },
            PortRule::Listener => location.port == Some(listener_port),
            PortRule::ListenerOrNone => location.port.is_none_or(|port| port == listener_port),
        };
        status == self.status
            && location.scheme == self.scheme
            && self.host.is_none_or(|host| location.host == host)
            && port_met
            && location.path == self.path.unwrap_or(request_path)
    }
}

/// Waits until a GET of `path` is answered as `expected` says (without following the
/// redirect), then returns the `Location` it carried.
async fn until_redirected(port: u16, path: &str, expected: Redirect<'_>) -> String {
    let what = format!("GET {path} redirected as {expected:?}");
    eventually(&what, CONVERGE, || async {
        let reply = send(port, request("GET", path, &[])).await?;
        let location = reply.location.clone().ok_or_else(|| format!("no Location: {reply:?}"))?;
        if expected.accepts(reply.status, &Location::parse(&location)?, (port, path)) {
            Ok(location)
        } else {
            Err(format!("answered {} with Location {location}", reply.status))
        }
    })
    .await
}

/// `HTTPRouteMethodMatching` (feature `HTTPRouteMethodMatching`): rules matching the method,
/// alone and ANDed with path and header matches, OR'd matches, and precedence (a path match
/// beats a header match). HEAD `/` matches no rule: 404. Route: golden case
/// `httproute-method-matching`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_method_matching() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let port = free_port().port();
    let route = golden_route("httproute-method-matching", "method-matching");
    let (world, proxy) = serving(&backends.services(), port, route).await;

    let cases = [
        (request("POST", "/", &[]), Expect::By("infra-backend-v1")),
        (request("GET", "/", &[]), Expect::By("infra-backend-v2")),
        (request("HEAD", "/", &[]), Expect::Status(404)),
        // With the core matches.
        (request("GET", "/path1", &[]), Expect::By("infra-backend-v1")),
        (request("PUT", "/", &[("version", "one")]), Expect::By("infra-backend-v2")),
        (request("POST", "/path2", &[("version", "two")]), Expect::By("infra-backend-v3")),
        // OR'd matches: either one is enough.
        (request("PATCH", "/path3", &[]), Expect::By("infra-backend-v1")),
        (request("DELETE", "/path4", &[("version", "three")]), Expect::By("infra-backend-v1")),
        // ANDed matches: a subset is not enough.
        (request("PUT", "/", &[]), Expect::Status(404)),
        (request("DELETE", "/path4", &[]), Expect::Status(404)),
        // Precedence.
        (request("PATCH", "/path5", &[]), Expect::By("infra-backend-v1")),
        (request("PATCH", "/", &[("version", "four")]), Expect::By("infra-backend-v2")),
    ];
    for (request, expected) in cases {
        until_answered(port, request, expected).await;
    }
    drop(proxy);
    world.stop().await;
}

/// `HTTPRouteQueryParamMatching` (feature `HTTPRouteQueryParamMatching`): exact query parameter
/// matches, case-sensitive in names and values; more matched parameters win; other parameters
/// are ignored; combinations with path and header matches, OR'd matches and precedence. Route:
/// golden case `httproute-query-param-matching`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_query_param_matching() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let port = free_port().port();
    let route = golden_route("httproute-query-param-matching", "query-param-matching");
    let (world, proxy) = serving(&backends.services(), port, route).await;

    let cases = [
        ("/?animal=whale", &[][..], Expect::By("infra-backend-v1")),
        ("/?animal=dolphin", &[], Expect::By("infra-backend-v2")),
        ("/?animal=dolphin&color=blue", &[], Expect::By("infra-backend-v3")),
        ("/?ANIMAL=Whale", &[], Expect::By("infra-backend-v3")),
        ("/?animal=whale&otherparam=irrelevant", &[], Expect::By("infra-backend-v1")),
        ("/?animal=dolphin&color=yellow", &[], Expect::By("infra-backend-v2")),
        ("/?color=blue", &[], Expect::Status(404)),
        ("/?animal=dog", &[], Expect::Status(404)),
        ("/?animal=whaledolphin", &[], Expect::Status(404)),
        ("/", &[], Expect::Status(404)),
        // With the core matches.
        ("/path1?animal=whale", &[], Expect::By("infra-backend-v1")),
        ("/?animal=whale", &[("version", "one")], Expect::By("infra-backend-v2")),
        ("/path2?animal=whale", &[("version", "two")], Expect::By("infra-backend-v3")),
        // OR'd matches: either one is enough.
        ("/path3?animal=shark", &[], Expect::By("infra-backend-v1")),
        ("/path4?animal=kraken", &[("version", "three")], Expect::By("infra-backend-v1")),
        // ANDed matches: a subset is not enough.
        ("/?animal=shark", &[], Expect::Status(404)),
        ("/path4?animal=kraken", &[], Expect::Status(404)),
        // Precedence.
        ("/path5?animal=hydra", &[], Expect::By("infra-backend-v1")),
        ("/?animal=hydra", &[("version", "four")], Expect::By("infra-backend-v3")),
    ];
    for (path, headers, expected) in cases {
        until_answered(port, request("GET", path, headers), expected).await;
    }
    drop(proxy);
    world.stop().await;
}

/// A rule for requests under `path_prefix` answered with a `RequestRedirect` of `redirect`.
fn redirect_rule(path_prefix: &str, redirect: Value) -> Value {
    json!({"matches": [{"path": prefix(path_prefix)}],
           "filters": [{"type": "RequestRedirect", "requestRedirect": redirect}]})
}

/// `HTTPRouteRedirectPath` (feature `HTTPRoutePathRedirect`): `ReplacePrefixMatch` keeps the
/// rest of the path after the matched prefix, `ReplaceFullPath` replaces all of it; with a
/// hostname and with status 301. The port is checked as the suite checks it on its listener on
/// 80: the listener's or none. (Ours keeps the listener's port, e.g.
/// `http://127.0.0.1:41807/replacement-prefix/lemon`, and with a hostname
/// `http://example.org:41807/replacement-prefix`; see `http_route_redirect_port_and_scheme_keeps_the_listener_port`.)
/// Route: golden case `httproute-redirect-path`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_redirect_path() {
    if !envoy::available() {
        return;
    }
    let backend = lone_backend().await;
    let port = free_port().port();
    let route = golden_route("httproute-redirect-path", "redirect-path");
    let (world, proxy) = serving(&[(backend.name.as_str(), &backend)], port, route).await;

    let found = Redirect::FOUND;
    let moved = Redirect { status: 301, ..found };
    let cases = [
        ("/original-prefix/lemon", Redirect { path: Some("/replacement-prefix/lemon"), ..found }),
        ("/full/path/original", Redirect { path: Some("/full-path-replacement"), ..found }),
        (
            "/path-and-host",
            Redirect { host: Some("example.org"), path: Some("/replacement-prefix"), ..found },
        ),
        ("/path-and-status", Redirect { path: Some("/replacement-prefix"), ..moved }),
        (
            "/full-path-and-host",
            Redirect { host: Some("example.org"), path: Some("/replacement-full"), ..found },
        ),
        ("/full-path-and-status", Redirect { path: Some("/replacement-full"), ..moved }),
    ];
    for (path, expected) in cases {
        until_redirected(port, path, expected).await;
    }
    drop(proxy);
    world.stop().await;
}

/// `HTTPRouteRedirectScheme` (feature `HTTPRouteSchemeRedirect`): the Location's scheme is
/// `https`; with a hostname and with status 301. Without a port in the filter the suite
/// accepts the scheme's well-known port printed or omitted; ours prints it
/// (`https://127.0.0.1:443/scheme`: the operator sets Envoy's `port_redirect` to 443 so that
/// the listener's port is not carried over, and Envoy then writes it out). Route: golden case
/// `httproute-redirect-scheme`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_redirect_scheme() {
    if !envoy::available() {
        return;
    }
    let backend = lone_backend().await;
    let port = free_port().port();
    let route = golden_route("httproute-redirect-scheme", "redirect-scheme");
    let (world, proxy) = serving(&[(backend.name.as_str(), &backend)], port, route).await;

    let https = Redirect { scheme: "https", port: PortRule::WellKnown, ..Redirect::FOUND };
    let cases = [
        ("/scheme", https),
        ("/scheme-and-host", Redirect { host: Some("example.org"), ..https }),
        ("/scheme-and-status", Redirect { status: 301, ..https }),
        ("/scheme-and-host-and-status", Redirect { host: Some("example.org"), ..https }),
    ];
    for (path, expected) in cases {
        let location = until_redirected(port, path, expected).await;
        println!("GET {path}: Location {location}");
    }
    drop(proxy);
    world.stop().await;
}

/// `HTTPRouteRedirectPort` (feature `HTTPRoutePortRedirect`): the Location names port 8083 and
/// keeps the scheme (`http`); with a hostname and with status 301. Route: golden case
/// `httproute-redirect-port`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_redirect_port() {
    if !envoy::available() {
        return;
    }
    let backend = lone_backend().await;
    let port = free_port().port();
    let route = golden_route("httproute-redirect-port", "redirect-port");
    let (world, proxy) = serving(&[(backend.name.as_str(), &backend)], port, route).await;

    let to_8083 = Redirect { port: PortRule::Exactly(8083), ..Redirect::FOUND };
    let cases = [
        ("/port", to_8083),
        ("/port-and-host", Redirect { host: Some("example.org"), ..to_8083 }),
        ("/port-and-status", Redirect { status: 301, ..to_8083 }),
        ("/port-and-host-and-status", Redirect { host: Some("example.org"), ..to_8083 }),
    ];
    for (path, expected) in cases {
        let location = until_redirected(port, path, expected).await;
        println!("GET {path}: Location {location}");
    }
    drop(proxy);
    world.stop().await;
}

/// The rules of the suite's `HTTPRouteRedirectPortAndScheme` route for its listener on 80:
/// each redirects to `example.org`, with the scheme and port its path names (`nil`: unset).
///
/// Written here rather than read from golden case `httproute-redirect-port-and-scheme`: that
/// case is pinned to what `crates/core/src/translate/gateway/tests.rs` checked of the test, its route for
/// the listener on 80 with the rule `/scheme-nil-and-port-nil` only, its route for 8080 with
/// neither `/scheme-nil-and-port-8080` nor the `https` ports 443 and 8443 asked below.
fn port_and_scheme_rules() -> Value {
    let rule = |path: &str, scheme: Option<&str>, port: Option<u16>| {
        let mut redirect = json!({"hostname": "example.org"});
        if let Some(scheme) = scheme {
            redirect["scheme"] = json!(scheme);
        }
        if let Some(port) = port {
            redirect["port"] = json!(port);
        }
        redirect_rule(path, redirect)
    };
    json!([
        rule("/scheme-nil-and-port-nil", None, None),
        rule("/scheme-nil-and-port-80", None, Some(80)),
        rule("/scheme-nil-and-port-8080", None, Some(8080)),
        rule("/scheme-https-and-port-nil", Some("https"), None),
        rule("/scheme-https-and-port-443", Some("https"), Some(443)),
        rule("/scheme-https-and-port-8443", Some("https"), Some(8443)),
    ])
}

/// `HTTPRouteRedirectPortAndScheme` (features `HTTPRoutePortRedirect`, `HTTPRouteSchemeRedirect`):
/// its HTTP listeners' cases that name a scheme or a port. A port named is printed unless it is
/// the scheme's well-known one (which may be printed); a scheme changed without a port takes the
/// new scheme's well-known port. The suite's HTTPS listener on 443 is not reproduced; its case
/// naming neither (the listener's port kept) is the test below.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_redirect_port_and_scheme() {
    if !envoy::available() {
        return;
    }
    let backend = lone_backend().await;
    let port = free_port().port();
    let route = route_on_gateway("http-route-for-listener-on-port-80", port_and_scheme_rules());
    let (world, proxy) = serving(&[(backend.name.as_str(), &backend)], port, route).await;

    let to_example = Redirect { host: Some("example.org"), ..Redirect::FOUND };
    let https = Redirect { scheme: "https", ..to_example };
    let cases = [
        ("/scheme-nil-and-port-80", Redirect { port: PortRule::WellKnown, ..to_example }),
        ("/scheme-nil-and-port-8080", Redirect { port: PortRule::Exactly(8080), ..to_example }),
        ("/scheme-https-and-port-nil", Redirect { port: PortRule::WellKnown, ..https }),
        ("/scheme-https-and-port-443", Redirect { port: PortRule::WellKnown, ..https }),
        ("/scheme-https-and-port-8443", Redirect { port: PortRule::Exactly(8443), ..https }),
    ];
    for (path, expected) in cases {
        let location = until_redirected(port, path, expected).await;
        println!("GET {path}: Location {location}");
    }
    drop(proxy);
    world.stop().await;
}

/// `HTTPRouteRedirectPortAndScheme` (feature `HTTPRoutePortRedirect`), its listener on 8080 (ours
/// on a free port): a redirect naming a hostname but neither scheme nor port keeps the
/// listener's port, `http://example.org:8080/scheme-nil-and-port-nil`.
/// (Envoy alone drops the request's port when it swaps the hostname; the translation writes
/// the listener's port into such redirects.) Route: golden case
/// `httproute-redirect-port-and-scheme`, its `http-route-for-listener-on-port-80` (on
/// [`GATEWAY`], whose listener here is on the free port; its rule is the 8080 route's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_redirect_port_and_scheme_keeps_the_listener_port() {
    if !envoy::available() {
        return;
    }
    let backend = lone_backend().await;
    let port = free_port().port();
    let route = golden_route("httproute-redirect-port-and-scheme", "http-route-for-listener-on-port-80");
    let (world, proxy) = serving(&[(backend.name.as_str(), &backend)], port, route).await;

    let expected = Redirect { host: Some("example.org"), port: PortRule::Listener, ..Redirect::FOUND };
    until_redirected(port, "/scheme-nil-and-port-nil", expected).await;
    drop(proxy);
    world.stop().await;
}
