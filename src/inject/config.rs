//! What the injector injects when a pod does not say otherwise: the operator's flags.

use crate::bootstrap::XdsTarget;
use crate::rules::envoy::DEFAULT_ENVOY_IMAGE;
use crate::rules::format;

/// Namespaces that never get a sidecar, whatever their labels: the control plane's own. The
/// operator's namespace is excluded as well (see [`InjectConfig::excluded_namespaces`]).
pub const SYSTEM_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// Namespace the operator runs in unless told otherwise.
pub const DEFAULT_OPERATOR_NAMESPACE: &str = "envoy-operator";

/// Compute resources of the sidecar. `None` leaves the request or limit unset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyResources {
    pub cpu_request: Option<String>,
    pub memory_request: Option<String>,
    pub cpu_limit: Option<String>,
    pub memory_limit: Option<String>,
}

impl Default for ProxyResources {
    /// The same figures as an `Envoy` fleet's defaults. No CPU limit: throttling a proxy adds
    /// latency to every request of the application behind it.
    fn default() -> Self {
        Self {
            cpu_request: Some("100m".to_owned()),
            memory_request: Some("64Mi".to_owned()),
            cpu_limit: None,
            memory_limit: Some("256Mi".to_owned()),
        }
    }
}

/// The injector's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InjectConfig {
    /// Envoy image of the sidecar; pinned by default.
    pub image: String,
    /// Default requests and limits; pods override them with annotations.
    pub resources: ProxyResources,
    /// xDS server for pods that name none; without it, such pods get an admin-only bootstrap.
    pub default_xds: Option<XdsTarget>,
    /// Inject as a native sidecar (an init container with `restartPolicy: Always`, Kubernetes
    /// 1.29+) unless a pod says otherwise. Off by default: older API servers reject it.
    pub native_sidecar: bool,
    /// The operator's own namespace, never injected: the injector must not depend on itself.
    pub operator_namespace: String,
    /// Further namespaces never injected, beyond [`SYSTEM_NAMESPACES`] and the operator's.
    pub extra_excluded_namespaces: Vec<String>,
}

impl Default for InjectConfig {
    fn default() -> Self {
        Self {
            image: DEFAULT_ENVOY_IMAGE.to_owned(),
            resources: ProxyResources::default(),
            default_xds: None,
            native_sidecar: false,
            operator_namespace: DEFAULT_OPERATOR_NAMESPACE.to_owned(),
            extra_excluded_namespaces: Vec::new(),
        }
    }
}

impl InjectConfig {
    /// Every namespace that never gets a sidecar, sorted and without duplicates: the same
    /// list the webhook configuration's `namespaceSelector` carries.
    pub fn excluded_namespaces(&self) -> Vec<String> {
        let mut names: Vec<String> = SYSTEM_NAMESPACES
            .iter()
            .map(|s| (*s).to_owned())
            .chain(std::iter::once(self.operator_namespace.clone()))
            .chain(self.extra_excluded_namespaces.iter().cloned())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    pub fn is_excluded(&self, namespace: &str) -> bool {
        SYSTEM_NAMESPACES.contains(&namespace)
            || namespace == self.operator_namespace
            || self.extra_excluded_namespaces.iter().any(|n| n == namespace)
    }

    /// Checks the configuration once at startup, so a bad flag fails fast rather than on
    /// every pod.
    pub fn validate(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        for reason in format::image(&self.image) {
            problems.push(format!("image {:?}: {reason}", self.image));
        }
        let resources = &self.resources;
        for (what, value) in [
            ("cpu request", &resources.cpu_request),
            ("memory request", &resources.memory_request),
            ("cpu limit", &resources.cpu_limit),
            ("memory limit", &resources.memory_limit),
        ] {
            if let Some(value) = value
                && let Err(reason) = format::quantity(value).and_then(non_negative)
            {
                problems.push(format!("{what} {value:?}: {reason}"));
            }
        }
        for namespace in std::iter::once(&self.operator_namespace).chain(&self.extra_excluded_namespaces) {
            for reason in format::dns1123_label(namespace) {
                problems.push(format!("namespace {namespace:?}: {reason}"));
            }
        }
        if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
    }
}

/// Rejects negative quantities, which no resource accepts.
pub(crate) fn non_negative(value: f64) -> Result<f64, String> {
    if value < 0.0 { Err("must be greater than or equal to 0".to_owned()) } else { Ok(value) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excluded_namespaces_include_the_operators_own() {
        let config =
            InjectConfig { extra_excluded_namespaces: vec!["monitoring".to_owned()], ..Default::default() };
        assert_eq!(
            config.excluded_namespaces(),
            ["envoy-operator", "kube-node-lease", "kube-public", "kube-system", "monitoring"]
        );
        assert!(config.is_excluded("kube-system"));
        assert!(config.is_excluded("envoy-operator"));
        assert!(config.is_excluded("monitoring"));
        assert!(!config.is_excluded("shop"));
    }

    #[test]
    fn validation_names_each_bad_flag() {
        assert_eq!(InjectConfig::default().validate(), Ok(()));
        let bad = InjectConfig {
            image: "Envoy:".to_owned(),
            resources: ProxyResources { cpu_request: Some("lots".to_owned()), ..Default::default() },
            ..Default::default()
        };
        let message = bad.validate().unwrap_err();
        assert!(message.contains("image \"Envoy:\""), "{message}");
        assert!(message.contains("cpu request \"lots\""), "{message}");
    }
}
