//! The TLSRoute door: a TLSRoute read once into the route model. A TLSRoute has no matches and
//! no filters: each rule is said in HTTPRoute's shape (its backendRefs, no match: every
//! connection) and read by the HTTPRoute door's reader, so its backends resolve by the same
//! rules (ReferenceGrants from `TLSRoute`) and its `ResolvedRefs` says the same. What is its
//! own: the proxies speak TCP to its backends ([`ir::BackendProtocol::Tcp`]), and a parent
//! serves it as TLS passthrough, chosen by SNI ([`super::merge`]).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;

use super::httproute::{Object, read_rules};
use super::listeners::TLS_ROUTE;
use crate::api::gateway::{HTTPBackendRef, HTTPRouteRule, ReferenceGrant, TLSRoute};
use crate::ir;
use crate::route::Route;

/// A TLSRoute, read into the model.
pub fn read(route: &TLSRoute, services: &[Arc<Service>], grants: &[Arc<ReferenceGrant>]) -> Route {
    let mut problems = Vec::new();
    if route.spec.rules.is_empty() {
        // The CRD asks for one; without, the route would send its connections nowhere.
        problems.push("spec.rules: a TLSRoute needs a rule with backendRefs".to_owned());
    }
    let rules: Vec<HTTPRouteRule> = route
        .spec
        .rules
        .iter()
        .map(|rule| HTTPRouteRule {
            name: rule.name.clone(),
            matches: Vec::new(),
            filters: Vec::new(),
            backend_refs: rule
                .backend_refs
                .iter()
                .map(|backend| HTTPBackendRef {
                    backend: backend.backend.clone(),
                    weight: backend.weight,
                    filters: Vec::new(),
                })
                .collect(),
            timeouts: None,
        })
        .collect();
    let object = Object {
        kind: TLS_ROUTE,
        metadata: &route.metadata,
        hostnames: &route.spec.hostnames,
        protocol: ir::BackendProtocol::Tcp,
        unresolved_answer: ir::UnresolvedAnswer::Closed,
    };
    read_rules(&object, &rules, problems, services, grants)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::route::conditions::ConditionState;

    fn service(namespace: &str, name: &str, port: i32) -> Arc<Service> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"namespace": namespace, "name": name},
                "spec": {"ports": [{"port": port}]}
            }))
            .unwrap(),
        )
    }

    fn route(spec: serde_json::Value) -> TLSRoute {
        serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1alpha2", "kind": "TLSRoute",
            "metadata": {"namespace": "shop", "name": "tls"}, "spec": spec
        }))
        .unwrap()
    }

    #[test]
    fn its_backends_are_tcp_clusters_weighted_and_resolved_like_httproutes() {
        let route = route(json!({
            "hostnames": ["a.example.com"],
            "rules": [{"backendRefs": [
                {"name": "a", "port": 443, "weight": 3},
                {"name": "b", "port": 443},
                {"name": "gone", "port": 443}
            ]}]
        }));
        let read = read(&route, &[service("shop", "a", 443), service("shop", "b", 443)], &[]);
        assert_eq!(read.kind, "TLSRoute");
        assert_eq!(read.refused, None);
        let (weights, unresolved_weight) = read.passthrough_backends();
        assert_eq!(
            weights,
            [ir::WeightedBackend::new("shop/a/443/tcp", 3), ir::WeightedBackend::new("shop/b/443/tcp", 1),]
        );
        assert_eq!(unresolved_weight, 1, "the share of the backendRef that does not resolve");
        let ConditionState { status, reason, message } = &read.resolved_refs;
        assert!(!status);
        assert_eq!(*reason, "BackendNotFound");
        assert!(message.contains("spec.rules[0].backendRefs[2]"), "{message}");
    }

    #[test]
    fn a_route_without_rules_is_refused_saying_so() {
        let read = read(&route(json!({"hostnames": ["a.example.com"]})), &[], &[]);
        assert!(
            read.refused.as_deref().is_some_and(|why| why.contains("needs a rule")),
            "{:?}",
            read.refused
        );
    }
}
