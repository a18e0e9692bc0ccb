//! `envoy-operator run` (`operator::run`) as testkit's [`FleetWorld`](envoy_operator_testkit::fleet_world::FleetWorld)
//! starts it: the control plane of one fleet against the in-memory API server.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use envoy_operator::controller::ControllerConfig;
use envoy_operator::operator::{self, CertMode, RunConfig, RunError};
use envoy_operator::webhook::serve::ServeConfig;
use envoy_operator::xds::control_plane::XdsConfig;
use envoy_operator_core::bootstrap::ControlPlane;
use envoy_operator_core::inject::InjectConfig;
use envoy_operator_testkit::fleet_world::Launch;

/// `run` with self-managed certificates in `launch.cert_dir`, the control plane on `launch.xds`
/// advertised as `localhost` (which the certificate `run` makes names).
pub fn run(launch: Launch) -> impl Future<Output = Result<(), RunError>> + Send + 'static {
    let config = RunConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        metrics_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        cert_mode: CertMode::SelfManaged,
        cert_dir: launch.cert_dir,
        service_name: "envoy-operator-webhook".to_owned(),
        identity: "replica-a".to_owned(),
        api_server: "the in-memory API server".to_owned(),
        cert_check_interval: Duration::from_secs(60),
        controllers: ControllerConfig { concurrency: 2, ..ControllerConfig::default() },
        inject: InjectConfig { operator_namespace: "envoy-operator".to_owned(), ..InjectConfig::default() },
        serve: ServeConfig { drain: Duration::ZERO, ..ServeConfig::default() },
        xds: Some(XdsConfig {
            listen: launch.xds,
            advertise: ControlPlane { host: "localhost".to_owned(), port: launch.xds.port() },
            insecure_node_identity: false,
        }),
        pod_uid: None,
    };
    operator::run(config, Some(launch.client), launch.shutdown)
}
