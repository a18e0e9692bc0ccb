//! What every Envoy container this operator runs has in common, the injected sidecar and the
//! fleet of an `Envoy` alike: the readiness port and probe (the bootstrap's readiness listener,
//! see [`crate::bootstrap`]), the downward-API environment that names the node, and a locked-down
//! security context.

use k8s_openapi::api::core::v1::{
    Capabilities, ContainerPort, EnvVar, EnvVarSource, ExecAction, HTTPGetAction, Lifecycle,
    LifecycleHandler, ObjectFieldSelector, Probe, SeccompProfile, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::envoy::{ADMIN_PORT, READINESS_PORT};

/// The uid the Envoy images run as.
pub const PROXY_UID: i64 = 101;
/// The port of a mesh sidecar's outbound listener, which its control plane serves it: the
/// capture redirects the application's outbound TCP here (`REDIRECT --to-ports`), and the
/// listener recovers the original destination (`original_dst`). Istio's port, so tooling that
/// knows one mesh reads the other.
pub const MESH_OUTBOUND_PORT: u16 = 15001;
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
        http_get: Some(get_ready()),
        initial_delay_seconds: Some(1),
        period_seconds: Some(5),
        failure_threshold: Some(3),
        ..Default::default()
    }
}

/// Started when Envoy's `/ready` says so: a native sidecar (an init container with
/// `restartPolicy: Always`) holds back the pod's next containers until its startup probe passes,
/// so the application starts after its proxy is configured. Probed every second for up to ten
/// minutes (a control plane that long away restarts the proxy, which then waits again).
pub fn startup_probe() -> Probe {
    Probe {
        http_get: Some(get_ready()),
        period_seconds: Some(1),
        failure_threshold: Some(600),
        ..Default::default()
    }
}

/// `GET /ready` on the readiness listener.
fn get_ready() -> HTTPGetAction {
    HTTPGetAction {
        path: Some("/ready".to_owned()),
        port: IntOrString::Int(READINESS_PORT),
        ..Default::default()
    }
}

/// How long a fleet's proxy drains before it is stopped: the Service's endpoints and the load
/// balancers in front of them must stop sending it new connections, and requests in flight
/// must finish. Envoy Gateway waits at least 15 s; a fleet sits behind a Service, whose
/// kube-proxy rules follow in about a second.
pub const FLEET_DRAIN_SECONDS: u32 = 10;
/// How long an injected sidecar drains: its application is stopped at the same time, and the
/// pod's deletion waits for the slower of the two.
pub const SIDECAR_DRAIN_SECONDS: u32 = 5;

/// The `preStop` hook that drains Envoy before the kubelet stops it (Envoy exits on SIGTERM at
/// once, closing connections mid-request). `POST /healthcheck/fail` on the admin interface,
/// which only the pod's own processes reach, makes `/ready` answer `503 DRAINING` and has Envoy
/// close every connection gracefully: HTTP/1.1 responses carry `connection: close`, HTTP/2
/// connections get a GOAWAY. The hook then waits `seconds` before the kubelet sends SIGTERM.
///
/// The admin request is written with bash's `/dev/tcp`, since the Envoy images have neither
/// curl nor wget. An image without bash (the distroless ones) fails the hook: the kubelet
/// records a `FailedPreStopHook` event and stops the proxy at once, as without the hook.
pub fn drain_on_stop(seconds: u32) -> Lifecycle {
    Lifecycle {
        pre_stop: Some(LifecycleHandler {
            exec: Some(ExecAction { command: Some(drain_command(seconds)) }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The command of [`drain_on_stop`]. A subshell makes the request, so an admin interface that
/// cannot be reached does not cut the wait short.
pub fn drain_command(seconds: u32) -> Vec<String> {
    let request = "POST /healthcheck/fail HTTP/1.1\\r\\nHost: localhost\\r\\nContent-Length: 0\\r\\nConnection: close\\r\\n\\r\\n";
    let script = format!(
        "(exec 3<>/dev/tcp/127.0.0.1/{ADMIN_PORT} && printf '{request}' >&3 && timeout 2 cat <&3 >/dev/null) 2>/dev/null; sleep {seconds}"
    );
    vec!["/bin/bash".to_owned(), "-c".to_owned(), script]
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
