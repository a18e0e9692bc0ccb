use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest as Request, DeltaDiscoveryResponse as Response,
};
use tokio_util::sync::CancellationToken;
use tonic::Code;

use super::cache::FleetKey;
use super::metrics::{NoMetrics, XdsMetrics};
use super::resource::type_url::{CLUSTER, ENDPOINT, LISTENER, ROUTE};
use super::service::AdsConfig;
use super::tracker::Protocol;
use super::{
    Client, FLEET, Fixture, OTHER_FLEET, decode, fixture, fixture_configured, fixture_with, nack_detail,
    node, snapshot, two_clusters_routing_to,
};
use envoy_operator_testkit::xds::resources::{prefix_route, regex_route};

type Envoy = Client<Request, Response>;

fn open(fixture: &Fixture) -> Envoy {
    Client::open(|requests| fixture.service.open_delta(requests, None))
}

fn request(type_url: &str) -> Request {
    Request { type_url: type_url.into(), ..Default::default() }
}

/// The first request of a stream, carrying the node.
fn hello(type_url: &str, node_id: &str, fleet: &str) -> Request {
    Request { node: node(node_id, fleet), ..request(type_url) }
}

fn subscribe(type_url: &str, names: &[&str]) -> Request {
    Request {
        resource_names_subscribe: names.iter().map(|name| name.to_string()).collect(),
        ..request(type_url)
    }
}

fn unsubscribe(type_url: &str, names: &[&str]) -> Request {
    Request {
        resource_names_unsubscribe: names.iter().map(|name| name.to_string()).collect(),
        ..request(type_url)
    }
}

fn ack(response: &Response) -> Request {
    Request { response_nonce: response.nonce.clone(), ..request(&response.type_url) }
}

fn nack(response: &Response, message: &str) -> Request {
    Request { error_detail: nack_detail(message), ..ack(response) }
}

fn names(response: &Response) -> Vec<&str> {
    let mut names: Vec<&str> = response.resources.iter().map(|resource| resource.name.as_str()).collect();
    names.sort();
    names
}

fn versions(response: &Response) -> HashMap<String, String> {
    response.resources.iter().map(|resource| (resource.name.clone(), resource.version.clone())).collect()
}

/// The path prefix and cluster of the first route of a route configuration response.
fn first_route(response: &Response) -> (String, String) {
    let config: RouteConfiguration = decode(response.resources[0].resource.as_ref().expect("a resource"));
    let route = &config.virtual_hosts[0].routes[0];
    let Some(envoy_types::pb::envoy::config::route::v3::route::Action::Route(action)) = &route.action else {
        panic!("not a route action")
    };
    let cluster = match &action.cluster_specifier {
        Some(envoy_types::pb::envoy::config::route::v3::route_action::ClusterSpecifier::Cluster(name)) => {
            name.clone()
        }
        other => panic!("unexpected cluster specifier {other:?}"),
    };
    let prefix = match route.r#match.as_ref().and_then(|m| m.path_specifier.as_ref()) {
        Some(PathSpecifier::Prefix(prefix)) => prefix.clone(),
        other => panic!("unexpected path specifier {other:?}"),
    };
    (prefix, cluster)
}

fn endpoint_ports(response: &Response) -> Vec<u32> {
    let assignment: ClusterLoadAssignment =
        decode(response.resources[0].resource.as_ref().expect("a resource"));
    let endpoints = assignment.endpoints.iter().flat_map(|locality| &locality.lb_endpoints);
    endpoints
        .filter_map(|endpoint| match &endpoint.host_identifier {
            Some(HostIdentifier::Endpoint(endpoint)) => endpoint.address.clone(),
            _ => None,
        })
        .filter_map(|address| match address.address {
            Some(envoy_types::pb::envoy::config::core::v3::address::Address::SocketAddress(socket)) => {
                match socket.port_specifier {
                    Some(
                        envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier::PortValue(
                            port,
                        ),
                    ) => Some(port),
                    _ => None,
                }
            }
            _ => None,
        })
        .collect()
}

fn fleet_status(fixture: &Fixture) -> super::tracker::FleetStatus {
    fixture.tracker.fleet_status(&FleetKey::from(FLEET))
}

/// What a synced proxy received, one response per type.
struct Synced {
    clusters: Response,
    endpoints: Response,
    listeners: Response,
    routes: Response,
}

/// Connects like Envoy does (CDS, then EDS for the clusters, then LDS, then RDS for the
/// listener's routes), ACKing everything.
async fn sync(envoy: &mut Envoy, node_id: &str) -> Synced {
    envoy.send(hello(CLUSTER, node_id, FLEET));
    let clusters = envoy.next().await;
    envoy.send(subscribe(ENDPOINT, &names(&clusters)));
    envoy.send(ack(&clusters));
    let endpoints = envoy.next().await;
    envoy.send(ack(&endpoints));
    envoy.send(request(LISTENER));
    let listeners = envoy.next().await;
    envoy.send(subscribe(ROUTE, &["routes"]));
    envoy.send(ack(&listeners));
    let routes = envoy.next().await;
    envoy.send(ack(&routes));
    envoy.assert_silent().await;
    Synced { clusters, endpoints, listeners, routes }
}

#[tokio::test(start_paused = true)]
async fn a_new_proxy_gets_clusters_and_endpoints_before_listeners_and_routes() {
    let fixture = fixture();
    let version = fixture.cache.set(FLEET, two_clusters_routing_to("a"));
    let mut envoy = open(&fixture);

    envoy.send(hello(CLUSTER, "pod-0", FLEET));
    // Asked early on purpose: listeners must wait until the clusters are warm.
    envoy.send(request(LISTENER));
    let clusters = envoy.next().await;
    assert_eq!((clusters.type_url.as_str(), names(&clusters)), (CLUSTER, vec!["a", "b"]));
    assert_eq!(clusters.system_version_info, version);
    envoy.assert_silent().await;

    envoy.send(subscribe(ENDPOINT, &["a", "b"]));
    envoy.send(ack(&clusters));
    let endpoints = envoy.next().await;
    assert_eq!((endpoints.type_url.as_str(), names(&endpoints)), (ENDPOINT, vec!["a", "b"]));
    envoy.assert_silent().await;

    envoy.send(ack(&endpoints));
    let listeners = envoy.next().await;
    assert_eq!((listeners.type_url.as_str(), names(&listeners)), (LISTENER, vec!["http"]));
    envoy.send(subscribe(ROUTE, &["routes"]));
    envoy.send(ack(&listeners));
    let routes = envoy.next().await;
    assert_eq!((routes.type_url.as_str(), names(&routes)), (ROUTE, vec!["routes"]));
    envoy.assert_silent().await;
    assert_eq!(fleet_status(&fixture).acked_version, None, "routes are not ACKed yet");

    envoy.send(ack(&routes));
    envoy.assert_silent().await;
    let status = fleet_status(&fixture);
    assert_eq!(status.acked_version.as_deref(), Some(version.as_str()));
    assert_eq!(status.proxies.len(), 1);
    assert_eq!(status.proxies[0].node_id, "pod-0");
    assert_eq!(status.proxies[0].types[ROUTE].acked_version.as_deref(), Some(version.as_str()));
}

#[tokio::test(start_paused = true)]
async fn a_route_change_sends_only_the_route_configuration() {
    let fixture = fixture();
    fixture.cache.set(FLEET, two_clusters_routing_to("a"));
    let mut envoy = open(&fixture);
    sync(&mut envoy, "pod-0").await;

    let version = fixture.cache.set(FLEET, two_clusters_routing_to("b"));
    let routes = envoy.next().await;
    assert_eq!(routes.type_url, ROUTE);
    assert_eq!(routes.system_version_info, version);
    assert_eq!(first_route(&routes), ("/".to_string(), "b".to_string()));
    assert!(routes.removed_resources.is_empty());
    envoy.send(ack(&routes));
    envoy.assert_silent().await;
    assert_eq!(fleet_status(&fixture).acked_version.as_deref(), Some(version.as_str()));
}

#[tokio::test(start_paused = true)]
async fn a_nack_is_reported_verbatim_and_not_retried_until_the_snapshot_changes() {
    let fixture = fixture();
    let good = fixture.cache.set(FLEET, two_clusters_routing_to("a"));
    let mut envoy = open(&fixture);
    sync(&mut envoy, "pod-0").await;

    let bad = fixture.cache.set(FLEET, snapshot(vec![regex_route("(", "a")], &[("a", 1), ("b", 2)]));
    let routes = envoy.next().await;
    let message = "Proto constraint validation failed: missing ): (";
    envoy.send(nack(&routes, message));
    envoy.assert_silent().await;
    let status = fleet_status(&fixture);
    let rejection = status.last_nack.expect("a standing NACK");
    assert_eq!((rejection.node_id.as_str(), rejection.type_url.as_str()), ("pod-0", ROUTE));
    assert_eq!((rejection.nack.version.as_str(), rejection.nack.message.as_str()), (bad.as_str(), message));
    assert_eq!(status.acked_version, Some(good.clone()), "the proxy still runs {good}, not {bad}");
    assert_eq!(status.proxies[0].types[ROUTE].acked_version.as_deref(), Some(good.as_str()));

    let fixed = fixture.cache.set(FLEET, two_clusters_routing_to("b"));
    let routes = envoy.next().await;
    assert_eq!(first_route(&routes).1, "b");
    envoy.send(ack(&routes));
    envoy.assert_silent().await;
    let status = fleet_status(&fixture);
    assert_eq!(status.last_nack, None);
    assert_eq!(status.acked_version.as_deref(), Some(fixed.as_str()));
}

#[tokio::test(start_paused = true)]
async fn a_new_cluster_is_warm_before_routes_use_it_and_the_old_one_goes_last() {
    let fixture = fixture();
    fixture.cache.set(FLEET, two_clusters_routing_to("a"));
    let mut envoy = open(&fixture);
    sync(&mut envoy, "pod-0").await;

    // Cluster a is replaced by c, and the route moves from a to c.
    let version = fixture.cache.set(FLEET, snapshot(vec![prefix_route("/", "c")], &[("b", 2), ("c", 3)]));
    let clusters = envoy.next().await;
    assert_eq!((clusters.type_url.as_str(), names(&clusters)), (CLUSTER, vec!["c"]));
    assert!(clusters.removed_resources.is_empty(), "a is still routed to");
    envoy.assert_silent().await;

    envoy.send(subscribe(ENDPOINT, &["c"]));
    envoy.send(ack(&clusters));
    let endpoints = envoy.next().await;
    assert_eq!((endpoints.type_url.as_str(), names(&endpoints)), (ENDPOINT, vec!["c"]));
    envoy.assert_silent().await;

    envoy.send(ack(&endpoints));
    let routes = envoy.next().await;
    assert_eq!(first_route(&routes).1, "c");
    envoy.assert_silent().await;

    envoy.send(ack(&routes));
    let removal = envoy.next().await;
    assert_eq!(removal.type_url, CLUSTER);
    assert!(removal.resources.is_empty());
    assert_eq!(removal.removed_resources, ["a"]);
    envoy.send(unsubscribe(ENDPOINT, &["a"]));
    envoy.send(ack(&removal));
    envoy.assert_silent().await;
    assert_eq!(fleet_status(&fixture).acked_version.as_deref(), Some(version.as_str()));
}

#[tokio::test(start_paused = true)]
async fn a_reconnecting_proxy_gets_only_what_changed_meanwhile() {
    let fixture = fixture();
    fixture.cache.set(FLEET, two_clusters_routing_to("a"));
    let mut envoy = open(&fixture);
    let had = sync(&mut envoy, "pod-0").await;
    envoy.hang_up();

    let version = fixture.cache.set(FLEET, two_clusters_routing_to("b"));
    let mut envoy = open(&fixture);
    envoy.send(Request {
        initial_resource_versions: versions(&had.clusters),
        ..hello(CLUSTER, "pod-0", FLEET)
    });
    let clusters = envoy.next().await;
    assert!(clusters.resources.is_empty() && clusters.removed_resources.is_empty(), "{clusters:?}");
    envoy.send(Request {
        initial_resource_versions: versions(&had.endpoints),
        ..subscribe(ENDPOINT, &["a", "b"])
    });
    envoy.send(ack(&clusters));
    envoy.assert_silent().await;

    envoy.send(Request { initial_resource_versions: versions(&had.listeners), ..request(LISTENER) });
    let listeners = envoy.next().await;
    assert!(listeners.resources.is_empty() && listeners.removed_resources.is_empty(), "{listeners:?}");
    envoy.send(Request { initial_resource_versions: versions(&had.routes), ..subscribe(ROUTE, &["routes"]) });
    envoy.send(ack(&listeners));
    let routes = envoy.next().await;
    assert_eq!(first_route(&routes).1, "b");
    envoy.send(ack(&routes));
    envoy.assert_silent().await;
    assert_eq!(fleet_status(&fixture).acked_version.as_deref(), Some(version.as_str()));
}

#[tokio::test(start_paused = true)]
async fn a_busy_stream_sends_only_the_newest_snapshot() {
    let fixture = fixture();
    fixture.cache.set(FLEET, two_clusters_routing_to("a"));
    let mut envoy = open(&fixture);
    sync(&mut envoy, "pod-0").await;

    let route = |i: usize| snapshot(vec![prefix_route(&format!("/{i}"), "a")], &[("a", 1), ("b", 2)]);
    // Fifty changes before the stream task gets to run.
    for i in 0..50 {
        fixture.cache.set(FLEET, route(i));
    }
    let routes = envoy.next().await;
    assert_eq!(first_route(&routes).0, "/49");
    // Two more while the proxy has not answered: nothing until it does, then only the last.
    fixture.cache.set(FLEET, route(50));
    let newest = fixture.cache.set(FLEET, route(51));
    envoy.assert_silent().await;
    envoy.send(ack(&routes));
    let routes = envoy.next().await;
    assert_eq!(first_route(&routes).0, "/51");
    assert_eq!(routes.system_version_info, newest);
    envoy.send(ack(&routes));
    envoy.assert_silent().await;
}

#[tokio::test(start_paused = true)]
async fn subscriptions_follow_subscribe_and_unsubscribe_and_absence_is_reported() {
    let fixture = fixture();
    fixture.cache.set(FLEET, two_clusters_routing_to("a"));
    let mut envoy = open(&fixture);
    sync(&mut envoy, "pod-0").await;

    envoy.send(unsubscribe(ENDPOINT, &["b"]));
    envoy.assert_silent().await;
    fixture.cache.set(FLEET, snapshot(vec![prefix_route("/", "a")], &[("a", 1), ("b", 22)]));
    envoy.assert_silent().await;

    envoy.send(subscribe(ENDPOINT, &["b"]));
    let endpoints = envoy.next().await;
    assert_eq!(names(&endpoints), ["b"]);
    assert_eq!(endpoint_ports(&endpoints), [22]);
    envoy.send(ack(&endpoints));

    envoy.send(subscribe(ENDPOINT, &["missing"]));
    let absent = envoy.next().await;
    assert!(absent.resources.is_empty());
    assert_eq!(absent.removed_resources, ["missing"]);
    envoy.send(ack(&absent));
    envoy.assert_silent().await;
}

#[tokio::test(start_paused = true)]
async fn a_stream_gets_only_its_own_fleet() {
    let fixture = fixture();
    fixture.cache.set(FLEET, two_clusters_routing_to("a"));
    fixture.cache.set(OTHER_FLEET, snapshot(vec![prefix_route("/", "z")], &[("z", 9)]));
    let mut other = open(&fixture);
    other.send(hello(CLUSTER, "pod-9", OTHER_FLEET));
    assert_eq!(names(&other.next().await), ["z"]);
    let mut envoy = open(&fixture);
    envoy.send(hello(CLUSTER, "pod-0", FLEET));
    assert_eq!(names(&envoy.next().await), ["a", "b"]);
}

#[tokio::test(start_paused = true)]
async fn refused_and_malformed_streams_end_with_a_clear_status() {
    let fixture = fixture();
    fixture.cache.set(FLEET, two_clusters_routing_to("a"));

    let mut stranger = open(&fixture);
    stranger.send(hello(CLUSTER, "pod-x", "ns/unknown"));
    let status = stranger.failure().await;
    assert_eq!(status.code(), Code::PermissionDenied);
    assert_eq!(status.message(), "node pod-x claims unknown fleet \"ns/unknown\"");

    let mut anonymous = open(&fixture);
    anonymous.send(request(CLUSTER));
    let status = anonymous.failure().await;
    assert_eq!(
        (status.code(), status.message()),
        (Code::InvalidArgument, "the first request of a stream must carry the node")
    );

    let mut untyped = open(&fixture);
    untyped.send(hello("", "pod-0", FLEET));
    assert_eq!(untyped.failure().await.code(), Code::InvalidArgument);

    let mut greedy = open(&fixture);
    greedy.send(hello(CLUSTER, "pod-0", FLEET));
    greedy.next().await;
    let names: Vec<String> = (0..=super::plan::MAX_SUBSCRIBED_BYTES / super::plan::ENTRY_OVERHEAD_BYTES)
        .map(|i| i.to_string())
        .collect();
    greedy.send(Request { resource_names_subscribe: names, ..request(ENDPOINT) });
    assert_eq!(greedy.failure().await.code(), Code::ResourceExhausted);
    greedy.assert_ended().await;
    assert!(fleet_status(&fixture).proxies.is_empty());
}

#[tokio::test(start_paused = true)]
async fn shutting_down_ends_streams_with_unavailable() {
    let fixture = fixture();
    fixture.cache.set(FLEET, two_clusters_routing_to("a"));
    let shutdown = CancellationToken::new();
    let service = fixture.service.with_shutdown(shutdown.clone());
    let mut envoy = Client::open(|requests| service.open_delta(requests, None));
    envoy.send(hello(CLUSTER, "pod-0", FLEET));
    envoy.next().await;
    assert_eq!(fleet_status(&fixture).proxies.len(), 1);
    shutdown.cancel();
    assert_eq!(envoy.failure().await.code(), Code::Unavailable);
    envoy.assert_ended().await;
    let status = fleet_status(&fixture);
    assert!(status.proxies.is_empty());
    assert_eq!(status.recent_disconnects[0].node_id, "pod-0");
}

#[tokio::test(start_paused = true)]
async fn a_proxy_that_stops_reading_holds_up_nobody() {
    let fixture = fixture();
    fixture.cache.set(FLEET, two_clusters_routing_to("a"));
    let mut stuck = open(&fixture);
    stuck.send(hello(CLUSTER, "pod-stuck", FLEET));
    let mut envoy = open(&fixture);
    sync(&mut envoy, "pod-0").await;

    let mut newest = String::new();
    for i in 0..100 {
        newest = fixture
            .cache
            .set(FLEET, snapshot(vec![prefix_route(&format!("/{i}"), "a")], &[("a", 1), ("b", 2)]));
        let routes = envoy.next().await;
        assert_eq!(routes.system_version_info, newest);
        envoy.send(ack(&routes));
    }
    envoy.assert_silent().await;
    let status = fleet_status(&fixture);
    let healthy = status.proxies.iter().find(|proxy| proxy.node_id == "pod-0").expect("pod-0");
    assert_eq!(healthy.applied_version.as_deref(), Some(newest.as_str()));
    // All the stuck proxy has waiting for it: its one unanswered response.
    assert_eq!(stuck.next().await.type_url, CLUSTER);
    stuck.assert_silent().await;
}

#[tokio::test(start_paused = true)]
async fn a_stream_whose_queue_is_full_sends_once_its_client_takes_a_response() {
    let config = AdsConfig { response_buffer: 1, ..AdsConfig::default() };
    let fixture = fixture_configured(Arc::new(NoMetrics), config);
    fixture.cache.set(FLEET, two_clusters_routing_to("a"));

    // The clusters fill the queue; the endpoints, planned before the client reads, wait.
    let mut envoy = open(&fixture);
    envoy.send(hello(CLUSTER, "pod-0", FLEET));
    envoy.send(subscribe(ENDPOINT, &["a", "b"]));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(envoy.next().await.type_url, CLUSTER);
    assert_eq!(envoy.next().await.type_url, ENDPOINT);

    // A stream waiting for room ends when the server stops: what was queued is delivered, and
    // the status that would not fit is not waited for.
    let shutdown = CancellationToken::new();
    let service = fixture.service.with_shutdown(shutdown.clone());
    let mut waiting = Client::open(|requests| service.open_delta(requests, None));
    waiting.send(hello(CLUSTER, "pod-1", FLEET));
    waiting.send(subscribe(ENDPOINT, &["a", "b"]));
    tokio::time::sleep(Duration::from_secs(1)).await;
    shutdown.cancel();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        fleet_status(&fixture).proxies.iter().all(|proxy| proxy.node_id != "pod-1"),
        "the stream waiting for room ended with the server"
    );
    assert_eq!(waiting.next().await.type_url, CLUSTER);
    waiting.assert_ended().await;
}

/// Counts the metrics hooks' calls.
#[derive(Default)]
struct Counting {
    opened: AtomicUsize,
    closed: AtomicUsize,
    refused: AtomicUsize,
    sent: AtomicUsize,
    acked: AtomicUsize,
    nacked: AtomicUsize,
    applied: AtomicUsize,
}

impl XdsMetrics for Counting {
    fn stream_opened(&self, _: &FleetKey, protocol: Protocol) {
        assert_eq!(protocol, Protocol::Delta);
        self.opened.fetch_add(1, Ordering::Relaxed);
    }
    fn stream_closed(&self, _: &FleetKey, _: Protocol) {
        self.closed.fetch_add(1, Ordering::Relaxed);
    }
    fn stream_refused(&self, code: Code) {
        assert_eq!(code, Code::PermissionDenied);
        self.refused.fetch_add(1, Ordering::Relaxed);
    }
    fn response_sent(&self, _: &FleetKey, _: &str, _: Duration) {
        self.sent.fetch_add(1, Ordering::Relaxed);
    }
    fn response_acked(&self, _: &FleetKey, _: &str, _: Duration) {
        self.acked.fetch_add(1, Ordering::Relaxed);
    }
    fn response_nacked(&self, _: &FleetKey, type_url: &str) {
        assert_eq!(type_url, ROUTE);
        self.nacked.fetch_add(1, Ordering::Relaxed);
    }
    fn snapshot_applied(&self, _: &FleetKey, _: Duration) {
        self.applied.fetch_add(1, Ordering::Relaxed);
    }
}

#[tokio::test(start_paused = true)]
async fn metrics_hooks_see_streams_responses_and_answers() {
    let metrics = Arc::new(Counting::default());
    let fixture = fixture_with(metrics.clone());
    fixture.cache.set(FLEET, two_clusters_routing_to("a"));
    let mut envoy = open(&fixture);
    sync(&mut envoy, "pod-0").await;
    fixture.cache.set(FLEET, snapshot(vec![regex_route("(", "a")], &[("a", 1), ("b", 2)]));
    let routes = envoy.next().await;
    envoy.send(nack(&routes, "missing ): ("));
    envoy.assert_silent().await;
    let mut stranger = open(&fixture);
    stranger.send(hello(CLUSTER, "pod-x", "ns/unknown"));
    stranger.failure().await;
    envoy.hang_up();
    // Time only moves on once every task is idle: the stream task has then ended.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let count = |counter: &AtomicUsize| counter.load(Ordering::Relaxed);
    assert_eq!((count(&metrics.opened), count(&metrics.closed), count(&metrics.refused)), (1, 1, 1));
    assert_eq!((count(&metrics.sent), count(&metrics.acked), count(&metrics.nacked)), (5, 4, 1));
    assert_eq!(count(&metrics.applied), 1);
}
