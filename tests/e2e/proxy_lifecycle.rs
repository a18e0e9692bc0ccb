//! Proxies as pods live: a fleet rolled under load drops no request (drain), a fleet rolled
//! while the control plane is away keeps its traffic on the configured pods (readiness), and a
//! Job calling through its native sidecar at once finds it configured (startup probe).
//!
//! These need real pods that reach the operator's control plane, so they run against the
//! operator deployed from `deploy/` (`E2E_IN_CLUSTER=1`), with native sidecars (Kubernetes
//! 1.29+). With the operator in-process they do not apply (pods cannot reach a control plane on
//! this machine) and are skipped with a note; with `E2E_IN_CLUSTER=1` on a cluster where no
//! node takes pods they fail, saying why (unless `E2E_NO_NODES=1` declares such a cluster).
//! Traffic comes from a client pod in the test namespace (`curl`, one new connection a request,
//! and a kept-alive one: [`load_client`]), whose log counts the failures. Images: nginx (the
//! backend), Envoy, curlimages/curl.

use std::time::Duration;

use envoy_operator_core::api::{Envoy, EnvoyRoute};
use envoy_operator_core::inject::annotations::{ENVOY, NAMESPACE_LABEL, NAMESPACE_LABEL_ENABLED};
use envoy_operator_core::names::DEFAULT_NGINX_IMAGE;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams, LogParams, Patch, PatchParams};
use serde_json::json;

use crate::harness::{
    Cluster, DEPLOYED_NAME, DEPLOYED_NAMESPACE, LONG, SHORT, TEST_MANAGER, create_in, get, in_cluster,
    in_cluster_mode, pod_state, pods_state, wait_for,
};
use crate::load_client::{self, CURL_IMAGE};

/// The fleet's listener port (the container port its Envoys bind).
const LISTENER_PORT: u16 = 10080;
/// The deployed operator (`deploy/`), scaled down for the outage.
const OPERATOR_NAMESPACE: &str = DEPLOYED_NAMESPACE;
const OPERATOR_DEPLOYMENT: &str = DEPLOYED_NAME;

/// Whether this story applies here (says why not): with the deployed operator, whose control
/// plane pods reach; and then it needs pods ([`Cluster::runs_pods`]).
fn runnable(cluster: &Cluster, story: &str) -> bool {
    if !in_cluster_mode() {
        eprintln!(
            "note: {story}: needs the deployed operator (E2E_IN_CLUSTER=1), whose control plane pods reach; skipped"
        );
        return false;
    }
    cluster.runs_pods(story)
}

/// nginx behind the Service `web`, and the Envoy `edge` (no `spec.xds`: the operator serves
/// it) routing every path to it; waits until the fleet is Ready.
async fn fleet_in_front_of_nginx(cluster: &Cluster, replicas: i32) {
    let _: Deployment = cluster
        .create(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "nginx", "image": DEFAULT_NGINX_IMAGE,
                                                           "ports": [{"name": "http", "containerPort": 80}]}]}}}}))
        .await;
    let _: Service = cluster
        .create(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}))
        .await;
    let _: Envoy = cluster
        .create(json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {"name": "edge"},
            "spec": {"replicas": replicas, "ports": [{"name": "http", "port": 80, "targetPort": LISTENER_PORT}]}}))
        .await;
    let _: EnvoyRoute = cluster
        .create(json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute", "metadata": {"name": "web"},
            "spec": {"parentRefs": [{"name": "edge"}], "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}}))
        .await;
    let (deployments, pods) = (cluster.api::<Deployment>(), cluster.api::<Pod>());
    wait_for("the fleet edge and its backend available", LONG, || async {
        for (name, selector) in [("edge", "app.kubernetes.io/instance=edge"), ("web", "app=web")] {
            let status = get(&deployments, name).await?.status.unwrap_or_default();
            let wanted = if name == "edge" { replicas } else { 1 };
            if status.available_replicas.unwrap_or(0) < wanted {
                return Err(format!("{name}: {status:?}; pods: {}", pods_state(&pods, selector).await));
            }
        }
        Ok(())
    })
    .await;
}

/// A pod that calls `http://edge/` for `seconds` (every 50 ms on a new connection, 20 a second
/// on one kept alive: [`load_client::script`]), a line per request.
async fn start_client(cluster: &Cluster, seconds: u32) {
    let script = load_client::script("http://edge/", seconds);
    let _: Pod = cluster
        .create(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client"},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "curl", "image": CURL_IMAGE, "command": ["sh", "-c", script]}]}}))
        .await;
    let pods = cluster.api::<Pod>();
    wait_for("the client pod running", LONG, || async {
        let pod = get(&pods, "client").await?;
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        if phase == "Running" { Ok(()) } else { Err(pod_state(&pod)) }
    })
    .await;
}

/// Waits for the client to finish, and fails if any of its requests did, `when` saying when.
async fn no_failed_request(cluster: &Cluster, seconds: u32, when: &str) {
    let outcome = client_outcome(cluster, seconds).await;
    outcome.assert_readable();
    let (requests, failures) = (outcome.requests, &outcome.failures);
    assert!(requests > 500, "the client made too few requests to tell: {requests}");
    let shown = &failures[..failures.len().min(10)];
    assert!(failures.is_empty(), "{} of {requests} requests failed {when}: {shown:?}", failures.len());
}

/// Waits for the client to finish; what its log says.
async fn client_outcome(cluster: &Cluster, seconds: u32) -> load_client::Outcome {
    let pods = cluster.api::<Pod>();
    wait_for("the client pod done", Duration::from_secs(u64::from(seconds) + 120), || async {
        let pod = get(&pods, "client").await?;
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" { Ok(()) } else { Err(pod_state(&pod)) }
    })
    .await;
    let log = pods.logs("client", &LogParams::default()).await.expect("the client's log");
    load_client::Outcome::of(&log)
}

/// `kubectl rollout restart` of the fleet's Deployment.
async fn restart_fleet(cluster: &Cluster) {
    let deployments = cluster.api::<Deployment>();
    let restarted = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "edge"},
        "spec": {"template": {"metadata": {"annotations": {
            "kubectl.kubernetes.io/restartedAt": seconds_since_epoch()}}}}});
    deployments
        .patch("edge", &PatchParams::apply(TEST_MANAGER), &Patch::Apply(&restarted))
        .await
        .expect("restarting the fleet");
}

/// Any value that changes restarts the pods.
fn seconds_since_epoch() -> String {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
        .to_string()
}

/// Waits until the fleet's rollout is done: every replica updated and available.
async fn rolled_out(cluster: &Cluster, replicas: i32) {
    let (deployments, pods) = (cluster.api::<Deployment>(), cluster.api::<Pod>());
    wait_for("the fleet rolled out", LONG, || async {
        let deployment = get(&deployments, "edge").await?;
        let generation = deployment.metadata.generation;
        let status = deployment.status.unwrap_or_default();
        let done = status.observed_generation == generation
            && status.updated_replicas == Some(replicas)
            && status.available_replicas == Some(replicas)
            && status.replicas == Some(replicas);
        if done {
            Ok(())
        } else {
            Err(format!("{status:?}; pods: {}", pods_state(&pods, "app.kubernetes.io/instance=edge").await))
        }
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn a_fleet_rolled_under_load_fails_no_request() {
    in_cluster("drain", async |cluster| {
        if !runnable(cluster, "drain") {
            return;
        }
        fleet_in_front_of_nginx(cluster, 2).await;
        let seconds = 60;
        start_client(cluster, seconds).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        restart_fleet(cluster).await;
        rolled_out(cluster, 2).await;
        no_failed_request(cluster, seconds, "while the fleet rolled (its pods drain before they stop)").await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn a_fleet_rolled_while_the_control_plane_is_away_keeps_its_traffic_on_configured_pods() {
    in_cluster("outage", async |cluster| {
        if !runnable(cluster, "outage") {
            return;
        }
        fleet_in_front_of_nginx(cluster, 2).await;
        let operators: Api<Deployment> = Api::namespaced(cluster.client.clone(), OPERATOR_NAMESPACE);
        let operator = get(&operators, OPERATOR_DEPLOYMENT).await.unwrap_or_else(|error| {
            panic!("the deployed operator {OPERATOR_NAMESPACE}/{OPERATOR_DEPLOYMENT}: {error}")
        });
        let operator_replicas = operator.spec.and_then(|s| s.replicas).unwrap_or(1);
        let scale = |replicas: i32| {
            let operators = operators.clone();
            async move {
                let patch = json!({"spec": {"replicas": replicas}});
                operators
                    .patch_scale(OPERATOR_DEPLOYMENT, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .unwrap_or_else(|error| panic!("scaling the operator to {replicas}: {error}"));
            }
        };
        let seconds = 90;
        start_client(cluster, seconds).await;
        scale(0).await;
        // Whatever happens below, the operator comes back.
        let outcome = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(async {
            wait_for("the operator's pods gone", SHORT, || async {
                let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), OPERATOR_NAMESPACE);
                let selector = ListParams::default().labels("app.kubernetes.io/name=envoy-operator");
                let left = pods.list(&selector).await.map_err(|e| e.to_string())?.items.len();
                if left == 0 { Ok(()) } else { Err(format!("{left} left")) }
            })
            .await;
            let before = fleet_pods(cluster).await;
            restart_fleet(cluster).await;
            // Longer than Envoy's default initial-fetch timeout (15 s), after which a new pod
            // used to turn Ready with no listener.
            tokio::time::sleep(Duration::from_secs(30)).await;
            let started_unconfigured: Vec<Pod> =
                fleet_pods(cluster).await.into_iter().filter(|pod| !before.iter().any(|old| old.metadata.name == pod.metadata.name)).collect();
            assert!(!started_unconfigured.is_empty(), "the rollout started no pod during the outage");
            let ready_unconfigured: Vec<_> =
                started_unconfigured.iter().filter(|pod| ready(pod)).filter_map(|pod| pod.metadata.name.clone()).collect();
            assert!(
                ready_unconfigured.is_empty(),
                "pods started while the control plane was away turned Ready unconfigured: {ready_unconfigured:?}"
            );
        }))
        .await;
        scale(operator_replicas).await;
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
        rolled_out(cluster, 2).await;
        no_failed_request(cluster, seconds, "across the outage and the rollout").await;
    })
    .await;
}

/// The fleet's pods.
async fn fleet_pods(cluster: &Cluster) -> Vec<Pod> {
    let selector = ListParams::default().labels("app.kubernetes.io/instance=edge");
    cluster.api::<Pod>().list(&selector).await.expect("listing the fleet's pods").items
}

fn ready(pod: &Pod) -> bool {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    conditions.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn jobs_calling_through_their_native_sidecar_at_once_all_succeed() {
    in_cluster("job", async |cluster| {
        if !runnable(cluster, "job") {
            return;
        }
        let jobs_namespace =
            cluster.extra_namespace("jobs", json!({NAMESPACE_LABEL: NAMESPACE_LABEL_ENABLED})).await;
        let ns = InNamespace(cluster.client.clone(), jobs_namespace);
        // The fleet lives with the Jobs: a sidecar names an Envoy of its own namespace.
        let deployments: Api<Deployment> = ns.api();
        create_in::<Deployment>(&deployments, json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web", "sidecar.example.com/inject": "false"}},
                                  "spec": {"containers": [{"name": "nginx", "image": DEFAULT_NGINX_IMAGE,
                                                           "ports": [{"name": "http", "containerPort": 80}]}]}}}})).await;
        create_in::<Service>(&ns.api(), json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})).await;
        create_in::<Envoy>(&ns.api(), json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {"name": "edge"},
            "spec": {"replicas": 0, "ports": [{"name": "http", "port": 80, "targetPort": LISTENER_PORT}]}})).await;
        create_in::<EnvoyRoute>(&ns.api(), json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute", "metadata": {"name": "web"},
            "spec": {"parentRefs": [{"name": "edge"}], "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}})).await;
        let pods: Api<Pod> = ns.api();
        wait_for("the backend available", LONG, || async {
            let status = get(&deployments, "web").await?.status.unwrap_or_default();
            if status.available_replicas.unwrap_or(0) >= 1 {
                Ok(())
            } else {
                Err(format!("{status:?}; pods: {}", pods_state(&pods, "app=web").await))
            }
        })
        .await;

        // Each Job calls once, with no retry, the moment its container starts.
        let jobs: Api<Job> = ns.api();
        let count = 6;
        for index in 0..count {
            create_in::<Job>(&jobs, json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": format!("call-{index}")},
                "spec": {"backoffLimit": 0, "template": {
                    "metadata": {"annotations": {ENVOY: "edge"}},
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "call", "image": CURL_IMAGE,
                        "command": ["curl", "-sf", "--max-time", "5", "-o", "/dev/null",
                                    format!("http://127.0.0.1:{LISTENER_PORT}/")]}]}}}})).await;
        }
        let outcome = wait_for("every Job finished", LONG, || async {
            let mut succeeded = 0;
            let mut failed = Vec::new();
            for index in 0..count {
                let name = format!("call-{index}");
                let status = get(&jobs, &name).await?.status.unwrap_or_default();
                succeeded += status.succeeded.unwrap_or(0);
                if status.failed.unwrap_or(0) > 0 {
                    failed.push(name);
                }
            }
            if succeeded + failed.len() as i32 == count {
                Ok(failed)
            } else {
                Err(format!("{succeeded} succeeded, failed {failed:?}; pods: {}", pods_state(&pods, "job-name").await))
            }
        })
        .await;
        assert!(
            outcome.is_empty(),
            "Jobs whose first call through the sidecar failed (the app started before its proxy was configured?): {outcome:?}"
        );
    })
    .await;
}

/// Objects of a namespace other than the test's own.
struct InNamespace(kube::Client, String);

impl InNamespace {
    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.0.clone(), &self.1)
    }
}

/// `envoy-operator proxy-config` on a running fleet pod: asked through the API server's pod
/// proxy, the deployed replica serving the pod answers with the configuration it pushed, which
/// the proxy has applied (in sync, nothing rejected), private keys never shown.
#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn proxy_config_shows_what_a_fleet_pod_was_pushed_and_applied() {
    use envoy_operator::cli::cluster::ClusterFlags;
    use envoy_operator::cli::documents::OutputFormat;
    use envoy_operator::cli::proxy_config::{self, OPERATOR_SELECTOR, ProxyConfigArgs};

    in_cluster("proxy-config", async |cluster| {
        if !runnable(cluster, "proxy-config") {
            return;
        }
        fleet_in_front_of_nginx(cluster, 1).await;
        let pod = fleet_pods(cluster).await.into_iter().find(ready).expect("a Ready fleet pod");
        let args = ProxyConfigArgs {
            pod: pod.metadata.name.clone().expect("a pod name"),
            namespace: Some(cluster.namespace.clone()),
            operator_namespace: OPERATOR_NAMESPACE.to_owned(),
            operator_selector: OPERATOR_SELECTOR.to_owned(),
            operations_port: 8080,
            output: OutputFormat::Yaml,
            cluster: ClusterFlags { kubeconfig: None, context: None },
        };
        let config = wait_for("the fleet pod's proxy in sync in proxy-config", SHORT, || async {
            let configs =
                proxy_config::fetch(&cluster.client, &args).await.map_err(|error| error.to_string())?;
            match configs.as_slice() {
                [config] if config.in_sync => Ok(config.clone()),
                other => Err(format!("not one proxy in sync: {other:?}")),
            }
        })
        .await;
        assert_eq!(config.fleet, format!("{}/edge", cluster.namespace));
        assert!(config.types.iter().all(|state| !state.rejecting), "{:?}", config.types);
        let printed = proxy_config::print(&[config], OutputFormat::Yaml).expect("YAML");
        assert!(printed.contains(&LISTENER_PORT.to_string()), "the fleet's listener port: {printed}");
        assert!(!printed.contains("PRIVATE KEY"), "no private key is printed: {printed}");
    })
    .await;
}
