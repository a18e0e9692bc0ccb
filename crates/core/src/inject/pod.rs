//! A read-only view of a raw pod (or pod template) JSON: the few fields injection looks at,
//! checked for shape once, so the rest of the code never indexes blindly. Nothing is
//! deserialized into k8s-openapi types: fields this build does not know stay untouched.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::InjectError;

/// The parts of a pod that injection reads.
#[derive(Debug)]
pub struct PodView<'a> {
    pub metadata: Option<&'a Map<String, Value>>,
    pub labels: Option<&'a Map<String, Value>>,
    pub annotations: Option<&'a Map<String, Value>>,
    pub spec: &'a Map<String, Value>,
    pub containers: &'a [Value],
    pub init_containers: Option<&'a [Value]>,
    pub ephemeral_containers: Option<&'a [Value]>,
    pub volumes: Option<&'a [Value]>,
}

impl<'a> PodView<'a> {
    /// Checks the shape of the fields injection reads or patches; `null` counts as absent.
    pub fn new(pod: &'a Value) -> Result<Self, InjectError> {
        let pod = pod.as_object().ok_or_else(|| malformed("the object is not a JSON object"))?;
        let metadata = optional_object(pod.get("metadata"), "metadata")?;
        let labels = optional_object(metadata.and_then(|m| m.get("labels")), "metadata.labels")?;
        let annotations =
            optional_object(metadata.and_then(|m| m.get("annotations")), "metadata.annotations")?;
        let spec = optional_object(pod.get("spec"), "spec")?.ok_or_else(|| malformed("spec is missing"))?;
        let containers = optional_array(spec.get("containers"), "spec.containers")?
            .ok_or_else(|| malformed("spec.containers is missing"))?;
        let view = Self {
            metadata,
            labels,
            annotations,
            spec,
            containers,
            init_containers: optional_array(spec.get("initContainers"), "spec.initContainers")?,
            ephemeral_containers: optional_array(
                spec.get("ephemeralContainers"),
                "spec.ephemeralContainers",
            )?,
            volumes: optional_array(spec.get("volumes"), "spec.volumes")?,
        };
        for (field, items) in [
            ("spec.containers", Some(view.containers)),
            ("spec.initContainers", view.init_containers),
            ("spec.ephemeralContainers", view.ephemeral_containers),
            ("spec.volumes", view.volumes),
        ] {
            if let Some(i) = items.into_iter().flatten().position(|item| !item.is_object()) {
                return Err(malformed(&format!("{field}[{i}] is not an object")));
            }
        }
        Ok(view)
    }

    pub fn label(&self, key: &str) -> Option<&'a str> {
        self.labels.and_then(|labels| labels.get(key)).and_then(Value::as_str)
    }

    pub fn has_annotation(&self, key: &str) -> bool {
        self.annotations.is_some_and(|annotations| annotations.get(key).is_some_and(|v| !v.is_null()))
    }

    /// Whether some annotation's key starts with `prefix`.
    pub fn has_annotation_prefix(&self, prefix: &str) -> bool {
        self.annotations.is_some_and(|annotations| annotations.keys().any(|key| key.starts_with(prefix)))
    }

    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        self.annotations.and_then(|annotations| annotations.get(key)).and_then(Value::as_str)
    }

    pub fn namespace(&self) -> Option<&'a str> {
        self.metadata.and_then(|m| m.get("namespace")).and_then(Value::as_str).filter(|ns| !ns.is_empty())
    }

    /// The name, else the `generateName` prefix with `*`, for messages and logs.
    pub fn display_name(&self) -> String {
        let field = |key: &str| self.metadata.and_then(|m| m.get(key)).and_then(Value::as_str);
        match (field("name"), field("generateName")) {
            (Some(name), _) if !name.is_empty() => name.to_owned(),
            (_, Some(prefix)) => format!("{prefix}*"),
            _ => "<unnamed>".to_owned(),
        }
    }

    /// `spec.restartPolicy` as written (the API server defaults it to `Always`).
    pub fn restart_policy(&self) -> Option<&'a str> {
        self.spec.get("restartPolicy").and_then(Value::as_str)
    }

    /// Whether an ownerReference names a `kind` of API `group` (any version).
    pub fn owned_by(&self, group: &str, kind: &str) -> bool {
        let owners = self.metadata.and_then(|m| m.get("ownerReferences")).and_then(Value::as_array);
        owners.into_iter().flatten().any(|owner| {
            let api_version = owner.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
            let owner_group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
            owner_group == group && owner.get("kind").and_then(Value::as_str) == Some(kind)
        })
    }

    /// The ServiceAccount the pod runs as: `spec.serviceAccountName`, else the deprecated
    /// `spec.serviceAccount`, else `default` (what the API server's admission sets).
    pub fn service_account(&self) -> &'a str {
        ["serviceAccountName", "serviceAccount"]
            .iter()
            .find_map(|key| self.spec.get(*key).and_then(Value::as_str).filter(|name| !name.is_empty()))
            .unwrap_or("default")
    }

    pub fn host_network(&self) -> bool {
        self.spec.get("hostNetwork").and_then(Value::as_bool).unwrap_or(false)
    }

    /// Every container of the pod: regular, init and ephemeral (their names share one space).
    pub fn all_containers(&self) -> impl Iterator<Item = &'a Value> + use<'a> {
        self.containers
            .iter()
            .chain(self.init_containers.into_iter().flatten())
            .chain(self.ephemeral_containers.into_iter().flatten())
    }

    /// Containers that run while the sidecar does: regular ones and native sidecars, and for a
    /// native sidecar (which starts first) every init container too.
    pub fn containers_alongside(&self, native_sidecar: bool) -> impl Iterator<Item = &'a Value> + use<'a> {
        let runs = move |c: &&Value| {
            native_sidecar || c.get("restartPolicy").and_then(Value::as_str) == Some("Always")
        };
        self.containers.iter().chain(self.init_containers.into_iter().flatten().filter(runs))
    }

    /// The ports `containers` declare.
    pub fn declared_ports(
        containers: impl Iterator<Item = &'a Value>,
    ) -> impl Iterator<Item = DeclaredPort<'a>> {
        containers.flat_map(|container| {
            let ports = container.get("ports").and_then(Value::as_array).into_iter().flatten();
            ports.filter_map(move |port| {
                let number = port.get("containerPort").and_then(Value::as_i64)?;
                let tcp =
                    port.get("protocol").and_then(Value::as_str).is_none_or(|protocol| protocol == "TCP");
                Some(DeclaredPort { container: name_of(container).unwrap_or("<unnamed>"), port: number, tcp })
            })
        })
    }

    pub fn has_container(&self, name: &str) -> bool {
        self.all_containers().any(|c| name_of(c) == Some(name))
    }

    /// The names of the pod's volumes, as a set: one pass, then every lookup is O(1), so
    /// searching for a free name stays linear however many volumes the pod has.
    pub fn volume_names(&self) -> HashSet<&'a str> {
        self.volumes.into_iter().flatten().filter_map(name_of).collect()
    }
}

/// A `containerPort` a container declares.
pub struct DeclaredPort<'a> {
    pub container: &'a str,
    pub port: i64,
    /// Over TCP (the default), as Envoy's listeners bind.
    pub tcp: bool,
}

pub fn name_of(item: &Value) -> Option<&str> {
    item.get("name").and_then(Value::as_str)
}

fn malformed(message: &str) -> InjectError {
    InjectError::Malformed(message.to_owned())
}

fn optional_object<'a>(
    value: Option<&'a Value>,
    field: &str,
) -> Result<Option<&'a Map<String, Value>>, InjectError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(_) => Err(malformed(&format!("{field} is not an object"))),
    }
}

fn optional_array<'a>(value: Option<&'a Value>, field: &str) -> Result<Option<&'a [Value]>, InjectError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => Ok(Some(items)),
        Some(_) => Err(malformed(&format!("{field} is not an array"))),
    }
}

/// Reads a pod's JSON keeping only what injection looks at (see [`PodView`]): the names,
/// labels, annotations and owners' `apiVersion` and `kind` of `metadata`; `hostNetwork`,
/// `restartPolicy`, `serviceAccountName` and `serviceAccount`; each container's `name`, `restartPolicy` and ports' `containerPort` and
/// `protocol`; each
/// volume's `name`. Everything else is
/// skipped without being built, so reading costs little time and memory whatever else the pod
/// holds, and [`super::inject`] on the result decides exactly as on the whole pod: the patch
/// only ever adds, and where it adds depends only on these fields. A field of the wrong type
/// keeps its type (an array stays an array, emptied), so the same shape errors are reported.
pub fn read_for_injection(json: &[u8]) -> Result<Value, serde_json::Error> {
    use serde::de::DeserializeSeed;
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    let value = Kept(&POD).deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// A pod read as [`read_for_injection`] reads it, as part of a larger document (the
/// AdmissionReview, read in one pass).
#[derive(Clone, Debug, PartialEq)]
pub struct PodForInjection(pub Value);

impl<'de> serde::Deserialize<'de> for PodForInjection {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::DeserializeSeed;
        Kept(&POD).deserialize(deserializer).map(Self)
    }
}

impl From<PodForInjection> for Value {
    fn from(pod: PodForInjection) -> Self {
        pod.0
    }
}

/// Which parts of a JSON value to keep.
enum Shape {
    /// The whole value.
    All,
    /// An object's listed members, each with its own shape; the others are skipped.
    Members(&'static [(&'static str, Shape)]),
    /// An array's items, each with this shape.
    Items(&'static Shape),
}

const PORT: Shape = Shape::Members(&[("containerPort", Shape::All), ("protocol", Shape::All)]);
const CONTAINER: Shape =
    Shape::Members(&[("name", Shape::All), ("restartPolicy", Shape::All), ("ports", Shape::Items(&PORT))]);
const VOLUME: Shape = Shape::Members(&[("name", Shape::All)]);
/// A Job's pod is told apart by its owner ([`PodView::owned_by`]).
const OWNER: Shape = Shape::Members(&[("apiVersion", Shape::All), ("kind", Shape::All)]);
const POD: Shape = Shape::Members(&[
    (
        "metadata",
        Shape::Members(&[
            ("name", Shape::All),
            ("generateName", Shape::All),
            ("namespace", Shape::All),
            ("labels", Shape::All),
            ("annotations", Shape::All),
            ("ownerReferences", Shape::Items(&OWNER)),
        ]),
    ),
    (
        "spec",
        Shape::Members(&[
            ("hostNetwork", Shape::All),
            ("restartPolicy", Shape::All),
            ("serviceAccountName", Shape::All),
            ("serviceAccount", Shape::All),
            ("containers", Shape::Items(&CONTAINER)),
            ("initContainers", Shape::Items(&CONTAINER)),
            ("ephemeralContainers", Shape::Items(&CONTAINER)),
            ("volumes", Shape::Items(&VOLUME)),
        ]),
    ),
]);

/// Deserializes a value keeping the parts its shape names.
struct Kept(&'static Shape);

impl<'de> serde::de::DeserializeSeed<'de> for Kept {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        match self.0 {
            Shape::All => serde::Deserialize::deserialize(deserializer),
            shape => deserializer.deserialize_any(KeptVisitor(shape)),
        }
    }
}

struct KeptVisitor(&'static Shape);

/// Reads an object key as the index of the member it names, without allocating it.
struct Member(&'static [(&'static str, Shape)]);

impl<'de> serde::de::DeserializeSeed<'de> for Member {
    type Value = Option<usize>;

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<Option<usize>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl serde::de::Visitor<'_> for Member {
    type Value = Option<usize>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("an object key")
    }

    fn visit_str<E>(self, key: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|(name, _)| *name == key))
    }
}

impl<'de> serde::de::Visitor<'de> for KeptVisitor {
    type Value = Value;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut kept = Map::new();
        let members = match self.0 {
            Shape::Members(members) => *members,
            _ => &[],
        };
        while let Some(member) = map.next_key_seed(Member(members))? {
            match member.and_then(|index| members.get(index)) {
                Some((name, shape)) => {
                    kept.insert((*name).to_owned(), map.next_value_seed(Kept(shape))?);
                }
                None => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(kept))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        match self.0 {
            Shape::Items(shape) => {
                while let Some(item) = seq.next_element_seed(Kept(shape))? {
                    items.push(item);
                }
            }
            _ => while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {},
        }
        Ok(Value::Array(items))
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reading_for_injection_keeps_what_it_reads_and_the_shape_of_the_rest() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "web-", "namespace": "shop", "labels": {"app": "web"},
                "annotations": {"sidecar.example.com/xds": "xds:1", "other": "x"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u"}]},
            "spec": {"hostNetwork": false, "restartPolicy": "Never", "nodeName": "n",
                "containers": [{"name": "app", "image": "nginx", "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "env": [{"name": "A", "value": "B"}]}],
                "initContainers": [{"name": "setup", "restartPolicy": "Always"}],
                "volumes": [{"name": "data", "emptyDir": {}}],
                "ephemeralContainers": null},
            "status": {"phase": "Pending"}
        });
        let kept = read_for_injection(pod.to_string().as_bytes()).unwrap();
        assert_eq!(
            kept,
            json!({
                "metadata": {"generateName": "web-", "namespace": "shop", "labels": {"app": "web"},
                    "annotations": {"sidecar.example.com/xds": "xds:1", "other": "x"},
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job"}]},
                "spec": {"hostNetwork": false, "restartPolicy": "Never",
                    "containers": [{"name": "app", "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
                    "initContainers": [{"name": "setup", "restartPolicy": "Always"}],
                    "volumes": [{"name": "data"}],
                    "ephemeralContainers": null}
            })
        );
        let wrong =
            read_for_injection(br#"{"spec": {"containers": {"name": "x"}, "volumes": "v"}}"#).unwrap();
        assert_eq!(wrong, json!({"spec": {"containers": {}, "volumes": "v"}}));
        assert!(read_for_injection(b"{\"spec\": ").is_err());
        assert!(read_for_injection(b"{} trailing").is_err());
    }
}
