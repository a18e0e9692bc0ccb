//! The Gateway API's plumbing against an in-memory API server: whether the API server serves
//! the Gateway API (discovery), the index's watches of its kinds and of what they name (only
//! certificate Secrets, never the fleets' identities), and the publisher that turns them into a
//! snapshot per Gateway fleet and the translation the status writers read.

use std::sync::Arc;
use std::time::Duration;

use envoy_operator::index::{GatewayApi, Index};
use envoy_operator::xds::publish::GatewayOutcomes;
use envoy_operator::xds::publish::gateways::{self, GatewayOutputs};
use envoy_operator::xds::server::{FleetKey, SnapshotCache, Tracker};
use envoy_operator_core::envoy::type_urls::{CLUSTER, LISTENER, ROUTE_CONFIGURATION};
use envoy_operator_core::names::XDS_IDENTITY_SECRET_LABEL as SECRET_LABEL;
use envoy_operator_core::names::{CONTROLLER_NAME, GATEWAY_LABEL};
use envoy_operator_testkit::fake_api::FakeApi;
use serde_json::{Value, json};

/// Guards against hangs; never part of an assertion about speed.
const HANG_GUARD: Duration = Duration::from_secs(30);
const NS: &str = "shop";

fn gateway_api(resource: &str, name: &str) -> String {
    match resource {
        "gatewayclasses" => format!("/apis/gateway.networking.k8s.io/v1/gatewayclasses/{name}"),
        "referencegrants" => {
            format!("/apis/gateway.networking.k8s.io/v1beta1/namespaces/{NS}/{resource}/{name}")
        }
        _ => format!("/apis/gateway.networking.k8s.io/v1/namespaces/{NS}/{resource}/{name}"),
    }
}

fn core(resource: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{NS}/{resource}/{name}")
}

fn secret(name: &str, type_: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": type_,
           "metadata": {"name": name, "labels": labels, "annotations": {"note": "not read"}},
           "data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5", "ca.crt": "Y2E=", "other": "eA=="}})
}

/// A GatewayClass naming the operator, a Gateway `edge` of it listening for HTTP on port 80,
/// its fleet `edge-envoy` (the Envoy the Gateway controller applies), an HTTPRoute from `shop.example.com`
/// to the Service `web`, and the Service's endpoints.
fn a_gateway_and_its_route(api: &FakeApi) {
    api.put(
        &gateway_api("gatewayclasses", "envoy"),
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
               "metadata": {"name": "envoy"}, "spec": {"controllerName": CONTROLLER_NAME}}),
    );
    api.put(
        &gateway_api("gateways", "edge"),
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": "edge"},
               "spec": {"gatewayClassName": "envoy",
                        "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}),
    );
    let uid = api.get(&gateway_api("gateways", "edge")).expect("the Gateway")["metadata"]["uid"].clone();
    api.put(
        "/apis/example.com/v1/namespaces/shop/envoys/edge-envoy",
        json!({"apiVersion": "example.com/v1", "kind": "Envoy",
               "metadata": {"name": "edge-envoy", "labels": {GATEWAY_LABEL: "edge"},
                            "ownerReferences": [{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                                                 "name": "edge", "uid": uid, "controller": true}]},
               "spec": {}}),
    );
    api.put(
        &gateway_api("httproutes", "shop"),
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": "shop"},
               "spec": {"parentRefs": [{"name": "edge"}], "hostnames": ["shop.example.com"],
                        "rules": [{"backendRefs": [{"name": "web", "port": 8080}]}]}}),
    );
    api.put(
        &core("services", "web"),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
               "spec": {"ports": [{"name": "http", "port": 8080, "targetPort": 8080}]}}),
    );
    api.put(
        "/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices/web-1",
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": "web-1", "labels": {"kubernetes.io/service-name": "web"}},
               "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
               "endpoints": [{"addresses": ["10.1.0.7"], "conditions": {"ready": true}}]}),
    );
}

/// The Gateway API's publisher running on `caches`, once it has published: its snapshots, its
/// translations, and its task.
async fn published(
    caches: gateways::GatewayCaches,
    changed: impl futures::Stream<Item = ()> + Send + 'static,
) -> (SnapshotCache, GatewayOutcomes, tokio::task::JoinHandle<()>) {
    let (cache, outcomes) = (SnapshotCache::new(), GatewayOutcomes::new());
    let outputs = GatewayOutputs {
        snapshots: Some((cache.clone(), Tracker::new())),
        outcomes: outcomes.clone(),
        isolation: None,
    };
    let (ready, published) = tokio::sync::oneshot::channel();
    let publisher = tokio::spawn(gateways::run(caches, changed, outputs, move || {
        let _ = ready.send(());
    }));
    tokio::time::timeout(HANG_GUARD, published).await.expect("published in time").expect("published");
    (cache, outcomes, publisher)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_is_served_its_routes_and_judged_from_the_api_server() {
    let api = FakeApi::new();
    api.install_gateway_api();
    a_gateway_and_its_route(&api);
    let index = Arc::new(Index::new(api.client(), None));
    assert_eq!(*index.gateway_api().await, GatewayApi::On);

    let (caches, changed) = gateways::from_index(&index);
    let (cache, outcomes, publisher) = published(caches, changed).await;

    let fleet = FleetKey::from("shop/edge-envoy");
    let snapshot = cache.get(&fleet).expect("the Gateway's fleet has a snapshot");
    let names = |type_url: &str| -> Vec<String> {
        snapshot.resources(type_url).iter().map(|resource| resource.name().to_owned()).collect()
    };
    assert_eq!(names(LISTENER).len(), 1, "one listener, on port 80");
    assert_eq!(names(ROUTE_CONFIGURATION).len(), 1);
    assert_eq!(names(CLUSTER).len(), 1, "the Service web: {:?}", names(CLUSTER));
    let translation = outcomes.latest();
    assert_eq!(translation.classes.len(), 1);
    assert_eq!(translation.gateways.len(), 1);
    let route = &translation.routes[0];
    assert_eq!((route.namespace.as_str(), route.name.as_str()), (NS, "shop"));
    assert!(route.parents[0].accepted.status, "{route:?}");
    assert!(route.parents[0].resolved_refs.status, "{route:?}");

    // The status writers follow the translation: a Gateway deleted leaves its fleet unserved.
    let mut subscriber = outcomes.subscribe();
    api.delete(&gateway_api("gateways", "edge"));
    tokio::time::timeout(HANG_GUARD, async {
        while cache.get(&fleet).is_some() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the snapshot removed in time");
    tokio::time::timeout(HANG_GUARD, subscriber.wait_for(|translation| translation.gateways.is_empty()))
        .await
        .expect("the translation updated in time")
        .expect("the outcomes live");
    publisher.abort();
}

/// Of Secrets, the index holds certificates only, reduced to their certificate and key: none
/// of the operator's own (a fleet's xDS identity, the webhook's certificate, the identity CA),
/// no other type, nothing else of a Secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_certificates_are_read_and_only_their_certificate_and_key_kept() {
    let api = FakeApi::new();
    api.put(&core("secrets", "shop-tls"), secret("shop-tls", "kubernetes.io/tls", json!({})));
    api.put(&core("secrets", "opaque"), secret("opaque", "Opaque", json!({})));
    api.put(
        &core("secrets", "edge-xds-identity"),
        secret("edge-xds-identity", "kubernetes.io/tls", json!({SECRET_LABEL: "edge"})),
    );
    api.put(
        "/api/v1/namespaces/envoy-operator/secrets/envoy-operator-xds-identity-ca",
        secret(
            "envoy-operator-xds-identity-ca",
            "kubernetes.io/tls",
            json!({"app.kubernetes.io/managed-by": "envoy-operator"}),
        ),
    );
    let index = Index::new(api.client(), None);
    let secrets = index.tls_secrets();
    tokio::time::timeout(HANG_GUARD, secrets.listed()).await.expect("listed in time").expect("listed");
    let cached = secrets.store().state();
    let names: Vec<_> =
        cached.iter().map(|secret| secret.metadata.name.clone().unwrap_or_default()).collect();
    assert_eq!(names, ["shop-tls"]);
    let data = cached[0].data.as_ref().expect("data");
    assert_eq!(data.keys().collect::<Vec<_>>(), ["tls.crt", "tls.key"]);
    assert_eq!(cached[0].metadata.annotations, None);
}

/// A namespaced install reads its own Namespace only (by name), for `allowedRoutes` selectors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_index_watches_its_own_namespace_only() {
    let api = FakeApi::new();
    for name in [NS, "other"] {
        api.put(
            &format!("/api/v1/namespaces/{name}"),
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": name, "labels": {"team": name}, "annotations": {"big": "x"}},
                   "spec": {"finalizers": ["kubernetes"]}}),
        );
    }
    let index = Index::new(api.client(), Some(NS.to_owned()));
    let namespaces = index.namespaces();
    tokio::time::timeout(HANG_GUARD, namespaces.listed()).await.expect("listed in time").expect("listed");
    let cached = namespaces.store().state();
    assert_eq!(cached.len(), 1);
    assert_eq!(cached[0].metadata.name.as_deref(), Some(NS));
    assert_eq!(
        cached[0].metadata.labels.as_ref().and_then(|labels| labels.get("team")).map(String::as_str),
        Some(NS)
    );
    assert_eq!((cached[0].metadata.annotations.as_ref(), cached[0].spec.as_ref()), (None, None), "reduced");
}

/// Without the Gateway API's CRDs (or with some of them missing), the index says it is off and
/// which kinds are missing; asked again, it answers the same without asking the API server.
#[tokio::test]
async fn without_the_gateway_api_the_index_says_it_is_off_and_why() {
    let api = FakeApi::new();
    let index = Index::new(api.client(), None);
    let GatewayApi::Off(reason) = index.gateway_api().await.clone() else { panic!("no CRDs, yet on") };
    for missing in ["gatewayclasses", "gateways", "httproutes", "referencegrants"] {
        assert!(reason.contains(missing), "{reason}");
    }
    // Installed later: this process keeps its answer (the operator is restarted to take them).
    api.install_gateway_api();
    assert_eq!(*index.gateway_api().await, GatewayApi::Off(reason));

    let partial = FakeApi::new();
    partial.install_gateway_api();
    partial.delete(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/referencegrants.gateway.networking.k8s.io",
    );
    let index = Index::new(partial.client(), None);
    let GatewayApi::Off(reason) = index.gateway_api().await.clone() else {
        panic!("no ReferenceGrants, yet on")
    };
    assert_eq!(reason, "the API server does not serve referencegrants (gateway.networking.k8s.io/v1beta1)");
    assert!(partial.requests().is_empty(), "discovery only: no watch was opened");
}

/// TLSRoutes are the experimental channel's: with the standard channel alone the Gateway API
/// is on and they are not watched (their `v1alpha2` is not even served); with it, they are.
#[tokio::test]
async fn tls_routes_are_watched_only_where_the_experimental_channel_serves_them() {
    let standard = FakeApi::new();
    standard.install_gateway_api();
    let index = Index::new(standard.client(), None);
    assert_eq!(*index.gateway_api().await, GatewayApi::On, "TLSRoute is not required");
    assert!(index.tls_routes_if_served().is_none());
    assert!(index.grpc_routes_if_served().is_some());

    let experimental = FakeApi::new();
    experimental.install_gateway_api_experimental();
    let index = Index::new(experimental.client(), None);
    assert!(index.tls_routes_if_served().is_none(), "not before discovery has answered");
    assert_eq!(*index.gateway_api().await, GatewayApi::On);
    assert!(index.tls_routes_if_served().is_some());
}

/// GRPCRoutes are optional: without their CRD the Gateway API is on all the same, and they are
/// not watched; with it, they are.
#[tokio::test]
async fn grpc_routes_are_watched_only_where_they_are_served() {
    let without = FakeApi::new();
    without.install_gateway_api();
    without.delete(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/grpcroutes.gateway.networking.k8s.io",
    );
    let index = Index::new(without.client(), None);
    assert_eq!(*index.gateway_api().await, GatewayApi::On, "GRPCRoute is not required");
    assert!(index.grpc_routes_if_served().is_none());

    let with = FakeApi::new();
    with.install_gateway_api();
    let index = Index::new(with.client(), None);
    assert!(index.grpc_routes_if_served().is_none(), "not before discovery has answered");
    assert_eq!(*index.gateway_api().await, GatewayApi::On);
    assert!(index.grpc_routes_if_served().is_some());
}

/// The mesh (HTTPRoutes on Services): a namespace labelled for injection gets its sidecars'
/// snapshot under the mesh's key, with no GatewayClass in the cluster; a route on a Service of
/// it adds a chain for that Service port, its backends' clusters beside the pass-through; the
/// route's Service parent is judged; and the namespace unlabelled loses the snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_meshed_namespace_is_served_its_sidecars_and_a_route_on_a_service_routes_there() {
    let api = FakeApi::new();
    api.install_gateway_api();
    let namespace = format!("/api/v1/namespaces/{NS}");
    api.put(
        &namespace,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {"envoy-injection": "enabled"}}}),
    );
    api.put(
        &core("services", "web"),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
               "spec": {"clusterIP": "10.96.0.40", "ports": [{"name": "http", "port": 8080, "targetPort": 8080}]}}),
    );
    let index = Arc::new(Index::new(api.client(), None));
    let (caches, changed) = gateways::from_index(&index);
    let (cache, outcomes, publisher) = published(caches, changed).await;
    let key = FleetKey::from(format!("{NS}/:mesh"));
    let names = |type_url: &str| -> Vec<String> {
        let snapshot = cache.get(&key).expect("the meshed namespace has a snapshot");
        snapshot.resources(type_url).iter().map(|resource| resource.name().to_owned()).collect()
    };
    assert_eq!(names(LISTENER), ["outbound"]);
    assert!(names(ROUTE_CONFIGURATION).is_empty(), "no route: everything passes through");
    assert_eq!(names(CLUSTER), ["passthrough"]);

    api.put(
        &gateway_api("httproutes", "web-canary"),
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute", "metadata": {"name": "web-canary"},
               "spec": {"parentRefs": [{"group": "", "kind": "Service", "name": "web", "port": 8080}],
                        "rules": [{"backendRefs": [{"name": "web", "port": 8080}]}]}}),
    );
    tokio::time::timeout(HANG_GUARD, async {
        while cache.get(&key).is_none_or(|snapshot| snapshot.resources(ROUTE_CONFIGURATION).is_empty()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the route reached the snapshot in time");
    assert_eq!(names(ROUTE_CONFIGURATION), ["outbound/shop/web/8080"]);
    assert_eq!(names(CLUSTER), ["passthrough", "shop/web/8080"]);
    let translation = outcomes.latest();
    let route =
        translation.routes.iter().find(|route| route.name == "web-canary").expect("the route's outcome");
    assert_eq!(route.parents.len(), 1);
    assert_eq!(route.parents[0].parent_ref.kind.as_deref(), Some("Service"));
    assert!(route.parents[0].accepted.status, "{route:?}");

    api.put(&namespace, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}));
    tokio::time::timeout(HANG_GUARD, async {
        while cache.get(&key).is_some() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the snapshot removed in time");
    publisher.abort();
}

/// Where the API server serves no Gateway API, a meshed namespace's sidecars are still served,
/// pass-through only (a mesh sidecar is Ready only once configured: its pod must start).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_gateway_api_a_meshed_namespace_is_served_pass_through() {
    let api = FakeApi::new();
    api.put(
        &format!("/api/v1/namespaces/{NS}"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {"envoy-injection": "enabled"}}}),
    );
    let index = Arc::new(Index::new(api.client(), None));
    assert_ne!(*index.gateway_api().await, GatewayApi::On);
    let (caches, changed) = gateways::mesh_only_from_index(&index);
    let (cache, _, publisher) = published(caches, changed).await;
    let snapshot =
        cache.get(&FleetKey::from(format!("{NS}/:mesh"))).expect("the meshed namespace's snapshot");
    let names = |type_url: &str| -> Vec<String> {
        snapshot.resources(type_url).iter().map(|resource| resource.name().to_owned()).collect()
    };
    assert_eq!(names(LISTENER), ["outbound"]);
    assert_eq!(names(CLUSTER), ["passthrough"]);
    publisher.abort();
}

/// A namespace not labelled for injection is meshed while it holds a pod with a mesh sidecar
/// (one opted in on its own): its sidecars' snapshot comes with its first such pod and goes
/// with its last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_is_meshed_while_it_holds_a_mesh_sidecars_pod() {
    let api = FakeApi::new();
    api.put(
        &format!("/api/v1/namespaces/{NS}"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    );
    let index = Arc::new(Index::new(api.client(), None));
    let (caches, changed) = gateways::mesh_only_from_index(&index);
    let (cache, _, publisher) = published(caches, changed).await;
    let key = FleetKey::from(format!("{NS}/:mesh"));
    assert!(cache.get(&key).is_none(), "no pod with a mesh sidecar: not meshed");
    let pod = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "labels": {envoy_operator_core::names::MESH_SIDECAR_LABEL: "true"}},
               "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}})
    };
    for name in ["client-a", "client-b"] {
        api.put(&core("pods", name), pod(name));
    }
    let until = |present: bool| {
        let cache = cache.clone();
        let key = key.clone();
        async move {
            tokio::time::timeout(HANG_GUARD, async {
                while cache.get(&key).is_some() != present {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
            .await
            .expect("the snapshot followed the pods in time");
        }
    };
    until(true).await;
    api.delete(&core("pods", "client-a"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(cache.get(&key).is_some(), "one pod with a mesh sidecar is left");
    api.delete(&core("pods", "client-b"));
    until(false).await;
    publisher.abort();
}
