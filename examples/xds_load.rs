//! Load on the xDS server: N delta ADS streams, by default each on its own mutual-TLS
//! connection with a client certificate of the identity CA as a fleet's proxy has (or over M
//! shared HTTP/2 connections: `--connections`), each behaving like an Envoy (wildcard CDS, EDS by name for the clusters received, then
//! wildcard LDS, RDS by name for the listeners received, ACKing every response). Then one
//! route changes, several times, and the time until every stream ACKed it is measured.
//!
//! ```sh
//! cargo run --release --example xds_load -- --streams 2000
//! cargo run --release --example xds_load -- --streams 5000 --connections 50 --plaintext
//! ```
//!
//! The server runs in a child process (this same binary, `--serve`), so its memory (VmRSS,
//! VmHWM from /proc) and CPU (from /proc/PID/stat) are its own. The parent drives it through
//! stdin (`set N` publishes snapshot N and answers `version V`). Reports: time for all streams
//! to sync initially; per change, the time from publishing to each stream's ACK (p50, p99, max:
//! max is "all N ACKed"); the server's RSS; its CPU while nothing changes.
//!
//! Where the server's memory goes, per connection, with dhat (a heap profiler; it slows every
//! allocation, so figures of time from such a run mean nothing):
//!
//! ```sh
//! cargo run --release --features dhat-heap --example xds_load -- --streams 1000 --heap-profile /tmp/xds-heap.json
//! ```
//!
//! The server profiles its heap from start to the end of the run, connections still open, and
//! the parent prints the bytes live then, by what holds them (the innermost frame of a crate
//! that matters: rustls, h2, hyper, tonic, tokio, the server's own modules), per connection.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use envoy_operator::certs::client_auth::ClientTrust;
use envoy_operator::certs::identity_ca::IdentityCa;
use envoy_operator::xds::server::resource::type_url::{CLUSTER, ENDPOINT, LISTENER, ROUTE};
use envoy_operator::xds::server::{
    AdsConfig, AdsService, DEFAULT_MEMORY_LIMIT, FleetKey, ServeConfig, Snapshot, SnapshotCache, Transport,
    XdsResource, connection_cap, nack_budget, serve, subscription_budget,
};
use envoy_operator_core::identity::FleetIdentity;
use envoy_operator_testkit::Percentiles;
use envoy_operator_testkit::xds::resources::{
    eds_cluster, endpoints, http_listener, prefix_route, route_config,
};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::listener::v3::filter::ConfigType;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DeltaDiscoveryResponse};
use prost::Message;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

#[derive(Parser, Debug)]
#[command(about = "Delta ADS load on the xDS server (server in a child process)")]
struct Args {
    /// Streams (simulated proxies).
    #[arg(long, default_value_t = 1000)]
    streams: usize,
    /// HTTP/2 connections the streams share (default: one per stream with TLS, as proxies
    /// connect; one per 100 streams in plaintext).
    #[arg(long)]
    connections: Option<usize>,
    /// Plaintext HTTP/2 instead of mutual TLS.
    #[arg(long)]
    plaintext: bool,
    /// Extensions the node of each proxy's first request lists, as Envoy's does (Envoy 1.40:
    /// 516, making its first request 61,228 bytes, its largest); 0 for a bare node.
    #[arg(long, default_value_t = 516)]
    node_extensions: usize,
    /// Size the server as its cgroup's memory limit would, in MiB (the Deployment's: 512): its
    /// connection cap and its subscription budget. Connections beyond the cap are refused, and
    /// counted. Without it, the server is sized for the connections: the smallest limit whose
    /// cap admits them all (at least 512 MiB).
    #[arg(long, value_name = "MIB")]
    memory_limit: Option<u64>,
    /// Connections opened at once while connecting (each a TLS handshake).
    #[arg(long, default_value_t = 32)]
    connect_concurrency: usize,
    /// Route changes to measure.
    #[arg(long, default_value_t = 5)]
    changes: usize,
    /// EDS clusters in the fleet's snapshot (each proxy gets them all, and their endpoints):
    /// what a proxy holds grows with them, as a mesh's sidecars do with its Services.
    #[arg(long, default_value = "10")]
    clusters: NonZeroUsize,
    /// Seconds of idleness over which the server's CPU is measured.
    #[arg(long, default_value_t = 10)]
    idle: u64,
    /// Instead of the load: `half-sent` opens `--connections` plaintext connections (default
    /// 1,000), each with the streams the server allows (one), and on each announces a request
    /// of the largest size allowed and sends all of it but the last byte; reports how many
    /// streams the server refused and its memory. `table-pins` opens `--connections` (default
    /// 200) that each fill the server's HPACK table with headers sent one read apart, and
    /// reports the server's memory; `table-pins-control` sends the same headers unindexed.
    #[arg(long, value_name = "ATTACK")]
    abuse: Option<String>,
    /// Profile the server's heap with dhat (build with `--features dhat-heap`), write the
    /// profile to this file at the end of the run (connections open), and print what is live
    /// then, per connection, by what holds it.
    #[arg(long, value_name = "FILE")]
    heap_profile: Option<PathBuf>,
    /// Internal: run as the server.
    #[arg(long, hide = true)]
    serve: bool,
    /// Internal (server): the directory to write the server's CA and a client certificate and
    /// key into (TLS).
    #[arg(long, hide = true)]
    ca_out: Option<PathBuf>,
    /// Internal (server): the connections to size the server for (without `--memory-limit`).
    #[arg(long, hide = true)]
    max_connections: Option<usize>,
}

#[cfg(feature = "dhat-heap")]
#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const FLEET: &str = "load/fleet";
const ROUTES: usize = 20;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    raise_open_files_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    if args.serve { runtime.block_on(run_server(args)) } else { runtime.block_on(run_load(args)) }
}

/// A connection per proxy takes a file descriptor in each process: the soft limit (often
/// 1,024) is raised to the hard limit, for this process and the server it starts.
fn raise_open_files_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        limit.current = limit.maximum;
        if let Err(error) = setrlimit(Resource::Nofile, limit) {
            eprintln!("cannot raise the open files limit: {error}");
        }
    }
}

/// Snapshot `generation`: one listener, 20 routes over `clusters` EDS clusters (10 by
/// default) of 3 endpoints; the first route's prefix names the generation, so each generation
/// changes one route.
fn snapshot(generation: usize, clusters: NonZeroUsize) -> Snapshot {
    let clusters = clusters.get();
    let mut builder = Snapshot::builder();
    let mut routes = vec![prefix_route(&format!("/generation-{generation}"), "cluster-0")];
    routes.extend(
        (1..ROUTES).map(|i| prefix_route(&format!("/service-{i}"), &format!("cluster-{}", i % clusters))),
    );
    builder.add_listener(
        &http_listener("http", SocketAddr::from(([127, 0, 0, 1], 10000)), "routes"),
        ["routes".to_owned()],
    );
    builder.add(&route_config("routes", routes));
    for i in 0..clusters {
        let name = format!("cluster-{i}");
        let [.., high, low] = (i as u32).to_be_bytes();
        let addresses: Vec<SocketAddr> =
            (0..3).map(|j| SocketAddr::from(([10, high, low, j as u8 + 1], 8080))).collect();
        builder.add(&eds_cluster(&name)).add(&endpoints(&name, &addresses));
    }
    builder.build().expect("a consistent snapshot")
}

// ---------------------------------------------------------------------------------------------
// Server (child process)

/// The smallest memory limit, in whole MiB and at least the Deployment's, under which the
/// server's cap admits `connections`.
fn limit_admitting(connections: usize) -> u64 {
    let mut limit = DEFAULT_MEMORY_LIMIT;
    while connection_cap(Some(limit), u64::MAX) < connections {
        limit += 1 << 20;
    }
    limit
}

async fn run_server(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut profiler = heap_profiler(args.heap_profile.as_deref())?;
    let cache = SnapshotCache::new();
    let memory_limit = match args.memory_limit {
        Some(mib) => mib << 20,
        None => limit_admitting(args.max_connections.unwrap_or(0)),
    };
    let ads = AdsConfig {
        subscription_budget: subscription_budget(Some(memory_limit)),
        nack_budget: nack_budget(Some(memory_limit)),
        ..AdsConfig::default()
    };
    let service =
        AdsService::builder(cache.clone(), |_: &Node, _: Option<SocketAddr>| Ok(FleetKey::from(FLEET)))
            .config(ads)
            .build();
    let transport = match &args.ca_out {
        Some(dir) => {
            let serving = envoy_operator_testkit::certs::serving();
            let identities = IdentityCa::generate(time::OffsetDateTime::now_utc())?;
            let clients = ClientTrust::new(identities.trust_bundle(), true)?;
            let client = identities
                .issue(&FleetIdentity::new("load", "fleet"), time::OffsetDateTime::now_utc())
                .map_err(|error| error.to_string())?;
            std::fs::write(dir.join("ca.pem"), &serving.ca_pem)?;
            std::fs::write(dir.join("client.pem"), &client.cert_pem)?;
            std::fs::write(dir.join("client.key"), &client.key_pem)?;
            Transport::MutualTls { certificate: serving.resolver, clients }
        }
        None => Transport::Plaintext,
    };
    let mut config = ServeConfig::sized_for(transport, Some(memory_limit));
    eprintln!(
        "the server, sized for a memory limit of {} MiB: a cap of {} connections, a reading budget of {} MiB ({} connections reading at once), a writing budget of {} MiB ({} writing at once), a receive budget of {} MiB, a budget of {} MiB for what streams hold of requests not taken, a subscription budget of {} MiB, a NACK explanations budget of {} MiB",
        memory_limit >> 20,
        config.limits.max_connections,
        config.server.reading_budget.available() >> 20,
        config.server.reading_budget.readers(),
        config.server.writing_budget.available() >> 20,
        config.server.writing_budget.writers(),
        config.server.receive_budget.available() >> 20,
        config.server.over_window_budget >> 20,
        subscription_budget(Some(memory_limit)) >> 20,
        nack_budget(Some(memory_limit)) >> 20
    );
    // Plaintext streams share connections; a proxy's own carries one.
    let streams_per_connection = args.streams.div_ceil(args.max_connections.unwrap_or(args.streams).max(1));
    config.limits.http2_max_concurrent_streams = u32::try_from(streams_per_connection)
        .unwrap_or(u32::MAX)
        .max(envoy_operator::xds::server::MAX_STREAMS_PER_CONNECTION);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let subscriptions = service.clone();
    let server = tokio::spawn(serve(listener, service, config, async move {
        let _ = stop_rx.await;
    }));
    println!("ready {address}");

    // Commands from the parent; stdin closing means stop.
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(tokio::io::stdin()));
    while let Some(line) = lines.next_line().await? {
        if let Some(generation) = line.strip_prefix("set ") {
            let version = cache.set(FLEET, snapshot(generation.trim().parse()?, args.clusters));
            println!("version {version}");
        } else if line == "over-window" {
            // What h2 reset for its budget of requests not taken (`vendor/h2`).
            println!("over-window {}", h2::server::over_window_refused());
        } else if line == "subscriptions" {
            // What the streams' subscriptions take of the subscription budget.
            println!("subscriptions {}", subscriptions.subscriptions_held());
        } else if line == "writing-waits" {
            // How many times a connection found the writing budget taken (`vendor/h2`).
            println!("writing-waits {}", h2::server::write_budget_waited());
        } else if line == "profile" {
            // Dropping the profiler writes the profile: what is live now is "at t-end".
            let _written = profiler.take().map(drop);
            println!("profiled");
        }
    }
    let _ = stop_tx.send(());
    server.await??;
    Ok(())
}

#[cfg(feature = "dhat-heap")]
type HeapProfiler = dhat::Profiler;
#[cfg(not(feature = "dhat-heap"))]
type HeapProfiler = ();

#[cfg(feature = "dhat-heap")]
fn heap_profiler(file: Option<&std::path::Path>) -> Result<Option<HeapProfiler>, Box<dyn std::error::Error>> {
    Ok(file.map(|file| dhat::Profiler::builder().file_name(file).build()))
}

#[cfg(not(feature = "dhat-heap"))]
fn heap_profiler(file: Option<&std::path::Path>) -> Result<Option<HeapProfiler>, Box<dyn std::error::Error>> {
    match file {
        Some(_) => Err("--heap-profile needs the heap profiler: build with --features dhat-heap".into()),
        None => Ok(None),
    }
}

// ---------------------------------------------------------------------------------------------
// Load (parent process)

/// The server process, killed if still running when dropped.
struct ServerProcess {
    child: Child,
    commands: ChildStdin,
    answers: BufReader<ChildStdout>,
}

impl ServerProcess {
    fn start(
        args: &Args,
        ca_out: Option<&PathBuf>,
        connections: usize,
    ) -> Result<(ServerProcess, SocketAddr), Box<dyn std::error::Error>> {
        let mut command = Command::new(std::env::current_exe()?);
        command.args(["--serve", "--streams", &args.streams.to_string()]);
        command.args(["--max-connections", &connections.to_string()]);
        command.args(["--clusters", &args.clusters.to_string()]);
        if let Some(mib) = args.memory_limit {
            command.args(["--memory-limit", &mib.to_string()]);
        }
        if let Some(path) = ca_out {
            command.arg("--ca-out").arg(path);
        }
        if let Some(path) = &args.heap_profile {
            command.arg("--heap-profile").arg(path);
        }
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
        let commands = child.stdin.take().ok_or("no stdin")?;
        let answers = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut server = ServerProcess { child, commands, answers };
        let address = server.read_answer("ready")?.parse()?;
        Ok((server, address))
    }

    fn read_answer(&mut self, prefix: &str) -> Result<String, Box<dyn std::error::Error>> {
        let mut line = String::new();
        self.answers.read_line(&mut line)?;
        let value = line.trim().strip_prefix(prefix).ok_or_else(|| format!("unexpected answer {line:?}"))?;
        Ok(value.trim().to_string())
    }

    /// Publishes snapshot `generation`; returns its version.
    fn set(&mut self, generation: usize) -> Result<String, Box<dyn std::error::Error>> {
        writeln!(self.commands, "set {generation}")?;
        self.commands.flush()?;
        self.read_answer("version")
    }

    fn status_kib(&self, field: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|line| line.starts_with(field))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// User plus system CPU time so far, in clock ticks.
    fn cpu_ticks(&self) -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        // Fields after the command name (which may hold spaces), which ends with ')'.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn clock_ticks_per_second() -> u64 {
    let output = Command::new("getconf").arg("CLK_TCK").output().ok();
    output.and_then(|output| String::from_utf8_lossy(&output.stdout).trim().parse().ok()).unwrap_or(100)
}

/// ACKs of route configurations, by the version they carry.
type Acks = mpsc::UnboundedSender<(String, Instant)>;

async fn run_load(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(attack) = &args.abuse {
        return abuse(&args, attack).await;
    }
    let streams = args.streams.max(1);
    let default_connections = if args.plaintext { streams.div_ceil(100) } else { streams };
    let connections = args.connections.unwrap_or(default_connections).clamp(1, streams);
    let dir = tempfile::tempdir()?;
    let certs = dir.path().to_owned();
    let (mut server, address) =
        ServerProcess::start(&args, (!args.plaintext).then_some(&certs), connections)?;
    let transport = if args.plaintext { "plaintext" } else { "mutual TLS" };
    println!(
        "server pid {} at {address}; {streams} streams over {connections} {transport} connections",
        server.child.id()
    );

    let first = DeltaDiscoveryRequest {
        node: Some(envoy_node(0, args.node_extensions)),
        type_url: CLUSTER.into(),
        ..Default::default()
    };
    println!(
        "each proxy's first request: {} bytes (its node lists {} extensions)",
        first.encoded_len(),
        args.node_extensions
    );
    let initial = server.set(0)?;
    let connecting = Instant::now();
    let (channels, refused) =
        connect(address, connections, (!args.plaintext).then_some(&certs), args.connect_concurrency).await?;
    println!(
        "{} connections open in {:.1}s; {refused} refused or failed",
        channels.len(),
        connecting.elapsed().as_secs_f64()
    );
    if channels.is_empty() {
        return Err("no connection".into());
    }
    // Streams over the connections the server admitted (one each when every one was).
    let streams = if refused > 0 { streams * channels.len() / connections } else { streams };
    let connections = channels.len();
    let (acks, mut acked) = mpsc::unbounded_channel();
    let started = Instant::now();
    let mut proxies = tokio::task::JoinSet::new();
    let extensions = args.node_extensions;
    for id in 0..streams {
        proxies.spawn(proxy(id, channels[id % connections].clone(), acks.clone(), extensions));
    }
    let synced = wait_for_acks(&mut acked, &initial, streams, started).await?;
    println!(
        "initial sync of {streams} streams: all ACKed in {:.0}ms ({synced})",
        started.elapsed().as_secs_f64() * 1000.0
    );
    print_memory(&server, "after the initial sync");
    let retries = RETRIES.load(std::sync::atomic::Ordering::Relaxed);
    if retries > 0 {
        println!("streams retried after RESOURCE_EXHAUSTED or UNAVAILABLE: {retries}");
    }
    writeln!(server.commands, "over-window")?;
    server.commands.flush()?;
    println!(
        "streams reset for want of the budget of requests not taken: {}",
        server.read_answer("over-window")?
    );
    writeln!(server.commands, "subscriptions")?;
    server.commands.flush()?;
    let subscribed: usize = server.read_answer("subscriptions")?.parse()?;
    println!(
        "the streams' subscriptions take {subscribed} bytes of the subscription budget, {} a stream",
        subscribed / streams.max(1)
    );

    let ticks = clock_ticks_per_second();
    let before = server.cpu_ticks().ok_or("cannot read the server's CPU time")?;
    tokio::time::sleep(Duration::from_secs(args.idle)).await;
    let after = server.cpu_ticks().ok_or("cannot read the server's CPU time")?;
    let cpu = (after - before) as f64 / ticks as f64;
    println!(
        "idle {}s: server CPU {:.2}s ({:.2}% of one core)",
        args.idle,
        cpu,
        cpu * 100.0 / args.idle as f64
    );

    let mut all = Vec::new();
    for generation in 1..=args.changes {
        let published = Instant::now();
        let version = server.set(generation)?;
        let mut latencies = Vec::with_capacity(streams);
        collect_acks(&mut acked, &version, streams, published, &mut latencies).await?;
        let summary = Percentiles::of(&latencies).ok_or("no ACKs")?;
        println!("route change {generation}: {summary} (max = all {streams} ACKed)");
        all.extend(latencies);
    }
    if let Some(summary) = Percentiles::of(&all) {
        println!("all {} changes: {summary}", args.changes);
    }
    writeln!(server.commands, "writing-waits")?;
    server.commands.flush()?;
    println!(
        "times a connection waited for the writing budget, the sync and changes: {}",
        server.read_answer("writing-waits")?
    );
    print_memory(&server, "at the end");
    if let Some(file) = &args.heap_profile {
        writeln!(server.commands, "profile")?;
        server.commands.flush()?;
        server.read_answer("profiled")?;
        print_heap_breakdown(file, connections, streams)?;
    }
    // The simulated proxies go before the server does, so none reports a broken stream.
    proxies.shutdown().await;
    Ok(())
}

/// What dhat found live at the profile's end (every connection open), by what holds it: the
/// innermost frame of a stack that names one of [`HOLDERS`].
fn print_heap_breakdown(
    file: &std::path::Path,
    connections: usize,
    streams: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let profile: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(file)?)?;
    let frames: Vec<&str> =
        profile["ftbl"].as_array().ok_or("no frame table")?.iter().filter_map(|f| f.as_str()).collect();
    let mut by_holder: std::collections::BTreeMap<&str, (u64, u64)> = std::collections::BTreeMap::new();
    let mut total = 0;
    for point in profile["pps"].as_array().ok_or("no program points")? {
        let (bytes, blocks) = (point["eb"].as_u64().unwrap_or(0), point["ebk"].as_u64().unwrap_or(0));
        if bytes == 0 {
            continue;
        }
        total += bytes;
        let stack = point["fs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|index| frames.get(index.as_u64()? as usize));
        let holder = stack
            .filter_map(|frame| HOLDERS.iter().find(|(prefix, _)| frame_function(frame).starts_with(prefix)))
            .map(|(_, holder)| *holder)
            .next()
            .unwrap_or("other");
        let entry = by_holder.entry(holder).or_default();
        entry.0 += bytes;
        entry.1 += blocks;
    }
    let mut rows: Vec<_> = by_holder.into_iter().collect();
    rows.sort_by_key(|(_, (bytes, _))| std::cmp::Reverse(*bytes));
    println!(
        "heap live at the end (dhat, {}): {:.1} MiB, {:.1} KiB per connection ({connections} connections, {streams} streams)",
        file.display(),
        total as f64 / 1048576.0,
        total as f64 / 1024.0 / connections as f64
    );
    for (holder, (bytes, blocks)) in rows {
        println!(
            "  {:>8.2} KiB per connection in {:>6.1} blocks  {holder}",
            bytes as f64 / 1024.0 / connections as f64,
            blocks as f64 / connections as f64
        );
    }
    Ok(())
}

/// Who holds an allocation, by the innermost frame whose function starts with the prefix.
const HOLDERS: &[(&str, &str)] = &[
    ("rustls::", "rustls (TLS session, record buffers)"),
    ("tokio_rustls::", "tokio-rustls"),
    ("h2::", "h2 (HTTP/2 connection, streams, frame buffers)"),
    ("hyper_util::", "hyper-util"),
    ("hyper::", "hyper (connection, read/write buffers)"),
    ("tonic::", "tonic (gRPC codec buffers, streams)"),
    ("envoy_operator::xds::server::plan", "xDS stream state (plan: subscriptions, held resources)"),
    ("envoy_operator::xds::server::stream", "xDS stream task"),
    ("envoy_operator::xds::server::tracker", "xDS tracker (per proxy status)"),
    ("envoy_operator::xds::server", "xDS server, other"),
    ("envoy_operator::net", "accept loop (slots, deadlines)"),
    ("envoy_operator::", "envoy-operator, other"),
    ("tokio::", "tokio (tasks, channels, timers, I/O)"),
    ("prost::", "prost (decoded requests)"),
];

/// `0x1234: path::to::function (file.rs:1:2)` → `path::to::function`; generic impls
/// (`<T as Trait>::f`) by the type's path.
fn frame_function(frame: &str) -> &str {
    let function = frame.split_once(": ").map_or(frame, |(_, rest)| rest);
    function.trim_start_matches('<')
}

fn print_memory(server: &ServerProcess, when: &str) {
    let mib = |field| {
        server.status_kib(field).map_or("?".to_string(), |kib| format!("{:.1} MiB", kib as f64 / 1024.0))
    };
    println!("server memory {when}: VmRSS {}, VmHWM {}", mib("VmRSS:"), mib("VmHWM:"));
}

/// Opens `connections` connections, `concurrency` handshakes at a time, all through one
/// endpoint (one TLS client configuration, whose session cache lets later handshakes resume).
/// Connections the server refuses (at its cap) are counted, not fatal.
async fn connect(
    address: SocketAddr,
    connections: usize,
    certs: Option<&PathBuf>,
    concurrency: usize,
) -> Result<(Vec<Channel>, usize), Box<dyn std::error::Error>> {
    use futures::StreamExt;
    let tls = match certs {
        Some(dir) => {
            let ca = std::fs::read_to_string(dir.join("ca.pem"))?;
            let identity = Identity::from_pem(
                std::fs::read_to_string(dir.join("client.pem"))?,
                std::fs::read_to_string(dir.join("client.key"))?,
            );
            Some(
                ClientTlsConfig::new()
                    .ca_certificate(Certificate::from_pem(ca))
                    .identity(identity)
                    .domain_name("localhost"),
            )
        }
        None => None,
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{address}"))?;
    if let Some(tls) = tls {
        endpoint = endpoint.tls_config(tls)?;
    }
    let mut attempts = futures::stream::iter((0..connections).map(|_| endpoint.connect()))
        .buffer_unordered(concurrency.max(1));
    let (mut channels, mut refused) = (Vec::with_capacity(connections), 0);
    while let Some(attempt) = attempts.next().await {
        match attempt {
            Ok(channel) => channels.push(channel),
            Err(error) => {
                if refused == 0 {
                    eprintln!("a connection failed: {error:?}");
                }
                refused += 1;
            }
        }
    }
    Ok((channels, refused))
}

async fn wait_for_acks(
    acked: &mut mpsc::UnboundedReceiver<(String, Instant)>,
    version: &str,
    streams: usize,
    since: Instant,
) -> Result<Percentiles, Box<dyn std::error::Error>> {
    let mut latencies = Vec::with_capacity(streams);
    collect_acks(acked, version, streams, since, &mut latencies).await?;
    Ok(Percentiles::of(&latencies).ok_or("no ACKs")?)
}

/// Collects the ACK times of `version` from `streams` streams (ACKs of other versions, late
/// ones of an earlier change, are skipped).
async fn collect_acks(
    acked: &mut mpsc::UnboundedReceiver<(String, Instant)>,
    version: &str,
    streams: usize,
    since: Instant,
    latencies: &mut Vec<Duration>,
) -> Result<(), Box<dyn std::error::Error>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    while latencies.len() < streams {
        let (acked_version, at) = tokio::time::timeout_at(deadline, acked.recv())
            .await
            .map_err(|_| format!("only {} of {streams} streams ACKed {version}", latencies.len()))?
            .ok_or("every stream ended")?;
        if acked_version == version {
            latencies.push(at.duration_since(since));
        }
    }
    Ok(())
}

/// Streams the server asked to retry (`RESOURCE_EXHAUSTED`, `UNAVAILABLE`), all proxies
/// together.
static RETRIES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One simulated Envoy on a delta ADS stream. Like Envoy, a stream the server ends with
/// `RESOURCE_EXHAUSTED` or `UNAVAILABLE` (e.g. every request budget taken by the first
/// requests of thousands of proxies connecting at once) is opened again after a jittered
/// backoff.
async fn proxy(id: usize, channel: Channel, acks: Acks, extensions: usize) {
    let mut backoff = Duration::from_millis(250);
    loop {
        match run_proxy(id, channel.clone(), acks.clone(), extensions).await {
            Ok(()) => return,
            Err(error) => {
                let retry = error.downcast_ref::<tonic::Status>().is_some_and(|status| {
                    matches!(status.code(), tonic::Code::ResourceExhausted | tonic::Code::Unavailable)
                });
                if !retry {
                    return eprintln!("stream {id}: {error}");
                }
            }
        }
        RETRIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Jitter from the id: between one and two backoffs.
        let jitter = backoff.mul_f64(((id * 7919) % 1000) as f64 / 1000.0);
        tokio::time::sleep(backoff + jitter).await;
        backoff = (backoff * 2).min(Duration::from_secs(4));
    }
}

async fn run_proxy(
    id: usize,
    channel: Channel,
    acks: Acks,
    extensions: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let (requests, rx) = mpsc::unbounded_channel();
    let node = envoy_node(id, extensions);
    requests.send(DeltaDiscoveryRequest {
        node: Some(node),
        type_url: CLUSTER.into(),
        ..Default::default()
    })?;
    let mut client = AggregatedDiscoveryServiceClient::new(channel);
    let mut responses =
        client.delta_aggregated_resources(UnboundedReceiverStream::new(rx)).await?.into_inner();
    let mut subscribed: HashMap<&'static str, HashSet<String>> = HashMap::new();
    let mut listeners_requested = false;
    while let Some(response) = responses.message().await? {
        // Like Envoy: what a cluster or listener refers to is requested by name.
        let (referred_type, references) = match response.type_url.as_str() {
            CLUSTER => (ENDPOINT, references(&response, endpoint_names)?),
            LISTENER => (ROUTE, references(&response, route_configuration_names)?),
            _ => ("", Vec::new()),
        };
        let new: Vec<String> = references
            .into_iter()
            .filter(|name| subscribed.entry(referred_type).or_default().insert(name.clone()))
            .collect();
        if !new.is_empty() {
            requests.send(DeltaDiscoveryRequest {
                type_url: referred_type.into(),
                resource_names_subscribe: new,
                ..Default::default()
            })?;
        }
        requests.send(DeltaDiscoveryRequest {
            type_url: response.type_url.clone(),
            response_nonce: response.nonce.clone(),
            ..Default::default()
        })?;
        if response.type_url == ROUTE {
            acks.send((response.system_version_info.clone(), Instant::now()))?;
        }
        // Envoy asks for listeners once its clusters are initialized.
        if response.type_url == ENDPOINT && !listeners_requested {
            listeners_requested = true;
            requests.send(DeltaDiscoveryRequest { type_url: LISTENER.into(), ..Default::default() })?;
        }
    }
    Ok(())
}

/// A node as Envoy's first request carries it: its id, its cluster (the fleet), and the
/// extensions it was built with (about 118 bytes each on the wire).
fn envoy_node(id: usize, extensions: usize) -> Node {
    use envoy_types::pb::envoy::config::core::v3::Extension;
    let extensions = (0..extensions)
        .map(|i| Extension {
            name: format!("envoy.filters.http.extension_{i:04}"),
            category: "envoy.filters.http".into(),
            type_urls: vec![format!("envoy.extensions.filters.http.extension_{i:04}.v3.Config")],
            ..Default::default()
        })
        .collect();
    Node { id: format!("load-{id}"), cluster: FLEET.into(), extensions, ..Default::default() }
}

/// The names the resources of `response` refer to, by `names` (decoded as Envoy does).
fn references<T: Message + Default>(
    response: &DeltaDiscoveryResponse,
    names: fn(T) -> Vec<String>,
) -> Result<Vec<String>, prost::DecodeError> {
    let mut referred = Vec::new();
    for resource in &response.resources {
        let Some(body) = &resource.resource else { continue };
        referred.extend(names(T::decode(body.value.as_slice())?));
    }
    Ok(referred)
}

/// An EDS cluster's endpoints.
fn endpoint_names(cluster: Cluster) -> Vec<String> {
    cluster.references().into_iter().map(|reference| reference.name).collect()
}

/// The route configurations a listener's HTTP connection managers take by RDS.
fn route_configuration_names(listener: Listener) -> Vec<String> {
    let filters = listener.filter_chains.into_iter().flat_map(|chain| chain.filters);
    filters
        .filter_map(|filter| {
            let Some(ConfigType::TypedConfig(any)) = filter.config_type else { return None };
            match HttpConnectionManager::decode(any.value.as_slice()).ok()?.route_specifier? {
                RouteSpecifier::Rds(rds) => Some(rds.route_config_name),
                _ => None,
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Abuse (parent process): the server as `run` configures it, attacked over plaintext HTTP/2
// (mutual TLS only decides who gets this far).

async fn abuse(args: &Args, attack: &str) -> Result<(), Box<dyn std::error::Error>> {
    match attack {
        "half-sent" => {}
        "table-pins" => return table_pins::attack(args, true).await,
        "table-pins-control" => return table_pins::attack(args, false).await,
        _ => {
            return Err(
                format!("unknown attack {attack:?} (half-sent, table-pins, table-pins-control)").into()
            );
        }
    }
    let connections = args.connections.unwrap_or(1000);
    let server_args = Args { streams: 1, plaintext: true, abuse: None, ..Args::parse_from(["xds_load"]) };
    let (server, address) = ServerProcess::start(&server_args, None, connections)?;
    print_memory(&server, "before");
    let started = Instant::now();
    let mut attackers = tokio::task::JoinSet::new();
    for _ in 0..connections {
        attackers.spawn(half_sent::connection(address));
    }
    let (mut held, mut failed) = (0, 0);
    let mut refused = std::collections::BTreeMap::<String, usize>::new();
    let mut open = Vec::new();
    while let Some(outcome) = attackers.join_next().await {
        match outcome? {
            Ok((streams, connection)) => {
                for stream in streams {
                    match stream {
                        half_sent::Outcome::Held(body) => {
                            held += 1;
                            open.push(body);
                        }
                        half_sent::Outcome::Refused(status) => *refused.entry(status).or_default() += 1,
                    }
                }
                open.push(Box::new(connection));
            }
            Err(_) => failed += 1,
        }
    }
    println!(
        "{connections} connections ({failed} failed to connect) in {:.1}s: {held} streams hold a half-sent {} KiB request; refused, by grpc-status: {refused:?}",
        started.elapsed().as_secs_f64(),
        envoy_operator::xds::server::MAX_REQUEST_BYTES / 1024
    );
    print_memory(&server, "while they hold them");
    tokio::time::sleep(Duration::from_secs(17)).await;
    print_memory(&server, "17 s later (past the 15 s first-request deadline)");
    drop(open);
    Ok(())
}

mod half_sent {
    use std::convert::Infallible;
    use std::net::SocketAddr;
    use std::time::Duration;

    use bytes::Bytes;
    use http_body_util::{BodyExt, StreamBody};
    use hyper::body::Frame;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use tokio::sync::mpsc;
    use tokio_stream::wrappers::UnboundedReceiverStream;

    type Body = StreamBody<UnboundedReceiverStream<Result<Frame<Bytes>, Infallible>>>;

    pub enum Outcome {
        /// The request's sender, kept so the request stays open.
        Held(Box<dyn std::any::Any + Send>),
        Refused(String),
    }

    /// One connection, the streams the server allows on it each with a request of the largest
    /// allowed size sent but its last byte; what the server made of each.
    pub async fn connection(
        address: SocketAddr,
    ) -> Result<
        (Vec<Outcome>, hyper::client::conn::http2::SendRequest<Body>),
        Box<dyn std::error::Error + Send + Sync>,
    > {
        let tcp = tokio::net::TcpStream::connect(address).await?;
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp)).await?;
        tokio::spawn(connection);
        let length = envoy_operator::xds::server::MAX_REQUEST_BYTES;
        let mut outcomes = Vec::new();
        for _ in 0..envoy_operator::xds::server::MAX_STREAMS_PER_CONNECTION {
            let (body, rx) = mpsc::unbounded_channel::<Result<Frame<Bytes>, Infallible>>();
            let request = http::Request::post(
                "http://localhost/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources",
            )
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(StreamBody::new(UnboundedReceiverStream::new(rx)))?;
            let mut framed = vec![0u8];
            framed.extend(u32::try_from(length)?.to_be_bytes());
            framed.resize(5 + length - 1, 0x0a);
            body.send(Ok(Frame::data(Bytes::from(framed))))?;
            let response = sender.send_request(request).await?;
            let mut response = response.into_body();
            // A refusal comes as trailers at once; a held stream says nothing.
            let outcome = match tokio::time::timeout(Duration::from_secs(2), response.frame()).await {
                Ok(Some(Ok(frame))) if frame.is_trailers() => {
                    let status =
                        frame.trailers_ref().and_then(|t| t.get("grpc-status")).map(|v| format!("{v:?}"));
                    Outcome::Refused(status.unwrap_or_default())
                }
                Ok(_) => Outcome::Refused("ended".into()),
                Err(_) => Outcome::Held(Box::new((body, response))),
            };
            outcomes.push(outcome);
        }
        Ok((outcomes, sender))
    }
}

/// Headers the server's HPACK decoder keeps in its dynamic table for the connection's life,
/// each sent in a frame of its own (a new stream with its `:path`), one read of the server's
/// apart: what a client can make a connection hold beyond what the model counts at rest. A
/// string h2 took from a frame as a slice kept the whole read buffer the frame came in
/// allocated while it lived (`vendor/h2/PATCHED.md`).
mod table_pins {
    use std::net::SocketAddr;
    use std::time::{Duration, Instant};

    use envoy_operator_testkit::h2_frame::{PREFACE, frame};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::{Args, ServerProcess, print_memory};

    /// Entries of 4-byte names and empty values take 36 bytes of the table's 4,096.
    const ENTRIES: u32 = 113;
    const PATH: &[u8] = b"/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

    /// With `indexed` false, the same frames with the header not indexed: what the connections
    /// cost without the table.
    pub async fn attack(args: &Args, indexed: bool) -> Result<(), Box<dyn std::error::Error>> {
        let connections = args.connections.unwrap_or(200);
        let server_args = Args {
            streams: 1,
            plaintext: true,
            abuse: None,
            heap_profile: args.heap_profile.clone(),
            ..<Args as clap::Parser>::parse_from(["xds_load"])
        };
        let (mut server, address) = ServerProcess::start(&server_args, None, connections)?;
        print_memory(&server, "before");
        let started = Instant::now();
        let mut attackers = tokio::task::JoinSet::new();
        for _ in 0..connections {
            attackers.spawn(connection(address, indexed));
        }
        let (mut open, mut failed) = (Vec::new(), 0);
        while let Some(outcome) = attackers.join_next().await {
            match outcome? {
                Ok(socket) => open.push(socket),
                Err(_) => failed += 1,
            }
        }
        println!(
            "{connections} connections ({failed} failed) each sent {ENTRIES} headers{}, one frame every 20 ms, in {:.1}s",
            if indexed { " to index" } else { " not to index" },
            started.elapsed().as_secs_f64()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        print_memory(&server, "while the connections stay open");
        if let Some(file) = &args.heap_profile {
            use std::io::Write;
            writeln!(server.commands, "profile")?;
            server.commands.flush()?;
            server.read_answer("profiled")?;
            super::print_heap_breakdown(file, connections, connections)?;
        }
        drop(open);
        Ok(())
    }

    async fn connection(address: SocketAddr, indexed: bool) -> std::io::Result<tokio::task::JoinHandle<()>> {
        let socket = tokio::net::TcpStream::connect(address).await?;
        let (mut read, mut write) = socket.into_split();
        // Whatever the server sends is read and dropped, so its writes never block.
        let reader = tokio::spawn(async move {
            let mut sink = vec![0u8; 4096];
            while matches!(read.read(&mut sink).await, Ok(n) if n > 0) {}
        });
        write.write_all(PREFACE).await?;
        write.write_all(&frame(0x4, 0, 0, &[])).await?; // SETTINGS
        write.write_all(&frame(0x4, 0x1, 0, &[])).await?; // SETTINGS ACK
        for entry in 0..ENTRIES {
            let mut block = vec![0x83, 0x86]; // :method POST, :scheme http
            block.push(0x04); // :path, a literal not indexed
            block.push(PATH.len() as u8);
            block.extend_from_slice(PATH);
            // A literal with a new name, indexed (or not).
            block.push(if indexed { 0x40 } else { 0x00 });
            block.push(4);
            block.extend_from_slice(format!("x{entry:03}").as_bytes());
            block.push(0); // an empty value
            // END_HEADERS | END_STREAM on a new stream.
            write.write_all(&frame(0x1, 0x5, 2 * entry + 1, &block)).await?;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Keeping the writer keeps the connection open.
        Ok(tokio::spawn(async move {
            let _write = write;
            let _ = reader.await;
        }))
    }
}
