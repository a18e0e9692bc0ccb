//! End-to-end tests of the reconcilers against a real cluster (the current kubeconfig
//! context). Ignored by default; run with `cargo test --test e2e -- --ignored`.
//!
//! Each test installs the CRDs (server-side apply, idempotent), creates a fresh namespace
//! with a random suffix and the label `envoy-operator.example.com/e2e=true`, runs the
//! controllers in-process watching only that namespace, and deletes the namespace
//! afterwards, even when the test fails. Checks that need running pods are skipped, with a
//! note, on clusters without a schedulable node.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use envoy_operator::api::{Envoy, Foo};
use envoy_operator::crd;
use envoy_operator::reconcile::controller::{ControllerConfig, run};
use envoy_operator::reconcile::labels::CONFIG_HASH_ANNOTATION;
use futures::FutureExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const E2E_LABEL: &str = "envoy-operator.example.com/e2e";
const TEST_MANAGER: &str = "envoy-operator-e2e";
/// Creating objects and the controller reacting.
const SHORT: Duration = Duration::from_secs(60);
/// Pulling images and starting pods.
const LONG: Duration = Duration::from_secs(240);

struct Cluster {
    client: Client,
    namespace: String,
    schedulable: bool,
    stop: Option<oneshot::Sender<()>>,
    controller: Option<JoinHandle<()>>,
}

impl Cluster {
    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    async fn create<K>(&self, object: Value) -> K
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::Serialize
            + serde::de::DeserializeOwned,
    {
        let object: K = serde_json::from_value(object).expect("a valid object");
        self.api::<K>().create(&PostParams::default(), &object).await.expect("create")
    }

    /// Tells the controllers to stop, waits for them, and deletes the namespace.
    async fn clean_up(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(controller) = self.controller.take() {
            let _ = tokio::time::timeout(SHORT, controller).await;
        }
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        if let Err(error) = namespaces.delete(&self.namespace, &DeleteParams::background()).await {
            eprintln!("could not delete namespace {}: {error}", self.namespace);
        }
    }
}

/// Runs `test` in a fresh namespace with the controllers running; always cleans up.
async fn in_cluster(story: &str, test: impl AsyncFnOnce(&Cluster)) {
    let client = Client::try_default().await.expect("a kubeconfig context or in-cluster configuration");
    install_crds(&client).await;
    let namespace = format!("eo-e2e-{story}-{}", random_suffix());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let body = json!({"metadata": {"name": namespace, "labels": {E2E_LABEL: "true"}}});
    namespaces
        .create(&PostParams::default(), &serde_json::from_value(body).expect("namespace"))
        .await
        .expect("create the test namespace");
    let schedulable = has_schedulable_node(&client).await;
    if !schedulable {
        eprintln!("note: no schedulable node: checks that need running pods are skipped");
    }
    let (stop, stopped) = oneshot::channel::<()>();
    let config =
        ControllerConfig { namespace: Some(namespace.clone()), concurrency: 2, ..Default::default() };
    let controller_client = client.clone();
    let controller = tokio::spawn(async move {
        let shutdown = stopped.map(|_| ());
        if let Err(error) = run(controller_client, config, shutdown, |ctx| ctx).await {
            eprintln!("controller failed: {error}");
        }
    });
    let cluster = Cluster { client, namespace, schedulable, stop: Some(stop), controller: Some(controller) };
    let outcome = AssertUnwindSafe(test(&cluster)).catch_unwind().await;
    cluster.clean_up().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

fn random_suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos(),
    );
    format!("{:06x}", hasher.finish() & 0xff_ffff)
}

async fn install_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for definition in crd::all() {
        let name = definition.name_any();
        crds.patch(&name, &PatchParams::apply(TEST_MANAGER).force(), &Patch::Apply(&definition))
            .await
            .unwrap_or_else(|error| panic!("installing CRD {name}: {error}"));
        tokio::time::timeout(SHORT, await_condition(crds.clone(), &name, conditions::is_crd_established()))
            .await
            .unwrap_or_else(|_| panic!("waited {SHORT:?} for CRD {name} to be Established"))
            .expect("watching the CRD");
    }
}

/// A Ready node that accepts ordinary pods.
async fn has_schedulable_node(client: &Client) -> bool {
    let nodes: Api<Node> = Api::all(client.clone());
    let Ok(nodes) = nodes.list(&ListParams::default()).await else { return false };
    nodes.items.iter().any(|node| {
        let spec = node.spec.clone().unwrap_or_default();
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let tainted =
            spec.taints.iter().flatten().any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute");
        ready && !spec.unschedulable.unwrap_or(false) && !tainted
    })
}

/// Polls `check` until it yields a value; on timeout, fails saying what was awaited and
/// what was last seen.
async fn wait_for<T, Fut>(what: &str, timeout: Duration, mut check: impl FnMut() -> Fut) -> T
where
    Fut: Future<Output = Result<T, String>>,
{
    let started = Instant::now();
    let mut seen = String::from("nothing yet");
    while started.elapsed() < timeout {
        match check().await {
            Ok(value) => return value,
            Err(now) => seen = now,
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("waited {timeout:?} for {what}; last saw: {seen}")
}

async fn get<K>(api: &Api<K>, name: &str) -> Result<K, String>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    match api.get_opt(name).await {
        Ok(Some(object)) => Ok(object),
        Ok(None) => Err(format!("{name} does not exist")),
        Err(error) => Err(format!("error reading {name}: {error}")),
    }
}

fn condition(status: Option<&Value>, type_: &str) -> Option<(String, String)> {
    let found = status?.get("conditions")?.as_array()?.iter().find(|c| c["type"] == type_)?;
    Some((found["status"].as_str()?.to_owned(), found["reason"].as_str()?.to_owned()))
}

fn foo_status(foo: &Foo) -> Option<Value> {
    foo.status.as_ref().and_then(|s| serde_json::to_value(s).ok())
}

fn foo_manifest(name: &str, deployment: &str, replicas: i32) -> Value {
    json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": {"name": name}, "spec": {"deploymentName": deployment, "replicas": replicas}})
}

async fn owned_deployment(cluster: &Cluster, name: &str, owner: &Foo) -> Deployment {
    let deployments = cluster.api::<Deployment>();
    let uid = owner.uid().unwrap_or_default();
    wait_for(&format!("Deployment {name} controlled by the Foo"), SHORT, || async {
        let deployment = get(&deployments, name).await?;
        let controlled =
            deployment.owner_references().iter().any(|o| o.uid == uid && o.controller == Some(true));
        if controlled { Ok(deployment) } else { Err(format!("owners {:?}", deployment.owner_references())) }
    })
    .await
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn a_new_foo_gets_its_deployment_and_becomes_ready() {
    in_cluster("new", async |cluster| {
        let text = include_str!("../examples/foo.yaml");
        let manifest: Value = serde_saphyr::from_str(text).expect("examples/foo.yaml");
        let foo: Foo = cluster.create(manifest).await;
        let deployment = owned_deployment(cluster, "example-foo", &foo).await;
        let labels = deployment.labels();
        assert_eq!(labels.get("app").map(String::as_str), Some("nginx"));
        assert_eq!(labels.get("controller").map(String::as_str), Some("example-foo"));
        assert_eq!(labels.get("app.kubernetes.io/managed-by").map(String::as_str), Some("envoy-operator"));
        let foos = cluster.api::<Foo>();
        wait_for("the Foo's status to observe generation 1", SHORT, || async {
            let foo = get(&foos, "example-foo").await?;
            let status = foo_status(&foo);
            match status.as_ref().map(|s| s["observedGeneration"].clone()) {
                Some(generation) if generation == 1 => Ok(()),
                _ => Err(format!("status {status:?}")),
            }
        })
        .await;
        if cluster.schedulable {
            wait_for("the Foo to be Ready with 1 available replica", LONG, || async {
                let foo = get(&foos, "example-foo").await?;
                let status = foo_status(&foo);
                let ready = condition(status.as_ref(), "Ready");
                match (&ready, status.as_ref().map(|s| s["availableReplicas"].clone())) {
                    (Some((s, _)), Some(available)) if s == "True" && available == 1 => Ok(()),
                    _ => Err(format!("Ready {ready:?}, status {status:?}")),
                }
            })
            .await;
            // Steady state: an unrelated change reconciles but writes nothing.
            let annotate = json!({"metadata": {"annotations": {"e2e/touched": "yes"}}});
            let touched = foos
                .patch("example-foo", &PatchParams::default(), &Patch::Merge(&annotate))
                .await
                .expect("annotate the Foo");
            tokio::time::sleep(Duration::from_secs(5)).await;
            let after = get(&foos, "example-foo").await.expect("the Foo");
            assert_eq!(
                after.resource_version(),
                touched.resource_version(),
                "no status write at steady state"
            );
        }
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn a_foreign_deployment_is_left_alone_and_reported() {
    in_cluster("foreign", async |cluster| {
        let foreign = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "taken"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "mine"}},
                "template": {"metadata": {"labels": {"app": "mine"}},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}});
        let before: Deployment = cluster.create(foreign).await;
        let _: Foo = cluster.create(foo_manifest("claimer", "taken", 1)).await;
        let foos = cluster.api::<Foo>();
        wait_for("Ready=False with reason ErrResourceExists", SHORT, || async {
            let foo = get(&foos, "claimer").await?;
            match condition(foo_status(&foo).as_ref(), "Ready") {
                Some((status, reason)) if status == "False" && reason == "ErrResourceExists" => Ok(()),
                other => Err(format!("Ready {other:?}")),
            }
        })
        .await;
        let events: Api<Event> = cluster.api();
        wait_for("a Warning event ErrResourceExists on the Foo", SHORT, || async {
            let list = events.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
            let found = list.items.iter().any(|e| {
                e.reason.as_deref() == Some("ErrResourceExists")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("claimer")
            });
            if found { Ok(()) } else { Err(format!("{} events, none matching", list.items.len())) }
        })
        .await;
        let after = get(&cluster.api::<Deployment>(), "taken").await.expect("the foreign Deployment");
        assert!(after.owner_references().is_empty(), "never adopted");
        assert_eq!(after.spec, before.spec, "never changed");
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn renaming_replaces_the_deployment() {
    in_cluster("rename", async |cluster| {
        let foo: Foo = cluster.create(foo_manifest("mover", "first", 1)).await;
        owned_deployment(cluster, "first", &foo).await;
        let rename = json!({"spec": {"deploymentName": "second"}});
        cluster
            .api::<Foo>()
            .patch("mover", &PatchParams::default(), &Patch::Merge(&rename))
            .await
            .expect("rename");
        owned_deployment(cluster, "second", &foo).await;
        let deployments = cluster.api::<Deployment>();
        wait_for("the old Deployment to be deleted", SHORT, || async {
            match deployments.get_opt("first").await {
                Ok(None) => Ok(()),
                Ok(Some(d)) if d.metadata.deletion_timestamp.is_some() => Ok(()),
                Ok(Some(_)) => Err("first still exists".to_owned()),
                Err(error) => Err(error.to_string()),
            }
        })
        .await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn drift_is_corrected() {
    in_cluster("drift", async |cluster| {
        let foo: Foo = cluster.create(foo_manifest("steady", "steady", 1)).await;
        owned_deployment(cluster, "steady", &foo).await;
        let deployments = cluster.api::<Deployment>();
        let scale = json!({"spec": {"replicas": 4}});
        deployments
            .patch("steady", &PatchParams::apply("someone-else").force(), &Patch::Apply(&json!({
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "steady"}, "spec": scale["spec"]
            })))
            .await
            .expect("scale the Deployment behind the operator's back");
        wait_for("spec.replicas to be put back to 1", SHORT, || async {
            let deployment = get(&deployments, "steady").await?;
            match deployment.spec.as_ref().and_then(|s| s.replicas) {
                Some(1) => Ok(()),
                other => Err(format!("replicas {other:?}")),
            }
        })
        .await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn an_envoy_bootstrap_change_rolls_the_fleet() {
    in_cluster("envoy", async |cluster| {
        let text = include_str!("../examples/envoy.yaml");
        let manifest: Value = serde_saphyr::from_str(text).expect("examples/envoy.yaml");
        let _: Envoy = cluster.create(manifest).await;
        let (config_maps, deployments, services) =
            (cluster.api::<ConfigMap>(), cluster.api::<Deployment>(), cluster.api::<Service>());
        let hash_of = |d: &Deployment| {
            d.spec
                .as_ref()
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.annotations.as_ref())
                .and_then(|a| a.get(CONFIG_HASH_ANNOTATION).cloned())
        };
        let first = wait_for("the ConfigMap, Deployment and Service", SHORT, || async {
            get(&config_maps, "envoy-cfg-1").await?;
            get(&services, "webserver-beta").await?;
            let deployment = get(&deployments, "webserver-beta").await?;
            hash_of(&deployment).ok_or_else(|| "no config hash on the pod template".to_owned())
        })
        .await;
        let envoys = cluster.api::<Envoy>();
        let change = json!({"spec": {"xds": {"port": 19001}}});
        envoys
            .patch("edge-envoy", &PatchParams::default(), &Patch::Merge(&change))
            .await
            .expect("change xDS port");
        let second = wait_for("a new bootstrap and config hash", SHORT, || async {
            let cm = get(&config_maps, "envoy-cfg-1").await?;
            let bootstrap = cm.data.and_then(|d| d.get("envoy.yaml").cloned()).unwrap_or_default();
            if !bootstrap.contains("19001") {
                return Err("bootstrap still points at 19000".to_owned());
            }
            let hash = hash_of(&get(&deployments, "webserver-beta").await?);
            match hash {
                Some(hash) if hash != first => Ok(hash),
                other => Err(format!("hash {other:?}")),
            }
        })
        .await;
        wait_for("status.configHash to report the new hash", SHORT, || async {
            let envoy = get(&envoys, "edge-envoy").await?;
            let reported = envoy.status.and_then(|s| s.config_hash);
            if reported.as_deref() == Some(second.as_str()) { Ok(()) } else { Err(format!("{reported:?}")) }
        })
        .await;
    })
    .await;
}
