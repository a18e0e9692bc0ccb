//! Whether the Gateway API objects name a Service, Secret or Envoy: a change to one that none
//! names cannot change the translation, so it need not re-run it (endpoint churn of the rest
//! of the cluster is most changes in a busy one). Answers err towards yes: references are
//! matched by namespace and name whatever their group and kind, so an answer of no is sure.

use kube::Resource;

use crate::api::gateway::{Gateway, GatewayClass, GatewayRoute};

/// Whether `route` (of any Gateway API route kind) sends requests to, or mirrors them to,
/// `namespace/name`.
pub fn route_names_service<R: GatewayRoute + Resource>(route: &R, namespace: &str, name: &str) -> bool {
    let own = route.meta().namespace.as_deref().unwrap_or_default();
    route
        .backend_references()
        .iter()
        .any(|reference| reference.name == name && reference.namespace.as_deref().unwrap_or(own) == namespace)
}

/// Whether a listener of `gateway` names `namespace/name` as a certificate.
pub fn gateway_names_secret(gateway: &Gateway, namespace: &str, name: &str) -> bool {
    let own = gateway.metadata.namespace.as_deref().unwrap_or_default();
    gateway
        .spec
        .listeners
        .iter()
        .filter_map(|listener| listener.tls.as_ref())
        .flat_map(|tls| &tls.certificate_refs)
        .any(|reference| reference.name == name && reference.namespace.as_deref().unwrap_or(own) == namespace)
}

/// Whether `class` takes its fleets' settings from `namespace/name`.
pub fn class_names_envoy(class: &GatewayClass, namespace: &str, name: &str) -> bool {
    class
        .spec
        .parameters_ref
        .as_ref()
        .is_some_and(|reference| reference.name == name && reference.namespace.as_deref() == Some(namespace))
}

/// Whether `namespace/name` has the name of `gateway`'s fleet ([`super::fleet::name_of`]): an
/// Envoy of that name is its fleet, or stands in the fleet's way; a Service of that name gives
/// the Gateway its addresses (when the fleet controls it).
pub fn names_fleet(gateway: &Gateway, namespace: &str, name: &str) -> bool {
    gateway.metadata.namespace.as_deref() == Some(namespace) && super::fleet::name_of(gateway) == name
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn route(rules: serde_json::Value) -> crate::api::gateway::HTTPRoute {
        serde_json::from_value(json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "shop", "namespace": "shop"}, "spec": {"rules": rules}}))
        .expect("a route")
    }

    #[test]
    fn a_route_names_its_backends_in_its_namespace_or_the_one_given_and_its_mirrors() {
        let route = route(json!([
            {"backendRefs": [{"name": "web", "port": 80}, {"name": "api", "namespace": "backends", "port": 80}],
             "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "shadow", "port": 80}}}]}
        ]));
        assert!(route_names_service(&route, "shop", "web"));
        assert!(route_names_service(&route, "backends", "api"));
        assert!(route_names_service(&route, "shop", "shadow"), "a mirror is read too");
        assert!(!route_names_service(&route, "backends", "web"), "another namespace's namesake");
        assert!(!route_names_service(&route, "shop", "api"));
        assert!(!route_names_service(&route, "shop", "unrelated"));
    }

    #[test]
    fn a_gateway_names_its_certificates_and_a_class_its_parameters() {
        let gateway: Gateway = serde_json::from_value(json!({"apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway", "metadata": {"name": "edge", "namespace": "infra"},
            "spec": {"gatewayClassName": "x", "listeners": [
                {"name": "https", "port": 443, "protocol": "HTTPS",
                 "tls": {"certificateRefs": [{"name": "own"}, {"name": "shared", "namespace": "certs"}]}},
                {"name": "http", "port": 80, "protocol": "HTTP"}]}}))
        .expect("a Gateway");
        assert!(gateway_names_secret(&gateway, "infra", "own"));
        assert!(gateway_names_secret(&gateway, "certs", "shared"));
        assert!(!gateway_names_secret(&gateway, "infra", "shared"));
        assert!(names_fleet(&gateway, "infra", "edge-x"), "the fleet's name: <gateway>-<class>");
        assert!(!names_fleet(&gateway, "other", "edge-x") && !names_fleet(&gateway, "infra", "edge"));

        let class: GatewayClass = serde_json::from_value(json!({"apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass", "metadata": {"name": "c"}, "spec": {"controllerName": "example.com/envoy-operator",
            "parametersRef": {"group": "example.com", "kind": "Envoy", "name": "template", "namespace": "ops"}}}))
        .expect("a class");
        assert!(class_names_envoy(&class, "ops", "template"));
        assert!(!class_names_envoy(&class, "shop", "template"));
    }
}
