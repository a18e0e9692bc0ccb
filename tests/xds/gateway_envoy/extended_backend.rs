//! Extended features of the upstream suite on a backendRef's own: its `RequestHeaderModifier`
//! (`HTTPRouteBackendRequestHeaderModification`), checked as the suite checks it, through
//! what the backend received (testkit's echo). Routes: the golden inputs
//! `httproute-request-header-modifier-backend` and
//! `httproute-request-header-modifier-backend-weights`.

use std::collections::BTreeSet;

use envoy_operator_testkit::fleet_world::free_port;

use super::extended::serving;
use super::extended_rewrite::{Seen, echoed, until_seen};
use super::suite::{Backends, golden_route};
use crate::support::envoy;

const V1: &str = "infra-backend-v1";

/// A request's path and headers, and what the backend should see of it.
type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], Seen<'a>);

/// `HTTPRouteBackendRequestHeaderModifier` (upstream: the test function of
/// `HTTPRouteRequestHeaderModifier`, in `httproute-request-header-modifier.go`, over the
/// manifest with the filters on the backendRefs): its seven cases, each the headers the backend
/// must see (values joined with `,`) and those it must not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_backend_request_header_modifier() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let port = free_port().port();
    let route = golden_route("httproute-request-header-modifier-backend", "request-header-modifier");
    let (world, proxy) = serving(&backends.services(), port, route).await;

    let seen = |path, headers, absent| Seen { backend: V1, path, host: None, headers, absent };
    let cases: [Case; 7] = [
        (
            "/set",
            &[("Some-Other-Header", "val")],
            seen("/set", &[("Some-Other-Header", "val"), ("X-Header-Set", "set-overwrites-values")], &[]),
        ),
        (
            "/set",
            &[("Some-Other-Header", "val"), ("X-Header-Set", "some-other-value")],
            seen("/set", &[("Some-Other-Header", "val"), ("X-Header-Set", "set-overwrites-values")], &[]),
        ),
        (
            "/add",
            &[("Some-Other-Header", "val")],
            seen("/add", &[("Some-Other-Header", "val"), ("X-Header-Add", "add-appends-values")], &[]),
        ),
        (
            "/add",
            &[("Some-Other-Header", "val"), ("X-Header-Add", "some-other-value")],
            seen(
                "/add",
                &[("Some-Other-Header", "val"), ("X-Header-Add", "some-other-value,add-appends-values")],
                &[],
            ),
        ),
        ("/remove", &[("X-Header-Remove", "val")], seen("/remove", &[], &["X-Header-Remove"])),
        (
            "/multiple",
            &[
                ("X-Header-Set-2", "set-val-2"),
                ("X-Header-Add-2", "add-val-2"),
                ("X-Header-Remove-2", "remove-val-2"),
                ("Another-Header", "another-header-val"),
            ],
            seen(
                "/multiple",
                &[
                    ("X-Header-Set-1", "header-set-1"),
                    ("X-Header-Set-2", "header-set-2"),
                    ("X-Header-Add-1", "header-add-1"),
                    ("X-Header-Add-2", "add-val-2,header-add-2"),
                    ("X-Header-Add-3", "header-add-3"),
                    ("Another-Header", "another-header-val"),
                ],
                &["X-Header-Remove-1", "X-Header-Remove-2"],
            ),
        ),
        (
            "/case-insensitivity",
            &[
                ("x-header-set", "original-val-set"),
                ("x-header-add", "original-val-add"),
                ("x-header-remove", "original-val-remove"),
                ("Another-Header", "another-header-val"),
            ],
            seen(
                "/case-insensitivity",
                &[
                    ("X-Header-Set", "header-set"),
                    ("X-Header-Add", "original-val-add,header-add"),
                    ("Another-Header", "another-header-val"),
                ],
                &["x-header-remove", "X-Header-Remove"],
            ),
        ),
    ];
    let host = format!("127.0.0.1:{port}");
    for (path, headers, expected) in cases {
        until_seen(port, &host, path, headers, expected).await;
    }
    drop(proxy);
    world.stop().await;
}

/// `HTTPRouteRequestHeaderModifierBackendWeights` (feature
/// `HTTPRouteBackendRequestHeaderModification`): two backends of weight 10, each setting
/// `Backend` to its own name; of 100 requests, each reached the backend its one `Backend`
/// header names, as the suite checks. (Beyond the suite: both backends were reached, so each
/// one's filter was seen at work.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_route_request_header_modifier_backend_weights() {
    if !envoy::available() {
        return;
    }
    let backends = Backends::start().await;
    let port = free_port().port();
    let route = golden_route(
        "httproute-request-header-modifier-backend-weights",
        "request-header-modifier-backend-weights",
    );
    let (world, proxy) = serving(&backends.services(), port, route).await;

    let host = format!("127.0.0.1:{port}");
    // Served at all first, as the suite asserts before counting.
    until_seen(port, &host, "/", &[], Seen { backend: V1, path: "/", host: None, headers: &[], absent: &[] })
        .await;
    let mut reached = BTreeSet::new();
    for i in 0..100 {
        let echo = echoed(port, &host, "/", &[]).await.unwrap_or_else(|e| panic!("request {i}: {e}"));
        let named = echo.headers.get("backend").map(Vec::as_slice).unwrap_or_default();
        assert_eq!(
            named,
            std::slice::from_ref(&echo.name),
            "request {i}: one Backend header, naming the backend that received it"
        );
        reached.insert(echo.name);
    }
    assert_eq!(reached, BTreeSet::from(["infra-backend-v1".to_owned(), "infra-backend-v2".to_owned()]));
    drop(proxy);
    world.stop().await;
}
