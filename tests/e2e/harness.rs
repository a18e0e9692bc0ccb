//! The e2e harness is `envoy_operator_testkit::e2e`; this is the operator it starts in-process
//! (the same `operator::run` as `envoy-operator run`): [`InProcess`].

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use envoy_operator::certs::serving::{self, CertOptions};
use envoy_operator::controller::{ControllerConfig, Settings};
use envoy_operator::operator::{self, CertMode, RunConfig};
use envoy_operator::webhook::serve::ServeConfig;
use envoy_operator::xds::control_plane::XdsConfig;
use envoy_operator_core::inject::InjectConfig;
pub use envoy_operator_testkit::e2e::*;
use futures::FutureExt;
use futures::future::BoxFuture;
use kube::Client;

/// The operator of this package, as the harness starts it.
pub struct InProcess;

impl Launcher for InProcess {
    fn default_resync(&self) -> std::time::Duration {
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
        let generated = serving::generate(&options).expect("generating certificates");
        serving::write(dir, &generated, false).expect("writing certificates");
        generated.ca_pem
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
            cert_check_interval: std::time::Duration::from_secs(60),
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
            serve: ServeConfig::default(),
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

/// Sets everything up with the operator in-process, runs `test`, and always cleans up.
pub async fn in_cluster(story: &str, test: impl AsyncFnOnce(&Cluster)) {
    envoy_operator_testkit::e2e::in_cluster(Arc::new(InProcess), story, test).await;
}
