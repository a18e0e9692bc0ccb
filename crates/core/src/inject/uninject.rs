//! Removing a sidecar: exactly the containers, volumes, labels and annotations the status
//! annotation records, and the annotation itself. Offline only (`inject --uninject`).

use serde_json::{Map, Value};

use super::annotations::STATUS;
use super::pod::name_of;
use super::status::InjectionStatus;

/// What [`uninject`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Uninjected {
    /// The recorded sidecar was removed.
    Removed(InjectionStatus),
    /// The pod has no status annotation: nothing to remove.
    NotInjected,
}

/// Removes what the status annotation of `pod` (a pod or pod template) records. Lists and
/// the annotations and labels maps left empty are removed, as they were before injection
/// created them.
pub fn uninject(pod: &mut Value) -> Result<Uninjected, String> {
    let Some(annotation) = pod.pointer("/metadata/annotations").and_then(|a| a.get(STATUS)) else {
        return Ok(Uninjected::NotInjected);
    };
    let status = annotation
        .as_str()
        .ok_or_else(|| format!("annotation {STATUS} is not a string"))
        .and_then(InjectionStatus::parse)?;

    if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
        remove_named(spec, "containers", &status.containers, false);
        remove_named(spec, "initContainers", &status.init_containers, true);
        remove_named(spec, "volumes", &status.volumes, true);
    }
    if let Some(metadata) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
        let added = std::iter::once(STATUS).chain(status.annotations.iter().map(String::as_str));
        remove_keys(metadata, "annotations", &added.collect::<Vec<_>>());
        remove_keys(metadata, "labels", &status.labels);
    }
    Ok(Uninjected::Removed(status))
}

/// Removes `keys` from the map `metadata[field]`, and the map if that leaves it empty.
fn remove_keys(metadata: &mut Map<String, Value>, field: &str, keys: &[impl AsRef<str>]) {
    let Some(map) = metadata.get_mut(field).and_then(Value::as_object_mut) else { return };
    if keys.is_empty() {
        return;
    }
    for key in keys {
        map.shift_remove(key.as_ref());
    }
    if map.is_empty() {
        metadata.shift_remove(field);
    }
}

fn remove_named(spec: &mut Map<String, Value>, field: &str, names: &[String], drop_if_empty: bool) {
    let Some(items) = spec.get_mut(field).and_then(Value::as_array_mut) else { return };
    items.retain(|item| !name_of(item).is_some_and(|name| names.iter().any(|n| n == name)));
    if drop_if_empty && items.is_empty() {
        spec.shift_remove(field);
    }
}
