//! The sidecar injector's admission endpoint (`POST /inject`): the pure [`crate::inject`]
//! function behind the AdmissionReview contract. Only Pod CREATE is injected; anything else
//! is allowed untouched, since the injector must never get in the way of the cluster.

use std::sync::Arc;

use super::review::{AdmissionRequest, AdmissionResponse, Operation};
use super::router::Endpoint;
use crate::inject::webhook_config::INJECT_PATH;
use crate::inject::{EnvoyLookup, InjectConfig, Injection, inject};
use crate::ops::metrics::Metrics;

/// What the endpoint looks Envoys up in: the operator's in-memory cache, never the API.
pub type SharedEnvoys = Arc<dyn EnvoyLookup + Send + Sync>;

/// The `/inject` endpoint, holding its configuration, the Envoy cache and the metrics.
pub fn endpoint(config: InjectConfig, envoys: SharedEnvoys, metrics: Metrics) -> Endpoint {
    Endpoint::new(INJECT_PATH, move |request| admit_pod(request, &config, envoys.as_ref(), &metrics))
}

/// Answers one pod review: a patch adding the sidecar, an untouched allow with the skip
/// counted, or a denial naming what is wrong with the pod's injection annotations.
pub fn admit_pod(
    request: &AdmissionRequest,
    config: &InjectConfig,
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
    match inject(pod, request.namespace.as_deref(), config, envoys) {
        Ok(Injection::Patched { patch, summary }) => {
            metrics.injected();
            AdmissionResponse::allow_with_patch(uid, &patch).with_warnings(summary.notes)
        }
        Ok(Injection::Skipped(skip)) => {
            metrics.injection_skipped(skip.reason.as_str());
            AdmissionResponse::allow(uid)
        }
        Err(error) => {
            metrics.injection_skipped(error.metric_label());
            tracing::info!(
                uid,
                namespace = request.namespace.as_deref().unwrap_or(""),
                pod = %request.display_name(),
                %error,
                "pod denied: its sidecar cannot be injected"
            );
            AdmissionResponse::bad_request(uid, error.to_string())
        }
    }
}
