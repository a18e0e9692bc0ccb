//! The JSON Patch that adds a sidecar to the raw pod. Built against the JSON as received, so
//! fields this build's k8s-openapi does not know survive; every optional parent (metadata,
//! annotations, volumes, initContainers) may be absent or null and is then created whole.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use serde_json::{Map, Value};

use super::annotations::STATUS;
use super::pod::PodView;
use super::sidecar::Sidecar;

/// Operations adding `sidecar` (as a regular container, or as the first init container when
/// `native`) and the status annotation `status` to `pod`.
pub fn sidecar_patch(pod: &PodView<'_>, sidecar: &Sidecar, native: bool, status: &str) -> Patch {
    let mut ops = Vec::with_capacity(3);
    ops.push(match pod.volumes {
        Some(_) => add(&["spec", "volumes", "-"], sidecar.volume.clone()),
        None => add(&["spec", "volumes"], Value::Array(vec![sidecar.volume.clone()])),
    });
    ops.push(match (native, pod.init_containers) {
        // First, so the proxy is up before the other init containers need the network.
        (true, Some(_)) => add(&["spec", "initContainers", "0"], sidecar.container.clone()),
        (true, None) => add(&["spec", "initContainers"], Value::Array(vec![sidecar.container.clone()])),
        (false, _) => add(&["spec", "containers", "-"], sidecar.container.clone()),
    });
    let status = Value::String(status.to_owned());
    ops.push(match (pod.metadata, pod.annotations) {
        (_, Some(_)) => add(&["metadata", "annotations", STATUS], status),
        (Some(_), None) => add(&["metadata", "annotations"], object(STATUS, status)),
        (None, None) => add(&["metadata"], object("annotations", object(STATUS, status))),
    });
    Patch(ops)
}

/// An `add` at the path of these (unescaped) keys: the pointer escapes `~` and `/`, so
/// `sidecar.example.com/status` becomes `sidecar.example.com~1status`.
fn add(keys: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation { path: PointerBuf::from_tokens(keys.iter().copied()), value })
}

fn object(key: &str, value: Value) -> Value {
    let mut map = Map::new();
    map.insert(key.to_owned(), value);
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keys_with_slashes_and_tildes_are_escaped() {
        let op = add(&["metadata", "annotations", "a~b/c"], json!("x"));
        assert_eq!(op.path().as_str(), "/metadata/annotations/a~0b~1c");
        let op = add(&["metadata", "annotations", STATUS], json!("x"));
        assert_eq!(op.path().as_str(), "/metadata/annotations/sidecar.example.com~1status");
    }
}
