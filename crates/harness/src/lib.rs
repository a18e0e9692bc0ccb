//! The operator's own library started in-process, for the integration tests and the examples:
//! what `envoy-operator-testkit` cannot hold, since that crate must not depend on the library.
//!
//! - [`InProcess`]: the operator as the e2e harness ([`envoy_operator_testkit::e2e`]) starts it,
//!   the same `operator::run` as `envoy-operator run`; [`in_cluster`] runs a story with it.
//! - [`fleet_world_operator`]: `run` as [`envoy_operator_testkit::fleet_world::FleetWorld`]
//!   starts it, the control plane of one fleet against the in-memory API server.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use envoy_operator::certs::serving::{self, CertOptions, TlsError};
use envoy_operator::controller::{ControllerConfig, Settings};
use envoy_operator::operator::{self, CertMode, RunConfig, RunError};
use envoy_operator::webhook::serve::WebhookConfig;
use envoy_operator::xds::control_plane::XdsConfig;
use envoy_operator_core::bootstrap::ControlPlane;
use envoy_operator_core::inject::InjectConfig;
use envoy_operator_testkit::e2e::{Cluster, Launcher, OperatorSetup, Watch};
use envoy_operator_testkit::fleet_world::Launch;
use futures::FutureExt;
use futures::future::BoxFuture;
use kube::Client;

/// The operator of this package, as the harness starts it.
pub struct InProcess;

impl Launcher for InProcess {
    fn default_resync(&self) -> Duration {
        Settings::default().resync
    }

    fn write_certificates(
        &self,
        dir: &Path,
        service_name: &str,
        namespace: &str,
        days: u32,
        extra_names: Vec<String>,
    ) -> String {
        let options = CertOptions {
            service_name: service_name.to_owned(),
            namespace: namespace.to_owned(),
            days,
            extra_names,
        };
        write_serving_certificate(dir, &options).expect("writing certificates")
    }

    fn run(
        &self,
        setup: &OperatorSetup,
        identity: &str,
        metrics: SocketAddr,
        client: Client,
        shutdown: BoxFuture<'static, ()>,
    ) -> BoxFuture<'static, Result<(), String>> {
        let config = RunConfig {
            listen: setup.listen,
            metrics_listen: metrics,
            cert_mode: CertMode::Files,
            cert_dir: setup.cert_dir.clone(),
            service_name: "envoy-operator-e2e".to_owned(),
            identity: identity.to_owned(),
            api_server: "the e2e cluster (current kubeconfig context)".to_owned(),
            cert_check_interval: Duration::from_secs(60),
            controllers: ControllerConfig {
                namespace: setup.watch_namespace.clone(),
                concurrency: 4,
                settings: Settings { resync: setup.resync, ..Settings::default() },
                // `run` reads the xDS reports when it serves the control plane.
                xds_reports_namespace: None,
            },
            inject: InjectConfig {
                operator_namespace: setup.operator_namespace.clone(),
                ..InjectConfig::default()
            },
            serve: WebhookConfig::default(),
            xds: Some(XdsConfig {
                listen: setup.xds.listen,
                advertise: setup.xds.advertise.clone(),
                insecure_node_identity: false,
            }),
            pod_uid: None,
        };
        operator::run(config, Some(client), shutdown)
            .map(|ended| ended.map_err(|error| error.to_string()))
            .boxed()
    }
}

/// A CA and a serving certificate as `options` say, written to `dir` as the webhook server reads
/// them (the key readable by its owner only); returns the CA as PEM, for clients to trust.
pub fn write_serving_certificate(dir: &Path, options: &CertOptions) -> Result<String, TlsError> {
    let generated = serving::generate(options)?;
    serving::write(dir, &generated, false)?;
    Ok(generated.ca_pem)
}

/// A day's certificate for a benchmark's local server (service and namespace `bench`) in `dir`;
/// returns its CA as PEM.
pub fn write_bench_certificate(dir: &Path) -> Result<String, TlsError> {
    let options = CertOptions {
        service_name: "bench".into(),
        namespace: "bench".into(),
        days: 1,
        extra_names: Vec::new(),
    };
    write_serving_certificate(dir, &options)
}

/// Sets everything up with the operator in-process, runs `test`, and always cleans up.
pub async fn in_cluster(story: &str, test: impl AsyncFnOnce(&Cluster)) {
    envoy_operator_testkit::e2e::in_cluster(Arc::new(InProcess), story, test).await;
}

/// [`in_cluster`] with the in-process operator watching every namespace, for a story that spans
/// several (it runs alone: see [`Watch::AllNamespaces`]).
pub async fn in_cluster_watching_all(story: &str, test: impl AsyncFnOnce(&Cluster)) {
    let launcher = Arc::new(InProcess);
    envoy_operator_testkit::e2e::in_cluster_watching(launcher, story, Watch::AllNamespaces, test).await;
}

/// `run` with self-managed certificates in `launch.cert_dir`, the control plane on `launch.xds`
/// advertised as `localhost` (which the certificate `run` makes names), as the replica
/// `replica-a`.
pub fn fleet_world_operator(launch: Launch) -> impl Future<Output = Result<(), RunError>> + Send + 'static {
    fleet_world_replica(launch, "replica-a")
}

/// [`fleet_world_operator`] as the replica `identity` (its pod name in a cluster).
pub fn fleet_world_replica(
    launch: Launch,
    identity: &str,
) -> impl Future<Output = Result<(), RunError>> + Send + 'static {
    let config = RunConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        metrics_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        cert_mode: CertMode::SelfManaged,
        cert_dir: launch.cert_dir,
        service_name: "envoy-operator-webhook".to_owned(),
        identity: identity.to_owned(),
        api_server: "the in-memory API server".to_owned(),
        cert_check_interval: Duration::from_secs(60),
        controllers: ControllerConfig { concurrency: 2, ..ControllerConfig::default() },
        inject: InjectConfig { operator_namespace: "envoy-operator".to_owned(), ..InjectConfig::default() },
        serve: WebhookConfig { drain: Duration::ZERO, ..WebhookConfig::default() },
        xds: Some(XdsConfig {
            listen: launch.xds,
            advertise: ControlPlane { host: "localhost".to_owned(), port: launch.xds.port() },
            insecure_node_identity: false,
        }),
        pod_uid: None,
    };
    operator::run(config, Some(launch.client), launch.shutdown)
}
