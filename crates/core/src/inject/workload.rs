//! Offline injection (`envoy-operator inject`): the pod template of each workload kind is run
//! through the very same [`inject`] as the webhook; every other object is passed through
//! unchanged.

use serde_json::Value;

use super::uninject::{Uninjected, uninject};
use super::{EnvoyLookup, InjectConfig, Injection, XdsSource, inject};
use crate::manifest::{Outcome, display_name, type_meta};

/// Where a kind keeps its pod: `""` for a Pod itself, else the pointer to its template.
pub fn pod_template_pointer(api_version: &str, kind: &str) -> Option<&'static str> {
    match (api_version, kind) {
        ("v1", "Pod") => Some(""),
        ("v1", "ReplicationController") => Some("/spec/template"),
        ("apps/v1", "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet") => Some("/spec/template"),
        ("batch/v1", "Job") => Some("/spec/template"),
        ("batch/v1", "CronJob") => Some("/spec/jobTemplate/spec/template"),
        _ => None,
    }
}

/// How to process documents.
pub struct Options<'a> {
    pub config: &'a InjectConfig,
    pub envoys: &'a dyn EnvoyLookup,
    /// Namespace of objects that name none (as `kubectl apply -n`).
    pub default_namespace: &'a str,
    /// Remove sidecars instead of adding them.
    pub uninject: bool,
}

/// Injects (or uninjects) one object.
pub fn process_object(mut object: Value, options: &Options<'_>) -> Outcome {
    let (api_version, kind) = match type_meta(&object) {
        Ok((api_version, kind)) => (api_version.to_owned(), kind.to_owned()),
        Err(unreadable) => return unreadable,
    };
    let Some(pointer) = pod_template_pointer(&api_version, &kind) else {
        let note = format!("{api_version} {kind} has no pod template: passed through unchanged");
        return Outcome::Unchanged { object, note };
    };
    let what = format!("{kind} {}", display_name(&object));
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty())
        .unwrap_or(options.default_namespace)
        .to_owned();
    let Some(pod) = object.pointer_mut(pointer).filter(|pod| pod.is_object()) else {
        return Outcome::Unreadable { message: format!("{what} has no pod template at {pointer}") };
    };

    if options.uninject {
        return match uninject(pod) {
            Ok(Uninjected::Removed(status)) => {
                let note = format!("{what}: removed sidecar (template hash {})", status.hash);
                Outcome::Changed { object, warnings: Vec::new(), notes: vec![note] }
            }
            Ok(Uninjected::NotInjected) => {
                Outcome::Unchanged { object, note: format!("{what}: no sidecar to remove") }
            }
            Err(message) => Outcome::Rejected { message: format!("{what}: {message}") },
        };
    }

    match inject(pod, Some(&namespace), options.config, options.envoys) {
        Ok(Injection::Skipped(skip)) => Outcome::Unchanged {
            note: format!("{what}: sidecar not injected ({}): {}", skip.reason, skip.detail),
            object,
        },
        Ok(Injection::Patched { patch, summary }) => {
            if let Err(error) = json_patch::patch(pod, &patch) {
                return Outcome::Rejected {
                    message: format!("{what}: internal error: the patch does not apply: {error}"),
                };
            }
            let xds = match (&summary.xds, &summary.xds_source) {
                (Some(xds), XdsSource::Mesh { service_account }) => format!(
                    "a mesh sidecar of namespace {namespace} (ServiceAccount {service_account}) served by the operator's control plane at {}:{}, {}",
                    xds.host,
                    xds.port,
                    if summary.capture { "capturing outbound TCP" } else { "without capture" }
                ),
                (Some(xds), XdsSource::Envoy(name)) if summary.fleet.is_some() => format!(
                    "the configuration of Envoy {name} from the operator's control plane at {}:{}",
                    xds.host, xds.port
                ),
                (Some(xds), XdsSource::Envoy(name)) => {
                    format!("xDS {}:{} from Envoy {name}", xds.host, xds.port)
                }
                (Some(xds), XdsSource::Annotation) => {
                    format!("xDS {}:{} from the pod annotation", xds.host, xds.port)
                }
                (Some(xds), _) => format!("xDS {}:{}", xds.host, xds.port),
                (None, _) => "admin-only bootstrap".to_owned(),
            };
            let mode = if summary.native { "native sidecar" } else { "sidecar" };
            let mut notes =
                vec![format!("{what}: injected {mode} (template hash {}, {xds})", summary.status.hash)];
            notes.extend(summary.notes.into_iter().map(|note| format!("{what}: {note}")));
            Outcome::Changed { object, warnings: Vec::new(), notes }
        }
        Err(error) => Outcome::Rejected { message: format!("{what} in namespace {namespace}: {error}") },
    }
}
