//! Envoy -> bootstrap ConfigMap, Deployment, Service: the config hash follows `spec.xds`;
//! two Envoys in one namespace keep to their own pods; deletion.

use std::collections::BTreeMap;

use envoy_operator_core::api::Envoy;
use envoy_operator_core::children::labels::CONFIG_HASH_ANNOTATION;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::harness::{SHORT, get, gone, in_cluster, wait_for};

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn an_envoy_bootstrap_change_rolls_the_fleet() {
    in_cluster("envoy", async |cluster| {
        // The seed's Envoy: its own xDS server, whose address lands in the bootstrap.
        let text = include_str!("../fixtures/seeds/envoy.yaml");
        let manifest: Value = serde_saphyr::from_str(text).expect("tests/fixtures/seeds/envoy.yaml");
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

fn envoy_manifest(name: &str, xds_port: i32) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {"name": name},
        "spec": {"replicas": 1, "xds": {"host": "xds.default", "port": xds_port}}})
}

fn matches(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn two_envoys_in_one_namespace_keep_to_their_own_pods() {
    in_cluster("two-envoys", async |cluster| {
        let _: Envoy = cluster.create(envoy_manifest("left", 18000)).await;
        let _: Envoy = cluster.create(envoy_manifest("right", 18001)).await;
        let (deployments, services) = (cluster.api::<Deployment>(), cluster.api::<Service>());
        let mut fleets = Vec::new();
        for name in ["left", "right"] {
            let fleet = wait_for(&format!("the Deployment and Service of Envoy {name}"), SHORT, || async {
                let deployment = get(&deployments, name).await?;
                let service = get(&services, name).await?;
                let spec = deployment.spec.ok_or("no Deployment spec")?;
                let selector = spec.selector.match_labels.unwrap_or_default();
                let template = spec.template.metadata.and_then(|m| m.labels).unwrap_or_default();
                let service_selector = service.spec.and_then(|s| s.selector).unwrap_or_default();
                Ok((selector, template, service_selector))
            })
            .await;
            fleets.push(fleet);
        }
        let [(left_selector, left_pods, left_service), (right_selector, right_pods, right_service)] =
            <[_; 2]>::try_from(fleets).expect("two fleets");
        assert!(matches(&left_selector, &left_pods) && matches(&right_selector, &right_pods));
        assert!(matches(&left_service, &left_pods) && matches(&right_service, &right_pods));
        assert!(!matches(&left_selector, &right_pods), "left's Deployment selects right's pods");
        assert!(!matches(&right_selector, &left_pods), "right's Deployment selects left's pods");
        assert!(!matches(&left_service, &right_pods), "left's Service selects right's pods");
        assert!(!matches(&right_service, &left_pods), "right's Service selects left's pods");
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn deleting_an_envoy_removes_its_children() {
    in_cluster("delete-envoy", async |cluster| {
        let _: Envoy = cluster.create(envoy_manifest("doomed", 18000)).await;
        let (config_maps, deployments, services) =
            (cluster.api::<ConfigMap>(), cluster.api::<Deployment>(), cluster.api::<Service>());
        wait_for("the Envoy's ConfigMap, Deployment and Service", SHORT, || async {
            get(&config_maps, "doomed-bootstrap").await?;
            get(&deployments, "doomed").await?;
            get(&services, "doomed").await.map(|_| ())
        })
        .await;
        let envoys = cluster.api::<Envoy>();
        envoys.delete("doomed", &DeleteParams::background()).await.expect("delete the Envoy");
        wait_for("the Envoy to be gone", SHORT, || gone(&envoys, "doomed")).await;
        wait_for(
            "the garbage collector to delete the ConfigMap, Deployment and Service (needs kube-controller-manager)",
            SHORT,
            || async {
                gone(&config_maps, "doomed-bootstrap").await?;
                gone(&deployments, "doomed").await?;
                gone(&services, "doomed").await
            },
        )
        .await;
    })
    .await;
}
