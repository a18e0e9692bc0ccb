//! The JSON Patch that adds a sidecar to the raw pod. Built against the JSON as received, so
//! fields this build's k8s-openapi does not know survive; every optional parent (metadata,
//! annotations, volumes, initContainers) may be absent or null and is then created whole.
//!
//! [`operations`] decides the three operations once; they are rendered either as a
//! [`Patch`] (to apply, as the offline command does) or straight into JSON bytes from the
//! sidecar's pre-serialized parts (what the webhook sends), so the webhook does not rebuild and
//! re-serialize the same container for every pod.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use serde_json::{Map, Value};

use super::annotations::STATUS;
use super::pod::PodView;
use super::sidecar::{Sidecar, SidecarJson};

/// What one operation adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Piece {
    Volume,
    VolumeList,
    Container,
    ContainerList,
    Status,
    /// `{STATUS: status}`, for a pod without annotations.
    Annotations,
    /// `{"annotations": {STATUS: status}}`, for a pod without metadata.
    Metadata,
}

/// The three `add` operations for `pod`: the volume, the container (as a regular container,
/// or as the first init container when `native`) and the status annotation.
fn operations(pod: &PodView<'_>, native: bool) -> [(&'static [&'static str], Piece); 3] {
    let volume = match pod.volumes {
        Some(_) => (&["spec", "volumes", "-"][..], Piece::Volume),
        None => (&["spec", "volumes"][..], Piece::VolumeList),
    };
    let container = match (native, pod.init_containers) {
        // First, so the proxy is up before the other init containers need the network.
        (true, Some(_)) => (&["spec", "initContainers", "0"][..], Piece::Container),
        (true, None) => (&["spec", "initContainers"][..], Piece::ContainerList),
        (false, _) => (&["spec", "containers", "-"][..], Piece::Container),
    };
    let status = match (pod.metadata, pod.annotations) {
        (_, Some(_)) => (&["metadata", "annotations", STATUS][..], Piece::Status),
        (Some(_), None) => (&["metadata", "annotations"][..], Piece::Annotations),
        (None, None) => (&["metadata"][..], Piece::Metadata),
    };
    [volume, container, status]
}

/// Operations adding `sidecar` and the status annotation `status` to `pod`.
pub fn sidecar_patch(pod: &PodView<'_>, sidecar: &Sidecar, native: bool, status: &str) -> Patch {
    let status = Value::String(status.to_owned());
    let ops = operations(pod, native).map(|(keys, piece)| {
        let value = match piece {
            Piece::Volume => sidecar.volume.clone(),
            Piece::VolumeList => Value::Array(vec![sidecar.volume.clone()]),
            Piece::Container => sidecar.container.clone(),
            Piece::ContainerList => Value::Array(vec![sidecar.container.clone()]),
            Piece::Status => status.clone(),
            Piece::Annotations => object(STATUS, status.clone()),
            Piece::Metadata => object("annotations", object(STATUS, status.clone())),
        };
        add(keys, value)
    });
    Patch(ops.into())
}

/// The same operations as [`sidecar_patch`], as the JSON text of the patch, written from the
/// sidecar's pre-serialized container and volume.
pub fn sidecar_patch_json(pod: &PodView<'_>, sidecar: &SidecarJson, native: bool, status: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(sidecar.container.len() + sidecar.volume.len() + status.len() + 256);
    // A JSON string of the status, quoted and escaped once.
    let status = serde_json::to_string(status).unwrap_or_else(|_| "\"\"".to_owned());
    out.push(b'[');
    for (i, (keys, piece)) in operations(pod, native).into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(br#"{"op":"add","path":"#);
        let path = PointerBuf::from_tokens(keys.iter().copied());
        // A pointer is plain text; serializing a string cannot fail.
        out.extend_from_slice(serde_json::to_string(path.as_str()).unwrap_or_default().as_bytes());
        out.extend_from_slice(br#","value":"#);
        let status_key = serde_json::to_string(STATUS).unwrap_or_default();
        match piece {
            Piece::Volume => out.extend_from_slice(sidecar.volume.as_bytes()),
            Piece::VolumeList => wrap(&mut out, b"[", sidecar.volume.as_bytes(), b"]"),
            Piece::Container => out.extend_from_slice(sidecar.container.as_bytes()),
            Piece::ContainerList => wrap(&mut out, b"[", sidecar.container.as_bytes(), b"]"),
            Piece::Status => out.extend_from_slice(status.as_bytes()),
            Piece::Annotations => {
                wrap(&mut out, format!("{{{status_key}:").as_bytes(), status.as_bytes(), b"}")
            }
            Piece::Metadata => wrap(
                &mut out,
                format!("{{\"annotations\":{{{status_key}:").as_bytes(),
                status.as_bytes(),
                b"}}",
            ),
        }
        out.push(b'}');
    }
    out.push(b']');
    out
}

fn wrap(out: &mut Vec<u8>, open: &[u8], inner: &[u8], close: &[u8]) {
    out.extend_from_slice(open);
    out.extend_from_slice(inner);
    out.extend_from_slice(close);
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
    use crate::inject::sidecar::{SidecarSpec, build};

    #[test]
    fn keys_with_slashes_and_tildes_are_escaped() {
        let op = add(&["metadata", "annotations", "a~b/c"], json!("x"));
        assert_eq!(op.path().as_str(), "/metadata/annotations/a~0b~1c");
        let op = add(&["metadata", "annotations", STATUS], json!("x"));
        assert_eq!(op.path().as_str(), "/metadata/annotations/sidecar.example.com~1status");
    }

    #[test]
    fn the_json_rendering_is_the_patch() {
        let spec = SidecarSpec {
            image: "envoyproxy/envoy:v1.34.1".to_owned(),
            resources: Default::default(),
            xds: None,
            native: false,
            tmp_volume: "envoy-tmp".to_owned(),
        };
        let sidecar = build(&spec);
        let json = sidecar.to_json();
        let status = r#"{"version":1,"hash":"h","containers":["envoy"],"volumes":["envoy-tmp"]}"#;
        let pods = [
            json!({"metadata": {"annotations": {"a": "b"}}, "spec": {"containers": [], "volumes": [], "initContainers": []}}),
            json!({"metadata": {"name": "x"}, "spec": {"containers": []}}),
            json!({"spec": {"containers": [], "initContainers": null}}),
        ];
        for pod in &pods {
            let view = PodView::new(pod).unwrap();
            for native in [false, true] {
                let patch = sidecar_patch(&view, &sidecar, native, status);
                let bytes = sidecar_patch_json(&view, &json, native, status);
                let rendered: Value = serde_json::from_slice(&bytes).expect("valid JSON");
                assert_eq!(rendered, serde_json::to_value(&patch).unwrap(), "{pod} native={native}");
            }
        }
    }
}
