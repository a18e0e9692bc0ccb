//! The Gateway API controllers against an in-memory API server that serves the Gateway API's
//! kinds, run as `controller::run` runs them (with the translation of its own): a GatewayClass
//! naming the operator is accepted, a Gateway of it gets its fleet (an Envoy labelled with and
//! owned by the Gateway) and its status, an HTTPRoute gets the operator's `status.parents`
//! entries beside other controllers', a new generation gets a new `observedGeneration`, and
//! objects of other controllers' classes get nothing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use envoy_operator::controller::ReconcileMetrics;
use envoy_operator_testkit::fake_api::FakeApi;
use serde_json::{Value, json};

use crate::controllers::{self, HANG_GUARD};

const NS: &str = "shop";
const CONTROLLER_NAME: &str = "example.com/envoy-operator";
const OTHER_CONTROLLER: &str = "example.net/other-gateway";
const GATEWAY_LABEL: &str = "envoy-operator.example.com/gateway";
const GROUP: &str = "gateway.networking.k8s.io";

fn class_path(name: &str) -> String {
    format!("/apis/{GROUP}/v1/gatewayclasses/{name}")
}

fn gateway_path(namespace: &str, name: &str) -> String {
    format!("/apis/{GROUP}/v1/namespaces/{namespace}/gateways/{name}")
}

fn route_path(namespace: &str, name: &str) -> String {
    format!("/apis/{GROUP}/v1/namespaces/{namespace}/httproutes/{name}")
}

fn envoy_path(namespace: &str, name: &str) -> String {
    format!("/apis/example.com/v1/namespaces/{namespace}/envoys/{name}")
}

fn service_path(namespace: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/services/{name}")
}

fn class(controller_name: &str) -> Value {
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "GatewayClass", "metadata": {},
           "spec": {"controllerName": controller_name}})
}

/// A Gateway of `class` with one HTTP listener on port 80 taking routes of its own namespace.
fn gateway(class: &str) -> Value {
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Gateway", "metadata": {},
           "spec": {"gatewayClassName": class,
                    "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}})
}

/// An HTTPRoute attached to the Gateways `parents`, sending everything to the Service `web`.
fn route(parents: &[&str]) -> Value {
    let parent_refs: Vec<Value> = parents.iter().map(|name| json!({"name": name})).collect();
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": "HTTPRoute", "metadata": {},
           "spec": {"parentRefs": parent_refs,
                    "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}})
}

fn service() -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {},
           "spec": {"ports": [{"name": "http", "port": 80}]}})
}

/// The `status.parents` entry another controller wrote for its own Gateway `parent`.
fn others_entry(parent: &str) -> Value {
    json!({"parentRef": {"name": parent}, "controllerName": OTHER_CONTROLLER,
           "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "theirs",
                           "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
}

/// Counts finished reconciles per Gateway API kind, so a test knows they ran.
#[derive(Default)]
struct Reconciles {
    classes: AtomicUsize,
    gateways: AtomicUsize,
    routes: AtomicUsize,
}

impl ReconcileMetrics for Reconciles {
    fn reconciled(&self, kind: &'static str, _error: Option<&'static str>, _elapsed: Duration) {
        let counter = match kind {
            "GatewayClass" => &self.classes,
            "Gateway" => &self.gateways,
            "HTTPRoute" => &self.routes,
            _ => return,
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }
}

/// The controllers, counting reconciles per Gateway API kind.
type Controllers = controllers::Controllers<Reconciles>;

/// How many HTTPRoute reconciles have finished.
fn routes_reconciled(controllers: &Controllers) -> usize {
    controllers.reconciles.routes.load(Ordering::SeqCst)
}

/// `(status, reason, observedGeneration)` of the condition `type_` in `conditions`.
fn condition(conditions: &Value, type_: &str) -> Option<(String, String, i64)> {
    let condition = conditions.as_array()?.iter().find(|c| c["type"] == type_)?;
    let text = |field: &str| condition[field].as_str().unwrap_or_default().to_owned();
    Some((text("status"), text("reason"), condition["observedGeneration"].as_i64().unwrap_or(-1)))
}

fn expect(status: &str, reason: &str, generation: i64) -> Option<(String, String, i64)> {
    Some((status.to_owned(), reason.to_owned(), generation))
}

/// Our `status.parents` entry of `route` for the Gateway `parent`.
fn our_entry(route: &Value, parent: &str) -> Option<Value> {
    route["status"]["parents"]
        .as_array()?
        .iter()
        .find(|entry| entry["controllerName"] == CONTROLLER_NAME && entry["parentRef"]["name"] == parent)
        .cloned()
}

async fn until(api: &FakeApi, what: &str, condition: impl Fn(&FakeApi) -> bool) {
    api.wait_for(what, HANG_GUARD, condition).await;
}

/// Stores `change`d spec of the object at `path` (keeping its status, as an update of the main
/// resource does), which bumps its generation.
fn change_spec(api: &FakeApi, path: &str, change: impl FnOnce(&mut Value)) {
    let mut object = api.get(path).expect("the object");
    change(&mut object["spec"]);
    api.put(path, object);
}

fn writes_to(api: &FakeApi, path: &str) -> usize {
    api.requests().iter().filter(|r| r.method != "GET" && r.path.starts_with(path)).count()
}

/// A GatewayClass, Gateway and HTTPRoute of the operator, the route also holding another
/// controller's entry, and their status; then a new generation of each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_class_gets_its_gateways_fleet_and_every_status_follows_each_generation() {
    let api = FakeApi::new();
    api.install_gateway_api();
    api.put(&class_path("ours"), class(CONTROLLER_NAME));
    let edge = gateway_path(NS, "edge");
    api.put(&edge, gateway("ours"));
    api.put(&service_path(NS, "web"), service());
    let shop = route_path(NS, "shop");
    let mut seeded = route(&["edge"]);
    seeded["status"] = json!({"parents": [others_entry("theirs")]});
    api.put(&shop, seeded);
    let controllers = Controllers::start(&api, None);

    // The class.
    until(&api, "the class Accepted", |api| {
        api.get(&class_path("ours")).is_some_and(|class| {
            condition(&class["status"]["conditions"], "Accepted") == expect("True", "Accepted", 1)
        })
    })
    .await;
    // Its supported features (GEP-2162), which the status schema lets through: the list the
    // conformance suite infers what to run from.
    let features = api.get(&class_path("ours")).expect("the class")["status"]["supportedFeatures"].clone();
    let named: Vec<&str> =
        features.as_array().into_iter().flatten().filter_map(|f| f["name"].as_str()).collect();
    assert_eq!(named, envoy_operator_core::translate::gateway::features::SUPPORTED_FEATURES);

    // The fleet: an Envoy named `<gateway>-<class>`, labelled with the Gateway and owned by it,
    // its privileged port mapped to an unprivileged one.
    let fleet = envoy_path(NS, "edge-ours");
    until(&api, "the fleet Envoy", |api| api.get(&fleet).is_some()).await;
    let envoy = api.get(&fleet).expect("the fleet");
    let uid = api.get(&edge).expect("the Gateway")["metadata"]["uid"].clone();
    assert_eq!(envoy["metadata"]["labels"][GATEWAY_LABEL], "edge", "{envoy}");
    let owners = envoy["metadata"]["ownerReferences"].as_array().expect("ownerReferences");
    assert!(
        owners.iter().any(|owner| owner["kind"] == "Gateway"
            && owner["apiVersion"] == format!("{GROUP}/v1")
            && owner["name"] == "edge"
            && owner["uid"] == uid
            && owner["controller"] == true),
        "{owners:?}"
    );
    let ports = envoy["spec"]["ports"].as_array().expect("spec.ports");
    assert!(ports.iter().any(|port| port["port"] == 80 && port["targetPort"] == 10080), "{ports:?}");

    // The Gateway's status: conditions of its generation, the listener's kinds and routes.
    until(&api, "the Gateway Accepted with its route attached", |api| {
        api.get(&edge).is_some_and(|gateway| {
            condition(&gateway["status"]["conditions"], "Accepted") == expect("True", "Accepted", 1)
                && gateway["status"]["listeners"][0]["attachedRoutes"] == 1
        })
    })
    .await;
    let status = api.get(&edge).expect("the Gateway")["status"].clone();
    for condition in status["conditions"].as_array().expect("conditions") {
        assert_eq!(condition["observedGeneration"], 1, "{condition}");
    }
    let listener = &status["listeners"][0];
    assert_eq!(listener["name"], "http");
    assert!(
        listener["supportedKinds"]
            .as_array()
            .is_some_and(|kinds| kinds.iter().any(|k| k["kind"] == "HTTPRoute")),
        "{listener}"
    );

    // The route: our entry beside theirs, which is kept as it was.
    until(&api, "the route Accepted and resolved by us", |api| {
        api.get(&shop).and_then(|route| our_entry(&route, "edge")).is_some_and(|entry| {
            condition(&entry["conditions"], "Accepted") == expect("True", "Accepted", 1)
                && condition(&entry["conditions"], "ResolvedRefs") == expect("True", "ResolvedRefs", 1)
        })
    })
    .await;
    let parents = api.get(&shop).expect("the route")["status"]["parents"].clone();
    assert_eq!(parents.as_array().map(Vec::len), Some(2), "{parents}");
    assert!(parents.as_array().is_some_and(|parents| parents.contains(&others_entry("theirs"))), "{parents}");

    // The fleet was applied once: later reconciles find it as desired.
    let applies = api.requests().iter().filter(|r| r.method == "PATCH" && r.path == fleet).count();
    assert_eq!(applies, 1, "the fleet is applied once");

    // At rest: a change of the route that is no new generation (a label) reconciles it, and
    // writes nothing.
    let (status_writes, reconciled) =
        (writes_to(&api, &format!("{shop}/status")), routes_reconciled(&controllers));
    let mut labelled = api.get(&shop).expect("the route");
    labelled["metadata"]["labels"] = json!({"team": "shop"});
    api.put(&shop, labelled);
    until(&api, "the labelled route reconciled", |_| routes_reconciled(&controllers) > reconciled).await;
    assert_eq!(
        writes_to(&api, &format!("{shop}/status")),
        status_writes,
        "an unchanged status is not written"
    );

    // A new generation of each: a new observedGeneration.
    change_spec(&api, &class_path("ours"), |spec| spec["description"] = json!("the operator's Envoys"));
    change_spec(&api, &edge, |spec| {
        spec["listeners"]
            .as_array_mut()
            .expect("listeners")
            .push(json!({"name": "alt", "port": 8080, "protocol": "HTTP"}))
    });
    change_spec(&api, &shop, |spec| spec["hostnames"] = json!(["shop.example.com"]));
    until(&api, "the class's new generation observed", |api| {
        api.get(&class_path("ours")).is_some_and(|class| {
            condition(&class["status"]["conditions"], "Accepted") == expect("True", "Accepted", 2)
        })
    })
    .await;
    until(&api, "the Gateway's new generation observed", |api| {
        api.get(&edge).is_some_and(|gateway| {
            condition(&gateway["status"]["conditions"], "Accepted") == expect("True", "Accepted", 2)
                && gateway["status"]["listeners"].as_array().map(Vec::len) == Some(2)
        })
    })
    .await;
    until(&api, "the route's new generation observed", |api| {
        api.get(&shop)
            .and_then(|route| our_entry(&route, "edge"))
            .is_some_and(|entry| condition(&entry["conditions"], "Accepted") == expect("True", "Accepted", 2))
    })
    .await;
    let parents = api.get(&shop).expect("the route")["status"]["parents"].clone();
    assert!(parents.as_array().is_some_and(|parents| parents.contains(&others_entry("theirs"))), "{parents}");
    let ports = api.get(&fleet).expect("the fleet")["spec"]["ports"].clone();
    assert!(ports.as_array().is_some_and(|ports| ports.iter().any(|port| port["port"] == 8080)), "{ports}");
    controllers.stop().await;
}

/// Objects of another controller's class get nothing from the operator; an Envoy named like
/// one of its Gateways but not its fleet is never touched; and a Gateway whose class stops
/// being the operator's loses its fleet, its routes the operator's entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_controllers_objects_get_nothing_and_a_gateway_leaving_our_class_loses_its_fleet() {
    let api = FakeApi::new();
    api.install_gateway_api();
    api.put(&class_path("ours"), class(CONTROLLER_NAME));
    api.put(&class_path("theirs"), class(OTHER_CONTROLLER));
    api.put(&service_path(NS, "web"), service());
    let edge = gateway_path(NS, "edge");
    api.put(&edge, gateway("ours"));
    let foreign = gateway_path(NS, "foreign");
    api.put(&foreign, gateway("theirs"));
    let foreign_route = route_path(NS, "foreign");
    api.put(&foreign_route, route(&["foreign"]));
    let shop = route_path(NS, "shop");
    api.put(&shop, route(&["edge"]));
    // A Gateway of ours whose fleet's name an Envoy of someone else's already has.
    let taken = gateway_path(NS, "taken");
    api.put(&taken, gateway("ours"));
    let someone_elses = json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {},
                               "spec": {"xds": {"host": "xds.mesh", "port": 18000}}});
    api.put(&envoy_path(NS, "taken-ours"), someone_elses);
    let controllers = Controllers::start(&api, None);

    until(&api, "the fleet of our Gateway", |api| api.get(&envoy_path(NS, "edge-ours")).is_some()).await;
    until(&api, "our route accepted", |api| {
        api.get(&shop)
            .and_then(|route| our_entry(&route, "edge"))
            .is_some_and(|entry| condition(&entry["conditions"], "Accepted") == expect("True", "Accepted", 1))
    })
    .await;
    until(&api, "every object reconciled", |_| {
        let reconciles = &controllers.reconciles;
        reconciles.classes.load(Ordering::SeqCst) >= 2
            && reconciles.gateways.load(Ordering::SeqCst) >= 3
            && reconciles.routes.load(Ordering::SeqCst) >= 2
    })
    .await;
    assert!(api.get(&envoy_path(NS, "foreign")).is_none(), "no fleet for another controller's Gateway");
    assert_eq!(writes_to(&api, &class_path("theirs")), 0, "another controller's class");
    assert_eq!(writes_to(&api, &foreign), 0, "another controller's Gateway");
    assert_eq!(writes_to(&api, &foreign_route), 0, "a route of another controller's Gateway");
    until(&api, "the Gateway whose name is taken told why it has no fleet", |api| {
        api.get(&taken).is_some_and(|gateway| {
            condition(&gateway["status"]["conditions"], "Programmed").is_some_and(|c| c.1 == "Invalid")
        })
    })
    .await;
    // (The Envoy reconciler writes its status, as any Envoy's: not the object itself.)
    let envoy = api.get(&envoy_path(NS, "taken-ours")).expect("someone else's Envoy");
    assert!(
        envoy["metadata"].get("labels").is_none() && envoy["metadata"].get("ownerReferences").is_none(),
        "{envoy}"
    );
    let at_envoy = envoy_path(NS, "taken-ours");
    assert_eq!(api.requests().iter().filter(|r| r.method != "GET" && r.path == at_envoy).count(), 0);

    // Our Gateway moves to the other controller's class: its fleet goes, and so do our entries
    // on its route.
    change_spec(&api, &edge, |spec| spec["gatewayClassName"] = json!("theirs"));
    until(&api, "the fleet deleted", |api| api.get(&envoy_path(NS, "edge-ours")).is_none()).await;
    until(&api, "our entry dropped from the route", |api| {
        api.get(&shop).is_some_and(|route| our_entry(&route, "edge").is_none())
    })
    .await;
    assert_eq!(api.get(&shop).expect("the route")["status"]["parents"], json!([]));
    assert!(api.get(&envoy_path(NS, "taken-ours")).is_some(), "someone else's Envoy stays");
    controllers.stop().await;
}

/// A fleet changed or deleted by hand is put back: its changes reconcile its Gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_changed_or_deleted_by_hand_is_restored() {
    let api = FakeApi::new();
    api.install_gateway_api();
    api.put(&class_path("ours"), class(CONTROLLER_NAME));
    api.put(&gateway_path(NS, "edge"), gateway("ours"));
    let controllers = Controllers::start(&api, None);
    let fleet = envoy_path(NS, "edge-ours");
    let serves_80 = |api: &FakeApi| {
        api.get(&fleet).is_some_and(|envoy| {
            envoy["spec"]["ports"].as_array().is_some_and(|ports| {
                ports.iter().any(|port| port["port"] == 80 && port["targetPort"] == 10080)
            })
        })
    };
    until(&api, "the fleet", serves_80).await;

    change_spec(&api, &fleet, |spec| spec["ports"] = json!([{"name": "http", "port": 8081}]));
    until(&api, "the fleet's ports taken back", serves_80).await;
    api.delete(&fleet);
    until(&api, "the fleet created again", serves_80).await;
    controllers.stop().await;
}

fn deployment_path(namespace: &str, name: &str) -> String {
    format!("/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
}

/// `(type, reason, note)` of the events about the `kind` `name` in [`NS`].
fn events_about(api: &FakeApi, kind: &str, name: &str) -> Vec<(String, String, String)> {
    let events = api.list(&format!("/apis/events.k8s.io/v1/namespaces/{NS}/events"));
    let about =
        events.into_iter().filter(|e| e["regarding"]["kind"] == kind && e["regarding"]["name"] == name);
    let text = |event: &Value, field: &str| event[field].as_str().unwrap_or_default().to_owned();
    about.map(|e| (text(&e, "type"), text(&e, "reason"), text(&e, "note"))).collect()
}

fn has_event(api: &FakeApi, kind: &str, name: &str, type_: &str, reason: &str, note_has: &str) -> bool {
    events_about(api, kind, name).iter().any(|(t, r, n)| t == type_ && r == reason && n.contains(note_has))
}

fn event_writes(api: &FakeApi) -> usize {
    api.requests().iter().filter(|r| r.method != "GET" && r.path.contains("/events")).count()
}

/// A Service nobody owns, with a cluster IP.
fn users_service(cluster_ip: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {},
           "spec": {"clusterIP": cluster_ip, "ports": [{"name": "http", "port": 80}]}})
}

/// A Gateway named like a user's Service claims nothing of it; one whose fleet's Service name a
/// user's Service holds says so in `Programmed` and in a Warning event, and claims no address
/// until the fleet's own Service has one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_claims_only_its_fleets_service_and_says_what_stops_its_fleet() {
    let api = FakeApi::new();
    api.install_gateway_api();
    api.put(&class_path("ours"), class(CONTROLLER_NAME));
    // The user's Service of the Gateway's name, and one of its fleet's name.
    api.put(&service_path(NS, "alt"), users_service("10.96.0.99"));
    api.put(&service_path(NS, "alt-ours"), users_service("10.96.0.98"));
    let alt = gateway_path(NS, "alt");
    api.put(&alt, gateway("ours"));
    let controllers = Controllers::start(&api, None);

    let clash = "Service Resource \"alt-ours\" already exists and is not managed by Envoy";
    until(&api, "the Gateway told that its fleet's Service name is taken", |api| {
        api.get(&alt).is_some_and(|gateway| {
            let conditions = &gateway["status"]["conditions"];
            let programmed = conditions.as_array().and_then(|c| c.iter().find(|c| c["type"] == "Programmed"));
            programmed.is_some_and(|c| {
                c["status"] == "False"
                    && c["reason"] == "Invalid"
                    && c["message"].as_str().is_some_and(|m| m.contains(clash))
            })
        })
    })
    .await;
    let status = api.get(&alt).expect("the Gateway")["status"].clone();
    assert!(status["addresses"].as_array().is_none_or(Vec::is_empty), "no address of the user's: {status}");
    until(&api, "a Warning event on the Gateway naming the Service", |api| {
        has_event(api, "Gateway", "alt", "Warning", "Invalid", clash)
    })
    .await;
    let users = api.get(&service_path(NS, "alt")).expect("the user's Service");
    assert!(users["metadata"].get("ownerReferences").is_none(), "untouched: {users}");

    // The user's Service goes: the fleet makes its own, and its address is the Gateway's.
    api.delete(&service_path(NS, "alt-ours"));
    let owned = |api: &FakeApi| {
        api.get(&service_path(NS, "alt-ours"))
            .is_some_and(|service| service["metadata"]["ownerReferences"][0]["kind"] == "Envoy")
    };
    // The fleet's Envoy is not told of a Service it does not own going away: it takes the name
    // at its next retry of the clash, whose backoff doubles (5 s, 10 s, 20 s, ...) while it lasts.
    api.wait_for("the fleet's own Service", std::time::Duration::from_secs(120), owned).await;
    let mut service = api.get(&service_path(NS, "alt-ours")).expect("the fleet's Service");
    service["spec"]["clusterIP"] = json!("10.96.0.42");
    api.put(&service_path(NS, "alt-ours"), service);
    until(&api, "the Gateway's address: its fleet's Service's", |api| {
        api.get(&alt).is_some_and(|gateway| {
            gateway["status"]["addresses"] == json!([{"type": "IPAddress", "value": "10.96.0.42"}])
                && condition(&gateway["status"]["conditions"], "Programmed").is_some_and(|c| c.1 == "Pending")
        })
    })
    .await;
    controllers.stop().await;
}

/// A Gateway whose listeners all conflict has no fleet, and a Warning event says why it is
/// refused; its fleet comes when a listener is valid, and goes (with a Normal event) when none
/// is again. A reconcile at rest tells nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_with_nothing_to_serve_runs_no_fleet_and_events_say_why() {
    let api = FakeApi::new();
    api.install_gateway_api();
    api.put(&class_path("ours"), class(CONTROLLER_NAME));
    let edge = gateway_path(NS, "edge");
    let conflicting = json!([{"name": "http", "port": 80, "protocol": "HTTP"},
                             {"name": "https", "port": 80, "protocol": "HTTPS",
                              "tls": {"certificateRefs": [{"name": "edge-tls"}]}}]);
    let mut refused = gateway("ours");
    refused["spec"]["listeners"] = conflicting.clone();
    api.put(&edge, refused);
    let controllers = Controllers::start(&api, None);
    let fleet = envoy_path(NS, "edge-ours");

    let not_accepted = |generation: i64| {
        move |api: &FakeApi| {
            api.get(&edge_path()).is_some_and(|gateway| {
                condition(&gateway["status"]["conditions"], "Accepted")
                    == expect("False", "ListenersNotValid", generation)
            })
        }
    };
    until(&api, "the Gateway refused", not_accepted(1)).await;
    until(&api, "a Warning event saying why", |api| {
        has_event(
            api,
            "Gateway",
            "edge",
            "Warning",
            "ListenersNotValid",
            "no listener of the Gateway is valid",
        ) && has_event(api, "Gateway", "edge", "Warning", "ProtocolConflict", "listener http: ")
            && has_event(api, "Gateway", "edge", "Warning", "ProtocolConflict", "listener https: ")
            && has_event(
                api,
                "Gateway",
                "edge",
                "Warning",
                "InvalidCertificateRef",
                "Secret shop/edge-tls not found",
            )
    })
    .await;
    assert!(api.get(&fleet).is_none(), "no fleet for a Gateway with nothing to serve");

    // At rest: a label is no new generation; the reconcile it causes tells nothing.
    let (events, reconciled) = (event_writes(&api), controllers.reconciles.gateways.load(Ordering::SeqCst));
    let mut labelled = api.get(&edge).expect("the Gateway");
    labelled["metadata"]["labels"] = json!({"team": "edge"});
    api.put(&edge, labelled);
    until(&api, "the labelled Gateway reconciled", |_| {
        controllers.reconciles.gateways.load(Ordering::SeqCst) > reconciled
    })
    .await;
    assert_eq!(event_writes(&api), events, "no event at rest");

    change_spec(&api, &edge, |spec| {
        spec["listeners"] = json!([{"name": "http", "port": 80, "protocol": "HTTP"}])
    });
    until(&api, "the fleet, once a listener is valid", |api| api.get(&fleet).is_some()).await;
    change_spec(&api, &edge, |spec| spec["listeners"] = conflicting);
    until(&api, "the fleet deleted when none is", |api| api.get(&fleet).is_none()).await;
    until(&api, "a Normal event saying so", |api| {
        has_event(api, "Gateway", "edge", "Normal", "FleetDeleted", "edge-ours")
    })
    .await;
    until(&api, "the Gateway refused again", not_accepted(3)).await;
    controllers.stop().await;
}

fn edge_path() -> String {
    gateway_path(NS, "edge")
}

/// A fleet made under the Gateway's own name (before fleets were named `<gateway>-<class>`)
/// stays while the fleet of the new name starts, and goes once it has a ready proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_of_the_gateways_earlier_name_goes_once_the_new_one_is_ready() {
    let api = FakeApi::new();
    api.install_gateway_api();
    api.put(&class_path("ours"), class(CONTROLLER_NAME));
    let edge = gateway_path(NS, "edge");
    api.put(&edge, gateway("ours"));
    let uid = api.get(&edge).expect("the Gateway")["metadata"]["uid"].clone();
    let earlier = envoy_path(NS, "edge");
    api.put(
        &earlier,
        json!({"apiVersion": "example.com/v1", "kind": "Envoy",
               "metadata": {"name": "edge", "namespace": NS, "labels": {GATEWAY_LABEL: "edge"},
                            "ownerReferences": [{"apiVersion": format!("{GROUP}/v1"), "kind": "Gateway",
                                                 "name": "edge", "uid": uid, "controller": true}]},
               "spec": {"ports": [{"name": "http-80", "port": 80, "targetPort": 10080}]}}),
    );
    let controllers = Controllers::start(&api, None);

    let deployment = deployment_path(NS, "edge-ours");
    until(&api, "the new fleet's Deployment", |api| api.get(&deployment).is_some()).await;
    assert!(api.get(&earlier).is_some(), "the earlier fleet serves until the new one is ready");
    let mut ready = api.get(&deployment).expect("the Deployment");
    let generation = ready["metadata"]["generation"].clone();
    ready["status"] = json!({"observedGeneration": generation, "replicas": 1, "updatedReplicas": 1,
                             "readyReplicas": 1, "availableReplicas": 1});
    api.put(&deployment, ready);
    until(&api, "the earlier fleet deleted", |api| api.get(&earlier).is_none()).await;
    assert!(api.get(&envoy_path(NS, "edge-ours")).is_some(), "the new fleet stays");
    until(&api, "a Normal event saying the fleet moved", |api| {
        has_event(api, "Gateway", "edge", "Normal", "FleetMoved", "the Gateway's fleet is now shop/edge-ours")
    })
    .await;
    controllers.stop().await;
}

/// GatewayInfrastructure (conformance v1.3.0): a Gateway with `spec.infrastructure` is
/// accepted at its generation, and the Service and pod template its fleet makes carry its
/// labels and annotations and Gateway API's gateway-name label, which the suite lists them by.
/// One whose labels take a key the operator sets is refused with a reason, and gets no fleet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateways_infrastructure_labels_and_annotations_reach_its_fleets_service_and_pods() {
    let api = FakeApi::new();
    api.install_gateway_api();
    api.put(&class_path("ours"), class(CONTROLLER_NAME));
    let infra = gateway_path(NS, "gateway-with-infrastructure-metadata");
    let mut with_infrastructure = gateway("ours");
    with_infrastructure["spec"]["infrastructure"] = json!({"labels": {"label-key": "label-value"}, "annotations": {"annotation-key": "annotation-value"}});
    api.put(&infra, with_infrastructure);
    let refused = gateway_path(NS, "takes-our-keys");
    let mut taking = gateway("ours");
    taking["spec"]["infrastructure"] = json!({"labels": {"app.kubernetes.io/instance": "other"}});
    api.put(&refused, taking);
    let controllers = Controllers::start(&api, None);

    until(&api, "the Gateway Accepted at its generation", |api| {
        api.get(&infra).is_some_and(|gateway| {
            condition(&gateway["status"]["conditions"], "Accepted") == expect("True", "Accepted", 1)
        })
    })
    .await;
    let fleet_name = "gateway-with-infrastructure-metadata-ours";
    let carries_all = |object: &Value, annotations_at: &str| {
        let labels = &object["metadata"]["labels"];
        let annotations = object.pointer(annotations_at).cloned().unwrap_or_default();
        labels["label-key"] == "label-value"
            && labels["gateway.networking.k8s.io/gateway-name"] == "gateway-with-infrastructure-metadata"
            && annotations["annotation-key"] == "annotation-value"
    };
    until(&api, "the fleet's Service with the Gateway's labels and annotations", |api| {
        api.get(&service_path(NS, fleet_name))
            .is_some_and(|service| carries_all(&service, "/metadata/annotations"))
    })
    .await;
    until(&api, "the fleet's pod template with them", |api| {
        api.get(&deployment_path(NS, fleet_name)).is_some_and(|deployment| {
            let template = &deployment["spec"]["template"];
            carries_all(template, "/metadata/annotations")
                && template["metadata"]["labels"]["app.kubernetes.io/instance"] == fleet_name
        })
    })
    .await;
    let status = api.get(&infra).expect("the Gateway")["status"].clone();
    for condition in status["conditions"].as_array().expect("conditions") {
        assert_eq!(condition["observedGeneration"], 1, "{condition}");
    }

    until(&api, "the Gateway taking the operator's label refused", |api| {
        api.get(&refused).is_some_and(|gateway| {
            condition(&gateway["status"]["conditions"], "Accepted").is_some_and(
                |(status, reason, generation)| status == "False" && reason == "Invalid" && generation == 1,
            ) && gateway["status"]["conditions"].to_string().contains("app.kubernetes.io/instance")
        })
    })
    .await;
    assert!(api.get(&envoy_path(NS, "takes-our-keys-ours")).is_none(), "no fleet for a refused Gateway");
    controllers.stop().await;
}

/// The Gateway's `status.addresses`, as `(type, value)`.
fn status_addresses(gateway: &Value) -> Vec<(String, String)> {
    let addresses = gateway["status"]["addresses"].as_array().cloned().unwrap_or_default();
    addresses
        .iter()
        .map(|a| {
            (
                a["type"].as_str().unwrap_or_default().to_owned(),
                a["value"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// GatewayStaticAddresses (conformance v1.3.0), its three steps with the addresses README's
/// conformance command gives: an address of a type no implementation supports keeps the Gateway
/// from being accepted; without it, an address outside the Service range (192.0.2.1) and a
/// usable one (10.96.0.200) cannot both be had (`AddressNotUsable`); with the usable one alone
/// the fleet's Service takes it as its cluster IP and it is the Gateway's only address. Between
/// the suite's steps, one more: the outside address alone, which the in-memory API server
/// refuses as kube-apiserver does, is `AddressNotUsable` in the API server's words; replaced by
/// the usable one, the Service is created again with it (a cluster IP cannot change).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateways_static_address_is_its_services_cluster_ip_or_says_why_it_is_not_usable() {
    let api = FakeApi::new();
    api.install_gateway_api();
    api.put(&class_path("ours"), class(CONTROLLER_NAME));
    let path = gateway_path(NS, "gateway-static-addresses");
    let mut static_addresses = gateway("ours");
    static_addresses["spec"]["addresses"] = json!([
        {"type": "test/fake-invalid-type", "value": "fake address teehee!"},
        {"type": "IPAddress", "value": "192.0.2.1"},
        {"type": "IPAddress", "value": "10.96.0.200"}]);
    api.put(&path, static_addresses);
    let controllers = Controllers::start(&api, None);
    let has = |api: &FakeApi, type_: &str, status: &str, reason: &str, generation: i64| {
        api.get(&path).is_some_and(|gateway| {
            condition(&gateway["status"]["conditions"], type_) == expect(status, reason, generation)
        })
    };

    until(&api, "the Gateway with an unsupported address not accepted", |api| {
        has(api, "Accepted", "False", "UnsupportedAddress", 1)
    })
    .await;
    let fleet_name = "gateway-static-addresses-ours";
    assert!(api.get(&envoy_path(NS, fleet_name)).is_none(), "no fleet for a Gateway not accepted");

    change_spec(&api, &path, |spec| {
        spec["addresses"].as_array_mut().expect("addresses").remove(0);
    });
    until(&api, "accepted, not programmed: two addresses", |api| {
        has(api, "Accepted", "True", "Accepted", 2) && has(api, "Programmed", "False", "AddressNotUsable", 2)
    })
    .await;
    let deployment = deployment_path(NS, fleet_name);
    until(&api, "the fleet's Deployment", |api| api.get(&deployment).is_some()).await;
    let mut ready = api.get(&deployment).expect("the Deployment");
    let generation = ready["metadata"]["generation"].clone();
    ready["status"] = json!({"observedGeneration": generation, "replicas": 1, "updatedReplicas": 1,
                             "readyReplicas": 1, "availableReplicas": 1});
    api.put(&deployment, ready);

    change_spec(&api, &path, |spec| spec["addresses"] = json!([{"type": "IPAddress", "value": "192.0.2.1"}]));
    until(&api, "the address the API server refuses: AddressNotUsable in its words", |api| {
        has(api, "Programmed", "False", "AddressNotUsable", 3)
            && api.get(&path).is_some_and(|gateway| {
                gateway["status"]["conditions"].to_string().contains("is not in the valid range")
            })
    })
    .await;
    assert!(status_addresses(&api.get(&path).expect("the Gateway")).is_empty());
    assert!(
        has_event(&api, "Envoy", fleet_name, "Warning", "AddressNotUsable", "192.0.2.1"),
        "the fleet says why in a Warning event"
    );

    change_spec(&api, &path, |spec| {
        spec["addresses"] = json!([{"type": "IPAddress", "value": "10.96.0.200"}])
    });
    until(&api, "accepted and programmed with the usable address", |api| {
        has(api, "Accepted", "True", "Accepted", 4)
            && has(api, "Programmed", "True", "Programmed", 4)
            && api.get(&path).is_some_and(|gateway| {
                status_addresses(&gateway) == [("IPAddress".to_owned(), "10.96.0.200".to_owned())]
            })
    })
    .await;
    let service = api.get(&service_path(NS, fleet_name)).expect("the fleet's Service");
    assert_eq!(service["spec"]["clusterIP"], "10.96.0.200");
    let gateway = api.get(&path).expect("the Gateway");
    let listener = &gateway["status"]["listeners"][0];
    assert_eq!(listener["name"], "http");
    assert_eq!(condition(&listener["conditions"], "Accepted").map(|c| c.0), Some("True".to_owned()));
    assert_eq!(condition(&listener["conditions"], "ResolvedRefs").map(|c| c.0), Some("True".to_owned()));

    // Another usable address: the Service cannot change its cluster IP, so it is made again.
    change_spec(&api, &path, |spec| spec["addresses"] = json!([{"value": "10.96.0.201"}]));
    until(&api, "the Service made again with the new address", |api| {
        api.get(&service_path(NS, fleet_name))
            .is_some_and(|service| service["spec"]["clusterIP"] == "10.96.0.201")
            && has(api, "Programmed", "True", "Programmed", 5)
            && api.get(&path).is_some_and(|gateway| {
                status_addresses(&gateway) == [("IPAddress".to_owned(), "10.96.0.201".to_owned())]
            })
    })
    .await;
    assert!(has_event(&api, "Envoy", fleet_name, "Normal", "ReplacedService", "10.96.0.201"));
    controllers.stop().await;
}

/// An HTTPRoute on a Service (the mesh's) gets the operator's `status.parents` entry for that
/// Service through the controllers, with no GatewayClass in the cluster, beside another
/// controller's entry, which is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_on_a_service_gets_its_mesh_parents_status() {
    let api = FakeApi::new();
    api.install_gateway_api();
    api.put(
        &format!("/api/v1/namespaces/{NS}"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {"envoy-injection": "enabled"}}}),
    );
    api.put(
        &service_path(NS, "web"),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {},
               "spec": {"clusterIP": "10.96.0.40", "ports": [{"name": "http", "port": 80}]}}),
    );
    let path = route_path(NS, "web-canary");
    let mut route = route(&[]);
    route["spec"]["parentRefs"] = json!([{"group": "", "kind": "Service", "name": "web", "port": 80},
                                         {"group": "", "kind": "Service", "name": "gone"}]);
    route["status"] = json!({"parents": [others_entry("theirs")]});
    api.put(&path, route);
    let controllers = Controllers::start(&api, None);
    let entry = |api: &FakeApi, service: &str| {
        let route = api.get(&path)?;
        route["status"]["parents"]
            .as_array()?
            .iter()
            .find(|entry| {
                entry["controllerName"] == CONTROLLER_NAME
                    && entry["parentRef"]["kind"] == "Service"
                    && entry["parentRef"]["name"] == service
            })
            .cloned()
    };
    until(&api, "the Service parents' entries", |api| {
        entry(api, "web").is_some() && entry(api, "gone").is_some()
    })
    .await;
    let web = entry(&api, "web").expect("web's entry");
    assert_eq!(
        condition(&web["conditions"], "Accepted").map(|c| (c.0, c.1)),
        Some(("True".into(), "Accepted".into()))
    );
    assert_eq!(web["parentRef"], json!({"group": "", "kind": "Service", "name": "web", "port": 80}));
    let gone = entry(&api, "gone").expect("gone's entry");
    assert_eq!(
        condition(&gone["conditions"], "Accepted").map(|c| (c.0, c.1)),
        Some(("False".into(), "NoMatchingParent".into()))
    );
    let route = api.get(&path).expect("the route");
    assert!(
        route["status"]["parents"]
            .as_array()
            .expect("parents")
            .iter()
            .any(|e| e["controllerName"] == OTHER_CONTROLLER)
    );
    controllers.stop().await;
}
