//! The permissions the operator's code uses, the single list `deploy/rbac.yaml` is checked
//! against. Change both together: a verb the code uses but RBAC lacks fails in production only.

use envoy_operator_core::names::{LEADER_LEASE, WEBHOOK_CONFIGURATION, WEBHOOK_SECRET};
use k8s_openapi::api::rbac::v1::PolicyRule;

fn rule(group: &str, resources: &[&str], names: &[&str], verbs: &[&str]) -> PolicyRule {
    let strings = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(strings(resources)),
        resource_names: (!names.is_empty()).then(|| strings(names)),
        verbs: strings(verbs),
        non_resource_urls: None,
    }
}

/// Cluster-wide: the custom resources and their children in every namespace, events, and the
/// operator's own webhook configurations.
pub fn cluster_rules() -> Vec<PolicyRule> {
    // Children are written with server-side apply (PATCH), which creates them when absent.
    let children = ["get", "list", "watch", "create", "patch", "delete"];
    vec![
        // Reflectors of the parents (controllers and the injector's Envoy lookup).
        rule("samplecontroller.k8s.io", &["foos"], &[], &["get", "list", "watch"]),
        rule("samplecontroller.k8s.io", &["foos/status"], &[], &["get", "patch"]),
        rule("example.com", &["envoys"], &[], &["get", "list", "watch"]),
        rule("example.com", &["envoys/status"], &[], &["get", "patch"]),
        // Foo and Envoy Deployments; deleted when a Foo renames its Deployment.
        rule("apps", &["deployments"], &[], &children),
        // Envoy bootstrap ConfigMaps and Services.
        rule("", &["configmaps", "services"], &[], &children),
        // kube-runtime's event Recorder (events.k8s.io/v1, with series patches).
        rule("events.k8s.io", &["events"], &[], &["create", "patch"]),
        // caBundle kept current by the leader.
        rule(
            "admissionregistration.k8s.io",
            &["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
            &[WEBHOOK_CONFIGURATION],
            &["get", "patch"],
        ),
    ]
}

/// In the operator's namespace: its certificate Secret and its leader Lease.
pub fn namespace_rules() -> Vec<PolicyRule> {
    vec![
        // `create` cannot be limited by name.
        rule("", &["secrets"], &[], &["create"]),
        rule("", &["secrets"], &[WEBHOOK_SECRET], &["get", "list", "watch", "update"]),
        rule("coordination.k8s.io", &["leases"], &[], &["create"]),
        rule("coordination.k8s.io", &["leases"], &[LEADER_LEASE], &["get", "patch"]),
    ]
}
