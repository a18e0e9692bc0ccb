//! Reconcile benchmark against the current cluster (kubeconfig context), with the operator
//! in-process (the same `operator::run`, set up exactly as the e2e tests do: the e2e harness
//! `envoy_operator_testkit::e2e`, with the launcher of `tests/e2e/harness.rs` repeated below).
//!
//! ```sh
//! cargo run --release --example bench_reconcile -- --count 100
//! cargo run --release --example bench_reconcile -- --count 500 --envoys 0 --idle 120
//! ```
//!
//! Creates `--count` Foos and `--envoys` Envoys (default: as many as Foos) in a fresh
//! namespace, and measures, per object, the time from its create request until its status
//! reports `observedGeneration == metadata.generation` (the operator writes status after its
//! children); then checks every child exists. Reports objects/s, p50/p99/max time-to-status,
//! write requests per object from the API server's `/metrics` (`apiserver_request_total`,
//! cluster-wide: other clients writing the same resources meanwhile are counted too) when the
//! caller may read them, the operator's own writes per object (its `api_writes` counter: what
//! it sent, whoever else writes), and the process's peak RSS (bench and operator together).
//! Then waits until the cluster is quiet (`--quiet` seconds without writes: the deployment
//! controller finishes rollouts after the statuses converge), idles one resync period
//! (`--idle`, the controllers' resync is set to it) and reports the operator's own writes
//! meanwhile (the goal is zero) apart from every writer's. Deletes everything it created, also
//! on Ctrl-C or failure.

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use envoy_operator_core::api::{Envoy, Foo};
use envoy_operator_harness::InProcess;
use envoy_operator_testkit::e2e as harness;
use futures::{FutureExt, StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

#[derive(Parser, Debug)]
#[command(about = "Reconcile benchmark against the current cluster, operator in-process")]
struct Args {
    /// Foos to create.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=5000))]
    count: u32,
    /// Envoys to create (default: as many as Foos).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=5000))]
    envoys: Option<u32>,
    /// Seconds without writes to the watched resources before the idle window starts.
    #[arg(long, default_value_t = 15)]
    quiet: u64,
    /// Seconds to idle afterwards: one resync period (the controllers' resync is set to it).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=1800))]
    idle: u64,
    /// Seconds to wait for every status before giving up.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(10..=3600))]
    timeout: u64,
    /// `spec.replicas` of every object: pods are not what is measured, so none by default.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i32).range(0..=10))]
    replicas: i32,
    /// Create requests in flight at once.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=256))]
    parallel: u32,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    if let Err(message) = harness::reachable_cluster().await {
        eprintln!("bench_reconcile needs a cluster (the current kubeconfig context): {message}");
        return std::process::ExitCode::from(2);
    }
    let cluster = harness::set_up_with(Arc::new(InProcess), "bench", Duration::from_secs(args.idle)).await;
    eprintln!("namespace {}; operator in-process", cluster.namespace);
    let outcome = tokio::select! {
        outcome = AssertUnwindSafe(bench(&cluster, &args)).catch_unwind() => outcome.map_err(|_| "the benchmark failed"),
        _ = tokio::signal::ctrl_c() => Err("interrupted"),
    };
    eprintln!("cleaning up namespace {}", cluster.namespace);
    cluster.clean_up().await;
    match outcome {
        Ok(Ok(())) => std::process::ExitCode::SUCCESS,
        Ok(Err(message)) | Err(message) => {
            eprintln!("{message}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn bench(cluster: &harness::Cluster, args: &Args) -> Result<(), &'static str> {
    let client = cluster.client.clone();
    let envoy_count = args.envoys.unwrap_or(args.count);
    let total = (args.count + envoy_count) as usize;
    let metrics_before = api_server_writes(&client).await;

    // Watch first, so no status write is missed.
    let foos: Api<Foo> = cluster.api();
    let envoys: Api<Envoy> = cluster.api();
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel::<(String, Instant)>();
    let observe = {
        let (foos, envoys, seen) = (foos.clone(), envoys.clone(), seen_tx.clone());
        async move {
            let foo_stream = watcher(foos, watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .map_ok(|foo: Foo| {
                    let observed = foo.status.as_ref().and_then(|s| s.observed_generation);
                    (
                        format!("Foo/{}", foo.name_any()),
                        observed.is_some() && observed == foo.metadata.generation,
                    )
                });
            let envoy_stream = watcher(envoys, watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .map_ok(|envoy: Envoy| {
                    let observed = envoy.status.as_ref().and_then(|s| s.observed_generation);
                    (
                        format!("Envoy/{}", envoy.name_any()),
                        observed.is_some() && observed == envoy.metadata.generation,
                    )
                });
            let mut merged = std::pin::pin!(futures::stream::select(foo_stream, envoy_stream));
            while let Some(event) = merged.next().await {
                if let Ok((key, true)) = event {
                    let _ = seen.send((key, Instant::now()));
                }
            }
        }
    };
    let watching = tokio::spawn(observe);
    drop(seen_tx);

    let started = Instant::now();
    let mut requests: Vec<(String, serde_json::Value)> = Vec::with_capacity(total);
    for i in 0..args.count {
        let name = format!("bench-foo-{i}");
        requests.push((
            format!("Foo/{name}"),
            json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": {"name": name},
                "spec": {"deploymentName": name, "replicas": args.replicas}}),
        ));
    }
    for i in 0..envoy_count {
        let name = format!("bench-envoy-{i}");
        requests.push((
            format!("Envoy/{name}"),
            json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {"name": name},
                "spec": {"replicas": args.replicas, "xds": {"host": "xds.default", "port": 18000}}}),
        ));
    }
    let created: Vec<Result<(String, Instant), String>> = futures::stream::iter(requests)
        .map(|(key, body)| {
            let (foos, envoys) = (foos.clone(), envoys.clone());
            async move {
                let at = Instant::now();
                let result = if key.starts_with("Foo/") {
                    let foo: Foo = serde_json::from_value(body).map_err(|e| e.to_string())?;
                    foos.create(&PostParams::default(), &foo).await.map(|_| ())
                } else {
                    let envoy: Envoy = serde_json::from_value(body).map_err(|e| e.to_string())?;
                    envoys.create(&PostParams::default(), &envoy).await.map(|_| ())
                };
                result.map(|()| (key.clone(), at)).map_err(|e| format!("{key}: {e}"))
            }
        })
        .buffer_unordered(args.parallel as usize)
        .collect()
        .await;
    let mut created_at = HashMap::new();
    for result in created {
        match result {
            Ok((key, at)) => {
                created_at.insert(key, at);
            }
            Err(error) => {
                eprintln!("create failed: {error}");
                return Err("creating the objects failed");
            }
        }
    }
    let creating = started.elapsed();
    eprintln!("created {total} objects in {creating:.1?}; waiting for their status");

    let mut latencies: HashMap<String, Duration> = HashMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.timeout);
    while latencies.len() < total {
        match tokio::time::timeout_at(deadline, seen_rx.recv()).await {
            Ok(Some((key, at))) => {
                if let Some(created) = created_at.get(&key) {
                    latencies.entry(key).or_insert_with(|| at.saturating_duration_since(*created));
                }
            }
            Ok(None) => return Err("the watch ended"),
            Err(_) => {
                eprintln!(
                    "waited {}s: {} of {total} statuses observed their generation",
                    args.timeout,
                    latencies.len()
                );
                return Err("timed out waiting for status");
            }
        }
    }
    let converged = started.elapsed();
    watching.abort();
    check_children(cluster, args.count as usize, envoy_count as usize).await?;
    let metrics_converged = api_server_writes(&client).await;
    let operator_converged = operator_writes(cluster).await;

    // Other writers (the deployment controller finishing rollouts, the operator's status
    // following them) go on for a while: the idle window starts once the cluster is quiet.
    let quiet_after =
        wait_until_quiet(&client, Duration::from_secs(args.quiet), Duration::from_secs(args.timeout)).await;
    let metrics_quiet = api_server_writes(&client).await;
    let operator_quiet = operator_writes(cluster).await;
    eprintln!("converged; quiet after {quiet_after:.1?}; idling {}s (one resync period)", args.idle);
    tokio::time::sleep(Duration::from_secs(args.idle)).await;
    let metrics_idle = api_server_writes(&client).await;
    let operator_idle = operator_writes(cluster).await;

    let mut sorted: Vec<Duration> = latencies.values().copied().collect();
    sorted.sort();
    println!("reconcile benchmark: {} Foos, {envoy_count} Envoys", args.count);
    println!("| figure | value |");
    println!("|---|---|");
    println!("| created in | {creating:.2?} |");
    println!("| all statuses observed after | {converged:.2?} |");
    println!("| objects/s | {:.1} |", total as f64 / converged.as_secs_f64());
    for (label, p) in [("p50", 50.0), ("p99", 99.0), ("max", 100.0)] {
        let value = percentile(&sorted, p).map_or("-".to_owned(), |d| format!("{d:.2?}"));
        println!("| time-to-status {label} | {value} |");
    }
    match (&metrics_before, &metrics_converged) {
        (Ok(before), Ok(after)) => {
            let writes = difference(before, after);
            // The bench's own creates are not the operator's.
            let own = total as f64;
            let all: f64 = writes.values().sum();
            println!(
                "| write requests per object (cluster-wide, own creates excluded) | {:.2} |",
                (all - own) / total as f64
            );
            for ((verb, resource), count) in &writes {
                println!("| writes {verb} {resource} | {count} |");
            }
        }
        (Err(error), _) | (_, Err(error)) => {
            println!("| write requests per object | not exposed ({error}) |")
        }
    }
    match operator_converged {
        Ok(writes) => println!(
            "| the operator's own writes per object (its api_writes counter) | {:.2} |",
            writes / total as f64
        ),
        Err(error) => println!("| the operator's own writes | not read ({error}) |"),
    }
    println!("| cluster quiet after convergence | {quiet_after:.1?} |");
    match (&operator_quiet, &operator_idle) {
        (Ok(before), Ok(after)) => {
            println!("| the operator's own writes during {}s idle (goal 0) | {} |", args.idle, after - before)
        }
        (Err(error), _) | (_, Err(error)) => {
            println!("| the operator's own writes during idle | not read ({error}) |")
        }
    }
    match (&metrics_quiet, &metrics_idle) {
        (Ok(before), Ok(after)) => {
            let writes = difference(before, after);
            let all: f64 = writes.values().sum();
            println!("| all writers' writes during {}s idle (cluster-wide) | {all} |", args.idle);
            for ((verb, resource), count) in &writes {
                println!("| idle writes {verb} {resource} | {count} |");
            }
        }
        _ => println!("| writes during idle | not exposed |"),
    }
    let peak = std::fs::read_to_string("/proc/self/status").ok().and_then(|s| peak_rss_kib(&s));
    println!(
        "| peak RSS (bench + operator) | {} |",
        peak.map_or("unknown".to_owned(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
    );
    Ok(())
}

/// Waits until the API server records no write to the watched resources for `quiet` (or
/// `limit` passes); returns how long it waited.
async fn wait_until_quiet(client: &Client, quiet: Duration, limit: Duration) -> Duration {
    let started = Instant::now();
    let mut last = api_server_writes(client).await.ok();
    let mut still_since = Instant::now();
    while started.elapsed() < limit {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = api_server_writes(client).await.ok();
        if now.is_none() {
            break; // Not exposed: nothing to wait on.
        }
        if now != last {
            still_since = Instant::now();
            last = now;
        } else if still_since.elapsed() >= quiet {
            break;
        }
    }
    started.elapsed()
}

/// The writes the in-process operator has sent, from its own `/metrics`
/// (`envoy_operator_api_writes_total`, every kind and verb).
async fn operator_writes(cluster: &harness::Cluster) -> Result<f64, String> {
    let address =
        cluster.operator.lock().await.as_ref().map(|o| o.metrics).ok_or("no in-process operator")?;
    let mut stream = tokio::net::TcpStream::connect(address).await.map_err(|e| e.to_string())?;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: operator\r\n\r\n").await.map_err(|e| e.to_string())?;
    let mut text = String::new();
    stream.read_to_string(&mut text).await.map_err(|e| e.to_string())?;
    Ok(sum_of(&text, "envoy_operator_api_writes_total"))
}

/// The sum of every sample of a metric family in a text exposition.
fn sum_of(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|line| line.strip_prefix(name).is_some_and(|rest| rest.starts_with(['{', ' '])))
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// Every Foo has its Deployment; every Envoy its ConfigMap, Deployment and Service.
async fn check_children(cluster: &harness::Cluster, foos: usize, envoys: usize) -> Result<(), &'static str> {
    let deployments = cluster.api::<Deployment>().list_metadata(&ListParams::default()).await;
    let config_maps = cluster
        .api::<ConfigMap>()
        .list_metadata(&ListParams::default().labels("app.kubernetes.io/managed-by=envoy-operator"))
        .await;
    let services = cluster
        .api::<Service>()
        .list_metadata(&ListParams::default().labels("app.kubernetes.io/managed-by=envoy-operator"))
        .await;
    match (deployments, config_maps, services) {
        (Ok(d), Ok(c), Ok(s))
            if d.items.len() == foos + envoys && c.items.len() == envoys && s.items.len() == envoys =>
        {
            Ok(())
        }
        (Ok(d), Ok(c), Ok(s)) => {
            eprintln!(
                "children: {} Deployments (want {}), {} ConfigMaps and {} Services (want {envoys})",
                d.items.len(),
                foos + envoys,
                c.items.len(),
                s.items.len()
            );
            Err("children missing")
        }
        _ => Err("listing children failed"),
    }
}

/// Write requests by `(verb, resource[/subresource])` from `apiserver_request_total`.
type Writes = BTreeMap<(String, String), f64>;

async fn api_server_writes(client: &Client) -> Result<Writes, String> {
    let request = http::Request::get("/metrics").body(Vec::new()).map_err(|e| e.to_string())?;
    let text = client.request_text(request).await.map_err(|e| e.to_string())?;
    let writes = parse_writes(&text);
    if writes.is_empty() && !text.contains("apiserver_request_total") {
        return Err("no apiserver_request_total in /metrics".to_owned());
    }
    Ok(writes)
}

/// The resources the operator (or the bench) writes. Not `leases`: every node and every
/// leader-elected component renews one every few seconds, which would drown the rest.
const WATCHED_RESOURCES: [&str; 6] = ["foos", "envoys", "deployments", "configmaps", "services", "events"];
const WRITE_VERBS: [&str; 5] = ["POST", "PUT", "PATCH", "DELETE", "APPLY"];

/// Sums `apiserver_request_total` over codes and versions for write verbs on the operator's
/// resources. Prometheus text format: `name{label="value",...} number`.
fn parse_writes(text: &str) -> Writes {
    let mut writes = Writes::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else { continue };
        let Some((labels, value)) = rest.rsplit_once('}') else { continue };
        let Ok(value) = value.split_whitespace().next().unwrap_or_default().parse::<f64>() else {
            continue;
        };
        let labels = parse_labels(labels);
        let (Some(verb), Some(resource)) = (labels.get("verb"), labels.get("resource")) else { continue };
        if !WRITE_VERBS.contains(&verb.as_str()) || !WATCHED_RESOURCES.contains(&resource.as_str()) {
            continue;
        }
        if labels.get("dry_run").is_some_and(|d| !d.is_empty()) {
            continue;
        }
        let resource = match labels.get("subresource").filter(|s| !s.is_empty()) {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource.clone(),
        };
        *writes.entry((verb.clone(), resource)).or_default() += value;
    }
    writes
}

/// `a="x",b="y\"z"` -> {a: x, b: y"z}.
fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut chars = text.chars().peekable();
    loop {
        let key: String = chars
            .by_ref()
            .take_while(|c| *c != '=')
            .collect::<String>()
            .trim_start_matches(',')
            .trim()
            .to_owned();
        if key.is_empty() || chars.next() != Some('"') {
            break;
        }
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(other) => value.push(other),
                    None => break,
                },
                '"' => break,
                c => value.push(c),
            }
        }
        labels.insert(key, value);
    }
    labels
}

/// What changed between two readings (counters only grow; a restart of the API server
/// resets them, read as no change).
fn difference(before: &Writes, after: &Writes) -> Writes {
    after
        .iter()
        .filter_map(|(key, now)| {
            let delta = now - before.get(key).copied().unwrap_or(0.0);
            (delta > 0.0).then(|| (key.clone(), delta))
        })
        .collect()
}

/// The nearest-rank percentile of sorted values (`p` in 0..=100).
fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// `VmHWM` (peak resident set) in KiB from `/proc/self/status`.
fn peak_rss_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let ms = |v: u64| Duration::from_millis(v);
        let sorted: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(percentile(&sorted, 50.0), Some(ms(50)));
        assert_eq!(percentile(&sorted, 99.0), Some(ms(99)));
        assert_eq!(percentile(&sorted, 100.0), Some(ms(100)));
        assert_eq!(percentile(&sorted, 0.0), Some(ms(1)));
        assert_eq!(percentile(&[ms(7)], 99.0), Some(ms(7)));
        assert_eq!(percentile(&[ms(1), ms(2), ms(3)], 50.0), Some(ms(2)));
        assert_eq!(percentile(&[], 50.0), None);
    }

    const METRICS: &str = r#"# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="POST",version="v1"} 12
apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="APPLY",version="v1"} 3
apiserver_request_total{code="409",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="APPLY",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="samplecontroller.k8s.io",resource="foos",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 5
apiserver_request_total{code="201",component="apiserver",dry_run="All",group="samplecontroller.k8s.io",resource="foos",scope="resource",subresource="",verb="POST",version="v1alpha1"} 9
apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="deployments",scope="namespace",subresource="",verb="LIST",version="v1"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 8
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="PUT",version="v1"} 2.5e+01
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 900
"#;

    #[test]
    fn counts_writes_to_the_operators_resources_only() {
        let writes = parse_writes(METRICS);
        let get = |verb: &str, resource: &str| writes.get(&(verb.to_owned(), resource.to_owned())).copied();
        assert_eq!(get("POST", "deployments"), Some(12.0));
        assert_eq!(get("APPLY", "deployments"), Some(4.0), "summed over codes");
        assert_eq!(get("PATCH", "foos/status"), Some(5.0));
        assert_eq!(get("PUT", "configmaps"), Some(25.0));
        assert_eq!(get("POST", "foos"), None, "dry runs are not writes");
        assert_eq!(get("LIST", "deployments"), None, "reads are not writes");
        assert_eq!(get("POST", "pods"), None, "not the operator's resource");
        assert_eq!(get("PUT", "leases"), None, "lease renewals are not reconcile writes");
        assert_eq!(writes.len(), 4);
    }

    #[test]
    fn labels_with_escapes_and_differences() {
        let labels = parse_labels(r#"a="x",b="y\"z,w",c="""#);
        assert_eq!(labels.get("a").map(String::as_str), Some("x"));
        assert_eq!(labels.get("b").map(String::as_str), Some("y\"z,w"));
        assert_eq!(labels.get("c").map(String::as_str), Some(""));
        let before = parse_writes(METRICS);
        let mut after = before.clone();
        *after.get_mut(&("PATCH".to_owned(), "foos/status".to_owned())).unwrap() += 2.0;
        let delta = difference(&before, &after);
        assert_eq!(
            delta.into_iter().collect::<Vec<_>>(),
            [(("PATCH".to_owned(), "foos/status".to_owned()), 2.0)]
        );
        assert!(difference(&before, &before).is_empty(), "no change, nothing reported");
    }

    #[test]
    fn sums_a_family_of_samples() {
        let text = "# TYPE envoy_operator_api_writes_total counter\nenvoy_operator_api_writes_total{kind=\"Deployment\",verb=\"apply\"} 3\nenvoy_operator_api_writes_total{kind=\"Foo\",verb=\"apply_status\"} 2\nenvoy_operator_api_writes_totally 9\n";
        assert_eq!(sum_of(text, "envoy_operator_api_writes_total"), 5.0);
    }

    #[test]
    fn peak_rss_from_proc_status() {
        let status = "Name:\tbench\nVmPeak:\t  300000 kB\nVmHWM:\t   51234 kB\nVmRSS:\t   40000 kB\n";
        assert_eq!(peak_rss_kib(status), Some(51234));
        assert_eq!(peak_rss_kib("Name:\tx\n"), None);
    }
}
