//! The HTTPRoute door: an HTTPRoute read once into the route model. Its rules share
//! EnvoyRoute's shape, so the rule engine judges and defaults them ([`RuleView`]) in the same
//! words; the filters EnvoyRoute does not have are read beside them ([`super::filters`]), the
//! filters the operator does not implement refuse the route, and its backends resolve by
//! Gateway API's rules (Services of other namespaces where a ReferenceGrant allows it), each
//! with the header changes of its own filters.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::conditions::{ConditionState, REASON_REF_NOT_PERMITTED};
use super::filters;
use super::grants::{self, Reference};
use crate::api::gateway::{GROUP, HTTPBackendRef, HTTPRoute, HTTPRouteFilter, HTTPRouteRule, ReferenceGrant};
use crate::api::route::FilterType;
use crate::ir;
use crate::route::backend::{self, ClusterKey, Unresolved};
use crate::route::{self, Route, status};
use crate::rules::route::{
    BackendView, DEFAULT_BACKEND_GROUP, DEFAULT_BACKEND_KIND, DEFAULT_WEIGHT, EffectiveBackendRef,
    FilterView, RuleView, validate_routing,
};
use crate::translate::gateway::listeners::HTTP_ROUTE;

/// The filter types the operator implements.
const SUPPORTED_FILTERS: &str =
    "RequestHeaderModifier, ResponseHeaderModifier, RequestMirror, RequestRedirect, URLRewrite";

/// An HTTPRoute, read into the model. Its `refused` says why the operator cannot serve it as it
/// is (a filter it does not implement, what the rule engine refuses).
pub fn read(route: &HTTPRoute, services: &[Arc<Service>], grants: &[Arc<ReferenceGrant>]) -> Route {
    let object = Object {
        kind: HTTP_ROUTE,
        metadata: &route.metadata,
        hostnames: &route.spec.hostnames,
        protocol: ir::BackendProtocol::Http1,
        unresolved_answer: ir::UnresolvedAnswer::InternalError,
    };
    read_rules(&object, &route.spec.rules, Vec::new(), services, grants)
}

/// A route object of an HTTP kind (HTTPRoute, GRPCRoute), what its rules do not say.
pub struct Object<'a> {
    pub kind: &'static str,
    pub metadata: &'a ObjectMeta,
    pub hostnames: &'a [String],
    /// How the proxies speak to its backends.
    pub protocol: ir::BackendProtocol,
    /// What the share of its backends that do not resolve is answered.
    pub unresolved_answer: ir::UnresolvedAnswer,
}

/// Rules of HTTPRoute's shape (a GRPCRoute's, once translated to it), read into the model;
/// `problems` holds what the caller already found wrong.
pub fn read_rules(
    object: &Object,
    spec_rules: &[HTTPRouteRule],
    mut problems: Vec<String>,
    services: &[Arc<Service>],
    grants: &[Arc<ReferenceGrant>],
) -> Route {
    let namespace = object.metadata.namespace.clone().unwrap_or_default();
    let name = object.metadata.name.clone().unwrap_or_default();
    let views: Vec<RuleView> = spec_rules
        .iter()
        .enumerate()
        .map(|(i, rule)| rule_view(&format!("spec.rules[{i}]"), rule, &mut problems))
        .collect();
    if let Err(errors) = validate_routing(object.hostnames, &views) {
        problems.push(errors.message(object.kind, &name));
    }
    let resolve = |b: &HTTPBackendRef| {
        resolve(object.kind, &namespace, b, services, grants).map(|key| key.with_protocol(object.protocol))
    };
    let mut unresolved = Vec::new();
    let mut unresolved_mirrors = Vec::new();
    let mut rules: Vec<route::Rule> = Vec::new();
    for (i, (rule, view)) in spec_rules.iter().zip(&views).enumerate() {
        let backends: Vec<Result<ClusterKey, Unresolved>> = served_backend_refs(rule)
            .iter()
            .enumerate()
            .map(|(k, reference)| {
                let resolved = resolve(reference);
                if let Err(why) = &resolved {
                    unresolved.push((format!("spec.rules[{i}].backendRefs[{k}]"), why.clone()));
                }
                resolved
            })
            .collect();
        let (extensions, unresolved) =
            filters::read_rule(&format!("spec.rules[{i}]"), rule, resolve, &mut problems);
        unresolved_mirrors.extend(unresolved);
        let mut read =
            route::rule(&view.effective(), backends, extensions.response_headers, extensions.mirrors);
        if let route::Action::Forward(forward) = &mut read.action {
            // The rule engine reads no backendRef's filters: their header changes join here.
            for (k, (backend, reference)) in
                forward.backends.iter_mut().zip(served_backend_refs(rule)).enumerate()
            {
                let path = format!("spec.rules[{i}].backendRefs[{k}]");
                (backend.request_headers, backend.response_headers) =
                    filters::read_backend(&path, reference, &mut problems);
            }
        }
        rules.push(read);
    }
    if rules.is_empty() {
        rules.push(route::rule(&RuleView::default().effective(), Vec::new(), Default::default(), Vec::new()));
    }
    for rule in &mut rules {
        if let route::Action::Forward(forward) = &mut rule.action {
            forward.unresolved_answer = object.unresolved_answer;
        }
    }
    Route {
        kind: object.kind,
        namespace,
        name,
        created: object.metadata.creation_timestamp.as_ref().map(|time| time.0),
        hostnames: object.hostnames.to_vec(),
        rules,
        refused: (!problems.is_empty()).then(|| problems.join("; ")),
        resolved_refs: with_mirrors(
            status::resolved_refs_answered(&unresolved, object.unresolved_answer),
            &unresolved_mirrors,
        ),
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

/// A rule as the rule engine reads it; the filters the operator does not implement are added
/// to `problems`.
fn rule_view<'a>(path: &str, rule: &'a HTTPRouteRule, problems: &mut Vec<String>) -> RuleView<'a> {
    let filters = rule
        .filters
        .iter()
        .enumerate()
        .filter(|(_, filter)| !filters::is_extension(filter))
        .filter_map(|(k, filter)| {
            let view = filter_view(k, filter);
            if view.is_none() {
                problems.push(format!(
                    "{path}.filters[{k}]: filter type {:?} is not supported (supported: {SUPPORTED_FILTERS})",
                    filter.filter_type
                ));
            }
            view
        })
        .collect();
    RuleView {
        matches: &rule.matches,
        filters,
        backend_refs: served_backend_refs(rule)
            .iter()
            .map(|backend| BackendView {
                group: backend.backend.group.as_deref(),
                kind: backend.backend.kind.as_deref(),
                name: &backend.backend.name,
                port: backend.backend.port,
                weight: backend.weight,
            })
            .collect(),
        timeouts: rule.timeouts.as_ref(),
    }
}

/// The backendRefs requests of `rule` can reach: none where a `RequestRedirect` answers them.
/// Gateway API allows backendRefs beside a redirect (EnvoyRoute forbids the combination); they
/// receive nothing, so they are neither served nor resolved.
fn served_backend_refs(rule: &HTTPRouteRule) -> &[HTTPBackendRef] {
    let redirects = rule.filters.iter().any(|filter| filter.filter_type == "RequestRedirect");
    if redirects { &[] } else { &rule.backend_refs }
}

/// A filter of a type the rule engine knows, with its configuration; `None` otherwise.
fn filter_view(index: usize, filter: &HTTPRouteFilter) -> Option<FilterView<'_>> {
    let filter_type = match filter.filter_type.as_str() {
        "RequestHeaderModifier" if filter.request_header_modifier.is_some() => {
            FilterType::RequestHeaderModifier
        }
        "RequestRedirect" if filter.request_redirect.is_some() => FilterType::RequestRedirect,
        "URLRewrite" if filter.url_rewrite.is_some() => FilterType::UrlRewrite,
        _ => return None,
    };
    Some(FilterView {
        index,
        filter_type,
        request_header_modifier: filter.request_header_modifier.as_ref(),
        request_redirect: filter.request_redirect.as_ref(),
        url_rewrite: filter.url_rewrite.as_ref(),
    })
}

/// The Service port `backend` names, or why none: not a Service (`InvalidKind`), in another
/// namespace without a ReferenceGrant allowing it (`RefNotPermitted`), or no such Service or
/// port (`BackendNotFound`).
fn resolve(
    from_kind: &str,
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
            from_kind,
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
                "Service {namespace}/{}: no ReferenceGrant in namespace {namespace:?} allows {from_kind}s of namespace {route_namespace:?} to reference it",
                reference.name
            ),
        });
    }
    backend::resolve(namespace, &effective, services)
}
