//! Offline injection (`envoy-operator inject`): every document of a manifest, with the pod
//! template of each workload kind run through the very same [`inject`] as the webhook, and
//! every other document passed through unchanged.

use serde_json::Value;

use super::uninject::{Uninjected, uninject};
use super::{EnvoyLookup, InjectConfig, Injection, XdsSource, inject};
use crate::check::display_name;
use crate::manifest::parse_documents;

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

/// What became of one document.
#[derive(Debug)]
pub enum Outcome {
    /// A sidecar was added (or removed, with `uninject`): the new object and notes.
    Changed { object: Value, notes: Vec<String> },
    /// The object is printed as it was, with the reason.
    Unchanged { object: Value, note: String },
    /// The pod must not be injected as it is (the webhook would deny it).
    Denied { message: String },
    /// The document is not a readable object.
    Unreadable { message: String },
}

/// One document's outcome with where it came from.
#[derive(Debug)]
pub struct Processed {
    /// `path (document N, line L)`.
    pub origin: String,
    pub outcome: Outcome,
}

/// Processes every document of one input named `source`.
pub fn process_text(source: &str, text: &str, options: &Options<'_>) -> Vec<Processed> {
    parse_documents(text)
        .into_iter()
        .map(|document| {
            let origin = format!("{source} (document {}, line {})", document.index, document.line);
            let outcome = match document.content {
                Ok(object) => process_object(object, options),
                Err(message) => Outcome::Unreadable { message: format!("not valid YAML or JSON: {message}") },
            };
            Processed { origin, outcome }
        })
        .collect()
}

/// Injects (or uninjects) one object.
pub fn process_object(mut object: Value, options: &Options<'_>) -> Outcome {
    let field = |name: &str| object.get(name).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if api_version.is_empty() || kind.is_empty() {
        return Outcome::Unreadable {
            message: "not a Kubernetes object: `apiVersion` and `kind` must both be set to non-empty strings"
                .to_owned(),
        };
    }
    if (api_version.as_str(), kind.as_str()) == ("v1", "List") {
        return process_list(object, options);
    }
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
                Outcome::Changed { object, notes: vec![note] }
            }
            Ok(Uninjected::NotInjected) => {
                Outcome::Unchanged { object, note: format!("{what}: no sidecar to remove") }
            }
            Err(message) => Outcome::Denied { message: format!("{what}: {message}") },
        };
    }

    match inject(pod, Some(&namespace), options.config, options.envoys) {
        Ok(Injection::Skipped(skip)) => Outcome::Unchanged {
            note: format!("{what}: sidecar not injected ({}): {}", skip.reason, skip.detail),
            object,
        },
        Ok(Injection::Patched { patch, summary }) => {
            if let Err(error) = json_patch::patch(pod, &patch) {
                return Outcome::Denied {
                    message: format!("{what}: internal error: the patch does not apply: {error}"),
                };
            }
            let xds = match (&summary.xds, &summary.xds_source) {
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
            Outcome::Changed { object, notes }
        }
        Err(error) => Outcome::Denied { message: format!("{what} in namespace {namespace}: {error}") },
    }
}

/// A `v1 List` (what `kubectl get -o yaml` prints for several objects): each item in turn.
/// Any denied or unreadable item fails the whole list, as it could not be printed in part.
fn process_list(mut list: Value, options: &Options<'_>) -> Outcome {
    let Some(items) = list.get_mut("items").and_then(Value::as_array_mut) else {
        return Outcome::Unchanged {
            object: list,
            note: "v1 List without items: passed through unchanged".to_owned(),
        };
    };
    let (mut notes, mut failures, mut changed) = (Vec::new(), Vec::new(), false);
    for (i, item) in items.iter_mut().enumerate() {
        match process_object(std::mem::take(item), options) {
            Outcome::Changed { object, notes: item_notes } => {
                *item = object;
                changed = true;
                notes.extend(item_notes.into_iter().map(|note| format!("items[{i}]: {note}")));
            }
            Outcome::Unchanged { object, note } => {
                *item = object;
                notes.push(format!("items[{i}]: {note}"));
            }
            Outcome::Denied { message } | Outcome::Unreadable { message } => {
                failures.push(format!("items[{i}]: {message}"))
            }
        }
    }
    match (failures.is_empty(), changed) {
        (false, _) => Outcome::Denied { message: failures.join("; ") },
        (true, true) => Outcome::Changed { object: list, notes },
        (true, false) => Outcome::Unchanged { object: list, note: notes.join("; ") },
    }
}
