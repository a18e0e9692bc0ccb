//! The sidecar injector: a Pod created in a namespace labelled `envoy-injection=enabled` gets
//! the `envoy` sidecar and the status annotation; one in an unlabelled namespace and one
//! labelled `sidecar.example.com/inject=false` do not. Injection happens at admission, so
//! none of this needs a node.

use envoy_operator_core::inject::annotations::{
    INJECT_LABEL, NAMESPACE_LABEL, NAMESPACE_LABEL_ENABLED, STATUS,
};
use envoy_operator_core::inject::sidecar::CONTAINER_NAME;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::Api;
use serde_json::{Value, json};

use crate::harness::{create_in, in_cluster};

fn pod(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}})
}

fn containers(pod: &Pod) -> Vec<String> {
    let spec = pod.spec.as_ref();
    let regular = spec.map(|s| s.containers.iter().map(|c| c.name.clone()).collect::<Vec<_>>());
    let init =
        spec.and_then(|s| s.init_containers.as_ref()).map(|c| c.iter().map(|c| c.name.clone()).collect());
    regular.into_iter().chain(init).flatten().collect()
}

fn injected(pod: &Pod) -> bool {
    containers(pod).iter().any(|c| c == CONTAINER_NAME)
}

#[tokio::test]
#[ignore = "needs a Kubernetes cluster"]
async fn pods_in_a_labelled_namespace_get_the_sidecar_unless_they_opt_out() {
    in_cluster("inject", async |cluster| {
        let enabled =
            cluster.extra_namespace("injected", json!({NAMESPACE_LABEL: NAMESPACE_LABEL_ENABLED})).await;
        let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), &enabled);
        let with: Pod = create_in(&pods, pod("with", json!({"app": "with"}))).await;
        assert!(
            injected(&with),
            "a Pod in the namespace {enabled} (labelled {NAMESPACE_LABEL}={NAMESPACE_LABEL_ENABLED}) has the \
             {CONTAINER_NAME} sidecar; containers {:?} (the pod webhooks fail open: is the webhook reachable \
             from the API server?)",
            containers(&with)
        );
        assert!(with.annotations().contains_key(STATUS), "the status annotation records the injection");

        let opted_out: Pod =
            create_in(&pods, pod("without", json!({"app": "without", INJECT_LABEL: "false"}))).await;
        assert!(
            !injected(&opted_out),
            "{INJECT_LABEL}=false opts out: containers {:?}",
            containers(&opted_out)
        );
        assert!(!opted_out.annotations().contains_key(STATUS));

        let plain: Pod = cluster.create(pod("plain", json!({"app": "plain"}))).await;
        assert!(
            !injected(&plain),
            "a Pod in the unlabelled namespace {} is left alone: containers {:?}",
            cluster.namespace,
            containers(&plain)
        );
    })
    .await;
}
