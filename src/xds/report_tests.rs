//! The fleet's xDS status end to end against the in-memory API server: two replicas' trackers
//! and report writers, and the leader's controllers aggregating the reports into the Envoy's
//! `status.xds` and `ConfigAccepted`. (Here rather than in `tests/`: the tracker's updates are
//! the xDS server's own, visible inside the crate only.)

use std::sync::Arc;
use std::time::Duration;

use envoy_operator_testkit::fake_api::FakeApi;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::report::{self, MIN_INTERVAL, POLL, ReportConfig};
use crate::controller::rejections::RejectionEvents;
use crate::controller::{self, ControllerConfig, Settings};
use crate::xds::isolate::{self, Isolation, Republish};
use crate::xds::server::resource::type_url;
use crate::xds::server::{FleetKey, Protocol, ProxyStatus, Snapshot, SnapshotCache, StreamId, Tracker};

const OPERATOR_NS: &str = "envoy-operator";
const EDGE: &str = "/apis/example.com/v1/namespaces/shop/envoys/edge";
const EXTERNAL: &str = "/apis/example.com/v1/namespaces/shop/envoys/external";
/// Guards against hangs; never part of an assertion about speed.
const GUARD: Duration = Duration::from_secs(30);

struct Replica {
    tracker: Tracker,
    cache: SnapshotCache,
    isolation: Isolation,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

fn replica(api: &FakeApi, identity: &str) -> Replica {
    let (tracker, cache, isolation) = (Tracker::new(), SnapshotCache::new(), Isolation::default());
    let (stop, stopped) = oneshot::channel::<()>();
    let config = ReportConfig {
        namespace: OPERATOR_NS.into(),
        identity: identity.into(),
        pod_uid: Some(format!("uid-{identity}")),
    };
    // Proxies named `app-…` are sidecars of other pods naming the Envoy.
    let roles = |_: &FleetKey, proxy: &ProxyStatus| proxy.node_id.starts_with("app-");
    let task = tokio::spawn(report::run(
        api.client(),
        config,
        tracker.clone(),
        cache.clone(),
        Arc::new(roles),
        isolation.clone(),
        async {
            let _ = stopped.await;
        },
    ));
    Replica { tracker, cache, isolation, stop, task }
}

fn snapshot(cluster: &str) -> Snapshot {
    let mut builder = Snapshot::builder();
    builder.add(&ClusterLoadAssignment { cluster_name: cluster.into(), ..Default::default() });
    builder.build().expect("a snapshot")
}

fn envoy(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {"name": name, "namespace": "shop"}, "spec": spec})
}

/// The Envoy's `ConfigAccepted` condition as (status, reason, message).
fn accepted(api: &FakeApi, path: &str) -> Option<(String, String, String)> {
    let envoy = api.get(path)?;
    let conditions = envoy["status"]["conditions"].as_array()?.clone();
    let condition = conditions.into_iter().find(|c| c["type"] == "ConfigAccepted")?;
    let text = |field: &str| condition[field].as_str().unwrap_or_default().to_owned();
    Some((text("status"), text("reason"), text("message")))
}

fn xds(api: &FakeApi, path: &str) -> Value {
    api.get(path).map(|envoy| envoy["status"]["xds"].clone()).unwrap_or(Value::Null)
}

/// The notes of the `ConfigRejected` events on the Envoy `edge`, oldest first.
async fn rejection_events(api: &FakeApi) -> Vec<String> {
    let events: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::namespaced(api.client(), "shop");
    let listed = events.list(&Default::default()).await.expect("events");
    listed
        .items
        .into_iter()
        .filter(|event| {
            event.reason.as_deref() == Some("ConfigRejected")
                && event.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("edge")
        })
        .map(|event| {
            assert_eq!(event.type_.as_deref(), Some("Warning"));
            event.note.unwrap_or_default()
        })
        .collect()
}

async fn wait_for_events(api: &FakeApi, count: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let events = rejection_events(api).await;
        if events.len() >= count {
            return events;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "waited {GUARD:?} for {count} ConfigRejected events: {events:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn writes(api: &FakeApi) -> Vec<String> {
    api.requests()
        .into_iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replicas_reports_make_the_fleets_xds_status() {
    let api = FakeApi::new();
    api.put(EDGE, envoy("edge", json!({})));
    api.put(EXTERNAL, envoy("external", json!({"xds": {"host": "xds.mesh", "port": 18000}})));
    let (stop_controllers, controllers_stopped) = oneshot::channel::<()>();
    let config = ControllerConfig {
        namespace: None,
        concurrency: 2,
        settings: Settings::default(),
        xds_reports_namespace: Some(OPERATOR_NS.into()),
    };
    let controllers = tokio::spawn(controller::run(
        api.client(),
        config,
        async {
            let _ = controllers_stopped.await;
        },
        // Events about rejections at most every 100 ms (a minute in operation), so the test
        // sees each one without waiting long.
        |mut ctx| {
            ctx.rejection_events = RejectionEvents::with_interval(Duration::from_millis(100));
            ctx
        },
    ));
    let key = FleetKey::from("shop/edge");
    let (a, b) = (replica(&api, "replica-a"), replica(&api, "replica-b"));
    let v1 = a.cache.set(key.clone(), snapshot("web"));
    assert_eq!(b.cache.set(key.clone(), snapshot("web")), v1, "equal inputs, equal versions");

    let reason = |api: &FakeApi| accepted(api, EDGE).map(|(_, reason, _)| reason);
    api.wait_for("no proxies yet", GUARD, |api| reason(api).as_deref() == Some("NoProxies")).await;
    assert_eq!(xds(&api, EDGE), json!({"connectedProxies": 0}));

    // Three proxies over two replicas, none of them up to date yet.
    a.tracker.connected(&key, StreamId(1), "edge-1", None, Protocol::Delta);
    a.tracker.connected(&key, StreamId(2), "edge-2", None, Protocol::Delta);
    b.tracker.connected(&key, StreamId(1), "edge-3", None, Protocol::Delta);
    let pending = format!("0 of 3 connected proxies applied version {v1}");
    api.wait_for("pending", GUARD, |api| {
        accepted(api, EDGE).is_some_and(|(_, _, message)| message == pending)
    })
    .await;
    assert_eq!(accepted(&api, EDGE).unwrap().0, "Unknown");

    for (replica, stream) in [(&a, 1), (&a, 2), (&b, 1)] {
        replica.tracker.applied(&key, StreamId(stream), &v1);
    }
    api.wait_for("accepted", GUARD, |api| reason(api).as_deref() == Some("Accepted")).await;
    assert_eq!(
        accepted(&api, EDGE).unwrap(),
        ("True".into(), "Accepted".into(), format!("all 3 connected proxies applied version {v1}"))
    );
    assert_eq!(xds(&api, EDGE), json!({"connectedProxies": 3, "ackedVersion": v1, "servedVersion": v1}));

    // A new version, which one proxy rejects: Envoy's own words, with the node and the type.
    let v2 = a.cache.set(key.clone(), snapshot("web-2"));
    b.cache.set(key.clone(), snapshot("web-2"));
    let envoys_words =
        "Proto constraint validation failed (ClusterValidationError.Name: length must be at least 1)";
    b.tracker.nacked(&key, StreamId(1), type_url::CLUSTER, &v2, envoys_words);
    // Both replicas report the new version served (each within a poll).
    let rejected = json!({"connectedProxies": 3, "ackedVersion": v1, "servedVersion": v2});
    api.wait_for("rejected", GUARD, |api| {
        reason(api).as_deref() == Some("Rejected") && xds(api, EDGE) == rejected
    })
    .await;
    let (status, _, message) = accepted(&api, EDGE).unwrap();
    assert_eq!(status, "False");
    assert_eq!(
        message,
        format!("proxy edge-3 rejected the envoy.config.cluster.v3.Cluster of version {v2}: {envoys_words}")
    );
    // The Envoy with an xDS server of its own gets no xDS status.
    assert_eq!(xds(&api, EXTERNAL), Value::Null);
    assert_eq!(accepted(&api, EXTERNAL), None);
    // And a Warning event says the same.
    let events = wait_for_events(&api, 1).await;
    assert_eq!(
        events,
        [format!(
            "proxy edge-3 rejected the envoy.config.cluster.v3.Cluster of version {v2}: {envoys_words}"
        )]
    );

    // Nothing that changes a report's content writes anything: a tracker change the report does
    // not show (an ACK of another type), and a report stored again unchanged.
    let before = writes(&api);
    a.tracker.acked(&key, StreamId(1), type_url::LISTENER, &v1);
    let b_report = format!("/api/v1/namespaces/{OPERATOR_NS}/configmaps/envoy-operator-xds-replica-b");
    api.put(&b_report, api.get(&b_report).expect("b's report"));
    tokio::time::sleep(3 * (MIN_INTERVAL + POLL)).await;
    let after = writes(&api);
    assert_eq!(after.len(), before.len(), "written although nothing changed: {:?}", &after[before.len()..]);

    // The proxy takes the next version; a sidecar naming the Envoy rejects it, since the
    // application in its pod holds the listener's port. The fleet is not held to it: the
    // condition stays True and names the sidecar and why, and an event tells it once.
    b.tracker.acked(&key, StreamId(1), type_url::CLUSTER, &v2);
    for (replica, stream) in [(&a, 1), (&a, 2), (&b, 1)] {
        replica.tracker.applied(&key, StreamId(stream), &v2);
    }
    // Both replicas report that before the sidecar comes: were the sidecar's rejection
    // reported first, the fleet would be seen rejecting for a poll, with both rejections.
    let applied = format!("all 3 connected proxies applied version {v2}");
    api.wait_for("the new version applied", GUARD, |api| {
        accepted(api, EDGE).is_some_and(|(_, _, message)| message == applied)
    })
    .await;
    a.tracker.connected(&key, StreamId(3), "app-7d-x", None, Protocol::Delta);
    let bind = "Error adding/updating listener(s) http: cannot bind '0.0.0.0:8080': Address already in use";
    a.tracker.nacked(&key, StreamId(3), type_url::LISTENER, &v2, bind);
    api.wait_for("the sidecar's rejection named", GUARD, |api| {
        reason(api).as_deref() == Some("SidecarsRejected")
    })
    .await;
    let (status, _, message) = accepted(&api, EDGE).unwrap();
    assert_eq!(status, "True");
    assert_eq!(
        message,
        format!(
            "all 3 connected proxies applied version {v2}; 1 sidecar rejects it, which does not hold the fleet back: \
             sidecar app-7d-x rejected the envoy.config.listener.v3.Listener of version {v2}: {bind}"
        )
    );
    assert_eq!(xds(&api, EDGE)["connectedProxies"], 4);
    let events = wait_for_events(&api, 2).await;
    assert_eq!(
        events[1],
        format!("sidecar app-7d-x rejected the envoy.config.listener.v3.Listener of version {v2}: {bind}")
    );
    // A change that leaves the rejections as they are tells nothing new.
    a.tracker.acked(&key, StreamId(2), type_url::ROUTE, &v2);
    tokio::time::sleep(3 * (MIN_INTERVAL + POLL)).await;
    assert_eq!(rejection_events(&api).await.len(), 2);

    // A replica that stops takes its report, and its proxies, out of the count.
    let _ = a.stop.send(());
    tokio::time::timeout(GUARD, a.task).await.expect("replica a stops").expect("no panic");
    api.wait_for("a's proxies gone", GUARD, |api| xds(api, EDGE)["connectedProxies"] == 1).await;
    let _ = b.stop.send(());
    tokio::time::timeout(GUARD, b.task).await.expect("replica b stops").expect("no panic");
    api.wait_for("no proxies left", GUARD, |api| reason(api).as_deref() == Some("NoProxies")).await;

    let _ = stop_controllers.send(());
    tokio::time::timeout(GUARD, controllers)
        .await
        .expect("the controllers stop")
        .expect("no panic")
        .expect("no error");
}

/// A route one replica's proxies rejected is in its report, and another replica adopts it from
/// there and republishes: every replica leaves it out, whichever proxies rejected it.
#[tokio::test]
async fn a_rejected_route_travels_to_the_other_replicas_through_the_reports() {
    use envoy_operator_core::fleet::isolate::{Rejection, RouteId};

    let api = FakeApi::new();
    let finder = replica(&api, "operator-a");
    let (routes, mut republished) = tokio::sync::mpsc::unbounded_channel();
    let (gateways, _gateways) = tokio::sync::mpsc::unbounded_channel();
    let adopter = Isolation::default();
    let (stop_adopting, stopped) = oneshot::channel::<()>();
    let adopting = tokio::spawn(isolate::adopt_reported(
        api.client(),
        OPERATOR_NS,
        adopter.clone(),
        Republish { routes, gateways },
        async {
            let _ = stopped.await;
        },
    ));

    let route =
        RouteId { kind: "EnvoyRoute", namespace: "shop".into(), name: "bad".into(), uid: "uid-bad".into() };
    let rejection = Rejection { generation: 4, message: "invalid repetition size: {1001}".into() };
    finder.isolation.adopt([(route.clone(), rejection.clone())]);
    let touched = tokio::time::timeout(GUARD, republished.recv()).await.expect("republished in time");
    assert_eq!(touched, Some(super::publish::inputs::Touched::Namespace("shop".into())));
    let adopted: Vec<_> = adopter.rejections().iter().map(|(id, r)| (id.clone(), r.clone())).collect();
    assert_eq!(adopted, [(route, rejection)]);

    let _ = stop_adopting.send(());
    adopting.await.expect("the adopter stops");
    let _ = finder.stop.send(());
    finder.task.await.expect("the report writer stops");
}
