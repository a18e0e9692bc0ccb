//! A listener conflict reported while the Gateway's other listeners serve: two HTTP listeners
//! on one port with one hostname are both `Conflicted` (`HostnameConflict`) and not
//! `Programmed`, and not bound; a route on the Gateway's third listener, on another port, is
//! served by the real Envoy.

use envoy_operator_testkit::fleet_world::free_port;
use serde_json::json;

use super::world::{Expect, GatewayWorld, gateway, gateway_api_at, http_route, until_answered};
use crate::support::backend::Backend;
use crate::support::envoy;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicted_listeners_are_reported_and_the_others_served() {
    if !envoy::available() {
        return;
    }
    let backend = Backend::start("backend-a").await;
    let (shared_port, other_port) = (free_port().port(), free_port().port());
    let http = |name: &str, port: u16, hostname: Option<&str>| {
        let mut listener = json!({"name": name, "port": port, "protocol": "HTTP"});
        if let Some(hostname) = hostname {
            listener["hostname"] = json!(hostname);
        }
        listener
    };
    let world = GatewayWorld::start(
        &[("a", &backend)],
        &[
            gateway(
                "public",
                json!([
                    http("first", shared_port, Some("shop.example.com")),
                    http("second", shared_port, Some("shop.example.com")),
                    http("other", other_port, None)
                ]),
            ),
            http_route(
                "store",
                json!({"parentRefs": [{"name": "public", "sectionName": "other"}],
                       "rules": [{"backendRefs": [{"name": "a", "port": 80}]}]}),
            ),
        ],
    )
    .await;
    let proxy = world.proxy("public").await;

    until_answered(other_port, "shop.example.com", "/", &[], Expect::By(&backend.name)).await;
    for conflicted in ["first", "second"] {
        world
            .until_listener_condition("public", conflicted, ("Conflicted", "True", "HostnameConflict"))
            .await;
        world.until_listener_condition("public", conflicted, ("Programmed", "False", "Invalid")).await;
    }
    world.until_listener_condition("public", "other", ("Conflicted", "False", "NoConflicts")).await;
    world.until_listener_condition("public", "other", ("Programmed", "True", "Programmed")).await;
    world
        .until_route_condition(
            &gateway_api_at("httproutes", "store"),
            ("public", Some("other")),
            ("Accepted", "True", "Accepted"),
        )
        .await;
    let gateway = world.api.get(&gateway_api_at("gateways", "public")).expect("the Gateway");
    let accepted = super::world::condition(&gateway["status"]["conditions"], "Accepted");
    assert_eq!(accepted, Some(("True".to_owned(), "Accepted".to_owned())), "one valid listener: {gateway}");
    // Neither conflicting listener is bound: the proxy has no listener on their port.
    let bound = proxy.bound_ports().await;
    assert!(bound.contains(&u64::from(other_port)), "{bound:?}");
    assert!(!bound.contains(&u64::from(shared_port)), "the conflicted port is bound: {bound:?}");
    world.stop().await;
}
