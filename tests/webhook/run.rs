//! `envoy-operator run` on a machine without a cluster: it serves every webhook from
//! development certificates it generates, exposes metrics and readiness, says that
//! reconciling is off, and shuts down cleanly on SIGTERM.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::{fixture, response_of};
use crate::tls::{client_config, connect, http1, post, send1};

/// A port free right now (the operator binds it a moment later).
fn free_port() -> u16 {
    envoy_operator_testkit::ports::unclaimed_port().port()
}

async fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.ok()?;
    tokio::spawn(connection);
    let request = http::Request::get(path)
        .header("host", "localhost")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let response = sender.send_request(request).await.ok()?;
    let status = response.status().as_u16();
    let body = http_body_util::BodyExt::collect(response.into_body()).await.ok()?.to_bytes();
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}

struct Operator(Child);

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.0.kill();
    }
}

#[tokio::test]
async fn run_without_a_cluster_serves_the_webhooks() {
    let dir = tempfile::tempdir().unwrap();
    let (webhook, operations) = (free_port(), free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_envoy-operator"))
        .args(["run", "--listen", &format!("127.0.0.1:{webhook}"), "--metrics-listen"])
        .arg(format!("127.0.0.1:{operations}"))
        .args(["--drain-seconds", "10"])
        .current_dir(dir.path())
        .env("KUBECONFIG", dir.path().join("no-such-kubeconfig"))
        .env("HOME", dir.path())
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut operator = Operator(child);
    let operations = SocketAddr::from(([127, 0, 0, 1], operations));

    // Ready once the generated certificate is served.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some((200, body)) = http_get(operations, "/readyz").await {
            assert!(body.contains("[+] webhook"), "{body}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "run never became ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let ca =
        std::fs::read_to_string(dir.path().join("certs/ca.crt")).expect("development CA generated in certs/");
    let stream =
        connect(SocketAddr::from(([127, 0, 0, 1], webhook)), client_config(&[&ca], &[b"http/1.1"])).await;
    let mut sender = http1(stream).await;
    let mut review: serde_json::Value = serde_json::from_slice(&fixture("foo-create-validate.json")).unwrap();
    review["request"]["object"]["spec"]["replicas"] = (-1).into();
    let (status, body) = send1(&mut sender, post("/validate", serde_json::to_vec(&review).unwrap())).await;
    assert_eq!(status, 200);
    let response = response_of(&body);
    assert_eq!(response["allowed"], false);
    assert!(response["status"]["message"].as_str().unwrap().contains("spec.replicas: Invalid value: -1"));
    let pod = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/inject/pod-create-direct-mutate.json"),
    )
    .unwrap();
    let (status, body) = send1(&mut sender, post("/inject", pod)).await;
    assert_eq!(status, 200);
    assert!(response_of(&body)["patch"].is_string(), "the injector is served too");

    let (status, metrics) = http_get(operations, "/metrics").await.expect("metrics answer");
    assert_eq!(status, 200);
    for series in [
        "envoy_operator_admission_requests_total{endpoint=\"validate\",decision=\"denied\"} 1",
        "envoy_operator_admission_requests_total{endpoint=\"inject\",decision=\"patched\"} 1",
        "envoy_operator_sidecar_injections_total 1",
        "envoy_operator_leader 0",
    ] {
        assert!(metrics.contains(series), "missing {series} in\n{metrics}");
    }

    let pid = operator.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    // Draining: not ready, and still serving reviews, on new connections too.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match http_get(operations, "/readyz").await {
            Some((503, body)) => {
                assert!(body.contains("[-] webhook"), "{body}");
                break;
            }
            Some((200, _)) => {}
            other => panic!("the operations port must answer while draining: {other:?}"),
        }
        assert!(tokio::time::Instant::now() < deadline, "never became not ready after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stream =
        connect(SocketAddr::from(([127, 0, 0, 1], webhook)), client_config(&[&ca], &[b"http/1.1"])).await;
    let mut draining = http1(stream).await;
    let (status, body) = send1(&mut draining, post("/validate", fixture("foo-create-validate.json"))).await;
    assert_eq!((status, response_of(&body)["allowed"].clone()), (200, serde_json::json!(true)));
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    let status = loop {
        if let Some(status) = operator.0.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "run did not stop after SIGTERM");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(operator.0.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "run failed: {stderr}");
    assert!(stderr.contains("reconciling is OFF"), "{stderr}");
    assert!(stderr.contains("SIGTERM received"), "{stderr}");
}

/// A configured cluster that does not answer is no development mode: no certificates are
/// generated, the API server (named) is retried, and the operator reports not ready.
#[tokio::test]
async fn run_with_an_unreachable_cluster_waits_for_it_not_ready() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let dead = free_port();
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: down\nclusters:\n- name: c\n  cluster: {{server: 'https://127.0.0.1:{dead}'}}\n\
             contexts:\n- name: down\n  context: {{cluster: c, user: u}}\nusers:\n- name: u\n  user: {{token: t}}\n"
        ),
    )
    .unwrap();
    let (webhook, operations) = (free_port(), free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_envoy-operator"))
        .args(["run", "--listen", &format!("127.0.0.1:{webhook}"), "--metrics-listen"])
        .arg(format!("127.0.0.1:{operations}"))
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .current_dir(dir.path())
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut operator = Operator(child);
    let operations = SocketAddr::from(([127, 0, 0, 1], operations));

    // The operations port answers, not ready, saying what it waits for: twice, a retry apart.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut seen = 0;
    while seen < 2 {
        if let Some((status, body)) = http_get(operations, "/readyz").await {
            assert_eq!(status, 503, "{body}");
            assert!(body.contains("[-] api-server"), "{body}");
            seen += 1;
        }
        assert!(tokio::time::Instant::now() < deadline, "the operations port never answered");
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    assert!(!dir.path().join("certs").exists(), "no development certificates for a configured cluster");
    assert!(
        tokio::net::TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], webhook))).await.is_err(),
        "the webhook does not serve before the cluster answers"
    );

    let pid = operator.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = operator.0.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "run did not stop after SIGTERM while waiting");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(operator.0.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("https://127.0.0.1:{dead}/ (context down)")),
        "names the server: {stderr}"
    );
    assert!(stderr.contains("cannot be reached; retrying"), "{stderr}");
    assert!(!stderr.contains("reconciling is OFF"), "{stderr}");
}
