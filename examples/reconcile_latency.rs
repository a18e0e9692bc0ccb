//! How long the reconcilers take to bring new Foos to their Deployment and status when every
//! request costs an API server's round trip, without a cluster: `controller::run` (what
//! `envoy-operator controller` runs) against the in-memory API server answering each request
//! after `--latency-ms` (watches stream at once).
//!
//! ```sh
//! cargo run --release --example reconcile_latency -- --foos 300 --latency-ms 5
//! ```
//!
//! Starts the controllers, waits until they have listed, creates `--foos` Foos at once, and
//! reports the time until every Foo's status says `observedGeneration: 1` with its Deployment
//! there, and the requests the reconcilers made per Foo by verb. The figure is for comparing
//! versions of the code on one machine; a real API server adds its own queueing.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use clap::Parser;
use envoy_operator::controller::{self, ControllerConfig};
use envoy_operator_testkit::fake_api::FakeApi;
use serde_json::json;

#[derive(Parser, Debug)]
#[command(about = "Reconcile time for new Foos against the in-memory API server with a per-request latency")]
struct Args {
    /// Foos to create.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u32).range(1..=5000))]
    foos: u32,
    /// Milliseconds every request but a watch takes.
    #[arg(long, default_value_t = 5)]
    latency_ms: u64,
    /// Reconciles running at once per kind (the controller's `--concurrency`).
    #[arg(long, default_value_t = 4)]
    concurrency: u16,
    /// Seconds to wait for every status before giving up.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
}

const NAMESPACE: &str = "bench";

fn foo_path(name: &str) -> String {
    format!("/apis/samplecontroller.k8s.io/v1alpha1/namespaces/{NAMESPACE}/foos/{name}")
}

fn deployment_path(name: &str) -> String {
    format!("/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}")
}

fn converged(api: &FakeApi, count: u32) -> bool {
    (0..count).all(|i| {
        let name = format!("foo-{i}");
        let observed = api.get(&foo_path(&name)).is_some_and(|foo| foo["status"]["observedGeneration"] == 1);
        observed && api.get(&deployment_path(&format!("web-{i}"))).is_some()
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let api = FakeApi::new();
    api.set_latency(Duration::from_millis(args.latency_ms));
    let config = ControllerConfig {
        namespace: Some(NAMESPACE.to_owned()),
        concurrency: args.concurrency,
        ..ControllerConfig::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controllers = tokio::spawn(controller::run(
        api.client(),
        config,
        async {
            let _ = stopped.await;
        },
        |ctx| ctx,
    ));
    // Listed: no new request for half a second (every watch started after its list).
    let started = Instant::now();
    let mut seen = (0, Instant::now());
    while seen.0 == 0 || seen.1.elapsed() < Duration::from_millis(500) {
        if started.elapsed() > Duration::from_secs(30) {
            return Err("the controllers never settled".into());
        }
        let requests = api.requests().len();
        if requests != seen.0 {
            seen = (requests, Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before = api.requests().len();

    let created = Instant::now();
    for i in 0..args.foos {
        let name = format!("foo-{i}");
        api.put(
            &foo_path(&name),
            json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
                   "metadata": {"name": name, "namespace": NAMESPACE, "uid": format!("uid-{i}"), "generation": 1},
                   "spec": {"deploymentName": format!("web-{i}"), "replicas": 1}}),
        );
    }
    let deadline = created + Duration::from_secs(args.timeout);
    while !converged(&api, args.foos) {
        if Instant::now() > deadline {
            return Err(format!("not every Foo converged within {} s", args.timeout).into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = created.elapsed();
    let mut verbs = BTreeMap::<String, usize>::new();
    for request in &api.requests()[before..] {
        *verbs.entry(format!("{} {}", request.method, request.target.resource)).or_default() += 1;
    }
    let _ = stop.send(());
    controllers.await??;

    println!(
        "{} Foos, {} ms per request, concurrency {}: every Deployment and status in {:.2} s ({:.0} Foos/s)",
        args.foos,
        args.latency_ms,
        args.concurrency,
        took.as_secs_f64(),
        f64::from(args.foos) / took.as_secs_f64()
    );
    for (verb, count) in verbs {
        println!("  {verb}: {count} ({:.2} per Foo)", count as f64 / f64::from(args.foos));
    }
    Ok(())
}
