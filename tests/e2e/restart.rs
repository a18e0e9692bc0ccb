//! The operator is killed mid-way (its runtime dropped: no graceful shutdown, the Lease left
//! held) and started again under a new identity: everything converges, nothing is duplicated,
//! and what was already right is not rewritten. In-process only: with `E2E_IN_CLUSTER=1` the
//! story does not apply (the deployed operator is not this test's to kill) and is skipped with a
//! note.

use std::collections::BTreeMap;
use std::time::Duration;

use envoy_operator_core::api::{Envoy, Foo};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::foo::foo_manifest;
use crate::harness::{LEASE, SHORT, in_cluster, in_cluster_mode, wait_for};

const FOOS: usize = 6;

/// The Foos' Deployments (those with a Foo owner; not the Envoy's): name -> (owner Foo uids,
/// metadata.generation, spec.replicas).
async fn deployments(cluster: &crate::harness::Cluster) -> BTreeMap<String, (Vec<String>, i64, i32)> {
    let list = cluster.api::<Deployment>().list(&ListParams::default()).await.expect("list Deployments");
    list.items
        .iter()
        .filter(|d| d.metadata.deletion_timestamp.is_none())
        .filter(|d| d.owner_references().iter().any(|o| o.kind == "Foo"))
        .map(|d| {
            let owners =
                d.owner_references().iter().filter(|o| o.kind == "Foo").map(|o| o.uid.clone()).collect();
            let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            (d.name_any(), (owners, d.metadata.generation.unwrap_or(0), replicas))
        })
        .collect()
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn a_killed_operator_restarts_and_converges_without_duplicates() {
    in_cluster("restart", async |cluster| {
        if in_cluster_mode() {
            eprintln!("note: E2E_IN_CLUSTER=1: the deployed operator is not killed by this test; skipped");
            return;
        }
        let foos = cluster.api::<Foo>();
        for i in 0..FOOS {
            let _: Foo = cluster.create(foo_manifest(&format!("foo-{i}"), &format!("foo-{i}"), 1)).await;
        }
        let _: Envoy = cluster
            .create(json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {"name": "edge"},
                "spec": {"replicas": 1, "xds": {"host": "xds.default", "port": 18000}}}))
            .await;
        // Mid-way: as soon as the first Deployment exists.
        wait_for("the first Deployment to exist", SHORT, || async {
            let found = deployments(cluster).await;
            if found.is_empty() { Err("no Deployment yet".to_owned()) } else { Ok(()) }
        })
        .await;
        let operator = cluster.operator.lock().await.take().expect("the operator");
        let dead = operator.identity.clone();
        operator.kill();
        let at_kill = deployments(cluster).await;
        eprintln!("killed {dead} with {} of {FOOS} Deployments created", at_kill.len());

        // While it is down (and its webhook with it, so Foo/Envoy writes would be refused):
        // a child deleted and another scaled behind its back.
        let deployment_api = cluster.api::<Deployment>();
        let mut tampered = Vec::new();
        if let Some(first) = at_kill.keys().next().cloned() {
            deployment_api.delete(&first, &DeleteParams::background()).await.expect("delete a Deployment");
            tampered.push(first);
        }
        if let Some(second) = at_kill.keys().nth(1).cloned() {
            let scale = json!({"spec": {"replicas": 5}});
            deployment_api
                .patch_scale(&second, &PatchParams::default(), &Patch::Merge(&scale))
                .await
                .expect("scale a Deployment");
            tampered.push(second);
        }

        cluster.start_operator(&format!("e2e-{}-2", cluster.run_id)).await;
        let uids: BTreeMap<String, String> = foos
            .list(&ListParams::default())
            .await
            .expect("list Foos")
            .items
            .iter()
            .map(|f| (f.name_any(), f.uid().unwrap_or_default()))
            .collect();
        let what = format!(
            "every Foo to have exactly one Deployment at 1 replica and an observed status, after the \
             restart (the new leader first waits up to {LEASE:?} for {dead}'s Lease to expire)"
        );
        wait_for(&what, SHORT + LEASE, || async {
            let found = deployments(cluster).await;
            for (name, uid) in &uids {
                let owned: Vec<_> = found.iter().filter(|(_, (owners, _, _))| owners.contains(uid)).collect();
                match owned.as_slice() {
                    [(deployment, (_, _, 1))] if deployment.as_str() == name.as_str() => {}
                    other => return Err(format!("Foo {name}: Deployments {other:?}")),
                }
                let foo = foos.get(name).await.map_err(|e| e.to_string())?;
                let observed = foo.status.as_ref().and_then(|s| s.observed_generation);
                if observed != foo.metadata.generation {
                    return Err(format!("Foo {name}: observedGeneration {observed:?}"));
                }
            }
            if found.len() != FOOS {
                return Err(format!("{} Deployments: {:?}", found.len(), found.keys()));
            }
            Ok(())
        })
        .await;
        let (config_maps, services) = (cluster.api::<ConfigMap>(), cluster.api::<Service>());
        wait_for("the Envoy's ConfigMap and Service, one each", SHORT, || async {
            let maps =
                config_maps.list(&ListParams::default().labels("app.kubernetes.io/instance=edge")).await;
            let services =
                services.list(&ListParams::default().labels("app.kubernetes.io/instance=edge")).await;
            match (maps.map(|l| l.items.len()), services.map(|l| l.items.len())) {
                (Ok(1), Ok(1)) => Ok(()),
                other => Err(format!("(ConfigMaps, Services) {other:?}")),
            }
        })
        .await;

        // What was right at the kill and left alone was not rewritten: same generation.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let after = deployments(cluster).await;
        for (name, (_, generation, _)) in at_kill.iter().filter(|(name, _)| !tampered.contains(name)) {
            let now = after.get(name).map(|(_, g, _)| *g);
            assert_eq!(now, Some(*generation), "Deployment {name} was rewritten by the restarted operator");
        }
    })
    .await;
}
