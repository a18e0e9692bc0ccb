//! A ReferenceGrant allowing, then revoking, an HTTPRoute's backend in another namespace: the
//! route's parent status and its traffic follow the grant both ways (500 with `RefNotPermitted`
//! without it, the backend with it).

use envoy_operator_testkit::fleet_world::{NS, at_in, free_port, service_with_endpoints};
use serde_json::json;

use super::world::{Expect, GatewayWorld, gateway, gateway_api_at, http_route, until_answered};
use crate::support::backend::Backend;
use crate::support::envoy;

const OTHER_NS: &str = "warehouse";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_grant_allows_then_revokes_a_cross_namespace_backend() {
    if !envoy::available() {
        return;
    }
    let (local, stock) = (Backend::start("backend-local").await, Backend::start("backend-stock").await);
    let port = free_port().port();
    let world = GatewayWorld::start(
        &[("local", &local)],
        &[
            gateway("public", json!([{"name": "http", "port": port, "protocol": "HTTP"}])),
            http_route(
                "store",
                json!({"parentRefs": [{"name": "public"}],
                       "rules": [{"backendRefs": [{"name": "stock", "namespace": OTHER_NS, "port": 80}]}]}),
            ),
        ],
    )
    .await;
    service_with_endpoints(&world.api, OTHER_NS, "stock", &stock);
    let proxy = world.proxy("public").await;
    let route_at = gateway_api_at("httproutes", "store");
    let parent = ("public", None);

    // No grant: accepted, its reference refused, its requests answered 500.
    world.until_route_condition(&route_at, parent, ("ResolvedRefs", "False", "RefNotPermitted")).await;
    world.until_route_condition(&route_at, parent, ("Accepted", "True", "Accepted")).await;
    until_answered(port, "shop.example", "/", &[], Expect::Status(500)).await;

    // The grant, in the backend's namespace: from HTTPRoutes of the route's, to Services.
    let grant_at = at_in(OTHER_NS, "gateway.networking.k8s.io/v1beta1", "referencegrants", "from-shop");
    world.api.put(
        &grant_at,
        json!({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
               "metadata": {"name": "from-shop", "namespace": OTHER_NS},
               "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": NS}],
                        "to": [{"group": "", "kind": "Service"}]}}),
    );
    until_answered(port, "shop.example", "/", &[], Expect::By(&stock.name)).await;
    world.until_route_condition(&route_at, parent, ("ResolvedRefs", "True", "ResolvedRefs")).await;

    // Revoked: back to 500 and RefNotPermitted.
    world.api.delete(&grant_at);
    until_answered(port, "shop.example", "/", &[], Expect::Status(500)).await;
    world.until_route_condition(&route_at, parent, ("ResolvedRefs", "False", "RefNotPermitted")).await;
    drop(proxy);
    world.stop().await;
}
