//! Load test with abuse mixed in: good reviews at a fixed rate while other clients send the
//! largest reviews the limits let through, pipeline requests and never read the answers, hold
//! idle connections and trickle bodies. Prints the good requests' latency (p50/p99/max) and
//! failures, what the abusers got, the server's peak RSS and why it closed connections.
//!
//! ```sh
//! cargo build --release && cargo run --release --example load_abuse -- --seconds 30
//! ```
//!
//! The server is the real binary (`target/release/envoy-operator run`, without a cluster), in a
//! process of its own so its memory is measured alone (VmHWM and VmRSS sampled from /proc).
//! Loopback only; bounded by `--seconds` (at most 300).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use envoy_operator::certs::serving;
use envoy_operator_harness::write_bench_certificate;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

#[derive(Parser)]
#[command(about = "Load test of the webhook with abusive clients mixed in (loopback only)")]
struct Args {
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(5..=300))]
    seconds: u64,
    /// Good reviews per second, over `--good-connections` keep-alive connections (open loop).
    #[arg(long, default_value_t = 500)]
    good_rate: u32,
    #[arg(long, default_value_t = 8)]
    good_connections: u32,
    /// Connections sending the largest reviews the limits let through, back to back.
    #[arg(long, default_value_t = 4)]
    huge: u32,
    /// Connections pipelining reviews without ever reading an answer.
    #[arg(long, default_value_t = 16)]
    non_reading: u32,
    /// Connections that complete the handshake and say nothing.
    #[arg(long, default_value_t = 100)]
    idle: u32,
    /// Connections trickling a body a byte at a time.
    #[arg(long, default_value_t = 10)]
    slow: u32,
    /// The server binary.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/target/release/envoy-operator"))]
    binary: PathBuf,
}

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// Kills the server when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let ca_pem = write_bench_certificate(&dir.path().join("certs"))?;
    let (webhook, operations) = (free_port()?, free_port()?);
    let server = Server(
        Command::new(&args.binary)
            .args(["run", "--cert-mode", "files", "--cert-dir", "certs", "--drain-seconds", "0"])
            .args([
                "--listen",
                &format!("127.0.0.1:{webhook}"),
                "--metrics-listen",
                &format!("127.0.0.1:{operations}"),
            ])
            .current_dir(dir.path())
            .env("KUBECONFIG", dir.path().join("none"))
            .env("HOME", dir.path())
            .env("RUST_LOG", "warn")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {}: {e} (cargo build --release first)", args.binary.display()))?,
    );
    let pid = server.0.id();
    let webhook = SocketAddr::from(([127, 0, 0, 1], webhook));
    let operations = SocketAddr::from(([127, 0, 0, 1], operations));
    wait_ready(operations).await?;
    let client = client_config(ca_pem.as_bytes())?;
    let baseline_rss = rss_kib(pid).unwrap_or(0);

    let stop = Arc::new(AtomicBool::new(false));
    let outcomes: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let peak_rss = Arc::new(AtomicU64::new(baseline_rss));
    let sampler = {
        let (stop, peak_rss) = (stop.clone(), peak_rss.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Some(rss) = rss_kib(pid) {
                    peak_rss.fetch_max(rss, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };

    let mut abusers = Vec::new();
    let huge = huge_bodies();
    for i in 0..args.huge {
        let (path, body) = huge[i as usize % huge.len()].clone();
        abusers.push(tokio::spawn(huge_sender(
            webhook,
            client.clone(),
            path,
            body,
            stop.clone(),
            outcomes.clone(),
        )));
    }
    for _ in 0..args.non_reading {
        abusers.push(tokio::spawn(non_reader(webhook, client.clone(), stop.clone(), outcomes.clone())));
    }
    for _ in 0..args.idle {
        abusers.push(tokio::spawn(idler(webhook, client.clone(), stop.clone(), outcomes.clone())));
    }
    for _ in 0..args.slow {
        abusers.push(tokio::spawn(trickler(webhook, client.clone(), stop.clone(), outcomes.clone())));
    }
    // Let the abuse build up before measuring the good requests.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let duration = Duration::from_secs(args.seconds);
    let started = Instant::now();
    let deadline = started + duration;
    let period = Duration::from_secs_f64(f64::from(args.good_connections) / f64::from(args.good_rate.max(1)));
    // The good clients run on a thread and runtime of their own, as the API server is a
    // process of its own: the abusers' busy loops do not delay their sending.
    let (good_connections, good_client_config) = (args.good_connections, client.clone());
    let good = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        runtime.block_on(async move {
            let mut workers = Vec::new();
            for i in 0..good_connections {
                let offset = period.mul_f64(f64::from(i) / f64::from(good_connections));
                workers.push(tokio::spawn(good_client(
                    webhook,
                    good_client_config.clone(),
                    period,
                    offset,
                    deadline,
                )));
            }
            let mut results = Vec::new();
            for worker in workers {
                results.push(worker.await?);
            }
            Ok::<_, Failure>(results)
        })
    });
    let results = tokio::task::spawn_blocking(move || good.join())
        .await?
        .map_err(|_| "the good clients' thread panicked")??;
    let mut latencies = Vec::new();
    let mut failures: BTreeMap<String, u64> = BTreeMap::new();
    for (mut ok, failed) in results {
        latencies.append(&mut ok);
        for (kind, count) in failed {
            *failures.entry(kind).or_default() += count;
        }
    }
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for abuser in abusers {
        abuser.abort();
    }
    let _ = sampler.await;
    let metrics = http_get(operations, "/metrics").await.unwrap_or_default();
    let hwm = status_kib(pid, "VmHWM:").unwrap_or(0);

    latencies.sort_unstable();
    let percentile = |p: f64| -> Duration {
        if latencies.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * latencies.len() as f64).ceil() as usize;
        latencies[rank.clamp(1, latencies.len()) - 1]
    };
    println!(
        "good: {} ok in {:.1} s at {} req/s target over {} connections; failed: {:?}",
        latencies.len(),
        elapsed.as_secs_f64(),
        args.good_rate,
        args.good_connections,
        failures
    );
    println!(
        "good latency: p50 {:?}  p99 {:?}  p99.9 {:?}  max {:?}",
        percentile(50.0),
        percentile(99.0),
        percentile(99.9),
        latencies.last().copied().unwrap_or_default()
    );
    println!(
        "abusers: {} huge, {} non-reading, {} idle, {} trickling; outcomes: {:?}",
        args.huge,
        args.non_reading,
        args.idle,
        args.slow,
        outcomes.lock().map(|o| o.clone()).unwrap_or_default()
    );
    println!(
        "server memory: {:.1} MiB before, peak RSS sampled {:.1} MiB, VmHWM {:.1} MiB (limit in deploy/: 256 MiB)",
        baseline_rss as f64 / 1024.0,
        peak_rss.load(Ordering::Relaxed) as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
    for line in metrics.lines().filter(|l| {
        (l.starts_with("envoy_operator_http_connections_closed_total{server=\"webhook\"")
            || l.starts_with("envoy_operator_admission_requests_total"))
            && !l.ends_with(" 0")
    }) {
        println!("  {line}");
    }
    drop(server);
    Ok(())
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS:")
}

async fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let tcp = TcpStream::connect(addr).await.ok()?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.ok()?;
    tokio::spawn(connection);
    let request = hyper::Request::get(path).header("host", "127.0.0.1").body(Full::new(Bytes::new())).ok()?;
    let response = sender.send_request(request).await.ok()?;
    let body = response.into_body().collect().await.ok()?.to_bytes();
    Some(String::from_utf8_lossy(&body).into_owned())
}

async fn wait_ready(operations: SocketAddr) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if http_get(operations, "/readyz")
            .await
            .is_some_and(|body| body.ends_with("ready\n") && !body.contains("not ready"))
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err("the server never became ready".into())
}

fn client_config(ca_pem: &[u8]) -> Result<Arc<rustls::ClientConfig>, Failure> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots.add(cert?)?;
    }
    let mut config = rustls::ClientConfig::builder_with_provider(serving::provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

async fn tls(addr: SocketAddr, config: Arc<rustls::ClientConfig>) -> Result<TlsStream<TcpStream>, Failure> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    Ok(TlsConnector::from(config).connect(ServerName::try_from("localhost")?, tcp).await?)
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn open(addr: SocketAddr, config: Arc<rustls::ClientConfig>) -> Result<Sender, Failure> {
    let (sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(tls(addr, config).await?)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

fn fixture(dir: &str, name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(dir).join(name);
    serde_json::from_slice(&std::fs::read(path).unwrap_or_default()).unwrap_or(Value::Null)
}

fn request(path: &str, body: Bytes) -> hyper::Request<Full<Bytes>> {
    hyper::Request::post(format!("{path}?timeout=5s"))
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(body))
        .unwrap_or_default()
}

/// Good traffic: the ReplicaSet pod to `/inject` and a Foo to `/validate`, alternately, each
/// at its scheduled time (a late answer delays nothing: latency counts from the schedule).
async fn good_client(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    period: Duration,
    offset: Duration,
    deadline: Instant,
) -> (Vec<Duration>, BTreeMap<String, u64>) {
    let pod = Bytes::from(
        serde_json::to_vec(&fixture("inject", "pod-create-from-replicaset-mutate.json")).unwrap_or_default(),
    );
    let foo = Bytes::from(
        serde_json::to_vec(&fixture("admission", "foo-create-validate.json")).unwrap_or_default(),
    );
    let mut latencies = Vec::new();
    let mut failed: BTreeMap<String, u64> = BTreeMap::new();
    let mut sender = None;
    let mut next = Instant::now() + offset;
    let mut turn = 0u64;
    loop {
        let scheduled = next;
        next += period;
        if scheduled >= deadline {
            break;
        }
        if Instant::now() < scheduled {
            tokio::time::sleep_until(scheduled.into()).await;
        }
        if sender.is_none() {
            match open(addr, config.clone()).await {
                Ok(opened) => sender = Some(opened),
                Err(_) => {
                    *failed.entry("connect".into()).or_default() += 1;
                    continue;
                }
            }
        }
        let Some(connection) = sender.as_mut() else { continue };
        turn += 1;
        let (path, body) =
            if turn.is_multiple_of(2) { ("/inject", pod.clone()) } else { ("/validate", foo.clone()) };
        let outcome = async {
            connection.ready().await?;
            let response = connection.send_request(request(path, body)).await?;
            let status = response.status();
            response.into_body().collect().await?;
            Ok::<_, Failure>(status.as_u16())
        };
        match outcome.await {
            Ok(200) => latencies.push(scheduled.elapsed()),
            Ok(status) => *failed.entry(format!("HTTP {status}")).or_default() += 1,
            Err(error) => {
                *failed.entry(format!("error: {error}")).or_default() += 1;
                sender = None;
            }
        }
    }
    (latencies, failed)
}

fn count(outcomes: &Mutex<BTreeMap<String, u64>>, what: String) {
    if let Ok(mut outcomes) = outcomes.lock() {
        *outcomes.entry(what).or_default() += 1;
    }
}

/// The largest reviews the limits let through: a pod with volumes, an Envoy with bad ports
/// (mutate and validate), and one over the value cap.
fn huge_bodies() -> Vec<(&'static str, Bytes)> {
    let mut pod = fixture("inject", "pod-create-from-replicaset-mutate.json");
    pod["request"]["object"]["spec"]["volumes"] =
        Value::Array((0..24_000).map(|i| json!({"name": format!("envoy-tmp-{i}")})).collect());
    let mut envoy = fixture("admission", "envoy-create-validate.json");
    envoy["request"]["object"]["spec"]["ports"] =
        Value::Array((0..12_000).map(|i| json!({"name": format!("p{i}"), "port": 0})).collect());
    let mut values = fixture("admission", "foo-create-validate.json");
    values["request"]["object"]["metadata"]["annotations"] = json!({"a": vec![json!([]); 900_000]});
    let bytes = |value: &Value| Bytes::from(serde_json::to_vec(value).unwrap_or_default());
    vec![
        ("/inject", bytes(&pod)),
        ("/mutate", bytes(&envoy)),
        ("/validate", bytes(&envoy)),
        ("/validate", bytes(&values)),
    ]
}

async fn huge_sender(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    path: &'static str,
    body: Bytes,
    stop: Arc<AtomicBool>,
    outcomes: Arc<Mutex<BTreeMap<String, u64>>>,
) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut sender) = open(addr, config.clone()).await else {
            count(&outcomes, "huge: connect failed".into());
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        while !stop.load(Ordering::Relaxed) {
            let result = async {
                sender.ready().await?;
                let response = sender.send_request(request(path, body.clone())).await?;
                let status = response.status();
                response.into_body().collect().await?;
                Ok::<_, Failure>(status.as_u16())
            };
            match result.await {
                Ok(status) => count(&outcomes, format!("huge {path}: HTTP {status}")),
                Err(_) => {
                    count(&outcomes, format!("huge {path}: connection closed"));
                    break;
                }
            }
        }
    }
}

async fn non_reader(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    stop: Arc<AtomicBool>,
    outcomes: Arc<Mutex<BTreeMap<String, u64>>>,
) {
    let body =
        serde_json::to_vec(&fixture("inject", "pod-create-from-replicaset-mutate.json")).unwrap_or_default();
    let head = format!(
        "POST /inject HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let mut message = head.into_bytes();
    message.extend_from_slice(&body);
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut stream) = tls(addr, config.clone()).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        while !stop.load(Ordering::Relaxed) {
            if stream.write_all(&message).await.is_err() {
                count(&outcomes, "non-reading: cut off".into());
                break;
            }
        }
    }
}

async fn idler(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    stop: Arc<AtomicBool>,
    outcomes: Arc<Mutex<BTreeMap<String, u64>>>,
) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut stream) = tls(addr, config.clone()).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let mut buffer = [0u8; 64];
        // Says nothing; the server closes the connection in time.
        let _ = tokio::io::AsyncReadExt::read(&mut stream, &mut buffer).await;
        count(&outcomes, "idle: closed by the server".into());
    }
}

async fn trickler(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    stop: Arc<AtomicBool>,
    outcomes: Arc<Mutex<BTreeMap<String, u64>>>,
) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(stream) = tls(addr, config.clone()).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let (mut reader, mut writer) = tokio::io::split(stream);
        let head = "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n";
        if writer.write_all(head.as_bytes()).await.is_err() {
            continue;
        }
        let answered = tokio::spawn(async move {
            let mut answer = Vec::new();
            let _ = tokio::io::AsyncReadExt::read_to_end(&mut reader, &mut answer).await;
            String::from_utf8_lossy(&answer).lines().next().unwrap_or_default().to_owned()
        });
        while !answered.is_finished() && !stop.load(Ordering::Relaxed) {
            if writer.write_all(b" ").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if let Ok(status) = answered.await {
            count(&outcomes, format!("trickling: {status}"));
        }
    }
}
