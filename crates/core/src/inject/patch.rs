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
use crate::names::{FLEET_LABEL, MESH_SIDECAR_LABEL};

/// What one operation adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Piece {
    /// The sidecar's volume of this index.
    Volume(usize),
    /// Every volume of the sidecar, for a pod without volumes.
    VolumeList,
    Container,
    /// The init containers' list, for a pod without one: the sidecar's init container (when
    /// `init`), then its container (a native sidecar).
    ContainerList {
        init: bool,
    },
    /// The sidecar's init container (a mesh sidecar's capture), first of the pod's.
    Init,
    /// `[init]`, for a pod without init containers.
    InitList,
    Status,
    /// `{STATUS: status}`, for a pod without annotations; with the scrape annotations too
    /// when `scrape`.
    Annotations {
        scrape: bool,
    },
    /// `{"annotations": {STATUS: status}}`, for a pod without metadata; likewise.
    Metadata {
        scrape: bool,
    },
    /// The value of the scrape annotation of this index in [`SCRAPE`].
    Scrape(usize),
    /// The value of the pod's label ([`FLEET_LABEL`] or [`MESH_SIDECAR_LABEL`]).
    LabelValue,
    /// `{key: value}` of that label, for a pod without labels.
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
    op(&["spec", "initContainers"], "/spec/initContainers", Piece::ContainerList { init: false });
const CONTAINER: Operation = op(&["spec", "containers", "-"], "/spec/containers/-", Piece::Container);
const STATUS_ANNOTATION: Operation = op(
    &["metadata", "annotations", STATUS],
    "/metadata/annotations/sidecar.example.com~1status",
    Piece::Status,
);
const ANNOTATIONS: Operation =
    op(&["metadata", "annotations"], "/metadata/annotations", Piece::Annotations { scrape: false });
const METADATA: Operation = op(&["metadata"], "/metadata", Piece::Metadata { scrape: false });
/// Prometheus' scrape annotations for the statistics the sidecar's readiness listener serves
/// (a unit test holds them to [`crate::children::envoy::scrape_annotations`]): key and value,
/// neither of which needs escaping in JSON.
const SCRAPE: [(&str, &str); 3] = [
    ("prometheus.io/path", "/stats/prometheus"),
    ("prometheus.io/port", "9902"),
    ("prometheus.io/scrape", "true"),
];
/// The `add` of each of [`SCRAPE`] to an existing annotations map.
const SCRAPE_ANNOTATIONS: [Operation; 3] = [
    op(
        &["metadata", "annotations", SCRAPE[0].0],
        "/metadata/annotations/prometheus.io~1path",
        Piece::Scrape(0),
    ),
    op(
        &["metadata", "annotations", SCRAPE[1].0],
        "/metadata/annotations/prometheus.io~1port",
        Piece::Scrape(1),
    ),
    op(
        &["metadata", "annotations", SCRAPE[2].0],
        "/metadata/annotations/prometheus.io~1scrape",
        Piece::Scrape(2),
    ),
];
/// [`SCRAPE`] as members of a JSON object, each after a comma.
const SCRAPE_MEMBERS: &str =
    r#","prometheus.io/path":"/stats/prometheus","prometheus.io/port":"9902","prometheus.io/scrape":"true""#;

/// What a patch adds besides the sidecar's container and volumes and its status annotation.
#[derive(Clone, Copy, Debug)]
pub struct Additions<'a> {
    /// The container is a native sidecar: the first init container.
    pub native: bool,
    /// The pod's label (a fleet sidecar's [`FLEET_LABEL`], a mesh sidecar's
    /// [`MESH_SIDECAR_LABEL`]) and its value, for [`sidecar_patch`]; the value as a JSON
    /// string literal, for [`sidecar_patch_json`].
    pub label: Option<(&'static str, &'a str)>,
    /// Prometheus' scrape annotations ([`SCRAPE`]).
    pub scrape: bool,
}
const FLEET_LABEL_VALUE: Operation = op(
    &["metadata", "labels", FLEET_LABEL],
    "/metadata/labels/envoy-operator.example.com~1fleet",
    Piece::LabelValue,
);
const MESH_LABEL_VALUE: Operation = op(
    &["metadata", "labels", MESH_SIDECAR_LABEL],
    "/metadata/labels/envoy-operator.example.com~1mesh-sidecar",
    Piece::LabelValue,
);
const LABELS: Operation = op(&["metadata", "labels"], "/metadata/labels", Piece::Labels);

/// The `add` operations for `pod`: the sidecar's `volumes` volumes, the container (as a regular
/// container, or as the first init container when `native`) and its init container when `init`
/// (first of all), the status annotation, with `scrape` the scrape annotations and, with a
/// `label`, the label.
fn operations(pod: &PodView<'_>, volumes: usize, init: bool, additions: &Additions<'_>) -> Vec<Operation> {
    let Additions { native, scrape, .. } = *additions;
    let mut operations = Vec::with_capacity(volumes + 7);
    match pod.volumes {
        Some(_) => operations.extend((0..volumes).map(|i| Operation { piece: Piece::Volume(i), ..VOLUME })),
        None => operations.push(VOLUME_LIST),
    }
    match (native, pod.init_containers) {
        // First, so the proxy is up before the other init containers need the network; the
        // init container is added at the front after it, so it runs before the proxy.
        (true, Some(_)) => operations.push(FIRST_INIT_CONTAINER),
        (true, None) => {
            operations.push(Operation { piece: Piece::ContainerList { init }, ..INIT_CONTAINER_LIST })
        }
        (false, _) => operations.push(CONTAINER),
    }
    if init {
        match (native, pod.init_containers) {
            (true, None) => {}
            (_, Some(_)) => operations.push(Operation { piece: Piece::Init, ..FIRST_INIT_CONTAINER }),
            (false, None) => operations.push(Operation { piece: Piece::InitList, ..INIT_CONTAINER_LIST }),
        }
    }
    let status = match (pod.metadata, pod.annotations) {
        (_, Some(_)) => STATUS_ANNOTATION,
        (Some(_), None) => Operation { piece: Piece::Annotations { scrape }, ..ANNOTATIONS },
        (None, None) => Operation { piece: Piece::Metadata { scrape }, ..METADATA },
    };
    operations.push(status);
    // Into the pod's own annotations; a map created above holds them already.
    if scrape && pod.annotations.is_some() {
        operations.extend(SCRAPE_ANNOTATIONS);
    }
    // After the status annotation, which creates `metadata` where the pod has none.
    if let Some((key, _)) = additions.label {
        operations.push(match pod.labels {
            Some(_) if key == MESH_SIDECAR_LABEL => MESH_LABEL_VALUE,
            Some(_) => FLEET_LABEL_VALUE,
            None => LABELS,
        });
    }
    operations
}

/// Operations adding `sidecar`, the status annotation `status` and the `additions` to `pod`.
pub fn sidecar_patch(pod: &PodView<'_>, sidecar: &Sidecar, status: &str, additions: &Additions<'_>) -> Patch {
    let status = Value::String(status.to_owned());
    let (label_key, label) = additions.label.unwrap_or_default();
    let label = Value::String(label.to_owned());
    let annotations = |scrape: bool| {
        let mut map = Map::new();
        map.insert(STATUS.to_owned(), status.clone());
        if scrape {
            map.extend(SCRAPE.iter().map(|(key, value)| ((*key).to_owned(), Value::from(*value))));
        }
        Value::Object(map)
    };
    let init = sidecar.init.clone().unwrap_or_default();
    let ops = operations(pod, sidecar.volumes.len(), sidecar.init.is_some(), additions).into_iter().map(
        |Operation { keys, piece, .. }| {
            let value = match piece {
                Piece::Volume(i) => sidecar.volumes[i].clone(),
                Piece::VolumeList => Value::Array(sidecar.volumes.clone()),
                Piece::Container => sidecar.container.clone(),
                Piece::ContainerList { init: false } => Value::Array(vec![sidecar.container.clone()]),
                Piece::ContainerList { init: true } => {
                    Value::Array(vec![init.clone(), sidecar.container.clone()])
                }
                Piece::Init => init.clone(),
                Piece::InitList => Value::Array(vec![init.clone()]),
                Piece::Status => status.clone(),
                Piece::Annotations { scrape } => annotations(scrape),
                Piece::Metadata { scrape } => object("annotations", annotations(scrape)),
                Piece::Scrape(i) => Value::from(SCRAPE[i].1),
                Piece::LabelValue => label.clone(),
                Piece::Labels => object(label_key, label.clone()),
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
/// The mesh label's likewise.
const MESH_LABEL_MEMBER: &str = "{\"envoy-operator.example.com/mesh-sidecar\":";

/// The same operations as [`sidecar_patch`], as the JSON text of the patch, written from the
/// sidecar's pre-serialized container and volumes, `status_literal` (the status annotation as
/// a JSON string literal) and the additions (the fleet label's value as a literal, likewise):
/// only copies, nothing serialized per pod.
pub fn sidecar_patch_json(
    pod: &PodView<'_>,
    sidecar: &SidecarJson,
    status_literal: &str,
    additions: &Additions<'_>,
) -> Vec<u8> {
    let volumes_len: usize = sidecar.volumes.iter().map(|v| v.len() + 1).sum();
    let label_len = additions.label.map_or(0, |(_, value)| value.len());
    let init = sidecar.init.as_deref().unwrap_or_default().as_bytes();
    let mut out = Vec::with_capacity(
        sidecar.container.len() + init.len() + volumes_len + status_literal.len() + label_len + 640,
    );
    let status = status_literal.as_bytes();
    let (label_key, label) = additions.label.unwrap_or_default();
    let label = label.as_bytes();
    let label_member = if label_key == MESH_SIDECAR_LABEL { MESH_LABEL_MEMBER } else { FLEET_LABEL_MEMBER };
    let operations = operations(pod, sidecar.volumes.len(), sidecar.init.is_some(), additions);
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
            Piece::ContainerList { init: false } => wrap(&mut out, b"[", sidecar.container.as_bytes(), b"]"),
            Piece::ContainerList { init: true } => {
                wrap(&mut out, b"[", init, b",");
                wrap(&mut out, b"", sidecar.container.as_bytes(), b"]");
            }
            Piece::Init => out.extend_from_slice(init),
            Piece::InitList => wrap(&mut out, b"[", init, b"]"),
            Piece::Status => out.extend_from_slice(status),
            Piece::Annotations { scrape } => {
                wrap(&mut out, STATUS_MEMBER.as_bytes(), status, scrape_members(scrape));
                out.push(b'}');
            }
            Piece::Metadata { scrape } => {
                out.extend_from_slice(br#"{"annotations":"#);
                wrap(&mut out, STATUS_MEMBER.as_bytes(), status, scrape_members(scrape));
                out.extend_from_slice(b"}}");
            }
            Piece::Scrape(i) => wrap(&mut out, b"\"", SCRAPE[i].1.as_bytes(), b"\""),
            Piece::LabelValue => out.extend_from_slice(label),
            Piece::Labels => wrap(&mut out, label_member.as_bytes(), label, b"}"),
        }
        out.push(b'}');
    }
    out.push(b']');
    out
}

fn scrape_members(scrape: bool) -> &'static [u8] {
    if scrape { SCRAPE_MEMBERS.as_bytes() } else { b"" }
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
    use crate::inject::sidecar::{CaptureSpec, FleetSidecar, MeshSidecar, SidecarSpec, SidecarXds, build};

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
            MESH_LABEL_VALUE,
            LABELS,
        ]
        .into_iter()
        .chain(SCRAPE_ANNOTATIONS);
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
        assert_eq!(MESH_LABEL_MEMBER, format!("{{{}:", serde_json::to_string(MESH_SIDECAR_LABEL).unwrap()));
        // The scrape annotations are the fleet's own, written as they are.
        let fleet: Vec<(String, String)> = crate::children::envoy::scrape_annotations().into_iter().collect();
        let ours: Vec<(String, String)> =
            SCRAPE.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        assert_eq!(ours, fleet);
        let members: String = SCRAPE
            .iter()
            .map(|(key, value)| {
                format!(",{}:{}", serde_json::to_string(key).unwrap(), serde_json::to_string(value).unwrap())
            })
            .collect();
        assert_eq!(SCRAPE_MEMBERS, members);
        for ((key, value), operation) in SCRAPE.iter().zip(SCRAPE_ANNOTATIONS) {
            assert_eq!(operation.keys, ["metadata", "annotations", *key]);
            assert_eq!(serde_json::to_string(value).unwrap(), format!("\"{value}\""));
        }
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
                config_map: "edge-xds-ca".to_owned(),
                ca_volume: "envoy-xds-ca".to_owned(),
                identity_volume: "envoy-xds-identity".to_owned(),
            }),
            ..spec.clone()
        };
        let mesh = |capture: bool| SidecarSpec {
            xds: SidecarXds::Mesh(MeshSidecar {
                control_plane: ControlPlane { host: "xds.ops.svc".to_owned(), port: 18000 },
                namespace: "shop".to_owned(),
                service_account: "web".to_owned(),
                ca_volume: "envoy-xds-ca".to_owned(),
                identity_volume: "envoy-xds-identity".to_owned(),
                capture: capture.then(|| CaptureSpec {
                    image: "envoy-operator:0.1.0".to_owned(),
                    exclude_ports: vec![5432],
                    exclude_cidrs: Vec::new(),
                }),
            }),
            ..spec.clone()
        };
        let status = r#"{"version":1,"hash":"h","containers":["envoy"],"volumes":["envoy-tmp"]}"#;
        let pods = [
            json!({"metadata": {"annotations": {"a": "b"}, "labels": {"app": "x"}}, "spec": {"containers": [], "volumes": [], "initContainers": []}}),
            json!({"metadata": {"name": "x"}, "spec": {"containers": []}}),
            json!({"spec": {"containers": [], "initContainers": null}}),
        ];
        let mesh_label = Some((MESH_SIDECAR_LABEL, "true"));
        for (spec, label) in [
            (spec.clone(), None),
            (fleet, Some((FLEET_LABEL, "edge"))),
            (mesh(true), mesh_label),
            (mesh(false), mesh_label),
        ] {
            let sidecar = build(&spec);
            let json = sidecar.to_json();
            for pod in &pods {
                let view = PodView::new(pod).unwrap();
                for (native, scrape) in [(false, false), (true, false), (false, true), (true, true)] {
                    let patch = sidecar_patch(&view, &sidecar, status, &Additions { native, label, scrape });
                    let status_literal = serde_json::to_string(status).unwrap();
                    let label_literal =
                        label.map(|(key, label)| (key, serde_json::to_string(label).unwrap()));
                    let additions = Additions {
                        native,
                        label: label_literal.as_ref().map(|(key, value)| (*key, value.as_str())),
                        scrape,
                    };
                    let bytes = sidecar_patch_json(&view, &json, &status_literal, &additions);
                    let rendered: Value = serde_json::from_slice(&bytes).expect("valid JSON");
                    assert_eq!(rendered, serde_json::to_value(&patch).unwrap(), "{pod} native={native}");
                    let mut patched = pod.clone();
                    json_patch::patch(&mut patched, &patch).expect("the patch applies");
                    assert_eq!(
                        patched["spec"]["volumes"].as_array().unwrap().len(),
                        sidecar.volumes.len(),
                        "{pod}"
                    );
                    if let Some((key, value)) = label {
                        assert_eq!(patched["metadata"]["labels"][key].as_str(), Some(value), "{pod}");
                    }
                    // The capture runs first of all, then the native sidecar, then the pod's.
                    let init_names: Vec<&str> = patched["spec"]["initContainers"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|c| c["name"].as_str())
                        .collect();
                    let mut expected = Vec::new();
                    if sidecar.init.is_some() {
                        expected.push("envoy-mesh-init");
                    }
                    if native {
                        expected.push("envoy");
                    }
                    assert_eq!(init_names, expected, "{pod} native={native}");
                    let annotations = patched["metadata"]["annotations"].as_object().unwrap();
                    assert_eq!(annotations.get("a").is_some(), pod["metadata"]["annotations"].is_object());
                    assert_eq!(
                        annotations.get("prometheus.io/port").and_then(Value::as_str),
                        scrape.then_some("9902")
                    );
                }
            }
        }
    }
}
