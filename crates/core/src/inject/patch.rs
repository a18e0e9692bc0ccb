//! The JSON Patch that adds a sidecar to the raw pod. Built against the JSON as received, so
//! fields this build's k8s-openapi does not know survive; every optional parent (metadata,
//! annotations, labels, volumes, initContainers) may be absent or null and is then created
//! whole.
//!
//! [`operations`] decides the operations once; they are rendered either as a
//! [`Patch`] (to apply, as the offline command does) or straight into JSON bytes from the
//! sidecar's pre-serialized parts (what the webhook sends), so the webhook does not rebuild and
//! re-serialize the same container for every pod.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use serde_json::{Map, Value};

use super::annotations::STATUS;
use super::pod::PodView;
use super::sidecar::{Sidecar, SidecarJson};
use crate::names::FLEET_LABEL;

/// What one operation adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Piece {
    /// The sidecar's volume of this index.
    Volume(usize),
    /// Every volume of the sidecar, for a pod without volumes.
    VolumeList,
    Container,
    ContainerList,
    Status,
    /// `{STATUS: status}`, for a pod without annotations.
    Annotations,
    /// `{"annotations": {STATUS: status}}`, for a pod without metadata.
    Metadata,
    /// The value of [`FLEET_LABEL`].
    FleetLabel,
    /// `{FLEET_LABEL: value}`, for a pod without labels.
    Labels,
}

type Operation = (&'static [&'static str], Piece);

/// The `add` operations for `pod`: the sidecar's `volumes` volumes, the container (as a regular
/// container, or as the first init container when `native`), the status annotation and, with
/// `fleet_label`, the fleet label.
fn operations(pod: &PodView<'_>, native: bool, volumes: usize, fleet_label: bool) -> Vec<Operation> {
    let mut operations = Vec::with_capacity(volumes + 3);
    match pod.volumes {
        Some(_) => operations.extend((0..volumes).map(|i| (&["spec", "volumes", "-"][..], Piece::Volume(i)))),
        None => operations.push((&["spec", "volumes"][..], Piece::VolumeList)),
    }
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
    operations.extend([container, status]);
    // After the status annotation, which creates `metadata` where the pod has none.
    if fleet_label {
        operations.push(match pod.labels {
            Some(_) => (&["metadata", "labels", FLEET_LABEL][..], Piece::FleetLabel),
            None => (&["metadata", "labels"][..], Piece::Labels),
        });
    }
    operations
}

/// Operations adding `sidecar`, the status annotation `status` and, when given, the fleet
/// label's value to `pod`.
pub fn sidecar_patch(
    pod: &PodView<'_>,
    sidecar: &Sidecar,
    native: bool,
    status: &str,
    fleet_label: Option<&str>,
) -> Patch {
    let status = Value::String(status.to_owned());
    let label = Value::String(fleet_label.unwrap_or_default().to_owned());
    let ops = operations(pod, native, sidecar.volumes.len(), fleet_label.is_some()).into_iter().map(
        |(keys, piece)| {
            let value = match piece {
                Piece::Volume(i) => sidecar.volumes[i].clone(),
                Piece::VolumeList => Value::Array(sidecar.volumes.clone()),
                Piece::Container => sidecar.container.clone(),
                Piece::ContainerList => Value::Array(vec![sidecar.container.clone()]),
                Piece::Status => status.clone(),
                Piece::Annotations => object(STATUS, status.clone()),
                Piece::Metadata => object("annotations", object(STATUS, status.clone())),
                Piece::FleetLabel => label.clone(),
                Piece::Labels => object(FLEET_LABEL, label.clone()),
            };
            add(keys, value)
        },
    );
    Patch(ops.collect())
}

/// The same operations as [`sidecar_patch`], as the JSON text of the patch, written from the
/// sidecar's pre-serialized container and volumes.
pub fn sidecar_patch_json(
    pod: &PodView<'_>,
    sidecar: &SidecarJson,
    native: bool,
    status: &str,
    fleet_label: Option<&str>,
) -> Vec<u8> {
    let volumes_len: usize = sidecar.volumes.iter().map(|v| v.len() + 1).sum();
    let mut out = Vec::with_capacity(sidecar.container.len() + volumes_len + status.len() + 256);
    // JSON strings of the status and the label, quoted and escaped once.
    let status = serde_json::to_string(status).unwrap_or_else(|_| "\"\"".to_owned());
    let label = serde_json::to_string(fleet_label.unwrap_or_default()).unwrap_or_else(|_| "\"\"".to_owned());
    let operations = operations(pod, native, sidecar.volumes.len(), fleet_label.is_some());
    out.push(b'[');
    for (i, (keys, piece)) in operations.into_iter().enumerate() {
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
            Piece::Volume(i) => out.extend_from_slice(sidecar.volumes[i].as_bytes()),
            Piece::VolumeList => wrap(&mut out, b"[", sidecar.volumes.join(",").as_bytes(), b"]"),
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
            Piece::FleetLabel => out.extend_from_slice(label.as_bytes()),
            Piece::Labels => {
                let key = serde_json::to_string(FLEET_LABEL).unwrap_or_default();
                wrap(&mut out, format!("{{{key}:").as_bytes(), label.as_bytes(), b"}")
            }
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
    use crate::bootstrap::ControlPlane;
    use crate::inject::sidecar::{FleetSidecar, SidecarSpec, SidecarXds, build};

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
            xds: SidecarXds::None,
            native: false,
            tmp_volume: "envoy-tmp".to_owned(),
        };
        let fleet = SidecarSpec {
            xds: SidecarXds::Fleet(FleetSidecar {
                control_plane: ControlPlane { host: "xds.ops.svc".to_owned(), port: 18000 },
                fleet: "shop/edge".to_owned(),
                envoy: "edge".to_owned(),
                config_map: "edge-bootstrap".to_owned(),
                ca_volume: "envoy-xds-ca".to_owned(),
            }),
            ..spec.clone()
        };
        let status = r#"{"version":1,"hash":"h","containers":["envoy"],"volumes":["envoy-tmp"]}"#;
        let pods = [
            json!({"metadata": {"annotations": {"a": "b"}, "labels": {"app": "x"}}, "spec": {"containers": [], "volumes": [], "initContainers": []}}),
            json!({"metadata": {"name": "x"}, "spec": {"containers": []}}),
            json!({"spec": {"containers": [], "initContainers": null}}),
        ];
        for (spec, label) in [(spec, None), (fleet, Some("edge"))] {
            let sidecar = build(&spec);
            let json = sidecar.to_json();
            for pod in &pods {
                let view = PodView::new(pod).unwrap();
                for native in [false, true] {
                    let patch = sidecar_patch(&view, &sidecar, native, status, label);
                    let bytes = sidecar_patch_json(&view, &json, native, status, label);
                    let rendered: Value = serde_json::from_slice(&bytes).expect("valid JSON");
                    assert_eq!(rendered, serde_json::to_value(&patch).unwrap(), "{pod} native={native}");
                    let mut patched = pod.clone();
                    json_patch::patch(&mut patched, &patch).expect("the patch applies");
                    assert_eq!(
                        patched["spec"]["volumes"].as_array().unwrap().len(),
                        sidecar.volumes.len(),
                        "{pod}"
                    );
                    assert_eq!(patched["metadata"]["labels"][FLEET_LABEL].as_str(), label, "{pod}");
                }
            }
        }
    }
}
