//! The e2e harness is `envoy_operator_testkit::e2e`; the operator it starts in-process (the same
//! `operator::run` as `envoy-operator run`) is `envoy_operator_harness`'s.

pub use envoy_operator_harness::{in_cluster, in_cluster_watching_all};
pub use envoy_operator_testkit::e2e::*;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, LogParams, PostParams};
use serde_json::json;

/// Runs `script` (`sh -c`) in a pod of `image` (container `curl`, with `env`) to its end, at most
/// `limit`, and returns what the container printed; the pod is deleted either way. Its other
/// containers (an injected sidecar) are not read.
pub async fn script_pod_log(
    cluster: &Cluster,
    image: &str,
    script: &str,
    env: serde_json::Value,
    limit: Duration,
) -> Result<String, String> {
    let pods = cluster.api::<Pod>();
    let name = format!("probe-{}", random_suffix());
    let pod: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"restartPolicy": "Never",
                 "containers": [{"name": "curl", "image": image, "command": ["sh", "-c", script], "env": env}]}}))
    .map_err(|e| e.to_string())?;
    pods.create(&PostParams::default(), &pod).await.map_err(|e| format!("creating the probe pod: {e}"))?;
    let mut state = String::from("not read yet");
    let finished = tokio::time::timeout(limit, async {
        loop {
            if let Ok(pod) = get(&pods, &name).await {
                state = pod_state(&pod);
                let phase = pod.status.and_then(|s| s.phase);
                if matches!(phase.as_deref(), Some("Succeeded" | "Failed")) {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    let params = LogParams { container: Some("curl".to_owned()), ..LogParams::default() };
    let log = pods.logs(&name, &params).await.map_err(|e| e.to_string());
    let _ = pods.delete(&name, &DeleteParams::background()).await;
    finished.map_err(|_| format!("the probe pod did not finish in {} s: {state}", limit.as_secs()))?;
    log
}
