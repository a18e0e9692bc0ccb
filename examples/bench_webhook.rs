//! Load benchmark of the admission webhook over TLS with keep-alive.
//!
//! ```sh
//! cargo run --release --example bench_webhook -- --connections 32 --seconds 10
//! cargo run --release --example bench_webhook -- --connections 8 --seconds 10 --rate 1000
//! cargo run --release --example bench_webhook -- --connections 32 --seconds 10 \
//!     --fixture pod-create-from-replicaset-mutate.json --path /inject
//! ```
//!
//! Starts the server in-process on 127.0.0.1:0 with fresh certificates (or targets a running
//! one with `--url https://127.0.0.1:8443 --ca-file certs/ca.crt`), opens N HTTP/1.1
//! keep-alive TLS connections, and POSTs a captured AdmissionReview as fast as the server
//! answers (closed loop) or at a fixed total rate (open loop: a request sent late because
//! the previous answer was slow counts from its scheduled time, so a stall is not hidden).
//! Prints req/s and p50/p99/max latency.
//! Loopback only; bounded by `--seconds` (at most 120).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use envoy_operator::certs::serving::{self, CertPaths, ReloadingCert};
use envoy_operator::webhook::metrics::WebhookMetrics;
use envoy_operator::webhook::serve::{WebhookConfig, WebhookServer};
use envoy_operator_core::inject::{InjectConfig, NoEnvoys};
use envoy_operator_harness::write_bench_certificate;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

#[derive(Parser)]
#[command(about = "Load benchmark of the admission webhook over TLS keep-alive (loopback only)")]
struct Args {
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
    connections: u32,
    /// Duration of the measurement.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=120))]
    seconds: u64,
    /// Fixed total request rate (req/s), spread over the connections; closed loop when absent.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=200_000))]
    rate: Option<u32>,
    /// A running webhook, e.g. https://127.0.0.1:8443 (loopback only); in-process when absent.
    #[arg(long)]
    url: Option<String>,
    /// CA of the running webhook's certificate (with --url).
    #[arg(long, default_value = "certs/ca.crt")]
    ca_file: PathBuf,
    /// The AdmissionReview to POST, from tests/fixtures/admission/.
    #[arg(long, default_value = "foo-create-validate.json")]
    fixture: String,
    /// The endpoint to POST to (`/mutate`, `/validate`, or the sidecar injector's `/inject`).
    #[arg(long, default_value = "/validate")]
    path: String,
}

type Failure = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let args = Args::parse();
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/admission").join(&args.fixture);
    let body = Bytes::from(std::fs::read(&fixture)?);

    let _cert_dir; // kept alive while the in-process server runs
    let (addr, ca_pem) = match &args.url {
        Some(url) => (loopback_addr(url)?, std::fs::read(&args.ca_file)?),
        None => {
            let dir = tempfile::tempdir()?;
            let ca_pem = write_bench_certificate(dir.path())?;
            let certs = ReloadingCert::load(CertPaths::in_dir(dir.path()))?;
            let mut config =
                WebhookConfig { listen: SocketAddr::from(([127, 0, 0, 1], 0)), ..WebhookConfig::default() };
            // The sidecar injector too, with the defaults and no Envoys, as `webhook` serves it.
            config.endpoints.push(envoy_operator::webhook::inject::endpoint(
                InjectConfig::default(),
                Arc::new(NoEnvoys),
                WebhookMetrics::default(),
            ));
            let server = WebhookServer::bind(config, certs)?;
            let addr = server.local_addr()?;
            tokio::spawn(server.run(std::future::pending()));
            _cert_dir = dir;
            (addr, ca_pem.into_bytes())
        }
    };

    let client = client_config(&ca_pem)?;
    let duration = Duration::from_secs(args.seconds);
    let per_connection_rate = args.rate.map(|rate| f64::from(rate) / f64::from(args.connections));
    let mut connections = Vec::new();
    for _ in 0..args.connections {
        connections.push(open(addr, client.clone()).await?);
    }
    let uri = format!("{}?timeout=10s", args.path);
    let started = Instant::now();
    let deadline = started + duration;
    let mut workers = Vec::new();
    for sender in connections {
        let (body, uri) = (body.clone(), uri.clone());
        workers.push(tokio::spawn(run_connection(sender, body, uri, deadline, per_connection_rate)));
    }
    let mut latencies = Vec::new();
    let mut errors = 0u64;
    for worker in workers {
        let result = worker.await?;
        latencies.extend(result.latencies);
        errors += result.errors;
    }
    let elapsed = started.elapsed();
    report(&args, latencies, errors, elapsed);
    Ok(())
}

struct ConnectionResult {
    latencies: Vec<Duration>,
    errors: u64,
}

async fn run_connection(
    mut sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    body: Bytes,
    uri: String,
    deadline: Instant,
    rate: Option<f64>,
) -> ConnectionResult {
    let mut result = ConnectionResult { latencies: Vec::new(), errors: 0 };
    let period = rate.map(|rate| Duration::from_secs_f64(1.0 / rate));
    let mut next = Instant::now();
    loop {
        // Open loop: each request has a scheduled time. If the previous answer came after
        // it, latency counts from the schedule (a stall is not hidden); if we are early,
        // sleep, and count from the actual send (the timer's own lateness is not the server's).
        let started = match period {
            Some(period) => {
                let scheduled = next;
                next += period;
                if Instant::now() < scheduled {
                    tokio::time::sleep_until(scheduled.into()).await;
                    Instant::now()
                } else {
                    scheduled
                }
            }
            None => Instant::now(),
        };
        if started >= deadline {
            break;
        }
        let request = hyper::Request::post(uri.as_str())
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .body(Full::new(body.clone()));
        let Ok(request) = request else { break };
        let ok = match sender.ready().await {
            Ok(()) => match sender.send_request(request).await {
                Ok(response) => {
                    let status = response.status();
                    response.into_body().collect().await.is_ok() && status == 200
                }
                Err(_) => false,
            },
            Err(_) => {
                result.errors += 1;
                break; // the connection is gone
            }
        };
        if ok {
            result.latencies.push(started.elapsed());
        } else {
            result.errors += 1;
        }
    }
    result
}

fn report(args: &Args, mut latencies: Vec<Duration>, errors: u64, elapsed: Duration) {
    latencies.sort_unstable();
    let count = latencies.len();
    let percentile = |p: f64| -> Duration {
        if count == 0 {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * count as f64).ceil() as usize;
        latencies[rank.clamp(1, count) - 1]
    };
    let mode = match args.rate {
        Some(rate) => format!("open loop at {rate} req/s"),
        None => "closed loop".to_owned(),
    };
    println!(
        "{} {} over {} TLS keep-alive connections ({mode}), {:.1} s",
        args.fixture,
        args.path,
        args.connections,
        elapsed.as_secs_f64()
    );
    println!("requests: {count} ok, {errors} failed");
    println!("throughput: {:.0} req/s", count as f64 / elapsed.as_secs_f64());
    println!(
        "latency: p50 {:?}  p99 {:?}  p99.9 {:?}  max {:?}",
        percentile(50.0),
        percentile(99.0),
        percentile(99.9),
        latencies.last().copied().unwrap_or_default()
    );
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

async fn open(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, Failure> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let tls = TlsConnector::from(config).connect(ServerName::try_from("localhost")?, tcp).await?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

/// The address of a loopback URL like `https://127.0.0.1:8443`; anything else is refused.
fn loopback_addr(url: &str) -> Result<SocketAddr, Failure> {
    let authority = url.strip_prefix("https://").ok_or("--url must start with https://")?;
    let authority = authority.split('/').next().unwrap_or_default();
    let authority = authority.replacen("localhost", "127.0.0.1", 1);
    let addr: SocketAddr =
        authority.parse().map_err(|_| format!("--url needs host:port, got {authority}"))?;
    if !addr.ip().is_loopback() {
        return Err("--url must point at a loopback address".into());
    }
    Ok(addr)
}
