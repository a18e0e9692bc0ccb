//! `run` and `install` against an API server older than the supported minimum (the in-memory
//! API server, reporting an old version): both refuse, naming the server's version, the
//! minimum and why, before they write or watch anything.

use std::net::SocketAddr;
use std::time::Duration;

use envoy_operator::controller::{ControllerConfig, Settings};
use envoy_operator::operator::{self, CertMode, RunConfig, RunError};
use envoy_operator::ops::install::{self, Manifests};
use envoy_operator::webhook::serve::WebhookConfig;
use envoy_operator::xds::control_plane::XdsConfig;
use envoy_operator_core::bootstrap::ControlPlane;
use envoy_operator_core::inject::InjectConfig;
use envoy_operator_core::kube_version::MINIMUM;
use envoy_operator_core::webhook_config::{self, WebhookOptions};
use envoy_operator_core::{crd, names};
use envoy_operator_testkit::fake_api::FakeApi;

/// Guards against hangs; never part of an assertion about speed.
const HANG_GUARD: Duration = Duration::from_secs(30);

fn run_config(cert_dir: &std::path::Path) -> RunConfig {
    let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
    RunConfig {
        listen: any_port,
        metrics_listen: any_port,
        cert_mode: CertMode::SelfManaged,
        cert_dir: cert_dir.to_owned(),
        service_name: names::WEBHOOK_SERVICE.to_owned(),
        identity: "replica-a".to_owned(),
        api_server: "the in-memory API server".to_owned(),
        cert_check_interval: Duration::from_secs(60),
        controllers: ControllerConfig {
            namespace: None,
            concurrency: 1,
            settings: Settings::default(),
            xds_reports_namespace: None,
        },
        inject: InjectConfig {
            operator_namespace: names::OPERATOR_NAMESPACE.to_owned(),
            ..InjectConfig::default()
        },
        serve: WebhookConfig { drain: Duration::ZERO, ..WebhookConfig::default() },
        xds: Some(XdsConfig {
            listen: any_port,
            advertise: ControlPlane { host: "envoy-operator-xds.envoy-operator.svc".to_owned(), port: 18000 },
            insecure_node_identity: false,
        }),
        pod_uid: None,
    }
}

/// An API server of Kubernetes 1.27 on EKS, which decorates its version.
fn old_api_server() -> FakeApi {
    let api = FakeApi::new();
    api.set_server_version("1", "27+", "v1.27.16-eks-a18cd3a");
    api
}

fn assert_says_version_minimum_and_why(message: &str) {
    for said in ["v1.27.16-eks-a18cd3a (1.27)", &format!("needs {MINIMUM} or newer"), "fieldPath"] {
        assert!(message.contains(said), "{said:?} is not in: {message}");
    }
}

#[tokio::test]
async fn run_refuses_an_api_server_older_than_the_minimum() {
    let api = old_api_server();
    let dir = tempfile::tempdir().unwrap();
    let never = std::future::pending::<()>();
    let outcome =
        tokio::time::timeout(HANG_GUARD, operator::run(run_config(dir.path()), Some(api.client()), never))
            .await
            .expect("run stops by itself");
    let error = outcome.expect_err("refused");
    assert!(matches!(error, RunError::UnsupportedKubernetes { .. }), "{error}");
    assert_eq!(error.metric_label(), "kubernetes_version");
    let message = error.to_string();
    assert!(message.starts_with("the in-memory API server: the API server runs Kubernetes"), "{message}");
    assert_says_version_minimum_and_why(&message);
    assert_eq!(api.requests(), [], "nothing was read, watched or written before the refusal");
}

#[tokio::test]
async fn install_refuses_an_api_server_older_than_the_minimum() {
    let api = old_api_server();
    let options = WebhookOptions::default();
    let manifests = Manifests {
        crds: crd::all(),
        mutating: webhook_config::mutating_configuration(webhook_config::mutating_webhooks(&options)),
        validating: webhook_config::validating_configuration(webhook_config::validating_webhooks(&options)),
    };
    let mut progress = Vec::new();
    let client = api.client();
    let installed = install::install(&client, &manifests, Duration::ZERO, |line| progress.push(line));
    let error = tokio::time::timeout(HANG_GUARD, installed).await.expect("no hang").expect_err("refused");
    assert_says_version_minimum_and_why(&error.to_string());
    assert_eq!(api.requests(), [], "no CRD and no webhook configuration was applied");
    assert!(progress.is_empty(), "{progress:?}");

    // The minimum itself is installed: the CRDs are applied (the in-memory server never
    // reports them Established, which is where this install stops).
    let minimum = FakeApi::new();
    minimum.set_server_version(&MINIMUM.major.to_string(), &MINIMUM.minor.to_string(), "v1.28.0");
    let client = minimum.client();
    let installed = install::install(&client, &manifests, Duration::ZERO, |_| {});
    let stopped =
        tokio::time::timeout(HANG_GUARD, installed).await.expect("no hang").expect_err("not established");
    assert_eq!(stopped.metric_label(), "not_established", "{stopped}");
    assert!(
        minimum.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/envoys.example.com").is_some()
    );
}
