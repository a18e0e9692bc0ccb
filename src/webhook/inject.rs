//! The sidecar injector's admission endpoint (`POST /inject`): the pure [`envoy_operator_core::inject`]
//! function behind the AdmissionReview contract. Only Pod CREATE is injected; anything else
//! is allowed untouched, since the injector must never get in the way of the cluster.

use std::sync::Arc;

use envoy_operator_core::api::Envoy;
use envoy_operator_core::bounded;
use envoy_operator_core::inject::decision::misplaced_opt_in;
use envoy_operator_core::inject::lookup::xds_of;
use envoy_operator_core::inject::pod::{PodForInjection, PodView};
use envoy_operator_core::inject::{
    EnvoyLookup, EnvoyXds, InjectConfig, Injection, Injector, Summary, XdsSource,
};
use envoy_operator_core::names::{INJECT_ANNOTATION_PATH, INJECT_PATH};
use kube::runtime::reflector::{ObjectRef, Store};

use super::metrics::WebhookMetrics;
use super::review::{AdmissionRequest, AdmissionResponse, Operation, read_as};
use super::router::Endpoint;

/// What the endpoint looks Envoys up in: the operator's in-memory cache, never the API.
pub type SharedEnvoys = Arc<dyn EnvoyLookup + Send + Sync>;

/// The operator's reflector store of Envoys: an in-memory read, never an API call. Until the
/// store has synced, Envoys are missing and pods naming one are denied (their ReplicaSets
/// retry), so the server reports ready only once the store is filled.
#[derive(Clone)]
pub struct EnvoyCache {
    store: Store<Envoy>,
    /// The namespace the store watches, when it watches one only (`--watch-namespace`).
    watched: Option<String>,
}

impl EnvoyCache {
    /// A cache of the Envoys `store` holds: of `watched` only, or of every namespace (`None`).
    pub fn new(store: Store<Envoy>, watched: Option<&str>) -> Self {
        Self { store, watched: watched.map(str::to_owned) }
    }
}

impl EnvoyLookup for EnvoyCache {
    fn xds_for(&self, namespace: &str, name: &str) -> Option<EnvoyXds> {
        self.store.get(&ObjectRef::new(name).within(namespace)).map(|envoy| xds_of(&envoy))
    }

    fn only_namespace(&self) -> Option<&str> {
        self.watched.as_deref()
    }
}

/// The `/inject` endpoint, holding the injector (its sidecar built once for the
/// configuration), the Envoy cache and the metrics.
pub fn endpoint(config: InjectConfig, envoys: SharedEnvoys, metrics: WebhookMetrics) -> Endpoint {
    let injector = Injector::new(config);
    Endpoint::new(INJECT_PATH, move |request| admit_pod(request, &injector, envoys.as_ref(), &metrics))
        .reading(read_as::<PodForInjection>)
}

/// The `/inject_annotation` endpoint: pods the API server sends only because their opt-in is
/// an annotation (see `webhook_config::opt_in_annotation_webhook`), told so in a warning.
pub fn annotation_endpoint() -> Endpoint {
    Endpoint::new(INJECT_ANNOTATION_PATH, warn_misplaced_opt_in).reading(read_as::<PodForInjection>)
}

/// Allows a pod untouched, warning it when its opt-in is an annotation; never injects (its
/// namespace does not inject every pod, and the pod is not labelled to opt in).
pub fn warn_misplaced_opt_in(request: &AdmissionRequest) -> AdmissionResponse {
    let uid = request.uid.as_str();
    let is_pod = request.kind.group.is_empty() && request.kind.kind == "Pod";
    let pod = request.object.as_ref().filter(|_| is_pod && request.operation == Operation::Create);
    let Some(warning) = pod.and_then(|pod| PodView::new(pod).ok()).and_then(|pod| misplaced_opt_in(&pod))
    else {
        return AdmissionResponse::allow(uid);
    };
    let who = request.log_fields();
    tracing::info!(
        uid = %who.uid,
        namespace = %who.namespace,
        pod = %who.name,
        "sidecar not injected: the pod opts in with an annotation, and only the label opts in"
    );
    AdmissionResponse::allow(uid).with_warnings(vec![warning])
}

/// Answers one pod review: a patch adding the sidecar, an untouched allow with the skip
/// counted, or a denial naming what is wrong with the pod's injection annotations. A pod
/// injected already (the reinvocation after a later webhook's change) is allowed as it is.
pub fn admit_pod(
    request: &AdmissionRequest,
    injector: &Injector,
    envoys: &dyn EnvoyLookup,
    metrics: &WebhookMetrics,
) -> AdmissionResponse {
    let uid = request.uid.as_str();
    let is_pod = request.kind.group.is_empty() && request.kind.kind == "Pod";
    let Some(pod) = request.object.as_ref().filter(|object| is_pod && !object.is_null()) else {
        return AdmissionResponse::allow(uid);
    };
    if request.operation != Operation::Create {
        return AdmissionResponse::allow(uid);
    }
    match injector.inject_json(pod, request.namespace.as_deref(), envoys) {
        Ok(Injection::Patched { patch, summary }) => {
            metrics.injected();
            let who = request.log_fields();
            tracing::info!(
                uid = %who.uid,
                namespace = %who.namespace,
                pod = %who.name,
                configuration = %configuration(&summary),
                native = summary.native,
                hash = %summary.status.hash,
                notes = %bounded::echo(&summary.notes.join("; ")),
                "sidecar injected"
            );
            AdmissionResponse::allow_with_patch_json(uid, patch).with_warnings(summary.notes)
        }
        Ok(Injection::Skipped(skip)) if !skip.reason.is_skip() => {
            if tracing::enabled!(tracing::Level::DEBUG) {
                let who = request.log_fields();
                tracing::debug!(
                    uid = %who.uid,
                    namespace = %who.namespace,
                    pod = %who.name,
                    detail = %skip.detail,
                    "sidecar present already: the pod is left as it is"
                );
            }
            AdmissionResponse::allow(uid)
        }
        Ok(Injection::Skipped(skip)) => {
            metrics.injection_skipped(skip.reason.as_str());
            let who = request.log_fields();
            tracing::info!(
                uid = %who.uid,
                namespace = %who.namespace,
                pod = %who.name,
                reason = skip.reason.as_str(),
                detail = %skip.detail,
                "sidecar not injected"
            );
            let warnings =
                if skip.warn { vec![format!("sidecar not injected: {}", skip.detail)] } else { Vec::new() };
            AdmissionResponse::allow(uid).with_warnings(warnings)
        }
        Err(error) => {
            metrics.injection_denied(error.metric_label());
            let who = request.log_fields();
            tracing::info!(
                uid = %who.uid,
                namespace = %who.namespace,
                pod = %who.name,
                %error,
                "pod denied: its sidecar cannot be injected"
            );
            AdmissionResponse::bad_request(uid, error.to_string())
        }
    }
}

/// Where an injected sidecar takes its configuration from, as a log reads it: the fleet of
/// the operator's control plane, an xDS server (and who named it), or none.
fn configuration(summary: &Summary) -> String {
    let source = match &summary.xds_source {
        XdsSource::Envoy(name) => format!("Envoy {name}"),
        XdsSource::Annotation => "annotation".to_owned(),
        XdsSource::Default => "operator default".to_owned(),
        XdsSource::Mesh { service_account } => {
            let capture = if summary.capture { "outbound capture" } else { "no capture" };
            let fleet = summary.fleet.as_deref().unwrap_or_default();
            let text = format!(
                "mesh sidecar {fleet} (operator's control plane), ServiceAccount {service_account}, {capture}"
            );
            return bounded::echo(&text).into_owned();
        }
        XdsSource::None => return "none: admin interface only".to_owned(),
    };
    let text = match (&summary.fleet, &summary.xds) {
        (Some(fleet), _) => format!("fleet {fleet} (operator's control plane)"),
        (None, Some(xds)) => format!("xDS {}:{} ({source})", xds.host, xds.port),
        (None, None) => format!("none: admin interface only ({source} has no xDS server)"),
    };
    bounded::echo(&text).into_owned()
}

#[cfg(test)]
mod tests {
    use kube::runtime::{reflector, watcher};

    use super::*;

    #[test]
    fn reflector_store_lookup() {
        let mut envoy: Envoy = serde_json::from_value(serde_json::json!({
            "apiVersion": "example.com/v1", "kind": "Envoy",
            "metadata": {"name": "edge", "namespace": "shop"},
            "spec": {"xds": {"host": "xds.mesh", "port": 18000}}
        }))
        .unwrap();
        let (store, mut writer) = reflector::store::<Envoy>();
        writer.apply_watcher_event(&watcher::Event::Apply(envoy.clone()));
        envoy.metadata.name = Some("bare".to_owned());
        envoy.spec.xds = None;
        writer.apply_watcher_event(&watcher::Event::Apply(envoy));
        let store = EnvoyCache::new(store, None);
        let Some(EnvoyXds::External(edge)) = store.xds_for("shop", "edge") else { panic!("spec.xds") };
        assert_eq!((edge.cluster_name.as_str(), edge.host.as_str()), ("xds_cluster", "xds.mesh"));
        let Some(EnvoyXds::ControlPlane { ca_config_map, listeners }) = store.xds_for("shop", "bare") else {
            panic!("served by the operator's control plane");
        };
        assert_eq!((ca_config_map.as_str(), listeners.len()), ("bare-xds-ca", 1));
        assert_eq!(store.xds_for("other", "edge"), None);
    }

    /// An operator that watches one namespace sees no Envoy elsewhere: a pod there naming one
    /// is told so, not that the Envoy does not exist.
    #[test]
    fn a_pod_outside_the_watched_namespace_is_told_the_truth() {
        use envoy_operator_core::inject::InjectError;
        let (store, mut writer) = reflector::store::<Envoy>();
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let watching_apps = EnvoyCache::new(store.clone(), Some("apps"));
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "annotations": {"sidecar.example.com/envoy": "edge"}},
            "spec": {"containers": [{"name": "web", "image": "web:1"}]}});
        let injector = Injector::new(InjectConfig::default());
        let denied = injector.inject(&pod, Some("shop"), &watching_apps).unwrap_err();
        assert!(matches!(denied, InjectError::NamespaceNotWatched { .. }), "{denied}");
        assert_eq!(
            denied.to_string(),
            "annotation sidecar.example.com/envoy: namespace shop is not watched by this operator \
             (--watch-namespace apps), so it cannot serve Envoy \"edge\" of shop: run the pod in apps, \
             name an xDS server with sidecar.example.com/xds, or remove the annotation"
        );
        // In the watched namespace, and for an operator watching every namespace, a missing
        // Envoy is missing.
        let missing = injector.inject(&pod, Some("apps"), &watching_apps).unwrap_err();
        assert!(matches!(missing, InjectError::UnknownEnvoy { .. }), "{missing}");
        let everywhere = EnvoyCache::new(store, None);
        let missing = injector.inject(&pod, Some("shop"), &everywhere).unwrap_err();
        assert!(missing.to_string().contains("no Envoy \"edge\" in namespace shop"), "{missing}");
    }
}
