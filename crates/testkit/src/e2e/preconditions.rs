//! What a story needs of the cluster, asked before it relies on it, and said plainly when it is
//! missing: a node that runs pods, the operator deployed from `deploy/` (`E2E_IN_CLUSTER=1`), no
//! other operator reconciling what an in-process one does; and why a pod is not running.

use std::time::{Duration, SystemTime};

use envoy_operator_core::names::LEADER_LEASE;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

/// The operator `kubectl apply -k deploy/` installs: its namespace, Deployment and webhook
/// configurations' name.
pub const DEPLOYED_NAMESPACE: &str = "envoy-operator";
pub const DEPLOYED_NAME: &str = "envoy-operator";

/// `E2E_NO_NODES=1`: the cluster runs no pods (a control plane alone), so checks that need
/// running pods are skipped, with a note, instead of failing.
pub fn no_nodes_declared() -> bool {
    std::env::var("E2E_NO_NODES").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// `Ok` when some node is Ready and takes ordinary pods; else why none does, node by node.
pub async fn schedulable_node(client: &Client) -> Result<(), String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let nodes = nodes.list(&ListParams::default()).await.map_err(|e| format!("listing the nodes: {e}"))?;
    let mut reasons = Vec::new();
    for node in &nodes.items {
        match unschedulable_because(node) {
            None => return Ok(()),
            Some(reason) => reasons.push(format!("{}: {reason}", node.name_any())),
        }
    }
    if reasons.is_empty() {
        return Err("the cluster has no node".to_owned());
    }
    Err(format!("no node takes pods ({})", reasons.join("; ")))
}

/// Why `node` takes no ordinary pod (no toleration), if it does not.
fn unschedulable_because(node: &Node) -> Option<String> {
    let spec = node.spec.clone().unwrap_or_default();
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    if !ready {
        return Some("not Ready".to_owned());
    }
    if spec.unschedulable.unwrap_or(false) {
        return Some("cordoned".to_owned());
    }
    let taints: Vec<String> = spec
        .taints
        .iter()
        .flatten()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect();
    (!taints.is_empty()).then(|| format!("tainted {}", taints.join(", ")))
}

/// An operator holding its leader Lease: it reconciles whatever it watches.
#[derive(Clone, Debug)]
pub struct LiveOperator {
    pub namespace: String,
    pub holder: String,
    /// Seconds since it last renewed the Lease.
    pub renewed_ago: f64,
}

impl std::fmt::Display for LiveOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Lease {}/{LEADER_LEASE} held by {} (renewed {:.0} s ago)",
            self.namespace, self.holder, self.renewed_ago
        )
    }
}

/// Every operator of the cluster that holds its leader Lease (held, and renewed within its
/// duration), with the labels of its namespace.
pub async fn live_operators(
    client: &Client,
) -> Vec<(LiveOperator, std::collections::BTreeMap<String, String>)> {
    let leases: Api<Lease> = Api::all(client.clone());
    let by_name = ListParams::default().fields(&format!("metadata.name={LEADER_LEASE}"));
    let leases = leases.list(&by_name).await.unwrap_or_else(|error| {
        panic!("listing the operators' Leases ({LEADER_LEASE}) to find running operators: {error}")
    });
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut live = Vec::new();
    for lease in leases.items {
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.unwrap_or_default();
        let (Some(renewed), Some(seconds)) = (spec.renew_time, spec.lease_duration_seconds) else { continue };
        let renewed_ago = SystemTime::now()
            .duration_since(SystemTime::from(renewed.0))
            .unwrap_or(Duration::ZERO)
            .as_secs_f64();
        if holder.is_empty() || renewed_ago > f64::from(seconds.max(0)) {
            continue;
        }
        let namespace = lease.namespace().unwrap_or_default();
        let labels = match namespaces.get_opt(&namespace).await {
            Ok(Some(found)) => found.labels().clone(),
            _ => Default::default(),
        };
        live.push((LiveOperator { namespace, holder, renewed_ago }, labels));
    }
    live
}

/// With `E2E_IN_CLUSTER=1`: fails, saying what to do, unless the operator of `deploy/` is
/// there, available, watching every namespace, with its webhook configurations.
pub async fn require_deployed_operator(client: &Client) {
    let apply = "apply it first (`kubectl apply -k deploy/`, its image loaded into the cluster) or run without E2E_IN_CLUSTER";
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), DEPLOYED_NAMESPACE);
    let deployment = match deployments.get_opt(DEPLOYED_NAME).await {
        Ok(Some(deployment)) => deployment,
        Ok(None) => panic!(
            "E2E_IN_CLUSTER=1, but there is no operator deployed from deploy/ (no Deployment {DEPLOYED_NAMESPACE}/{DEPLOYED_NAME}): {apply}"
        ),
        Err(error) => panic!("reading the deployed operator {DEPLOYED_NAMESPACE}/{DEPLOYED_NAME}: {error}"),
    };
    let args: Vec<String> = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.args.clone())
        .unwrap_or_default();
    if let Some(scoped) = args.iter().find(|arg| arg.starts_with("--watch-namespace")) {
        panic!(
            "E2E_IN_CLUSTER=1, but the deployed operator watches one namespace ({scoped}: deploy-namespaced/), and each story makes namespaces of its own: deploy the cluster-wide install (`kubectl apply -k deploy/`)"
        );
    }
    let available = deployment.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0);
    if available < 1 {
        panic!(
            "E2E_IN_CLUSTER=1, but the deployed operator {DEPLOYED_NAMESPACE}/{DEPLOYED_NAME} has no available replica: {:?}",
            deployment.status.as_ref().map(|s| (&s.replicas, &s.conditions))
        );
    }
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let configured = (mutating.get_opt(DEPLOYED_NAME).await, validating.get_opt(DEPLOYED_NAME).await);
    if !matches!(configured, (Ok(Some(_)), Ok(Some(_)))) {
        panic!(
            "E2E_IN_CLUSTER=1, but the webhook configurations {DEPLOYED_NAME} of deploy/ are missing or unreadable: {apply}"
        );
    }
}

/// Why `pod` is where it is: its phase, why it is not scheduled, and each container's state
/// (waiting or terminated, with the reason: `ErrImagePull`, `Unschedulable: 0/1 nodes…`).
pub fn pod_state(pod: &Pod) -> String {
    let Some(status) = &pod.status else { return format!("{}: no status yet", pod.name_any()) };
    let mut parts = vec![format!("{}: {}", pod.name_any(), status.phase.as_deref().unwrap_or("no phase"))];
    for condition in status.conditions.iter().flatten().filter(|c| c.status == "False") {
        let reason = condition.reason.as_deref().unwrap_or("");
        let message = condition.message.as_deref().unwrap_or("");
        if !reason.is_empty() || !message.is_empty() {
            parts.push(format!("{} False {reason} {message}", condition.type_).trim_end().to_owned());
        }
    }
    let containers =
        status.init_container_statuses.iter().flatten().chain(status.container_statuses.iter().flatten());
    for container in containers {
        let state = container.state.as_ref();
        if let Some(waiting) = state.and_then(|s| s.waiting.as_ref()) {
            let reason = waiting.reason.as_deref().unwrap_or("waiting");
            let message = waiting.message.as_deref().unwrap_or("");
            parts.push(format!("{} waiting: {reason} {message}", container.name).trim_end().to_owned());
        } else if let Some(terminated) = state.and_then(|s| s.terminated.as_ref()) {
            let reason = terminated.reason.as_deref().unwrap_or("terminated");
            parts.push(format!("{} terminated: {reason} (exit {})", container.name, terminated.exit_code));
        } else if !container.ready {
            parts.push(format!("{} running, not ready", container.name));
        }
    }
    parts.join("; ")
}

/// [`pod_state`] of every pod `selector` selects in `pods`' namespace.
pub async fn pods_state(pods: &Api<Pod>, selector: &str) -> String {
    match pods.list(&ListParams::default().labels(selector)).await {
        Ok(list) if list.items.is_empty() => format!("no pod {selector}"),
        Ok(list) => list.items.iter().map(pod_state).collect::<Vec<_>>().join(" | "),
        Err(error) => format!("listing pods {selector}: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node(value: serde_json::Value) -> Node {
        serde_json::from_value(value).expect("a Node")
    }

    #[test]
    fn a_node_takes_pods_when_ready_uncordoned_and_untainted() {
        let ready = json!({"metadata": {"name": "n"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(unschedulable_because(&node(ready.clone())), None);
        let mut tainted = ready.clone();
        tainted["spec"] = json!({"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
                                             {"key": "soft", "effect": "PreferNoSchedule"}]});
        assert_eq!(
            unschedulable_because(&node(tainted)).as_deref(),
            Some("tainted node-role.kubernetes.io/control-plane:NoSchedule")
        );
        let mut cordoned = ready;
        cordoned["spec"] = json!({"unschedulable": true});
        assert_eq!(unschedulable_because(&node(cordoned)).as_deref(), Some("cordoned"));
        let not_ready = json!({"metadata": {"name": "n"}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        assert_eq!(unschedulable_because(&node(not_ready)).as_deref(), Some("not Ready"));
    }

    #[test]
    fn a_pods_state_says_why_it_is_not_running() {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "client"}, "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                            "message": "0/1 nodes are available: 1 Insufficient cpu."}],
            "containerStatuses": [{"name": "curl", "image": "curl", "imageID": "", "ready": false, "restartCount": 0,
                                   "state": {"waiting": {"reason": "ErrImagePull", "message": "not found"}}}]}}))
        .expect("a Pod");
        assert_eq!(
            pod_state(&pod),
            "client: Pending; PodScheduled False Unschedulable 0/1 nodes are available: 1 Insufficient cpu.; curl waiting: ErrImagePull not found"
        );
    }
}
