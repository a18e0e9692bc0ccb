//! The permissions the operator's code uses, the single list `deploy/` is checked against
//! (`tests/crds/deploy.rs`); `tests/cluster/rbac.rs` runs the operator against an in-memory API server and
//! checks that it needs exactly these. Change them together: a verb the code uses but RBAC
//! lacks fails in production only.
//!
//! Two installs share them: cluster-wide (`deploy/`: [`workload_rules`] in a ClusterRole) and
//! namespaced (`deploy-namespaced/`, `--watch-namespace`: the same rules in a Role of the
//! watched namespace). Both add [`webhook_configuration_rules`], the Gateway API's
//! cluster-scoped objects ([`gateway_class_rules`]), the certificates Gateways name
//! ([`gateway_certificate_rules`]: every namespace, or the watched one) and, in the operator's
//! own namespace, [`namespace_rules`].

use envoy_operator_core::api::gateway::GROUP as GATEWAY_GROUP;
use envoy_operator_core::names::{
    LEADER_LEASE, WEBHOOK_CONFIGURATION, WEBHOOK_SECRET, XDS_IDENTITY_CA_SECRET,
};
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

/// Where the operator reconciles (every namespace, or the watched one): the custom resources
/// and their children, and events.
pub fn workload_rules() -> Vec<PolicyRule> {
    // Children are written with server-side apply (PATCH), which also needs `create` when it
    // creates them; `get` reads a child the label-selected cache cannot see (a name clash).
    let children = ["get", "list", "watch", "create", "patch", "delete"];
    vec![
        // Reflectors of the parents (controllers and the injector's Envoy lookup); status is
        // written with server-side apply.
        rule("samplecontroller.k8s.io", &["foos"], &[], &["list", "watch"]),
        rule("samplecontroller.k8s.io", &["foos/status"], &[], &["patch"]),
        // Envoys are also written: Gateways' fleets, applied with server-side apply (read first
        // when the cache has not seen them yet) and deleted when their Gateway leaves the
        // operator's classes; the admission policy confines the writes to the operator's own.
        rule("example.com", &["envoys"], &[], &children),
        rule("example.com", &["envoys/status"], &[], &["patch"]),
        // The xDS control plane's caches (every replica) and the EnvoyRoute status writer
        // (leader): what fleets are translated from, and the fleet pods that tell a fleet's
        // sidecars from its own proxies; route status written with server-side apply.
        rule("example.com", &["envoyroutes"], &[], &["list", "watch"]),
        rule("example.com", &["envoyroutes/status"], &[], &["patch"]),
        rule("discovery.k8s.io", &["endpointslices"], &[], &["list", "watch"]),
        rule("", &["pods"], &[], &["list", "watch"]),
        // Foo and Envoy Deployments; deleted when a Foo renames its Deployment.
        rule("apps", &["deployments"], &[], &children),
        // Envoy bootstrap ConfigMaps and Services (every Service is also read by the xDS caches:
        // routes' backends).
        rule("", &["configmaps", "services"], &[], &children),
        // Fleets' and mesh sidecars' identity Secrets (their xDS client certificates), written
        // with server-side apply and never read: no `get`, `list` or `watch`, so no Secret of
        // anyone's can be read; the admission policy keeps writes to the operator's own
        // `kubernetes.io/tls` Secrets, and the owner reference deletes a fleet's with its Envoy.
        rule("", &["secrets"], &[], &["create", "patch"]),
        // kube-runtime's event Recorder (events.k8s.io/v1, with series patches).
        rule("events.k8s.io", &["events"], &[], &["create", "patch"]),
        // The Gateway API (where its CRDs are installed): the translation's caches (every
        // replica) and the status writers (leader), with server-side apply.
        rule(
            GATEWAY_GROUP,
            &["gateways", "httproutes", "grpcroutes", "tlsroutes", "referencegrants"],
            &[],
            &["list", "watch"],
        ),
        rule(
            GATEWAY_GROUP,
            &["gateways/status", "httproutes/status", "grpcroutes/status", "tlsroutes/status"],
            &[],
            &["patch"],
        ),
    ]
}

/// The Gateway API's cluster-scoped objects, in both installs: GatewayClasses (which name the
/// operator) and their status; Namespaces, whose labels `allowedRoutes` selects routes by (a
/// namespaced install watches only its own, by name).
pub fn gateway_class_rules() -> Vec<PolicyRule> {
    vec![
        rule(GATEWAY_GROUP, &["gatewayclasses"], &[], &["list", "watch"]),
        rule(GATEWAY_GROUP, &["gatewayclasses/status"], &[], &["patch"]),
        rule("", &["namespaces"], &[], &["list", "watch"]),
    ]
}

/// The certificates Gateways' listeners name. RBAC cannot limit a grant to a type of Secret:
/// the operator asks only for `kubernetes.io/tls` Secrets (by field selector) and never for
/// its fleets' identity Secrets (by label selector), keeping only `tls.crt` and `tls.key`. A
/// separate role, bound apart: cluster-wide in `deploy/` (that operator watches every
/// namespace), in the watched namespace in `deploy-namespaced/`.
pub fn gateway_certificate_rules() -> Vec<PolicyRule> {
    vec![rule("", &["secrets"], &[], &["list", "watch"])]
}

/// The cluster-wide install's ClusterRole: [`workload_rules`] in every namespace.
pub fn cluster_rules() -> Vec<PolicyRule> {
    workload_rules()
}

/// The only cluster-scoped objects the operator touches, by name: its webhook configurations,
/// whose `caBundle` the leader keeps current.
pub fn webhook_configuration_rules() -> Vec<PolicyRule> {
    vec![rule(
        "admissionregistration.k8s.io",
        &["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
        &[WEBHOOK_CONFIGURATION],
        &["get", "patch"],
    )]
}

/// In the operator's namespace: its certificate Secrets (the webhook's, the xDS identity CA),
/// its leader Lease and the replicas' xDS reports.
pub fn namespace_rules() -> Vec<PolicyRule> {
    vec![
        // `create` cannot be limited by name; the mirrors list and watch by field selector.
        rule("", &["secrets"], &[], &["create"]),
        rule(
            "",
            &["secrets"],
            &[WEBHOOK_SECRET, XDS_IDENTITY_CA_SECRET],
            &["get", "list", "watch", "update"],
        ),
        rule("coordination.k8s.io", &["leases"], &[], &["create"]),
        rule("coordination.k8s.io", &["leases"], &[LEADER_LEASE], &["get", "patch"]),
        // Every replica's xDS report, named after its pod (so not by a fixed name): written
        // with server-side apply, deleted on shutdown; the leader lists and watches them all
        // (the Envoys' status), and every replica (the routes some replica's proxies rejected).
        rule("", &["configmaps"], &[], &["list", "watch", "create", "patch", "delete"]),
    ]
}
