//! The sidecar injector's admission endpoint (`POST /inject`): the pure [`envoy_operator_core::inject`]
//! function behind the AdmissionReview contract. Only Pod CREATE is injected; anything else
//! is allowed untouched, since the injector must never get in the way of the cluster.

use std::sync::Arc;

use envoy_operator_core::api::Envoy;
use envoy_operator_core::inject::lookup::xds_of;
use envoy_operator_core::inject::pod::PodForInjection;
use envoy_operator_core::inject::{EnvoyLookup, EnvoyXds, InjectConfig, Injection, Injector};
use envoy_operator_core::names::INJECT_PATH;
use kube::runtime::reflector::{ObjectRef, Store};

use super::review::{AdmissionRequest, AdmissionResponse, Operation, read_as};
use super::router::Endpoint;
use crate::ops::metrics::Metrics;

/// What the endpoint looks Envoys up in: the operator's in-memory cache, never the API.
pub type SharedEnvoys = Arc<dyn EnvoyLookup + Send + Sync>;

/// The operator's reflector store of Envoys: an in-memory read, never an API call. Until the
/// store has synced, Envoys are missing and pods naming one are denied (their ReplicaSets
/// retry), so the server reports ready only once the store is filled.
#[derive(Clone)]
pub struct EnvoyCache(Store<Envoy>);

impl EnvoyCache {
    pub fn new(store: Store<Envoy>) -> Self {
        Self(store)
    }
}

impl EnvoyLookup for EnvoyCache {
    fn xds_for(&self, namespace: &str, name: &str) -> Option<EnvoyXds> {
        self.0.get(&ObjectRef::new(name).within(namespace)).map(|envoy| xds_of(&envoy))
    }
}

/// The `/inject` endpoint, holding the injector (its sidecar built once for the
/// configuration), the Envoy cache and the metrics.
pub fn endpoint(config: InjectConfig, envoys: SharedEnvoys, metrics: Metrics) -> Endpoint {
    let injector = Injector::new(config);
    Endpoint::new(INJECT_PATH, move |request| admit_pod(request, &injector, envoys.as_ref(), &metrics))
        .reading(read_as::<PodForInjection>)
}

/// Answers one pod review: a patch adding the sidecar, an untouched allow with the skip
/// counted, or a denial naming what is wrong with the pod's injection annotations.
pub fn admit_pod(
    request: &AdmissionRequest,
    injector: &Injector,
    envoys: &dyn EnvoyLookup,
    metrics: &Metrics,
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
            // The common answer: its log fields (cut and escaped copies) only when logged.
            if tracing::enabled!(tracing::Level::DEBUG) {
                let who = request.log_fields();
                tracing::debug!(
                    uid = %who.uid,
                    namespace = %who.namespace,
                    pod = %who.name,
                    hash = %summary.status.hash,
                    native = summary.native,
                    "sidecar injected"
                );
            }
            AdmissionResponse::allow_with_patch_json(uid, patch).with_warnings(summary.notes)
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
        let store = EnvoyCache::new(store);
        let Some(EnvoyXds::External(edge)) = store.xds_for("shop", "edge") else { panic!("spec.xds") };
        assert_eq!((edge.cluster_name.as_str(), edge.host.as_str()), ("xds_cluster", "xds.mesh"));
        assert_eq!(
            store.xds_for("shop", "bare"),
            Some(EnvoyXds::ControlPlane { config_map: "bare-bootstrap".to_owned() })
        );
        assert_eq!(store.xds_for("other", "edge"), None);
    }
}
