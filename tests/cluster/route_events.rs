//! Events on routes against an in-memory API server, with the controllers `controller::run`
//! starts: a Warning when a parent refuses a route or a reference stops resolving, a Normal
//! event when it is good again; nothing for a status written again without a transition, nor
//! for a route whose status already says so when the operator starts.

use std::sync::Mutex;
use std::time::Duration;

use envoy_operator::controller::ReconcileMetrics;
use envoy_operator_testkit::fake_api::FakeApi;
use serde_json::{Value, json};

use crate::controllers::{self, HANG_GUARD};

const NS: &str = "shop";
const CONTROLLER_NAME: &str = "example.com/envoy-operator";
const GROUP: &str = "gateway.networking.k8s.io";

/// Every finished reconcile, by kind.
#[derive(Default)]
struct Reconciles(Mutex<Vec<&'static str>>);

impl ReconcileMetrics for Reconciles {
    fn reconciled(&self, kind: &'static str, _error: Option<&'static str>, _elapsed: Duration) {
        self.0.lock().unwrap().push(kind);
    }
}

type Controllers = controllers::Controllers<Reconciles>;

fn service_path(name: &str) -> String {
    format!("/api/v1/namespaces/{NS}/services/{name}")
}

fn service() -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {}, "spec": {"ports": [{"name": "http", "port": 80}]}})
}

/// The events recorded about the `kind` named `name`, in the order of their names (which
/// carry the time they were made).
fn events_about(api: &FakeApi, kind: &str, name: &str) -> Vec<Value> {
    let mut events: Vec<Value> = api
        .list(&format!("/apis/events.k8s.io/v1/namespaces/{NS}/events"))
        .into_iter()
        .filter(|event| event["regarding"]["kind"] == kind && event["regarding"]["name"] == name)
        .collect();
    events.sort_by_key(|event| event["eventTime"].as_str().unwrap_or_default().to_owned());
    events
}

/// `(type, reason)` of each event.
fn told(events: &[Value]) -> Vec<(String, String)> {
    let text = |event: &Value, field: &str| event[field].as_str().unwrap_or_default().to_owned();
    events.iter().map(|event| (text(event, "type"), text(event, "reason"))).collect()
}

/// `(status, reason, observedGeneration)` of the condition `type_` of our entry for `parent`.
fn condition(route: &Value, parent: &str, type_: &str) -> Option<(String, String, i64)> {
    let entry = route["status"]["parents"]
        .as_array()?
        .iter()
        .find(|entry| entry["controllerName"] == CONTROLLER_NAME && entry["parentRef"]["name"] == parent)?;
    let condition = entry["conditions"].as_array()?.iter().find(|c| c["type"] == type_)?;
    let text = |field: &str| condition[field].as_str().unwrap_or_default().to_owned();
    Some((text("status"), text("reason"), condition["observedGeneration"].as_i64()?))
}

async fn until(api: &FakeApi, what: &str, condition: impl Fn(&FakeApi) -> bool) {
    api.wait_for(what, HANG_GUARD, condition).await;
}

fn expect(status: &str, reason: &str, generation: i64) -> Option<(String, String, i64)> {
    Some((status.to_owned(), reason.to_owned(), generation))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_envoy_route_is_told_when_its_envoy_refuses_it_and_accepts_it_again_and_only_then() {
    let api = FakeApi::new();
    api.put(&service_path("web"), service());
    let shop = format!("/apis/example.com/v1/namespaces/{NS}/envoyroutes/shop");
    api.put(
        &shop,
        json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute", "metadata": {},
               "spec": {"parentRefs": [{"name": "edge"}], "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}}),
    );
    let controllers = Controllers::start(&api, None);

    // No Envoy "edge": refused, with a Warning naming the reason, the Envoy and the message.
    until(&api, "the route refused", |api| {
        api.get(&shop).and_then(|route| condition(&route, "edge", "Accepted"))
            == expect("False", "NoMatchingParent", 1)
    })
    .await;
    until(&api, "the Warning event", |api| !events_about(api, "EnvoyRoute", "shop").is_empty()).await;
    let events = events_about(&api, "EnvoyRoute", "shop");
    assert_eq!(told(&events), [("Warning".into(), "NoMatchingParent".into())]);
    let warning = &events[0];
    let note = warning["note"].as_str().unwrap_or_default();
    assert!(note.starts_with("Accepted turned False for Envoy \"edge\": "), "{note}");
    let message =
        api.get(&shop).expect("the route")["status"]["parents"][0]["conditions"][0]["message"].clone();
    assert!(note.ends_with(message.as_str().expect("a message")), "{note} / {message}");
    assert_eq!(warning["action"], "Accepted");
    assert_eq!(warning["related"]["kind"], "Envoy");
    assert_eq!(warning["related"]["name"], "edge");
    assert_eq!(warning["reportingController"], "envoy-operator");

    // The Envoy appears: accepted again, a Normal event.
    api.put(
        &format!("/apis/example.com/v1/namespaces/{NS}/envoys/edge"),
        json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {},
               "spec": {"configMapName": "edge-cfg", "xds": {"host": "xds.mesh", "port": 18000}}}),
    );
    until(&api, "the Normal event", |api| events_about(api, "EnvoyRoute", "shop").len() == 2).await;
    let events = events_about(&api, "EnvoyRoute", "shop");
    assert_eq!(told(&events)[1], ("Normal".into(), "Accepted".into()));
    assert!(
        events[1]["note"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Accepted is True again for Envoy \"edge\"")
    );
    controllers.stop().await;

    // A new operator finds the route's status as it left it: nothing to tell. A new generation
    // is a status write (its observedGeneration) without a transition: nothing either.
    let series = |api: &FakeApi| {
        api.requests().iter().filter(|r| r.method == "PATCH" && r.path.contains("/events/")).count()
    };
    let repeats = series(&api);
    let controllers = Controllers::start(&api, None);
    let mut changed = api.get(&shop).expect("the route");
    changed["spec"]["hostnames"] = json!(["shop.example.com"]);
    api.put(&shop, changed);
    until(&api, "the new generation judged", |api| {
        api.get(&shop).and_then(|route| condition(&route, "edge", "Accepted"))
            == expect("True", "Accepted", 2)
    })
    .await;
    assert_eq!(events_about(&api, "EnvoyRoute", "shop").len(), 2, "no event without a transition");
    assert_eq!(series(&api), repeats, "no repeat of an event either");
    controllers.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_route_is_told_when_its_backend_goes_missing_and_when_it_resolves_again() {
    let api = FakeApi::new();
    api.install_gateway_api();
    api.put(
        &format!("/apis/{GROUP}/v1/gatewayclasses/ours"),
        json!({"apiVersion": format!("{GROUP}/v1"), "kind": "GatewayClass", "metadata": {},
               "spec": {"controllerName": CONTROLLER_NAME}}),
    );
    api.put(
        &format!("/apis/{GROUP}/v1/namespaces/{NS}/gateways/edge"),
        json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Gateway", "metadata": {},
               "spec": {"gatewayClassName": "ours", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}),
    );
    let shop = format!("/apis/{GROUP}/v1/namespaces/{NS}/httproutes/shop");
    api.put(
        &shop,
        json!({"apiVersion": format!("{GROUP}/v1"), "kind": "HTTPRoute", "metadata": {},
               "spec": {"parentRefs": [{"name": "edge"}], "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}}),
    );
    let controllers = Controllers::start(&api, None);

    until(&api, "the route's backend not found", |api| {
        api.get(&shop).and_then(|route| condition(&route, "edge", "ResolvedRefs"))
            == expect("False", "BackendNotFound", 1)
    })
    .await;
    let backend_not_found = |api: &FakeApi| {
        let events = events_about(api, "HTTPRoute", "shop");
        events.into_iter().filter(|event| event["reason"] == "BackendNotFound").collect::<Vec<_>>()
    };
    until(&api, "the Warning event", |api| !backend_not_found(api).is_empty()).await;
    let warning = &backend_not_found(&api)[0];
    assert_eq!(warning["type"], "Warning");
    assert_eq!(warning["action"], "ResolvedRefs");
    let note = warning["note"].as_str().unwrap_or_default();
    assert!(note.starts_with("ResolvedRefs turned False for Gateway \"shop/edge\": "), "{note}");
    assert!(note.contains("\"web\""), "the message names the Service: {note}");
    assert_eq!(warning["related"]["kind"], "Gateway");
    assert_eq!(warning["related"]["apiVersion"], format!("{GROUP}/v1"));
    assert_eq!(warning["related"]["name"], "edge");

    api.put(&service_path("web"), service());
    let resolved = |api: &FakeApi| {
        let events = events_about(api, "HTTPRoute", "shop");
        events.into_iter().filter(|event| event["reason"] == "ResolvedRefs").collect::<Vec<_>>()
    };
    until(&api, "the Normal event", |api| !resolved(api).is_empty()).await;
    assert_eq!(resolved(&api)[0]["type"], "Normal");
    assert_eq!(backend_not_found(&api).len(), 1, "told once");
    assert_eq!(resolved(&api).len(), 1, "told once");
    controllers.stop().await;
}
