//! How long a new client waits at the webhook's connection cap while other clients hold every
//! slot: the time from its TCP connect to the answer of `GET /healthz`, which the API server
//! would have to get within its `timeoutSeconds: 5`.
//!
//! ```sh
//! cargo run --release --example cap_wait -- --hold http1-idle
//! cargo run --release --example cap_wait -- --hold h2-silent
//! cargo run --release --example cap_wait -- --hold h2-idle --hoarders 128 --give-up 70
//! ```
//!
//! The server runs in-process on 127.0.0.1:0 with fresh certificates and the webhook's
//! connection limits (128 connections). The hoarders: `http1-idle` sends one request per
//! connection and keeps it alive; `h2-silent` sends the HTTP/2 preface and SETTINGS and never
//! reads again; `h2-idle` sends one request over HTTP/2 and keeps the connection. Then one new
//! client connects. Loopback only; the new client gives up after `--give-up` seconds.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::{Parser, ValueEnum};
use envoy_operator::certs::serving::{self, CertPaths, ReloadingCert};
use envoy_operator::webhook::serve::{WebhookConfig, WebhookServer};
use envoy_operator_harness::write_bench_certificate;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

#[derive(Clone, Copy, ValueEnum)]
enum Hold {
    /// HTTP/1.1 keep-alive connections that each completed one request and idle.
    Http1Idle,
    /// HTTP/2 connections that sent the preface and SETTINGS and never read.
    H2Silent,
    /// HTTP/2 connections that completed one request and idle.
    H2Idle,
}

#[derive(Parser)]
#[command(about = "Time a new client waits at the webhook's connection cap (loopback only)")]
struct Args {
    #[arg(long, value_enum)]
    hold: Hold,
    /// Connections held; the webhook's cap is 128.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=512))]
    hoarders: u32,
    /// How long the new client waits before giving up.
    #[arg(long, default_value_t = 70, value_parser = clap::value_parser!(u64).range(1..=300))]
    give_up: u64,
}

type Failure = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let ca_pem = write_bench_certificate(dir.path())?;
    let certs = ReloadingCert::load(CertPaths::in_dir(dir.path()))?;
    let config = WebhookConfig { listen: SocketAddr::from(([127, 0, 0, 1], 0)), ..WebhookConfig::default() };
    let server = WebhookServer::bind(config, certs)?;
    let addr = server.local_addr()?;
    tokio::spawn(server.run(std::future::pending()));

    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let client = rustls::ClientConfig::builder_with_provider(serving::provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();

    let mut held = Vec::new();
    for _ in 0..args.hoarders {
        held.push(hoard(addr, &client, args.hold).await?);
    }
    let kind = args.hold.to_possible_value().map(|value| value.get_name().to_owned()).unwrap_or_default();
    println!("{} connections held: {kind}", held.len());

    let started = Instant::now();
    let served = tokio::time::timeout(Duration::from_secs(args.give_up), async {
        let stream = connect(addr, &client, b"http/1.1").await?;
        let handshake = started.elapsed();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(connection);
        let response = sender.send_request(get("/healthz")).await?;
        let status = response.status();
        response.into_body().collect().await?;
        Ok::<_, Failure>((handshake, status))
    })
    .await;
    match served {
        Ok(Ok((handshake, status))) => println!(
            "new client: TLS handshake done after {:.3} s, GET /healthz {status} after {:.3} s",
            handshake.as_secs_f64(),
            started.elapsed().as_secs_f64()
        ),
        Ok(Err(error)) => {
            println!("new client failed after {:.3} s: {error}", started.elapsed().as_secs_f64())
        }
        Err(_) => println!("new client gave up after {} s", args.give_up),
    }
    drop(held);
    Ok(())
}

/// What keeps a held connection open until dropped: its request sender, or the stream itself.
type Held = Box<dyn std::any::Any + Send>;

async fn hoard(addr: SocketAddr, client: &rustls::ClientConfig, hold: Hold) -> Result<Held, Failure> {
    Ok(match hold {
        Hold::Http1Idle => {
            let stream = connect(addr, client, b"http/1.1").await?;
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(connection);
            sender.send_request(get("/healthz")).await?.into_body().collect().await?;
            Box::new(sender)
        }
        Hold::H2Silent => {
            let mut stream = connect(addr, client, b"h2").await?;
            // The client preface and an empty SETTINGS frame.
            stream.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").await?;
            stream.flush().await?;
            Box::new(stream)
        }
        Hold::H2Idle => {
            let stream = connect(addr, client, b"h2").await?;
            let (mut sender, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await?;
            tokio::spawn(connection);
            sender.send_request(get("https://localhost/healthz")).await?.into_body().collect().await?;
            Box::new(sender)
        }
    })
}

async fn connect(
    addr: SocketAddr,
    client: &rustls::ClientConfig,
    alpn: &[u8],
) -> Result<TlsStream<TcpStream>, Failure> {
    let mut config = client.clone();
    config.alpn_protocols = vec![alpn.to_vec()];
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    Ok(TlsConnector::from(Arc::new(config)).connect(ServerName::try_from("localhost")?, tcp).await?)
}

fn get(uri: &str) -> hyper::Request<Empty<Bytes>> {
    hyper::Request::get(uri).header("host", "localhost").body(Empty::new()).expect("a valid request")
}
