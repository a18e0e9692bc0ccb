//! What the injector injects when a pod does not say otherwise: the operator's flags.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::bootstrap::{ControlPlane, XdsTarget};
use crate::names::{
    DEFAULT_ENVOY_IMAGE, DEFAULT_MESH_INIT_IMAGE, DEFAULT_PROXY_CPU_REQUEST, DEFAULT_PROXY_MEMORY_LIMIT,
    DEFAULT_PROXY_MEMORY_REQUEST, OPERATOR_NAMESPACE, SYSTEM_NAMESPACES,
};
use crate::rules::{format, quantity};

/// Compute resources of the sidecar. `None` leaves the request or limit unset.
#[derive(Clone, Debug, PartialEq)]
pub struct ProxyResources {
    pub cpu_request: Option<Quantity>,
    pub memory_request: Option<Quantity>,
    pub cpu_limit: Option<Quantity>,
    pub memory_limit: Option<Quantity>,
}

impl Default for ProxyResources {
    /// The same figures as an `Envoy` fleet's defaults (see [`crate::names`]).
    fn default() -> Self {
        let quantity = |value: &str| Some(Quantity(value.to_owned()));
        Self {
            cpu_request: quantity(DEFAULT_PROXY_CPU_REQUEST),
            memory_request: quantity(DEFAULT_PROXY_MEMORY_REQUEST),
            cpu_limit: None,
            memory_limit: quantity(DEFAULT_PROXY_MEMORY_LIMIT),
        }
    }
}

/// The injector's configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct InjectConfig {
    /// Envoy image of the sidecar; pinned by default.
    pub image: String,
    /// Default requests and limits; pods override them with annotations.
    pub resources: ProxyResources,
    /// xDS server for pods that name none; without it, such pods get an admin-only bootstrap.
    pub default_xds: Option<XdsTarget>,
    /// The operator's control plane as sidecars reach it, for pods naming an Envoy without
    /// `spec.xds`: they get that Envoy's configuration from it; and for pods naming nothing
    /// (without [`default_xds`](Self::default_xds)): they get a mesh sidecar. `None` where the
    /// operator serves none: such sidecars get an admin-only bootstrap.
    pub control_plane: Option<ControlPlane>,
    /// The image of a mesh sidecar's capture init container (`envoy-operator mesh-init`): the
    /// operator's own.
    pub mesh_init_image: String,
    /// Inject as a native sidecar (an init container with `restartPolicy: Always`, Kubernetes
    /// 1.29+) unless a pod says otherwise. Off by default: older API servers reject it.
    pub native_sidecar: bool,
    /// Whether the cluster runs native sidecars (Kubernetes 1.29+): pods that run to
    /// completion get one, whatever the default; without, they are left alone (a regular
    /// sidecar would keep them from finishing), and native sidecars are never injected.
    pub native_sidecars_supported: bool,
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
            control_plane: None,
            mesh_init_image: DEFAULT_MESH_INIT_IMAGE.to_owned(),
            native_sidecar: false,
            native_sidecars_supported: true,
            operator_namespace: OPERATOR_NAMESPACE.to_owned(),
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
        for reason in format::image(&self.mesh_init_image) {
            problems.push(format!("mesh init image {:?}: {reason}", self.mesh_init_image));
        }
        let resources = &self.resources;
        for (what, value) in [
            ("cpu request", &resources.cpu_request),
            ("memory request", &resources.memory_request),
            ("cpu limit", &resources.cpu_limit),
            ("memory limit", &resources.memory_limit),
        ] {
            if let Some(value) = value
                && let Err(reason) = quantity::check(value)
            {
                problems.push(format!("{what} {:?}: {reason}", value.0));
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
            resources: ProxyResources {
                cpu_request: Some(Quantity("lots".to_owned())),
                ..Default::default()
            },
            ..Default::default()
        };
        let message = bad.validate().unwrap_err();
        assert!(message.contains("image \"Envoy:\""), "{message}");
        assert!(message.contains("cpu request \"lots\""), "{message}");
    }
}
