//! Whether a pod gets a sidecar. The webhook configuration's selectors keep most pods that
//! must not be injected from ever reaching the injector; these checks repeat them in code
//! (defence in depth, and the offline command has no selectors) and add those a selector
//! cannot express.

use super::annotations::{INJECT_LABEL, STATUS};
use super::config::InjectConfig;
use super::pod::PodView;
use crate::api::envoy::{ADMIN_PORT, READINESS_PORT};

/// Why a pod was left alone. [`SkipReason::as_str`] is a stable label for logs and metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// The pod's namespace is a system namespace or the operator's own.
    ExcludedNamespace,
    /// The pod carries `sidecar.example.com/inject: "false"`.
    OptedOut,
    /// The pod already has a sidecar (its status annotation is present): most often the
    /// webhook's reinvocation (`reinvocationPolicy: IfNeeded`) for a pod it has just injected.
    /// No skip: see [`SkipReason::is_skip`].
    AlreadyInjected,
    /// The pod shares the node's network namespace, where the sidecar's ports would clash
    /// with every other host-network pod's and the node's.
    HostNetwork,
    /// An application container declares a port the sidecar needs.
    PortConflict,
    /// The pod runs to completion (a Job's) and the cluster has no native sidecars (1.29+): a
    /// regular sidecar would keep it running forever.
    RunToCompletion,
}

impl SkipReason {
    pub const ALL: [SkipReason; 6] = [
        Self::ExcludedNamespace,
        Self::OptedOut,
        Self::AlreadyInjected,
        Self::HostNetwork,
        Self::PortConflict,
        Self::RunToCompletion,
    ];

    /// A stable label for logs and metrics, in the metrics' snake_case.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ExcludedNamespace => "excluded_namespace",
            Self::OptedOut => "opted_out",
            Self::AlreadyInjected => "already_injected",
            Self::HostNetwork => "host_network",
            Self::PortConflict => "port_conflict",
            Self::RunToCompletion => "run_to_completion",
        }
    }
}

impl SkipReason {
    /// Whether the pod is left without a sidecar it was sent to the injector for. An
    /// already-injected pod has its sidecar: the webhook sees every pod it injects again when a
    /// later webhook changes it, and that pass is no skip, neither logged nor counted as one.
    pub fn is_skip(self) -> bool {
        self != Self::AlreadyInjected
    }
}

impl std::fmt::Display for SkipReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A skip with the detail a user needs to understand it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skip {
    pub reason: SkipReason,
    pub detail: String,
    /// Whether to say it back to the user (an admission warning), not only count it: the pod
    /// was meant to get a sidecar it cannot have, or opted out in an undocumented way.
    pub warn: bool,
}

/// `Some(skip)` when the pod must not be injected. `namespace` is where the pod is created.
/// The first matching reason wins, already-injected first: reinvocation must be a no-op.
pub fn skip(pod: &PodView<'_>, namespace: Option<&str>, config: &InjectConfig) -> Option<Skip> {
    let skip = |reason, detail: String| Some(Skip { reason, detail, warn: false });
    let warn = |reason, detail: String| Some(Skip { reason, detail, warn: true });
    if pod.has_annotation(STATUS) {
        return skip(SkipReason::AlreadyInjected, format!("the pod has the {STATUS} annotation"));
    }
    if let Some(namespace) = namespace
        && config.is_excluded(namespace)
    {
        return skip(
            SkipReason::ExcludedNamespace,
            format!("namespace {namespace} is never injected (system or operator namespace)"),
        );
    }
    if pod.label(INJECT_LABEL) == Some("false") {
        return skip(SkipReason::OptedOut, format!("the pod has the label {INJECT_LABEL}=false"));
    }
    if pod.annotation(INJECT_LABEL) == Some("false") {
        return warn(
            SkipReason::OptedOut,
            format!(
                "the pod has the annotation {INJECT_LABEL}=false (the label is the documented form: it also spares the webhook call)"
            ),
        );
    }
    if pod.host_network() {
        return warn(
            SkipReason::HostNetwork,
            format!(
                "the pod uses hostNetwork: the sidecar's ports {ADMIN_PORT} and {READINESS_PORT} would be bound on the node"
            ),
        );
    }
    if runs_to_completion(pod) && !config.native_sidecars_supported {
        return warn(
            SkipReason::RunToCompletion,
            format!(
                "the pod runs to completion (restartPolicy {}) and the cluster has no native sidecars (Kubernetes 1.29+): a regular sidecar would keep it from ever finishing",
                pod.restart_policy().unwrap_or("Never")
            ),
        );
    }
    if let Some((container, port)) = conflicting_port(pod) {
        return warn(
            SkipReason::PortConflict,
            format!(
                "container {container} declares port {port}, which the sidecar needs ({ADMIN_PORT} admin, {READINESS_PORT} readiness)"
            ),
        );
    }
    None
}

/// The admission warning for a pod that asks for a sidecar with the annotation
/// `sidecar.example.com/inject: "true"` where only the label opts in (the webhook's
/// `objectSelector` reads labels): the injector is not called for it, so without this it would
/// start without a sidecar and nobody would say why. `None` for any other pod.
pub fn misplaced_opt_in(pod: &PodView<'_>) -> Option<String> {
    let asks = pod.annotation(INJECT_LABEL) == Some("true") && pod.label(INJECT_LABEL) != Some("true");
    asks.then(|| {
        format!("sidecar not injected: make {INJECT_LABEL}=true a label of the pod, not an annotation")
    })
}

/// Whether the pod is meant to finish (a Job's pod, or any pod with `restartPolicy` `Never` or
/// `OnFailure`): a regular sidecar container would keep it running forever.
pub fn runs_to_completion(pod: &PodView<'_>) -> bool {
    matches!(pod.restart_policy(), Some("Never" | "OnFailure")) || pod.owned_by("batch", "Job")
}

/// The first container running alongside the sidecar that declares one of its ports.
fn conflicting_port(pod: &PodView<'_>) -> Option<(String, i64)> {
    let sidecar_ports = [i64::from(ADMIN_PORT), i64::from(READINESS_PORT)];
    PodView::declared_ports(pod.containers_alongside(false))
        .find(|declared| sidecar_ports.contains(&declared.port))
        .map(|declared| (declared.container.to_owned(), declared.port))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn decide(pod: Value, namespace: &str) -> Option<SkipReason> {
        let view = PodView::new(&pod).unwrap();
        skip(&view, Some(namespace), &InjectConfig::default()).map(|s| s.reason)
    }

    fn pod(spec: Value, metadata: Value) -> Value {
        json!({"metadata": metadata, "spec": spec})
    }

    #[test]
    fn each_reason() {
        let plain = json!({"containers": [{"name": "app"}]});
        assert_eq!(decide(pod(plain.clone(), json!({})), "shop"), None);
        assert_eq!(decide(pod(plain.clone(), json!({})), "kube-system"), Some(SkipReason::ExcludedNamespace));
        assert_eq!(
            decide(pod(plain.clone(), json!({})), "envoy-operator"),
            Some(SkipReason::ExcludedNamespace)
        );
        assert_eq!(
            decide(pod(plain.clone(), json!({"labels": {INJECT_LABEL: "false"}})), "shop"),
            Some(SkipReason::OptedOut)
        );
        assert_eq!(decide(pod(plain.clone(), json!({"labels": {INJECT_LABEL: "true"}})), "shop"), None);
        assert_eq!(
            decide(pod(plain.clone(), json!({"annotations": {STATUS: "{}"}})), "kube-system"),
            Some(SkipReason::AlreadyInjected)
        );
        assert_eq!(
            decide(pod(json!({"hostNetwork": true, "containers": [{"name": "app"}]}), json!({})), "shop"),
            Some(SkipReason::HostNetwork)
        );
        let admin_port = json!({"containers": [{"name": "app", "ports": [{"containerPort": 80}, {"containerPort": 9901}]}]});
        assert_eq!(decide(pod(admin_port, json!({})), "shop"), Some(SkipReason::PortConflict));
    }

    #[test]
    fn pods_that_run_to_completion_need_native_sidecars() {
        let job_pod = json!({"restartPolicy": "Never", "containers": [{"name": "work"}]});
        assert_eq!(decide(pod(job_pod.clone(), json!({})), "shop"), None, "1.29+: injected (natively)");
        let old_cluster = InjectConfig { native_sidecars_supported: false, ..Default::default() };
        let view = pod(job_pod, json!({}));
        let skipped = skip(&PodView::new(&view).unwrap(), Some("shop"), &old_cluster).map(|s| s.reason);
        assert_eq!(skipped, Some(SkipReason::RunToCompletion));
        let owned = pod(
            json!({"containers": [{"name": "work"}]}),
            json!({"ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u"}]}),
        );
        assert!(runs_to_completion(&PodView::new(&owned).unwrap()));
        let server = pod(json!({"restartPolicy": "Always", "containers": [{"name": "web"}]}), json!({}));
        assert!(!runs_to_completion(&PodView::new(&server).unwrap()));
    }

    #[test]
    fn the_opt_out_also_works_as_an_annotation() {
        let plain = json!({"containers": [{"name": "app"}]});
        assert_eq!(
            decide(pod(plain, json!({"annotations": {INJECT_LABEL: "false"}})), "shop"),
            Some(SkipReason::OptedOut)
        );
    }

    #[test]
    fn only_concurrent_init_containers_conflict() {
        let init = |policy: Value| {
            json!({"containers": [{"name": "app"}],
                "initContainers": [{"name": "setup", "restartPolicy": policy, "ports": [{"containerPort": 9902}]}]})
        };
        assert_eq!(decide(pod(init(Value::Null), json!({})), "shop"), None);
        assert_eq!(decide(pod(init(json!("Always")), json!({})), "shop"), Some(SkipReason::PortConflict));
    }

    #[test]
    fn a_reinvocation_is_no_skip() {
        let skips: Vec<_> = SkipReason::ALL.into_iter().filter(|r| !r.is_skip()).collect();
        assert_eq!(skips, [SkipReason::AlreadyInjected]);
    }

    #[test]
    fn an_opt_in_written_as_an_annotation_is_told_the_label() {
        let plain = json!({"containers": [{"name": "app"}]});
        let annotated = pod(plain.clone(), json!({"annotations": {INJECT_LABEL: "true"}}));
        let warning = misplaced_opt_in(&PodView::new(&annotated).unwrap()).unwrap();
        assert_eq!(
            warning,
            "sidecar not injected: make sidecar.example.com/inject=true a label of the pod, not an annotation"
        );
        assert!(warning.len() < super::super::MAX_WARNING_CHARS, "{}", warning.len());
        for fine in [
            pod(plain.clone(), json!({})),
            pod(plain.clone(), json!({"annotations": {INJECT_LABEL: "false"}})),
            pod(
                plain.clone(),
                json!({"annotations": {INJECT_LABEL: "true"}, "labels": {INJECT_LABEL: "true"}}),
            ),
        ] {
            assert_eq!(misplaced_opt_in(&PodView::new(&fine).unwrap()), None, "{fine}");
        }
    }

    #[test]
    fn labels_are_stable() {
        let labels: Vec<_> = SkipReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(
            labels,
            [
                "excluded_namespace",
                "opted_out",
                "already_injected",
                "host_network",
                "port_conflict",
                "run_to_completion"
            ]
        );
    }
}
