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

    /// Containers that run alongside the application: regular ones and native sidecars.
    pub fn long_running_containers(&self) -> impl Iterator<Item = &'a Value> + use<'a> {
        let native = |c: &&Value| c.get("restartPolicy").and_then(Value::as_str) == Some("Always");
        self.containers.iter().chain(self.init_containers.into_iter().flatten().filter(native))
    }

    pub fn has_container(&self, name: &str) -> bool {
        self.all_containers().any(|c| name_of(c) == Some(name))
    }

    pub fn has_volume(&self, name: &str) -> bool {
        self.volumes.into_iter().flatten().any(|v| name_of(v) == Some(name))
    }

    /// The names of the pod's volumes, as a set: one pass, then every lookup is O(1), so
    /// searching for a free name stays linear however many volumes the pod has.
    pub fn volume_names(&self) -> HashSet<&'a str> {
        self.volumes.into_iter().flatten().filter_map(name_of).collect()
    }
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
