//! Foo -> Deployment: ownership, status and `Ready`, the scale subresource, a foreign
//! Deployment, renaming, drift, deletion. Every story runs in both modes (in-process and
//! `E2E_IN_CLUSTER=1`); `Ready=True` needs a node that takes pods (it fails, saying why, on a
//! cluster without one, unless `E2E_NO_NODES=1` declares it); deletion needs the garbage
//! collector (kube-controller-manager).

use std::time::Duration;

use envoy_operator_core::api::Foo;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::harness::{Cluster, LONG, SHORT, condition, get, gone, in_cluster, pods_state, wait_for};

pub fn foo_status(foo: &Foo) -> Option<Value> {
    foo.status.as_ref().and_then(|s| serde_json::to_value(s).ok())
}

pub fn foo_manifest(name: &str, deployment: &str, replicas: i32) -> Value {
    json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": {"name": name}, "spec": {"deploymentName": deployment, "replicas": replicas}})
}

pub async fn owned_deployment(cluster: &Cluster, name: &str, owner: &Foo) -> Deployment {
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
        let text = include_str!("../../examples/foo.yaml");
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
        let ready =
            condition(foo_status(&get(&foos, "example-foo").await.expect("the Foo")).as_ref(), "Ready");
        assert!(ready.is_some(), "a Ready condition is reported from the first status write");
        if cluster.runs_pods("the Foo's Ready=True and availableReplicas") {
            let pods = cluster.api::<Pod>();
            wait_for("the Foo to be Ready with 1 available replica (pods must start)", LONG, || async {
                let foo = get(&foos, "example-foo").await?;
                let status = foo_status(&foo);
                let ready = condition(status.as_ref(), "Ready");
                match (&ready, status.as_ref().map(|s| s["availableReplicas"].clone())) {
                    (Some((s, _)), Some(available)) if s == "True" && available == 1 => Ok(()),
                    _ => Err(format!(
                        "Ready {ready:?}, status {status:?}; pods: {}",
                        pods_state(&pods, "controller=example-foo").await
                    )),
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
        wait_for("the old Deployment first to be deleted", SHORT, || gone(&deployments, "first")).await;
        let owned = deployments.list(&ListParams::default()).await.expect("list Deployments");
        let names: Vec<String> = owned.items.iter().map(|d| d.name_any()).collect();
        assert_eq!(
            names.iter().filter(|n| !n.starts_with("first")).count(),
            1,
            "one live Deployment: {names:?}"
        );
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
async fn kubectl_scale_goes_through_the_scale_subresource() {
    in_cluster("scale", async |cluster| {
        let foo: Foo = cluster.create(foo_manifest("scaled", "scaled", 1)).await;
        owned_deployment(cluster, "scaled", &foo).await;
        let foos = cluster.api::<Foo>();
        // What `kubectl scale foo scaled --replicas=3` sends: a patch of foos/scaled/scale.
        let scale = foos
            .patch_scale("scaled", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"replicas": 3}})))
            .await
            .expect("patching the scale subresource");
        assert_eq!(scale.spec.and_then(|s| s.replicas), Some(3));
        assert_eq!(get(&foos, "scaled").await.expect("the Foo").spec.replicas, Some(3), "spec.replicas");
        let deployments = cluster.api::<Deployment>();
        wait_for("the Deployment to be scaled to 3", SHORT, || async {
            let deployment = get(&deployments, "scaled").await?;
            match deployment.spec.as_ref().and_then(|s| s.replicas) {
                Some(3) => Ok(()),
                other => Err(format!("replicas {other:?}")),
            }
        })
        .await;
        // status.selector feeds the scale subresource's selector (what an HPA uses).
        let scale = wait_for("the scale subresource to report the pod selector", SHORT, || async {
            let scale = foos.get_scale("scaled").await.map_err(|e| e.to_string())?;
            match scale.status.as_ref().and_then(|s| s.selector.clone()) {
                Some(selector) if !selector.is_empty() => Ok(selector),
                _ => Err(format!("scale {scale:?}")),
            }
        })
        .await;
        assert!(scale.contains("controller=scaled"), "selects the Foo's pods: {scale}");
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn deleting_a_foo_removes_its_deployment() {
    in_cluster("delete-foo", async |cluster| {
        let foo: Foo = cluster.create(foo_manifest("doomed", "doomed", 1)).await;
        owned_deployment(cluster, "doomed", &foo).await;
        let foos = cluster.api::<Foo>();
        foos.delete("doomed", &DeleteParams::background()).await.expect("delete the Foo");
        wait_for("the Foo to be gone", SHORT, || gone(&foos, "doomed")).await;
        // As `kubectl delete` (background propagation): the garbage collector
        // (kube-controller-manager) then removes the owned Deployment; a
        // control plane without one (e.g. a bare API server) never does.
        let deployments: Api<Deployment> = cluster.api();
        wait_for(
            "the garbage collector to delete the Deployment the Foo owned (needs kube-controller-manager)",
            SHORT,
            || gone(&deployments, "doomed"),
        )
        .await;
        // The operator does not bring it back for a parent that is gone.
        tokio::time::sleep(Duration::from_secs(3)).await;
        gone(&deployments, "doomed").await.expect("the Deployment stays deleted");
    })
    .await;
}
