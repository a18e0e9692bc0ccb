//! A fleet's workload identity on a real API server: the operator issues an Envoy of its
//! control plane a client certificate into the Secret `<envoy>-xds-identity` (which the
//! operator may write but not read; the admission policy, where installed, lets it write only
//! its own `kubernetes.io/tls` Secrets), the fleet's pods mount it, and it goes with the Envoy.
//! Kubernetes 1.28+ (what the operator supports); the garbage collector deletes the Secret, so
//! the last step needs kube-controller-manager.

use std::collections::BTreeMap;

use envoy_operator_core::api::Envoy;
use envoy_operator_core::{identity, names};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::DeleteParams;
use serde_json::json;

use crate::harness::{SHORT, get, gone, in_cluster, wait_for};

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn an_envoy_of_the_operators_control_plane_gets_an_identity_that_goes_with_it() {
    in_cluster("identity", async |cluster| {
        // No spec.xds: the operator's control plane serves it, so it gets an identity.
        let envoy: Envoy = cluster
            .create(json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {"name": "mesh"},
                           "spec": {"replicas": 0, "ports": [{"name": "http", "port": 80, "targetPort": 10080}]}}))
            .await;
        let secrets = cluster.api::<Secret>();
        let name = identity::secret_name("mesh");
        let secret = wait_for("the fleet's identity Secret", SHORT, || async { get(&secrets, &name).await }).await;
        assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
        assert_eq!(secret.labels().get(names::XDS_IDENTITY_SECRET_LABEL).map(String::as_str), Some("mesh"));
        let owner = secret.owner_references().first().cloned().expect("an owner reference");
        assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Envoy", envoy.uid().unwrap_or_default().as_str()));
        let data: BTreeMap<_, _> = secret.data.clone().unwrap_or_default();
        let sds = String::from_utf8(data.get(identity::SDS_KEY).expect("the SDS file").0.clone()).expect("UTF-8");
        assert!(sds.contains("tls_certificate") && sds.contains("BEGIN CERTIFICATE"), "{sds}");
        assert!(data.contains_key("tls.crt") && data.contains_key("tls.key"));

        // The fleet's pods mount it; the Deployment records what was issued, for renewals.
        let deployments = cluster.api::<Deployment>();
        let deployment = wait_for("the fleet's Deployment", SHORT, || async { get(&deployments, "mesh").await }).await;
        assert!(deployment.annotations().contains_key(names::XDS_IDENTITY_ISSUED_ANNOTATION), "{:?}", deployment.annotations());
        let pod = deployment.spec.and_then(|spec| spec.template.spec).expect("a pod template");
        let volume = pod.volumes.unwrap_or_default().into_iter().find_map(|volume| volume.secret);
        assert_eq!(volume.and_then(|secret| secret.secret_name), Some(name.clone()));

        let envoys = cluster.api::<Envoy>();
        envoys.delete("mesh", &DeleteParams::background()).await.expect("delete the Envoy");
        wait_for(
            "the garbage collector to delete the identity Secret (needs kube-controller-manager)",
            SHORT,
            || gone(&secrets, &name),
        )
        .await;
    })
    .await;
}
