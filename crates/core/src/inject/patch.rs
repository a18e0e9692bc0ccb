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

/// One `add` operation: where, as keys and as the JSON Pointer they make, and what.
#[derive(Clone, Copy, Debug)]
struct Operation {
    keys: &'static [&'static str],
    /// `keys` as a JSON Pointer (`~` and `/` escaped), written out once rather than per pod;
    /// a unit test holds it to [`PointerBuf::from_tokens`].
    pointer: &'static str,
    piece: Piece,
}

const fn op(keys: &'static [&'static str], pointer: &'static str, piece: Piece) -> Operation {
    Operation { keys, pointer, piece }
}

const VOLUME: Operation = op(&["spec", "volumes", "-"], "/spec/volumes/-", Piece::Volume(0));
const VOLUME_LIST: Operation = op(&["spec", "volumes"], "/spec/volumes", Piece::VolumeList);
const FIRST_INIT_CONTAINER: Operation =
    op(&["spec", "initContainers", "0"], "/spec/initContainers/0", Piece::Container);
const INIT_CONTAINER_LIST: Operation =
    op(&["spec", "initContainers"], "/spec/initContainers", Piece::ContainerList);
const CONTAINER: Operation = op(&["spec", "containers", "-"], "/spec/containers/-", Piece::Container);
const STATUS_ANNOTATION: Operation = op(
    &["metadata", "annotations", STATUS],
    "/metadata/annotations/sidecar.example.com~1status",
    Piece::Status,
);
const ANNOTATIONS: Operation = op(&["metadata", "annotations"], "/metadata/annotations", Piece::Annotations);
const METADATA: Operation = op(&["metadata"], "/metadata", Piece::Metadata);
const FLEET_LABEL_VALUE: Operation = op(
    &["metadata", "labels", FLEET_LABEL],
    "/metadata/labels/envoy-operator.example.com~1fleet",
    Piece::FleetLabel,
);
const LABELS: Operation = op(&["metadata", "labels"], "/metadata/labels", Piece::Labels);

/// The `add` operations for `pod`: the sidecar's `volumes` volumes, the container (as a regular
/// container, or as the first init container when `native`), the status annotation and, with
/// `fleet_label`, the fleet label.
fn operations(pod: &PodView<'_>, native: bool, volumes: usize, fleet_label: bool) -> Vec<Operation> {
    let mut operations = Vec::with_capacity(volumes + 3);
    match pod.volumes {
        Some(_) => operations.extend((0..volumes).map(|i| Operation { piece: Piece::Volume(i), ..VOLUME })),
        None => operations.push(VOLUME_LIST),
    }
    let container = match (native, pod.init_containers) {
        // First, so the proxy is up before the other init containers need the network.
        (true, Some(_)) => FIRST_INIT_CONTAINER,
        (true, None) => INIT_CONTAINER_LIST,
        (false, _) => CONTAINER,
    };
    let status = match (pod.metadata, pod.annotations) {
        (_, Some(_)) => STATUS_ANNOTATION,
        (Some(_), None) => ANNOTATIONS,
        (None, None) => METADATA,
    };
    operations.extend([container, status]);
    // After the status annotation, which creates `metadata` where the pod has none.
    if fleet_label {
        operations.push(match pod.labels {
            Some(_) => FLEET_LABEL_VALUE,
            None => LABELS,
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
        |Operation { keys, piece, .. }| {
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

/// The status annotation's key as a JSON object's opening, for the pieces that create it.
const STATUS_MEMBER: &str = "{\"sidecar.example.com/status\":";
/// The fleet label's key as a JSON object's opening, for a pod without labels.
const FLEET_LABEL_MEMBER: &str = "{\"envoy-operator.example.com/fleet\":";

/// The same operations as [`sidecar_patch`], as the JSON text of the patch, written from the
/// sidecar's pre-serialized container and volumes, `status_literal` (the status annotation as
/// a JSON string literal) and `label_literal` (the fleet label's value, likewise): only
/// copies, nothing serialized per pod.
pub fn sidecar_patch_json(
    pod: &PodView<'_>,
    sidecar: &SidecarJson,
    native: bool,
    status_literal: &str,
    label_literal: Option<&str>,
) -> Vec<u8> {
    let volumes_len: usize = sidecar.volumes.iter().map(|v| v.len() + 1).sum();
    let label_len = label_literal.map_or(0, str::len);
    let mut out =
        Vec::with_capacity(sidecar.container.len() + volumes_len + status_literal.len() + label_len + 384);
    let status = status_literal.as_bytes();
    let label = label_literal.unwrap_or_default().as_bytes();
    let operations = operations(pod, native, sidecar.volumes.len(), label_literal.is_some());
    out.push(b'[');
    for (i, Operation { pointer, piece, .. }) in operations.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        // A pointer of these keys has nothing to escape in JSON.
        wrap(&mut out, br#"{"op":"add","path":""#, pointer.as_bytes(), br#"","value":"#);
        match piece {
            Piece::Volume(i) => out.extend_from_slice(sidecar.volumes[i].as_bytes()),
            Piece::VolumeList => {
                out.push(b'[');
                for (i, volume) in sidecar.volumes.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(volume.as_bytes());
                }
                out.push(b']');
            }
            Piece::Container => out.extend_from_slice(sidecar.container.as_bytes()),
            Piece::ContainerList => wrap(&mut out, b"[", sidecar.container.as_bytes(), b"]"),
            Piece::Status => out.extend_from_slice(status),
            Piece::Annotations => wrap(&mut out, STATUS_MEMBER.as_bytes(), status, b"}"),
            Piece::Metadata => {
                out.extend_from_slice(br#"{"annotations":"#);
                wrap(&mut out, STATUS_MEMBER.as_bytes(), status, b"}}");
            }
            Piece::FleetLabel => out.extend_from_slice(label),
            Piece::Labels => wrap(&mut out, FLEET_LABEL_MEMBER.as_bytes(), label, b"}"),
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
    fn pointers_and_members_are_their_keys() {
        let all = [
            VOLUME,
            VOLUME_LIST,
            FIRST_INIT_CONTAINER,
            INIT_CONTAINER_LIST,
            CONTAINER,
            STATUS_ANNOTATION,
            ANNOTATIONS,
            METADATA,
            FLEET_LABEL_VALUE,
            LABELS,
        ];
        for operation in all {
            let pointer = PointerBuf::from_tokens(operation.keys.iter().copied());
            assert_eq!(operation.pointer, pointer.as_str());
            // Written into the patch unquoted: nothing in it may need escaping.
            assert_eq!(
                serde_json::to_string(operation.pointer).unwrap(),
                format!("\"{}\"", operation.pointer)
            );
        }
        assert_eq!(STATUS_MEMBER, format!("{{{}:", serde_json::to_string(STATUS).unwrap()));
        assert_eq!(FLEET_LABEL_MEMBER, format!("{{{}:", serde_json::to_string(FLEET_LABEL).unwrap()));
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
                    let status_literal = serde_json::to_string(status).unwrap();
                    let label_literal = label.map(|label| serde_json::to_string(label).unwrap());
                    let bytes =
                        sidecar_patch_json(&view, &json, native, &status_literal, label_literal.as_deref());
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
