//! The admission path as users meet it through `kubectl apply`: the seed manifests come back
//! defaulted; invalid objects are refused naming the field, by the webhook and, with the
//! webhook configurations removed, still by the CRD schema and its CEL rules.
//!
//! Order in the API server: mutating webhooks, then the CRD schema (OpenAPI + CEL), then the
//! validating webhooks. An object the schema refuses therefore never reaches `/validate`; what
//! the webhook alone answers is an object that does not even read as a Foo/Envoy (a string
//! for `spec.replicas`), which `/mutate` refuses with `400` naming the field.

use envoy_operator_core::api::{Envoy, EnvoyRoute, Foo};
use envoy_operator_core::manifest::parse_documents;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::harness::{SHORT, api_error, get, in_cluster, in_cluster_mode, wait_for};

fn manifest(text: &str) -> Value {
    serde_saphyr::from_str(text).expect("an example manifest")
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn the_seed_examples_apply_unchanged_and_come_back_defaulted() {
    in_cluster("examples", async |cluster| {
        let foo: Foo = cluster.create(manifest(include_str!("../fixtures/seeds/foo.yaml"))).await;
        assert_eq!(foo.spec.deployment_name.as_deref(), Some("example-foo"));
        assert_eq!(foo.spec.replicas, Some(1));
        let sparse: Foo = cluster
            .create(json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
                "metadata": {"name": "sparse"}, "spec": {}}))
            .await;
        assert_eq!(sparse.spec.deployment_name.as_deref(), Some("sparse"), "defaulted to its own name");
        assert_eq!(sparse.spec.replicas, Some(1), "defaulted to one replica");

        let envoy: Envoy = cluster.create(manifest(include_str!("../fixtures/seeds/envoy.yaml"))).await;
        assert_eq!(envoy.spec.name.as_deref(), Some("webserver-beta"), "kept as written");
        assert_eq!(envoy.spec.replicas, Some(3), "kept as written");
        assert!(envoy.spec.image.is_some(), "the image is defaulted: {:?}", envoy.spec);
        assert!(!envoy.spec.ports.is_empty(), "listener ports are defaulted: {:?}", envoy.spec);
    })
    .await;
}

/// `kubectl apply -f examples/`, file by file in its order, into one namespace: every example
/// is admitted as written, and the route is accepted by both Envoys it names (the operator's
/// `status.summary`). Pods naming an Envoy the injector's cache has not seen yet are refused,
/// and created again, as a ReplicaSet would.
#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn the_examples_apply_together_and_the_route_is_accepted_by_both_envoys() {
    const EXAMPLES: [(&str, &str); 8] = [
        ("backends.yaml", include_str!("../../examples/backends.yaml")),
        ("deployment.yaml", include_str!("../../examples/deployment.yaml")),
        ("envoy-full.yaml", include_str!("../../examples/envoy-full.yaml")),
        ("envoy.yaml", include_str!("../../examples/envoy.yaml")),
        ("envoyroute.yaml", include_str!("../../examples/envoyroute.yaml")),
        ("foo-minimal.yaml", include_str!("../../examples/foo-minimal.yaml")),
        ("foo.yaml", include_str!("../../examples/foo.yaml")),
        ("pod.yaml", include_str!("../../examples/pod.yaml")),
    ];
    in_cluster("together", async |cluster| {
        for (file, text) in EXAMPLES {
            for document in parse_documents(text) {
                let object = document.content.unwrap_or_else(|e| panic!("{file}: {e}"));
                match object["kind"].as_str() {
                    Some("Deployment") => drop(cluster.create::<Deployment>(object).await),
                    Some("Service") => drop(cluster.create::<Service>(object).await),
                    Some("Envoy") => drop(cluster.create::<Envoy>(object).await),
                    Some("EnvoyRoute") => drop(cluster.create::<EnvoyRoute>(object).await),
                    Some("Foo") => drop(cluster.create::<Foo>(object).await),
                    Some("Pod") => {
                        let pods = cluster.api::<Pod>();
                        let pod: Pod = serde_json::from_value(object).expect("a Pod");
                        wait_for(&format!("{file}: the Pod created"), SHORT, || async {
                            pods.create(&PostParams::default(), &pod)
                                .await
                                .map(drop)
                                .map_err(|e| e.to_string())
                        })
                        .await;
                    }
                    other => panic!("{file}: an example of kind {other:?} this story does not create"),
                }
            }
        }
        let routes = cluster.api::<EnvoyRoute>();
        wait_for("the route accepted by both Envoys (status.summary.accepted 2/2)", SHORT, || async {
            let route = get(&routes, "shop").await?;
            let summary = route.status.and_then(|s| s.summary);
            match summary.as_ref().map(|s| s.accepted.as_str()) {
                Some("2/2") => Ok(()),
                _ => Err(format!("{summary:?}")),
            }
        })
        .await;
    })
    .await;
}

/// What a refused create answered: `(code, message)`.
async fn refused<K>(api: &Api<K>, object: &Value) -> Result<(u16, String), String>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
{
    // Raw JSON: `replicas: "three"` must reach the API server as written.
    let body = serde_json::to_vec(object).map_err(|e| e.to_string())?;
    let request = http::Request::post(api.resource_url())
        .header("Content-Type", "application/json")
        .body(body)
        .map_err(|e| e.to_string())?;
    match api.clone().into_client().request::<K>(request).await {
        Ok(created) => Err(format!("created {}: not refused", kube::ResourceExt::name_any(&created))),
        Err(error) => Ok(api_error(error)),
    }
}

fn unreadable_foo() -> Value {
    json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": {"name": "unreadable"}, "spec": {"replicas": "three"}})
}

fn unreadable_envoy() -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Envoy",
        "metadata": {"name": "unreadable"}, "spec": {"replicas": "many"}})
}

fn out_of_range_foo() -> Value {
    json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
        "metadata": {"name": "negative"}, "spec": {"deploymentName": "negative", "replicas": -1}})
}

/// A listener on the admin port: refused by a CEL rule (`x-kubernetes-validations`).
fn reserved_port_envoy() -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {"name": "reserved"},
        "spec": {"xds": {"host": "xds.default", "port": 18000},
            "ports": [{"name": "admin", "port": 9901}]}})
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn invalid_objects_are_refused_by_the_webhook_and_without_it_by_the_schema() {
    in_cluster("invalid", async |cluster| {
        let (foos, envoys) = (cluster.api::<Foo>(), cluster.api::<Envoy>());
        for (webhook, object, field) in [
            ("foos.samplecontroller.k8s.io", unreadable_foo(), "spec.replicas"),
            ("envoys.example.com", unreadable_envoy(), "spec.replicas"),
        ] {
            let answer = match webhook {
                "foos.samplecontroller.k8s.io" => refused(&foos, &object).await,
                _ => refused(&envoys, &object).await,
            };
            let (code, message) = answer.unwrap_or_else(|e| panic!("{webhook}: {e}"));
            assert_eq!(code, 400, "{message}");
            assert!(
                message.starts_with(&format!("admission webhook \"{webhook}\" denied the request")),
                "{message}"
            );
            assert!(message.contains(field), "names {field}: {message}");
        }
        // Refused by the schema (before any validating webhook): 422 naming the field.
        let (code, message) = refused(&foos, &out_of_range_foo()).await.expect("refused");
        assert_eq!(code, 422, "{message}");
        assert!(message.contains("spec.replicas"), "{message}");
        let (code, message) = refused(&envoys, &reserved_port_envoy()).await.expect("refused");
        assert_eq!(code, 422, "{message}");
        assert!(message.contains("spec.ports[0]") && message.contains("reserved"), "{message}");

        if in_cluster_mode() {
            eprintln!("note: E2E_IN_CLUSTER=1: the deployed webhook configurations are not removed");
            return;
        }
        cluster.remove_webhook_configurations().await;
        // Configurations stop applying a little after they are deleted: until then the webhook
        // still refuses (nothing is created either way).
        for (object, kind) in [(unreadable_foo(), "Foo"), (unreadable_envoy(), "Envoy")] {
            let (code, message) = wait_for(
                &format!("the unreadable {kind} to be refused by the CRD schema, not the webhook"),
                SHORT,
                || async {
                    let answer = match kind {
                        "Foo" => refused(&foos, &object).await?,
                        _ => refused(&envoys, &object).await?,
                    };
                    if answer.1.contains("admission webhook") { Err(answer.1) } else { Ok(answer) }
                },
            )
            .await;
            assert_eq!(code, 422, "{message}");
            assert!(message.contains("spec.replicas") && message.contains("integer"), "{message}");
        }
        let (code, message) = refused(&foos, &out_of_range_foo()).await.expect("refused");
        assert_eq!(code, 422, "{message}");
        assert!(message.contains("spec.replicas"), "{message}");
        let (code, message) = refused(&envoys, &reserved_port_envoy()).await.expect("refused");
        assert_eq!(code, 422, "{message}");
        assert!(message.contains("reserved"), "the CEL rule's message: {message}");
    })
    .await;
}
