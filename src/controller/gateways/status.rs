//! Writing a Gateway API object's status: server-side apply on the status subresource, under
//! the operator's field manager, and only when the computed status differs from the cached one
//! (a reconcile at rest sends nothing).

use std::fmt::Debug;

use envoy_operator_core::names::FIELD_MANAGER;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;
use tracing::debug;

use crate::controller::{Context, Error, Result};

/// Whether a status write is conditional on the object being unchanged since it was cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Guard {
    /// The status holds only the operator's fields (a GatewayClass's or Gateway's): written
    /// whatever else changed.
    None,
    /// The status holds other controllers' entries in a list written whole (an HTTPRoute's
    /// `status.parents`, `listType=atomic`): written only over the cached `resourceVersion`,
    /// so an entry another controller wrote meanwhile is never dropped (the API server answers
    /// 409, and the object's own change reconciles it again).
    ResourceVersion,
}

/// Applies `desired` as `object`'s status through `api` when it differs from `current` (the
/// cached object's). Returns whether it was written; an object deleted meanwhile is not.
pub async fn write<K, S>(
    ctx: &Context,
    api: &Api<K>,
    kind: &'static str,
    object: &K,
    current: &S,
    desired: &S,
    guard: Guard,
) -> Result<bool>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned,
    S: Serialize + PartialEq,
{
    if same(current, desired) {
        return Ok(false);
    }
    let name = object.name_any();
    let mut body = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": desired,
    });
    if let (Guard::ResourceVersion, Some(version)) = (guard, object.resource_version()) {
        body["metadata"] = json!({"resourceVersion": version});
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let written = api.patch_status(&name, &params, &Patch::Apply(&body)).await;
    ctx.metrics.wrote(kind, "apply_status");
    match written {
        Ok(_) => {
            debug!(kind, namespace = object.namespace().unwrap_or_default(), %name, "status written");
            Ok(true)
        }
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(source) => Err(Error::Api { verb: "apply status of", kind, name, source }),
    }
}

/// Whether two statuses say the same, as JSON (how they are compared once written).
fn same<S: Serialize + PartialEq>(current: &S, desired: &S) -> bool {
    match (serde_json::to_value(current), serde_json::to_value(desired)) {
        (Ok(current), Ok(desired)) => current == desired,
        _ => current == desired,
    }
}

#[cfg(test)]
mod tests {
    use envoy_operator_core::api::gateway::{
        Gateway, GatewayStatus, HTTPRoute, HTTPRouteStatus, ParentReference, RouteParentStatus,
    };
    use envoy_operator_testkit::mock::{expect, mock};
    use http::{Method, StatusCode};
    use kube::runtime::reflector;

    use super::*;
    use crate::controller::{Settings, Stores};

    fn context(client: kube::Client) -> Context {
        let stores = Stores::new(reflector::store().0, reflector::store().0, reflector::store().0);
        Context::new(client, Settings::default(), stores)
    }

    fn route() -> HTTPRoute {
        let mut route = HTTPRoute::new("shop", Default::default());
        route.metadata.namespace = Some("shop".into());
        route.metadata.resource_version = Some("7".into());
        route
    }

    fn parents(controller_name: &str) -> HTTPRouteStatus {
        let parent_ref = ParentReference { name: "edge".into(), ..ParentReference::default() };
        let entry =
            RouteParentStatus { parent_ref, controller_name: controller_name.into(), conditions: Vec::new() };
        HTTPRouteStatus { parents: vec![entry] }
    }

    #[tokio::test]
    async fn a_routes_status_is_applied_over_the_cached_version_and_not_at_all_when_unchanged() {
        let (client, mut handle) = mock();
        let ctx = context(client.clone());
        let api: Api<HTTPRoute> = Api::namespaced(client, "shop");
        let (route, current, desired) =
            (route(), parents("example.net/other"), parents("example.com/envoy-operator"));

        let unchanged = write(&ctx, &api, "HTTPRoute", &route, &desired, &desired, Guard::ResourceVersion);
        assert!(!unchanged.await.expect("no request, no error"), "an unchanged status is not written");

        let written = write(&ctx, &api, "HTTPRoute", &route, &current, &desired, Guard::ResourceVersion);
        let path = "/apis/gateway.networking.k8s.io/v1/namespaces/shop/httproutes/shop/status";
        let answer = serde_json::to_value(&route).expect("a route");
        let (written, sent) =
            tokio::join!(written, expect(&mut handle, Method::PATCH, path, StatusCode::OK, answer));
        assert!(written.expect("written"));
        assert_eq!(sent["metadata"], json!({"resourceVersion": "7"}), "only over the cached version: {sent}");
        assert_eq!(sent["status"], serde_json::to_value(&desired).expect("a status"));
        assert_eq!(sent["kind"], "HTTPRoute");
    }

    #[tokio::test]
    async fn a_gateways_status_is_applied_unconditionally_and_a_deleted_gateway_is_no_error() {
        let (client, mut handle) = mock();
        let ctx = context(client.clone());
        let api: Api<Gateway> = Api::namespaced(client, "shop");
        let mut gateway = Gateway::new("edge", Default::default());
        gateway.metadata.resource_version = Some("3".into());
        let desired = GatewayStatus {
            addresses: vec![envoy_operator_core::api::gateway::GatewayStatusAddress {
                address_type: "IPAddress".into(),
                value: "10.0.0.1".into(),
            }],
            ..GatewayStatus::default()
        };
        let none = GatewayStatus::default();
        let written = write(&ctx, &api, "Gateway", &gateway, &none, &desired, Guard::None);
        let path = "/apis/gateway.networking.k8s.io/v1/namespaces/shop/gateways/edge/status";
        let gone = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404});
        let (written, sent) =
            tokio::join!(written, expect(&mut handle, Method::PATCH, path, StatusCode::NOT_FOUND, gone));
        assert!(!written.expect("a deleted Gateway is no error"));
        assert!(sent.get("metadata").is_none(), "no precondition: {sent}");
        assert_eq!(sent["status"]["addresses"][0]["value"], "10.0.0.1");
    }
}
