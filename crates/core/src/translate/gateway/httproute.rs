//! An HTTPRoute read for translation: its rules as an EnvoyRoute's (the same matches, filters
//! and timeouts, so the rule engine judges it and the IR is built by the same code), the
//! filters the operator does not implement, what an EnvoyRoute's rule cannot say
//! ([`super::filters`]: response header changes, mirrors), and its backends resolved by
//! Gateway API's rules (Services of other namespaces where a ReferenceGrant allows it).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::conditions::{ConditionState, REASON_REF_NOT_PERMITTED};
use super::filters;
use super::grants::{self, Reference};
use crate::api::EnvoyRoute;
use crate::api::gateway::{GROUP, HTTPBackendRef, HTTPRoute, HTTPRouteFilter, HTTPRouteRule, ReferenceGrant};
use crate::api::route::{BackendRef, EnvoyRouteSpec, FilterType, RouteFilter, RouteRule};
use crate::route::backend::{self, ClusterKey, Unresolved};
use crate::rules::route::{DEFAULT_BACKEND_GROUP, DEFAULT_BACKEND_KIND, DEFAULT_WEIGHT, EffectiveBackendRef};
use crate::rules::{Rules, defaulted};
use crate::translate::envoyroute::attach::CheckedRoute;
use crate::translate::envoyroute::rule::RuleExtensions;
use crate::translate::envoyroute::status::resolved_refs;

/// The filter types the operator implements.
const SUPPORTED_FILTERS: &str =
    "RequestHeaderModifier, ResponseHeaderModifier, RequestMirror, RequestRedirect, URLRewrite";

/// An HTTPRoute, read.
#[derive(Clone, Debug)]
pub struct ReadRoute {
    pub namespace: String,
    pub name: String,
    /// `spec.hostnames`: empty for every host.
    pub hostnames: Vec<String>,
    /// Its rules as an EnvoyRoute's, without parentRefs or hostnames (a listener gives those).
    pub rules: EnvoyRoute,
    /// Why the operator cannot serve it as it is (a filter it does not implement, or what the
    /// rule engine refuses), if anything.
    pub unsupported: Option<String>,
    /// For each rule, for each of its backendRefs: the Service port, or why none.
    pub backends: Vec<Vec<Result<ClusterKey, Unresolved>>>,
    /// For each rule, its response header changes and the mirrors that resolve.
    pub extensions: Vec<RuleExtensions>,
    /// `ResolvedRefs`, the same for every parent: backendRefs' and mirrors' backends.
    pub resolved_refs: ConditionState,
}

impl ReadRoute {
    pub fn read(route: &HTTPRoute, services: &[Arc<Service>], grants: &[Arc<ReferenceGrant>]) -> Self {
        let namespace = route.metadata.namespace.clone().unwrap_or_default();
        let name = route.metadata.name.clone().unwrap_or_default();
        let mut problems: Vec<String> = Vec::new();
        let rules: Vec<RouteRule> = route
            .spec
            .rules
            .iter()
            .enumerate()
            .map(|(i, rule)| envoy_rule(&format!("spec.rules[{i}]"), rule, &mut problems))
            .collect();
        let envoy_route = EnvoyRoute {
            metadata: ObjectMeta {
                name: route.metadata.name.clone(),
                namespace: route.metadata.namespace.clone(),
                uid: route.metadata.uid.clone(),
                generation: route.metadata.generation,
                creation_timestamp: route.metadata.creation_timestamp.clone(),
                ..Default::default()
            },
            spec: EnvoyRouteSpec { parent_refs: Vec::new(), hostnames: Vec::new(), rules },
            status: None,
        };
        // The rule engine judges the route with its own hostnames; on a listener it gets their
        // intersection with the listener's.
        let mut judged = envoy_route.clone();
        judged.spec.hostnames = route.spec.hostnames.clone();
        if let Err(errors) = defaulted(judged).validate(None) {
            problems.push(errors.message("HTTPRoute", &name));
        }
        let backends: Vec<Vec<Result<ClusterKey, Unresolved>>> = route
            .spec
            .rules
            .iter()
            .map(|rule| {
                served_backend_refs(rule).iter().map(|b| resolve(&namespace, b, services, grants)).collect()
            })
            .collect();
        let mut unresolved_mirrors = Vec::new();
        let extensions: Vec<RuleExtensions> = route
            .spec
            .rules
            .iter()
            .enumerate()
            .map(|(i, rule)| {
                let resolve = |b: &HTTPBackendRef| resolve(&namespace, b, services, grants);
                let (extensions, unresolved) =
                    filters::read_rule(&format!("spec.rules[{i}]"), rule, resolve, &mut problems);
                unresolved_mirrors.extend(unresolved);
                extensions
            })
            .collect();
        let resolved_refs = with_mirrors(
            resolved_refs(&CheckedRoute::with_backends(&envoy_route, backends.clone())),
            &unresolved_mirrors,
        );
        Self {
            namespace,
            name,
            hostnames: route.spec.hostnames.clone(),
            rules: envoy_route,
            unsupported: (!problems.is_empty()).then(|| problems.join("; ")),
            backends,
            extensions,
            resolved_refs,
        }
    }

    /// The route as served on a listener, with the hostnames it serves there.
    pub fn on_listener(&self, hostnames: Vec<String>) -> CheckedRoute {
        let mut route = self.rules.clone();
        route.spec.hostnames = hostnames;
        let mut checked = CheckedRoute::with_backends(&route, self.backends.clone());
        checked.extensions = self.extensions.clone();
        checked
    }
}

/// `ResolvedRefs` of the backendRefs, and of the mirrors' backends (with their field paths)
/// that do not resolve: those mirror nothing. The first reason of the backendRefs wins.
fn with_mirrors(backend_refs: ConditionState, unresolved_mirrors: &[(String, Unresolved)]) -> ConditionState {
    let Some((_, first)) = unresolved_mirrors.first() else { return backend_refs };
    let messages: Vec<String> = unresolved_mirrors.iter().map(|(at, why)| format!("{at}: {why}")).collect();
    let mirrors = format!("{}; no copy of the requests is sent there", messages.join("; "));
    if backend_refs.status {
        ConditionState { status: false, reason: first.reason, message: mirrors }
    } else {
        ConditionState { message: format!("{}; {mirrors}", backend_refs.message), ..backend_refs }
    }
}

/// A rule as an EnvoyRoute's; the filters it cannot carry are added to `problems`.
fn envoy_rule(path: &str, rule: &HTTPRouteRule, problems: &mut Vec<String>) -> RouteRule {
    let filters = rule
        .filters
        .iter()
        .enumerate()
        .filter(|(_, filter)| !filters::is_extension(filter))
        .filter_map(|(k, filter)| {
            let converted = envoy_filter(filter);
            if converted.is_none() {
                problems.push(format!(
                    "{path}.filters[{k}]: filter type {:?} is not supported (supported: {SUPPORTED_FILTERS})",
                    filter.filter_type
                ));
            }
            converted
        })
        .collect();
    for (k, backend) in rule.backend_refs.iter().enumerate() {
        if !backend.filters.is_empty() {
            problems.push(format!("{path}.backendRefs[{k}].filters: filters per backend are not supported"));
        }
    }
    RouteRule {
        matches: rule.matches.clone(),
        filters,
        backend_refs: served_backend_refs(rule)
            .iter()
            .map(|backend| BackendRef {
                group: backend.backend.group.clone(),
                kind: backend.backend.kind.clone(),
                name: backend.backend.name.clone(),
                port: backend.backend.port,
                weight: backend.weight,
            })
            .collect(),
        timeouts: rule.timeouts.clone(),
    }
}

/// The backendRefs requests of `rule` can reach: none where a `RequestRedirect` answers them.
/// Gateway API allows backendRefs beside a redirect (EnvoyRoute forbids the combination); they
/// receive nothing, so they are neither served nor resolved.
fn served_backend_refs(rule: &HTTPRouteRule) -> &[HTTPBackendRef] {
    let redirects = rule.filters.iter().any(|filter| filter.filter_type == "RequestRedirect");
    if redirects { &[] } else { &rule.backend_refs }
}

/// A filter of a type EnvoyRoute implements, with its configuration; `None` otherwise.
fn envoy_filter(filter: &HTTPRouteFilter) -> Option<RouteFilter> {
    let filter_type = match filter.filter_type.as_str() {
        "RequestHeaderModifier" if filter.request_header_modifier.is_some() => {
            FilterType::RequestHeaderModifier
        }
        "RequestRedirect" if filter.request_redirect.is_some() => FilterType::RequestRedirect,
        "URLRewrite" if filter.url_rewrite.is_some() => FilterType::UrlRewrite,
        _ => return None,
    };
    Some(RouteFilter {
        filter_type,
        request_header_modifier: filter.request_header_modifier.clone(),
        request_redirect: filter.request_redirect.clone(),
        url_rewrite: filter.url_rewrite.clone(),
    })
}

/// The Service port `backend` names, or why none: not a Service (`InvalidKind`), in another
/// namespace without a ReferenceGrant allowing it (`RefNotPermitted`), or no such Service or
/// port (`BackendNotFound`).
fn resolve(
    route_namespace: &str,
    backend: &HTTPBackendRef,
    services: &[Arc<Service>],
    grants: &[Arc<ReferenceGrant>],
) -> Result<ClusterKey, Unresolved> {
    let reference = &backend.backend;
    let effective = EffectiveBackendRef {
        group: reference.group.clone().unwrap_or_else(|| DEFAULT_BACKEND_GROUP.to_owned()),
        kind: reference.kind.clone().unwrap_or_else(|| DEFAULT_BACKEND_KIND.to_owned()),
        name: reference.name.clone(),
        port: reference.port,
        weight: backend.weight.unwrap_or(DEFAULT_WEIGHT),
    };
    let namespace = reference.namespace.as_deref().unwrap_or(route_namespace);
    let allowed = grants::permitted(
        grants,
        &Reference {
            from_group: GROUP,
            from_kind: "HTTPRoute",
            from_namespace: route_namespace,
            to_group: DEFAULT_BACKEND_GROUP,
            to_kind: DEFAULT_BACKEND_KIND,
            to_namespace: namespace,
            to_name: &reference.name,
        },
    );
    if effective.is_service() && !allowed {
        return Err(Unresolved {
            reason: REASON_REF_NOT_PERMITTED,
            message: format!(
                "Service {namespace}/{}: no ReferenceGrant in namespace {namespace:?} allows HTTPRoutes of namespace {route_namespace:?} to reference it",
                reference.name
            ),
        });
    }
    backend::resolve(namespace, &effective, services)
}
