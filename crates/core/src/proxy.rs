//! What every Envoy container this operator runs has in common, the injected sidecar and the
//! fleet of an `Envoy` alike: the readiness port and probe (the bootstrap's readiness listener,
//! see [`crate::bootstrap`]), the downward-API environment that names the node, and a locked-down
//! security context.

use k8s_openapi::api::core::v1::{
    Capabilities, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, ObjectFieldSelector, Probe,
    SeccompProfile, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::envoy::READINESS_PORT;

/// The uid the Envoy images run as.
pub const PROXY_UID: i64 = 101;
/// Name of the readiness port on the container.
pub const READINESS_PORT_NAME: &str = "envoy-ready";

/// The readiness listener's port.
pub fn readiness_port() -> ContainerPort {
    ContainerPort {
        name: Some(READINESS_PORT_NAME.to_owned()),
        container_port: READINESS_PORT,
        protocol: Some("TCP".to_owned()),
        ..Default::default()
    }
}

/// Ready when Envoy's admin `/ready` (forwarded by the readiness listener) says so.
pub fn readiness_probe() -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/ready".to_owned()),
            port: IntOrString::Int(READINESS_PORT),
            ..Default::default()
        }),
        initial_delay_seconds: Some(1),
        period_seconds: Some(5),
        failure_threshold: Some(3),
        ..Default::default()
    }
}

/// `POD_NAME` and `POD_NAMESPACE` from the downward API, for `--service-node` and friends.
pub fn downward_env() -> Vec<EnvVar> {
    vec![field_env("POD_NAME", "metadata.name"), field_env("POD_NAMESPACE", "metadata.namespace")]
}

fn field_env(name: &str, field_path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector { field_path: field_path.to_owned(), api_version: None }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Non-root, no privilege escalation, read-only root filesystem, no capabilities, the runtime's
/// default seccomp profile: the Pod Security "restricted" profile on its own.
pub fn security_context() -> SecurityContext {
    SecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(PROXY_UID),
        run_as_group: Some(PROXY_UID),
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        privileged: Some(false),
        capabilities: Some(Capabilities { drop: Some(vec!["ALL".to_owned()]), add: None }),
        seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".to_owned(), localhost_profile: None }),
        ..Default::default()
    }
}
