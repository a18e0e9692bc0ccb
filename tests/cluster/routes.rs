//! The EnvoyRoute status writer against an in-memory API server, run as `controller::run` runs
//! it and alone (with the translation that judges the routes): a route's `status.parents`
//! follows its Envoys and backend Services as they come and go (the translation tells which
//! routes' outcomes changed), and nothing is written at rest.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use envoy_operator::controller::{Context, ReconcileMetrics, Settings, Stores, routes};
use envoy_operator::index::Index;
use envoy_operator::xds::publish::{self, Outputs, RouteOutcomes, inputs};
use envoy_operator_testkit::fake_api::FakeApi;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::controllers::{self, HANG_GUARD};

const NS: &str = "shop";
const CONTROLLER_NAME: &str = "example.com/envoy-operator";

fn route_path(namespace: &str, name: &str) -> String {
    format!("/apis/example.com/v1/namespaces/{namespace}/envoyroutes/{name}")
}

fn envoy_path(namespace: &str, name: &str) -> String {
    format!("/apis/example.com/v1/namespaces/{namespace}/envoys/{name}")
}

fn service_path(namespace: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/services/{name}")
}

/// A route attached to `parents`, sending everything to the Services `backends` (port 80).
fn route(parents: &[&str], backends: &[&str]) -> Value {
    let parent_refs: Vec<Value> = parents.iter().map(|name| json!({"name": name})).collect();
    let backend_refs: Vec<Value> = backends.iter().map(|name| json!({"name": name, "port": 80})).collect();
    json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute", "metadata": {},
           "spec": {"parentRefs": parent_refs, "rules": [{"backendRefs": backend_refs}]}})
}

/// An Envoy with the default port (`http`, one listener) and an external xDS server.
fn envoy() -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {},
           "spec": {"configMapName": "edge-cfg", "xds": {"host": "xds.mesh", "port": 18000}}})
}

fn service(labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"labels": labels},
           "spec": {"ports": [{"name": "http", "port": 80}]}})
}

/// Counts finished EnvoyRoute reconciles, so a test knows one ran without waiting for time.
#[derive(Default)]
struct RouteReconciles(AtomicUsize);

impl ReconcileMetrics for RouteReconciles {
    fn reconciled(&self, kind: &'static str, _error: Option<&'static str>, _elapsed: Duration) {
        if kind == "EnvoyRoute" {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The controllers, counting EnvoyRoute reconciles.
type Controllers = controllers::Controllers<RouteReconciles>;

/// The route controller alone, with the translation that judges the routes: no Envoy
/// controller writing Envoy status, so only the change under test can change an outcome.
fn start_routes_only(api: &FakeApi, namespace: Option<&str>) -> Controllers {
    let reconciles = Arc::new(RouteReconciles::default());
    let index = Arc::new(Index::new(api.client(), namespace.map(str::to_owned)));
    let stores = Stores::of_index(&index);
    let ctx = Context::new(api.client(), Settings::default(), stores).with_metrics(reconciles.clone());
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async {
        let _ = stopped.await;
    };
    let outcomes = RouteOutcomes::default();
    let (caches, touched) = inputs::translation_from_index(&index);
    let outputs = Outputs { snapshots: None, outcomes: outcomes.clone(), isolation: None };
    let translation = publish::run(caches, touched, outputs, || ());
    let config = kube::runtime::controller::Config::default().concurrency(4);
    let running = routes::controller(Arc::new(ctx), &index, outcomes, config, shutdown);
    let task = tokio::spawn(async move {
        tokio::select! {
            () = running => {},
            () = translation => panic!("the translation ended"),
        }
        drop(index);
        Ok(())
    });
    Controllers { reconciles, stop, task }
}

/// How many EnvoyRoute reconciles have finished.
fn reconciled(controllers: &Controllers) -> usize {
    controllers.reconciles.0.load(Ordering::SeqCst)
}

/// `(status, reason)` of the condition `type_` our controller wrote for the parentRef naming
/// `parent`, if any.
fn condition(route: &Value, parent: &str, type_: &str) -> Option<(String, String)> {
    let entry = route["status"]["parents"]
        .as_array()?
        .iter()
        .find(|entry| entry["controllerName"] == CONTROLLER_NAME && entry["parentRef"]["name"] == parent)?;
    let condition = entry["conditions"].as_array()?.iter().find(|c| c["type"] == type_)?;
    let text = |field: &str| condition[field].as_str().unwrap_or_default().to_owned();
    Some((text("status"), text("reason")))
}

/// Waits until the route at `at` reports `want` for the condition `type_` of `parent`.
async fn until_condition(api: &FakeApi, at: &str, parent: &str, type_: &str, want: (&str, &str)) {
    let what = format!("{type_}={}/{} for {parent} on {at}", want.0, want.1);
    api.wait_for(&what, HANG_GUARD, |api| {
        api.get(at).and_then(|route| condition(&route, parent, type_))
            == Some((want.0.to_owned(), want.1.to_owned()))
    })
    .await;
}

fn status_writes(api: &FakeApi, at: &str) -> usize {
    let status = format!("{at}/status");
    api.requests().iter().filter(|r| r.method != "GET" && r.path == status).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_to_an_existing_envoy_and_service_is_accepted_and_resolved_and_then_left_alone() {
    let api = FakeApi::new();
    api.put(&envoy_path(NS, "edge"), envoy());
    api.put(&service_path(NS, "web"), service(json!({})));
    let shop = route_path(NS, "shop");
    api.put(&shop, route(&["edge"], &["web"]));
    let controllers = Controllers::start(&api, None);

    until_condition(&api, &shop, "edge", "Accepted", ("True", "Accepted")).await;
    until_condition(&api, &shop, "edge", "ResolvedRefs", ("True", "ResolvedRefs")).await;
    let written = api.get(&shop).expect("the route");
    let parents = written["status"]["parents"].as_array().expect("status.parents");
    assert_eq!(parents.len(), 1, "{parents:?}");
    assert_eq!(parents[0]["parentRef"], json!({"name": "edge"}));
    for condition in parents[0]["conditions"].as_array().expect("conditions") {
        assert_eq!(condition["observedGeneration"], 1, "{condition}");
    }

    // At rest: a change of a Service or of the Envoy the route names changes nothing about
    // it, so nothing is written; the new spec below, translated after those changes, is then
    // the one write more.
    let writes = status_writes(&api, &shop);
    api.put(&service_path(NS, "web"), service(json!({"team": "shop"})));
    api.put(&envoy_path(NS, "edge"), {
        let mut labelled = envoy();
        labelled["metadata"]["labels"] = json!({"team": "shop"});
        labelled
    });

    // A new spec: the status follows, for the new generation.
    api.put(&shop, route(&["edge"], &["api"]));
    until_condition(&api, &shop, "edge", "ResolvedRefs", ("False", "BackendNotFound")).await;
    assert_eq!(status_writes(&api, &shop), writes + 1, "an unchanged status is not written again");
    let written = api.get(&shop).expect("the route");
    assert_eq!(written["metadata"]["generation"], 2);
    let accepted = &written["status"]["parents"][0]["conditions"][0];
    assert_eq!(accepted["observedGeneration"], 2, "{accepted}");
    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_envoy_is_no_matching_parent_until_it_appears_and_again_once_it_goes() {
    let api = FakeApi::new();
    // An Envoy of that name in another namespace is not the route's parent.
    api.put(&envoy_path("blog", "edge"), envoy());
    api.put(&service_path(NS, "web"), service(json!({})));
    let shop = route_path(NS, "shop");
    api.put(&shop, route(&["edge"], &["web"]));
    let controllers = start_routes_only(&api, None);

    until_condition(&api, &shop, "edge", "Accepted", ("False", "NoMatchingParent")).await;
    until_condition(&api, &shop, "edge", "ResolvedRefs", ("True", "ResolvedRefs")).await;
    api.wait_for("the route's own change reconciled", HANG_GUARD, |_| reconciled(&controllers) >= 2).await;

    // The Envoy watch reconciles the route when its parent appears, and when it goes.
    api.put(&envoy_path(NS, "edge"), envoy());
    until_condition(&api, &shop, "edge", "Accepted", ("True", "Accepted")).await;
    api.delete(&envoy_path(NS, "edge"));
    until_condition(&api, &shop, "edge", "Accepted", ("False", "NoMatchingParent")).await;
    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_backend_is_backend_not_found_until_the_service_appears() {
    let api = FakeApi::new();
    api.put(&service_path(NS, "web"), service(json!({})));
    // Only the watched namespace is reconciled: a route elsewhere gets no status from us.
    let elsewhere = route_path("blog", "shop");
    api.put(&elsewhere, route(&["edge"], &["web"]));
    let shop = route_path(NS, "shop");
    api.put(&shop, route(&["edge"], &["web", "api"]));
    let controllers = start_routes_only(&api, Some(NS));

    until_condition(&api, &shop, "edge", "ResolvedRefs", ("False", "BackendNotFound")).await;
    let written = api.get(&shop).expect("the route");
    let message = written["status"]["parents"][0]["conditions"][1]["message"].as_str().unwrap_or_default();
    assert!(message.contains("Service \"api\" not found"), "{message}");
    // The reconcile that wrote the status and the one its own change triggered are over.
    api.wait_for("the route's own change reconciled", HANG_GUARD, |_| reconciled(&controllers) >= 2).await;

    // The Service watch reconciles the route when the backend appears.
    api.put(&service_path(NS, "api"), service(json!({})));
    until_condition(&api, &shop, "edge", "ResolvedRefs", ("True", "ResolvedRefs")).await;
    assert_eq!(status_writes(&api, &elsewhere), 0, "a route outside the watched namespace");
    assert!(api.get(&elsewhere).is_some_and(|route| route.get("status").is_none()));
    controllers.stop().await;
}

/// `controller::run` (the `controller` command) holds one watch per resource its controllers
/// read, the route statuses' translation included, and none of what only serving xDS needs
/// (EndpointSlices, fleet pods); without the Gateway API's CRDs, none of the Gateway API's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controllers_hold_one_watch_per_resource_they_read() {
    let expected = expected_watches(&[]);
    let watches = watches_of_the_controllers(FakeApi::new(), &expected).await;
    assert_eq!(watches, expected, "WATCH requests per resource");
}

/// With the Gateway API's CRDs, the Gateway API's kinds, the Namespaces and the certificates
/// (`kubernetes.io/tls` Secrets) are watched too, once each, for the Gateway controllers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_gateway_api_the_controllers_watch_its_kinds_once_each() {
    let api = FakeApi::new();
    api.install_gateway_api();
    let gateway_api = [
        "gatewayclasses",
        "gateways",
        "grpcroutes",
        "httproutes",
        "namespaces",
        "referencegrants",
        "secrets",
    ];
    let expected = expected_watches(&gateway_api);
    let watches = watches_of_the_controllers(api.clone(), &expected).await;
    assert_eq!(watches, expected, "WATCH requests per resource");
    let secrets =
        api.requests().into_iter().find(|r| r.target.resource == "secrets").expect("a Secret watch");
    assert!(
        secrets.query.contains("fieldSelector=type%3Dkubernetes.io%2Ftls")
            && secrets.query.contains("labelSelector=%21envoy-operator.example.com%2Fxds-identity")
            && secrets.query.contains("app.kubernetes.io%2Fmanaged-by%21%3Denvoy-operator"),
        "only certificates, never the fleets' identities nor the operator's own: {}",
        secrets.query
    );
}

/// The WATCH requests per resource of the controllers on `api`, once they judged a route and
/// opened a watch of every resource `expected` names (a cache the route statuses do not read,
/// such as the Gateway API's, may be opened later).
async fn watches_of_the_controllers(
    api: FakeApi,
    expected: &BTreeMap<String, usize>,
) -> BTreeMap<String, usize> {
    api.put(&envoy_path(NS, "edge"), envoy());
    let shop = route_path(NS, "shop");
    api.put(&shop, route(&["edge"], &["web"]));
    let controllers = Controllers::start(&api, None);
    until_condition(&api, &shop, "edge", "Accepted", ("True", "Accepted")).await;
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
    let opened = watches(&api);
    controllers.stop().await;
    opened
}

fn expected_watches(gateway_api: &[&str]) -> BTreeMap<String, usize> {
    ["configmaps", "deployments", "envoyroutes", "envoys", "foos", "services"]
        .iter()
        .chain(gateway_api)
        .map(|resource| ((*resource).to_owned(), 1))
        .collect()
}
