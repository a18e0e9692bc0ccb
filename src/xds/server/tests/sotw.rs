use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::service::discovery::v3::{
    DiscoveryRequest as Request, DiscoveryResponse as Response,
};

use super::cache::FleetKey;
use super::resource::type_url::{CLUSTER, ENDPOINT, LISTENER, ROUTE};
use super::{Client, FLEET, Fixture, decode, fixture, nack_detail, node, snapshot, two_clusters_routing_to};
use envoy_operator_testkit::xds::resources::prefix_route;

type Envoy = Client<Request, Response>;

fn open(fixture: &Fixture) -> Envoy {
    Client::open(|requests| fixture.service.open_sotw(requests, None))
}

fn request(type_url: &str, names: &[&str]) -> Request {
    Request {
        type_url: type_url.into(),
        resource_names: names.iter().map(|name| name.to_string()).collect(),
        ..Default::default()
    }
}

/// A request that ACKs `response` and keeps (or changes) the subscription to `names`.
fn ack(response: &Response, names: &[&str]) -> Request {
    Request {
        version_info: response.version_info.clone(),
        response_nonce: response.nonce.clone(),
        ..request(&response.type_url, names)
    }
}

fn names(response: &Response) -> Vec<String> {
    assert_eq!(response.type_url, CLUSTER, "{response:?}");
    response.resources.iter().map(|any| decode::<Cluster>(any).name).collect()
}

fn fleet_status(fixture: &Fixture) -> super::tracker::FleetStatus {
    fixture.tracker.fleet_status(&FleetKey::from(FLEET))
}

/// Connects like Envoy does with `GRPC` ADS, ACKing everything.
async fn sync(envoy: &mut Envoy) {
    envoy.send(Request { node: node("pod-0", FLEET), ..request(CLUSTER, &[]) });
    let clusters = envoy.next().await;
    envoy.send(request(ENDPOINT, &["a", "b"]));
    envoy.send(ack(&clusters, &[]));
    let endpoints = envoy.next().await;
    envoy.send(ack(&endpoints, &["a", "b"]));
    envoy.send(request(LISTENER, &[]));
    let listeners = envoy.next().await;
    envoy.send(request(ROUTE, &["routes"]));
    envoy.send(ack(&listeners, &[]));
    let routes = envoy.next().await;
    envoy.send(ack(&routes, &["routes"]));
    envoy.assert_silent().await;
}

#[tokio::test(start_paused = true)]
async fn a_proxy_syncs_in_order_and_full_state_types_carry_every_resource() {
    let fixture = fixture();
    let version = fixture.cache.set(FLEET, two_clusters_routing_to("a"));
    let mut envoy = open(&fixture);
    envoy.send(Request { node: node("pod-0", FLEET), ..request(CLUSTER, &[]) });
    envoy.send(request(LISTENER, &[]));
    let clusters = envoy.next().await;
    assert_eq!((clusters.type_url.as_str(), names(&clusters)), (CLUSTER, vec!["a".into(), "b".into()]));
    assert_eq!(clusters.version_info, version);
    envoy.assert_silent().await;

    envoy.send(request(ENDPOINT, &["a", "b"]));
    envoy.send(ack(&clusters, &[]));
    let endpoints = envoy.next().await;
    assert_eq!((endpoints.type_url.as_str(), endpoints.resources.len()), (ENDPOINT, 2));
    envoy.assert_silent().await;
    envoy.send(ack(&endpoints, &["a", "b"]));
    let listeners = envoy.next().await;
    assert_eq!(listeners.type_url, LISTENER);
    envoy.send(request(ROUTE, &["routes"]));
    envoy.send(ack(&listeners, &[]));
    let routes = envoy.next().await;
    assert_eq!((routes.type_url.as_str(), routes.resources.len()), (ROUTE, 1));
    envoy.send(ack(&routes, &["routes"]));
    envoy.assert_silent().await;
    assert_eq!(fleet_status(&fixture).acked_version.as_deref(), Some(version.as_str()));
}

#[tokio::test(start_paused = true)]
async fn removed_clusters_stay_in_the_full_set_until_routes_moved_away() {
    let fixture = fixture();
    fixture.cache.set(FLEET, two_clusters_routing_to("a"));
    let mut envoy = open(&fixture);
    sync(&mut envoy).await;

    let version = fixture.cache.set(FLEET, snapshot(vec![prefix_route("/", "c")], &[("b", 2), ("c", 3)]));
    let clusters = envoy.next().await;
    assert_eq!(names(&clusters), ["a", "b", "c"], "a is kept while routes use it");
    envoy.send(request(ENDPOINT, &["a", "b", "c"]));
    envoy.send(ack(&clusters, &[]));
    let endpoints = envoy.next().await;
    assert_eq!(endpoints.resources.len(), 3);
    envoy.assert_silent().await;

    envoy.send(ack(&endpoints, &["a", "b", "c"]));
    let routes = envoy.next().await;
    assert_eq!(routes.type_url, ROUTE);
    envoy.assert_silent().await;
    envoy.send(ack(&routes, &["routes"]));
    let clusters = envoy.next().await;
    assert_eq!(names(&clusters), ["b", "c"]);
    envoy.send(ack(&clusters, &[]));
    envoy.send(ack(&endpoints, &["b", "c"]));
    envoy.assert_silent().await;
    assert_eq!(fleet_status(&fixture).acked_version.as_deref(), Some(version.as_str()));
}

#[tokio::test(start_paused = true)]
async fn stale_requests_are_ignored_and_a_nack_keeps_the_previous_set() {
    let fixture = fixture();
    let good = fixture.cache.set(FLEET, two_clusters_routing_to("a"));
    let mut envoy = open(&fixture);
    sync(&mut envoy).await;

    // A new cluster: the CDS response is NACKed.
    let bad =
        fixture.cache.set(FLEET, snapshot(vec![prefix_route("/", "a")], &[("a", 1), ("b", 2), ("c", 3)]));
    let clusters = envoy.next().await;
    assert_eq!(names(&clusters), ["a", "b", "c"]);
    // A request answering an older response (its successor is on the way) changes nothing.
    envoy.send(Request { response_nonce: "0".into(), ..request(ENDPOINT, &["a"]) });
    envoy.send(Request {
        version_info: good.clone(),
        response_nonce: clusters.nonce.clone(),
        error_detail: nack_detail("cluster c: invalid"),
        ..request(CLUSTER, &[])
    });
    envoy.assert_silent().await;
    let status = fleet_status(&fixture);
    let rejection = status.last_nack.expect("a standing NACK");
    assert_eq!(
        (rejection.nack.version.as_str(), rejection.nack.message.as_str()),
        (bad.as_str(), "cluster c: invalid")
    );
    assert_eq!(status.acked_version, Some(good.clone()));

    // The fix drops c: the route change goes out (it needs no new cluster), then the full set
    // without c, in case Envoy kept it from the rejected response.
    let fixed = fixture.cache.set(FLEET, two_clusters_routing_to("b"));
    let routes = envoy.next().await;
    assert_eq!(routes.type_url, ROUTE);
    envoy.send(ack(&routes, &["routes"]));
    let clusters = envoy.next().await;
    assert_eq!(names(&clusters), ["a", "b"]);
    envoy.send(ack(&clusters, &[]));
    envoy.assert_silent().await;
    let status = fleet_status(&fixture);
    assert_eq!((status.acked_version.as_deref(), status.last_nack), (Some(fixed.as_str()), None));
}
