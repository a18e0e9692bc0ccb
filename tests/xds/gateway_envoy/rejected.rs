//! An HTTPRoute the Gateway's proxy rejects although the rules accept it (a regex past the
//! program size of a proxy whose runtime keeps Envoy's default limit of 100, which the
//! operator's bootstraps raise) is found from the NACK and left out alone: its status says
//! `Accepted: False` with Envoy's words, the listener counts only the other route, and a change
//! to the other route is served meanwhile.

use serde_json::json;

use super::world::{
    Expect, GatewayWorld, gateway, gateway_api_at, http_route, listener_status, until_answered,
};
use crate::support::backend::Backend;
use crate::support::envoy;
use envoy_operator_testkit::fleet_world::free_port;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_httproute_the_proxy_rejects_is_left_out_alone_while_the_others_keep_flowing() {
    if !envoy::available() {
        return;
    }
    let (a, b) = (Backend::start("backend-a").await, Backend::start("backend-b").await);
    let port = free_port().port();
    let to = |prefix: &str, backend: &str| {
        json!({"parentRefs": [{"name": "public"}],
               "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": prefix}}],
                          "backendRefs": [{"name": backend, "port": 80}]}]})
    };
    let world = GatewayWorld::start(
        &[("a", &a), ("b", &b)],
        &[
            gateway("public", json!([{"name": "http", "port": port, "protocol": "HTTP"}])),
            http_route("store", to("/store", "a")),
        ],
    )
    .await;
    let _proxy = world
        .proxy_with("public", |bootstrap| {
            let layer = &mut bootstrap["layered_runtime"]["layers"][0]["static_layer"];
            assert!(layer.get("re2.max_program_size.error_level").is_some(), "the operator's runtime keys");
            layer["re2.max_program_size.error_level"] = json!(100);
        })
        .await;
    until_answered(port, "shop.example.com", "/store", &[], Expect::By(&a.name)).await;

    let big = "/bad/[a-z]{200}";
    let (bad_at, mut bad) = http_route(
        "bad",
        json!({"parentRefs": [{"name": "public"}],
               "rules": [{"matches": [{"path": {"type": "RegularExpression", "value": big}}],
                          "backendRefs": [{"name": "b", "port": 80}]}]}),
    );
    world.api.put(&bad_at, bad.clone());
    world.until_route_condition(&bad_at, ("public", None), ("Accepted", "False", "UnsupportedValue")).await;
    let status = world.api.get(&bad_at).expect("the route")["status"].to_string();
    assert!(status.contains("program size"), "Envoy's words in the route's status: {status}");
    world
        .until_object(
            "the listener counting only the route it serves",
            &gateway_api_at("gateways", "public"),
            |gw| listener_status(gw, "http").is_some_and(|l| l["attachedRoutes"] == 1),
        )
        .await;

    // Another route's change is served meanwhile.
    let (store_at, store) = http_route("store", to("/store", "b"));
    world.api.put(&store_at, store);
    until_answered(port, "shop.example.com", "/store", &[], Expect::By(&b.name)).await;

    // The refused route, changed, is tried again and served.
    bad["spec"]["rules"][0]["matches"][0]["path"]["value"] = json!("/bad/[a-z]+");
    world.api.put(&bad_at, bad);
    world.until_route_condition(&bad_at, ("public", None), ("Accepted", "True", "Accepted")).await;
    until_answered(port, "shop.example.com", "/bad/xyz", &[], Expect::By(&b.name)).await;
    world.stop().await;
}
