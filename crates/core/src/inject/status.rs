//! The status annotation: a record of exactly what was injected, so a second pass knows the
//! pod is done and `--uninject` can remove precisely what was added.

use serde::{Deserialize, Serialize};

/// Value of the `sidecar.example.com/status` annotation, as JSON, e.g.
/// `{"version":1,"hash":"3f9c0a1be2d4c5f6","containers":["envoy"],"volumes":["envoy-tmp"]}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InjectionStatus {
    /// Format version of this record.
    pub version: u32,
    /// Hash of the injected container and volume (see [`super::sidecar::Sidecar::hash`]).
    pub hash: String,
    /// Containers added to `spec.containers`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<String>,
    /// Containers added to `spec.initContainers` (native sidecars).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<String>,
    /// Volumes added to `spec.volumes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<String>,
    /// Keys of the labels added to `metadata.labels` (the fleet label of a sidecar naming an
    /// Envoy served by the operator's control plane).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Keys of the annotations added besides this one (Prometheus' scrape annotations, for a
    /// pod that had none of its own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub annotations: Vec<String>,
}

/// The current format version.
pub const STATUS_VERSION: u32 = 1;

impl InjectionStatus {
    pub fn to_annotation(&self) -> String {
        // Strings and numbers only: serialization cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn parse(annotation: &str) -> Result<Self, String> {
        serde_json::from_str(annotation).map_err(|e| format!("not an injection record: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_compact_form() {
        let status = InjectionStatus {
            version: STATUS_VERSION,
            hash: "0123456789abcdef".to_owned(),
            containers: vec!["envoy".to_owned()],
            init_containers: Vec::new(),
            volumes: vec!["envoy-tmp".to_owned()],
            labels: Vec::new(),
            annotations: Vec::new(),
        };
        let text = status.to_annotation();
        assert_eq!(
            text,
            r#"{"version":1,"hash":"0123456789abcdef","containers":["envoy"],"volumes":["envoy-tmp"]}"#
        );
        assert_eq!(InjectionStatus::parse(&text).unwrap(), status);
        assert!(InjectionStatus::parse("yes").is_err());
    }
}
