//! `envoy-operator proxy-config POD`: what the control plane pushed to a running proxy and what
//! the proxy ACKed or NACKed, asked live of the operator replica it is connected to.
//!
//! Every replica serves xDS to its own proxies, so each running replica is asked in turn, through
//! the API server's pod proxy (`pods/<replica>:<port>/proxy/debug/proxies/<pod>`, which needs
//! `get` on `pods/proxy` in the operator's namespace), until one has the pod; the operations
//! port answers from [`crate::xds::debug`]. A node id is a pod's name, so when several proxies
//! have it (pods of the same name in two namespaces) the one connecting from the pod's IP is
//! kept.

use std::process::ExitCode;

use envoy_operator_core::manifest::to_yaml;
use envoy_operator_core::names;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use super::cluster::ClusterFlags;
use super::documents::OutputFormat;
use crate::ops::logging::KubeError;
use crate::xds::debug::ProxyConfig;

/// The label every operator pod of `deploy/` carries.
pub const OPERATOR_SELECTOR: &str = "app.kubernetes.io/name=envoy-operator";

#[derive(clap::Args)]
pub struct ProxyConfigArgs {
    /// The pod whose proxy to show (a fleet's Envoy or a pod with the sidecar).
    pub pod: String,
    /// The pod's namespace (default: the kubeconfig context's).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Where the operator runs.
    #[arg(long, value_name = "NAMESPACE", default_value = names::OPERATOR_NAMESPACE)]
    pub operator_namespace: String,
    /// The operator's pods (a label selector).
    #[arg(long, value_name = "SELECTOR", default_value = OPERATOR_SELECTOR)]
    pub operator_selector: String,
    /// The operator's operations port (`run --metrics-listen`).
    #[arg(long, default_value_t = 8080)]
    pub operations_port: u16,
    #[arg(short = 'o', long, value_enum, default_value = "yaml")]
    pub output: OutputFormat,
    #[command(flatten)]
    pub cluster: ClusterFlags,
}

/// Why the proxy's configuration could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum ProxyConfigError {
    #[error("reading pod {namespace}/{pod}: {message}")]
    Pod { namespace: String, pod: String, message: String },
    #[error("listing the operator's pods ({selector}) in namespace {namespace}: {message}")]
    Replicas { namespace: String, selector: String, message: String },
    #[error(
        "no running operator pod matches {selector} in namespace {namespace} (see --operator-namespace, --operator-selector)"
    )]
    NoReplica { namespace: String, selector: String },
    #[error("pod {namespace}/{pod}'s proxy is connected to no operator replica (asked {asked}){failures}")]
    NotConnected { namespace: String, pod: String, asked: String, failures: String },
    #[error("printing: {0}")]
    Print(String),
}

pub fn run(args: ProxyConfigArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Runtime::new().map_err(super::Error::Runtime)?;
    runtime.block_on(async {
        let cluster = args.cluster.require().await?;
        let configs =
            fetch(&cluster.client, &args).await.map_err(|error| format!("{}: {error}", cluster.server))?;
        print!("{}", print(&configs, args.output)?);
        Ok(ExitCode::SUCCESS)
    })
}

/// The configurations of the pod's proxy, from the replica serving it.
pub async fn fetch(client: &Client, args: &ProxyConfigArgs) -> Result<Vec<ProxyConfig>, ProxyConfigError> {
    let namespace = args.namespace.as_deref().unwrap_or(client.default_namespace());
    let pod = Api::<Pod>::namespaced(client.clone(), namespace).get(&args.pod).await.map_err(|error| {
        ProxyConfigError::Pod {
            namespace: namespace.to_owned(),
            pod: args.pod.clone(),
            message: KubeError(&error).to_string(),
        }
    })?;
    let pod_ip = pod.status.as_ref().and_then(|status| status.pod_ip.clone());
    let replicas = running_replicas(client, args).await?;
    let mut failures = Vec::new();
    for replica in &replicas {
        let path = format!(
            "/api/v1/namespaces/{}/pods/{replica}:{}/proxy/debug/proxies/{}",
            args.operator_namespace, args.operations_port, args.pod
        );
        let request = http::Request::get(&path).body(Vec::new()).expect("a GET of a path is a request");
        match client.request::<Vec<ProxyConfig>>(request).await {
            Ok(configs) => {
                let mine = of_pod(configs, pod_ip.as_deref());
                if !mine.is_empty() {
                    return Ok(mine);
                }
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => failures.push(format!("{replica}: {}", KubeError(&error))),
        }
    }
    Err(ProxyConfigError::NotConnected {
        namespace: namespace.to_owned(),
        pod: args.pod.clone(),
        asked: replicas.join(", "),
        failures: failures.iter().map(|failure| format!("; {failure}")).collect(),
    })
}

/// The names of the operator's running pods.
async fn running_replicas(client: &Client, args: &ProxyConfigArgs) -> Result<Vec<String>, ProxyConfigError> {
    let pods = Api::<Pod>::namespaced(client.clone(), &args.operator_namespace)
        .list(&ListParams::default().labels(&args.operator_selector))
        .await
        .map_err(|error| ProxyConfigError::Replicas {
            namespace: args.operator_namespace.clone(),
            selector: args.operator_selector.clone(),
            message: KubeError(&error).to_string(),
        })?;
    let mut running: Vec<String> = pods
        .items
        .iter()
        .filter(|pod| pod.status.as_ref().and_then(|status| status.phase.as_deref()) == Some("Running"))
        .map(|pod| pod.name_any())
        .collect();
    running.sort();
    if running.is_empty() {
        return Err(ProxyConfigError::NoReplica {
            namespace: args.operator_namespace.clone(),
            selector: args.operator_selector.clone(),
        });
    }
    Ok(running)
}

/// Of the proxies with the pod's name as node id, those connecting from the pod's IP: another
/// namespace's pod of the same name is someone else. Without an IP to tell, all of them.
fn of_pod(configs: Vec<ProxyConfig>, pod_ip: Option<&str>) -> Vec<ProxyConfig> {
    let Some(pod_ip) = pod_ip else { return configs };
    configs
        .into_iter()
        .filter(|config| {
            let peer_ip = config.peer.as_deref().and_then(|peer| peer.parse::<std::net::SocketAddr>().ok());
            peer_ip.is_none_or(|peer| peer.ip().to_string() == pod_ip)
        })
        .collect()
}

/// Each proxy's configuration as a YAML document, or a JSON array.
pub fn print(configs: &[ProxyConfig], output: OutputFormat) -> Result<String, ProxyConfigError> {
    match output {
        OutputFormat::Json => serde_json::to_string_pretty(configs)
            .map(|text| text + "\n")
            .map_err(|error| ProxyConfigError::Print(error.to_string())),
        OutputFormat::Yaml => configs
            .iter()
            .map(|config| to_yaml(config).map(|text| format!("---\n{text}")))
            .collect::<Result<String, _>>()
            .map_err(|error| ProxyConfigError::Print(error.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use envoy_operator_core::xds::Resources;
    use envoy_operator_testkit::fake_api::FakeApi;
    use serde_json::json;

    use super::*;
    use crate::xds::debug::ProxyDebug;
    use crate::xds::server::{FleetKey, Protocol, SnapshotCache, StreamId, Tracker};

    fn config(peer: Option<&str>) -> ProxyConfig {
        ProxyConfig {
            replica: "envoy-operator-0".into(),
            node: "edge-1".into(),
            fleet: "shop/edge".into(),
            peer: peer.map(Into::into),
            protocol: "delta".into(),
            connected_since: "2026-11-28T08:00:00Z".into(),
            applied_version: None,
            served_version: None,
            in_sync: false,
            types: Vec::new(),
            resources: Vec::new(),
            config: None,
        }
    }

    #[test]
    fn the_proxy_connecting_from_the_pods_ip_is_the_pods() {
        let configs = vec![config(Some("10.0.0.7:40000")), config(Some("10.0.1.9:40000"))];
        let mine = of_pod(configs.clone(), Some("10.0.1.9"));
        assert_eq!(mine, vec![configs[1].clone()]);
        assert_eq!(of_pod(configs.clone(), None), configs, "without the pod's IP, every proxy of the name");
        assert_eq!(of_pod(vec![config(None)], Some("10.0.1.9")).len(), 1, "a peer unknown is not told apart");
    }

    fn pod(
        namespace: &str,
        name: &str,
        labels: serde_json::Value,
        phase: &str,
        ip: &str,
    ) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": namespace, "labels": labels},
               "status": {"phase": phase, "podIP": ip}})
    }

    /// An operations port serving `debug` on loopback.
    async fn operations(debug: &ProxyDebug) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let address = listener.local_addr().expect("its address");
        let router = debug.router();
        tokio::spawn(async move { axum::serve(listener, router).await });
        address
    }

    fn args(pod: &str) -> ProxyConfigArgs {
        ProxyConfigArgs {
            pod: pod.to_owned(),
            namespace: Some("shop".to_owned()),
            operator_namespace: "envoy-operator".to_owned(),
            operator_selector: OPERATOR_SELECTOR.to_owned(),
            operations_port: 8080,
            output: OutputFormat::Yaml,
            cluster: ClusterFlags { kubeconfig: None, context: None },
        }
    }

    /// Two replicas; the second serves the pod's proxy (and, under the same node id, a pod of
    /// another namespace): asked through the API server's pod proxy, the first says 404 and
    /// the second answers with the proxy connecting from the pod's IP.
    #[tokio::test]
    async fn the_replica_serving_the_pod_answers_through_the_pod_proxy() {
        let api = FakeApi::new();
        let operator = json!({"app.kubernetes.io/name": "envoy-operator"});
        api.put(
            "/api/v1/namespaces/shop/pods/edge-1",
            pod("shop", "edge-1", json!({}), "Running", "10.0.0.7"),
        );
        for (name, phase) in [
            ("envoy-operator-a", "Running"),
            ("envoy-operator-b", "Running"),
            ("envoy-operator-c", "Pending"),
        ] {
            let path = format!("/api/v1/namespaces/envoy-operator/pods/{name}");
            api.put(&path, pod("envoy-operator", name, operator.clone(), phase, "10.0.9.9"));
        }
        let (idle, serving) = (ProxyDebug::default(), ProxyDebug::default());
        idle.serve("envoy-operator-a", SnapshotCache::new(), Tracker::new());
        let (cache, tracker) = (SnapshotCache::new(), Tracker::new());
        let version =
            cache.set("shop/edge", crate::xds::publish::snapshot(&Resources::default()).expect("a snapshot"));
        let fleet = FleetKey::from("shop/edge");
        tracker.connected(
            &fleet,
            StreamId(1),
            "edge-1",
            Some("10.0.0.7:40000".parse().unwrap()),
            Protocol::Delta,
        );
        tracker.applied(&fleet, StreamId(1), &version);
        let other = FleetKey::from("other/edge");
        tracker.connected(
            &other,
            StreamId(2),
            "edge-1",
            Some("10.0.5.5:40000".parse().unwrap()),
            Protocol::Delta,
        );
        serving.serve("envoy-operator-b", cache, tracker);
        api.proxy_pod_port("envoy-operator", "envoy-operator-a", 8080, operations(&idle).await);
        api.proxy_pod_port("envoy-operator", "envoy-operator-b", 8080, operations(&serving).await);

        let configs = fetch(&api.client(), &args("edge-1")).await.expect("the pod's proxy");
        assert_eq!(configs.len(), 1, "{configs:?}");
        let config = &configs[0];
        assert_eq!((config.replica.as_str(), config.fleet.as_str()), ("envoy-operator-b", "shop/edge"));
        assert!(config.in_sync && config.applied_version.as_deref() == Some(version.as_str()), "{config:?}");
        let printed = print(&configs, OutputFormat::Yaml).expect("YAML");
        assert!(printed.starts_with("---\n") && printed.contains("fleet: shop/edge"), "{printed}");
        let asked: Vec<String> = api
            .requests()
            .into_iter()
            .filter(|request| request.target.subresource.as_deref() == Some("proxy"))
            .map(|request| request.path)
            .collect();
        assert_eq!(
            asked,
            [
                "/api/v1/namespaces/envoy-operator/pods/envoy-operator-a:8080/proxy/debug/proxies/edge-1",
                "/api/v1/namespaces/envoy-operator/pods/envoy-operator-b:8080/proxy/debug/proxies/edge-1"
            ],
            "running replicas only, in order, until one has it"
        );

        api.put(
            "/api/v1/namespaces/shop/pods/lonely",
            pod("shop", "lonely", json!({}), "Running", "10.0.0.8"),
        );
        let error =
            fetch(&api.client(), &args("lonely")).await.expect_err("no replica serves it").to_string();
        assert!(
            error.contains("connected to no operator replica (asked envoy-operator-a, envoy-operator-b)"),
            "{error}"
        );
        let error = fetch(&api.client(), &args("missing")).await.expect_err("no such pod").to_string();
        assert!(error.starts_with("reading pod shop/missing"), "{error}");
    }
}
