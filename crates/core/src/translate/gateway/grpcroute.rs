//! The GRPCRoute door: a GRPCRoute read once into the route model. A gRPC request is an HTTP/2
//! POST to `/<service>/<method>`, so each rule is said in HTTPRoute's shape (a method match
//! becomes a path match, as Envoy Gateway does) and read by the HTTPRoute door's reader, with
//! the same rule engine (RE2 judge, header checks), filters and backend resolution. What is
//! gRPC's own: backends are spoken to in HTTP/2 cleartext, and a backend that does not resolve
//! is answered 503, which Envoy tells a gRPC client as `UNAVAILABLE` (GRPCRoute's word).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;

use super::httproute::{Object, read_rules};
use super::listeners::GRPC_ROUTE;
use crate::api::gateway::{
    GRPCBackendRef, GRPCMethodMatch, GRPCRoute, GRPCRouteFilter, GRPCRouteMatch, GRPCRouteRule,
    HTTPBackendRef, HTTPRouteFilter, HTTPRouteRule, ReferenceGrant,
};
use crate::api::route::{PathMatch, PathMatchType, RouteMatch};
use crate::ir;
use crate::route::Route;
use crate::rules::re2;

/// The filter types the operator implements on a GRPCRoute (all of GRPCRoute's core and
/// extended ones but `ExtensionRef`).
const SUPPORTED_FILTERS: [&str; 3] = ["RequestHeaderModifier", "ResponseHeaderModifier", "RequestMirror"];

/// What a service or method the request names may be, where a match leaves it open.
const ANY_NAME: &str = "[^/]+";

/// A GRPCRoute, read into the model. Its `refused` says why the operator cannot serve it as it
/// is, naming the GRPCRoute's own fields where they are not HTTPRoute's.
pub fn read(route: &GRPCRoute, services: &[Arc<Service>], grants: &[Arc<ReferenceGrant>]) -> Route {
    let mut problems = Vec::new();
    let rules: Vec<HTTPRouteRule> = route
        .spec
        .rules
        .iter()
        .enumerate()
        .map(|(i, rule)| http_rule(&format!("spec.rules[{i}]"), rule, &mut problems))
        .collect();
    let object = Object {
        kind: GRPC_ROUTE,
        metadata: &route.metadata,
        hostnames: &route.spec.hostnames,
        protocol: ir::BackendProtocol::Http2,
        unresolved_answer: ir::UnresolvedAnswer::Unavailable,
    };
    read_rules(&object, &rules, problems, services, grants)
}

/// `rule` in HTTPRoute's shape; what cannot be said in it goes to `problems`.
fn http_rule(path: &str, rule: &GRPCRouteRule, problems: &mut Vec<String>) -> HTTPRouteRule {
    HTTPRouteRule {
        name: rule.name.clone(),
        matches: rule
            .matches
            .iter()
            .enumerate()
            .map(|(j, grpc_match)| route_match(&format!("{path}.matches[{j}]"), grpc_match, problems))
            .collect(),
        filters: http_filters(path, &rule.filters, problems),
        backend_refs: rule.backend_refs.iter().map(|backend| backend_ref(path, backend, problems)).collect(),
        timeouts: None,
    }
}

fn route_match(path: &str, grpc_match: &GRPCRouteMatch, problems: &mut Vec<String>) -> RouteMatch {
    let path_match = grpc_match.method.as_ref().map(|method| {
        method_path(&format!("{path}.method"), method).unwrap_or_else(|problem| {
            problems.push(problem);
            // Refused all the same; a path the rule engine accepts, so it says nothing twice.
            PathMatch { match_type: Some(PathMatchType::PathPrefix), value: Some("/".to_owned()) }
        })
    });
    RouteMatch {
        path: path_match,
        headers: grpc_match.headers.clone(),
        query_params: Vec::new(),
        method: None,
    }
}

/// The path match of a method match: `Exact` with a service and a method is the exact path
/// `/<service>/<method>`; with a service only, the path prefix `/<service>` (whole segments);
/// with a method only, the regular expression `/[^/]+/<method>`. `RegularExpression` is
/// `/(?:<service>)/(?:<method>)`, either `[^/]+` when not given.
fn method_path(path: &str, method: &GRPCMethodMatch) -> Result<PathMatch, String> {
    let service = method.service.as_deref().filter(|s| !s.is_empty());
    let name = method.method.as_deref().filter(|m| !m.is_empty());
    if service.is_none() && name.is_none() {
        return Err(format!("{path}: one or both of service and method must be specified"));
    }
    let exact =
        |match_type, value: String| Ok(PathMatch { match_type: Some(match_type), value: Some(value) });
    match method.match_type.as_deref().unwrap_or("Exact") {
        "Exact" => {
            if let Some(service) = service.filter(|s| !is_service_name(s)) {
                return Err(format!(
                    "{path}.service: {service:?} is not a gRPC service name (letters, digits, '_', separated by '.')"
                ));
            }
            if let Some(name) = name.filter(|m| !is_method_name(m)) {
                return Err(format!(
                    "{path}.method: {name:?} is not a gRPC method name (letters, digits, '_')"
                ));
            }
            match (service, name) {
                (Some(service), Some(name)) => exact(PathMatchType::Exact, format!("/{service}/{name}")),
                (Some(service), None) => exact(PathMatchType::PathPrefix, format!("/{service}")),
                (None, Some(name)) => exact(PathMatchType::RegularExpression, format!("/{ANY_NAME}/{name}")),
                (None, None) => unreachable!("one of them is given, checked above"),
            }
        }
        "RegularExpression" => {
            for (field, pattern) in [("service", service), ("method", name)] {
                if let Some(pattern) = pattern
                    && let Err(refusal) = re2::judge(pattern)
                {
                    return Err(format!("{path}.{field}: {pattern:?}: {}", refusal.0));
                }
            }
            let regex = format!("/(?:{})/(?:{})", service.unwrap_or(ANY_NAME), name.unwrap_or(ANY_NAME));
            exact(PathMatchType::RegularExpression, regex)
        }
        other => {
            Err(format!("{path}.type: {other:?} is not supported (supported: Exact, RegularExpression)"))
        }
    }
}

/// Gateway API's service name: `^(?i)\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*$`.
fn is_service_name(service: &str) -> bool {
    let service = service.strip_prefix('.').unwrap_or(service);
    service.split('.').all(is_method_name)
}

/// Gateway API's method name: `^[A-Za-z_][A-Za-z_0-9]*$`.
fn is_method_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The filters the operator implements, as HTTPRoute's; the others refuse the route.
fn http_filters(path: &str, filters: &[GRPCRouteFilter], problems: &mut Vec<String>) -> Vec<HTTPRouteFilter> {
    filters
        .iter()
        .enumerate()
        .filter_map(|(k, filter)| {
            if !SUPPORTED_FILTERS.contains(&filter.filter_type.as_str()) {
                problems.push(format!(
                    "{path}.filters[{k}]: filter type {:?} is not supported (supported: {})",
                    filter.filter_type,
                    SUPPORTED_FILTERS.join(", ")
                ));
                return None;
            }
            Some(http_filter(filter))
        })
        .collect()
}

fn http_filter(filter: &GRPCRouteFilter) -> HTTPRouteFilter {
    HTTPRouteFilter {
        filter_type: filter.filter_type.clone(),
        request_header_modifier: filter.request_header_modifier.clone(),
        response_header_modifier: filter.response_header_modifier.clone(),
        request_mirror: filter.request_mirror.clone(),
        request_redirect: None,
        url_rewrite: None,
        extension_ref: filter.extension_ref.clone(),
    }
}

/// A backendRef as HTTPRoute's. Its filters (per backend) are passed on for the HTTPRoute
/// reader to refuse in its words: the operator implements none.
fn backend_ref(path: &str, backend: &GRPCBackendRef, problems: &mut Vec<String>) -> HTTPBackendRef {
    HTTPBackendRef {
        backend: backend.backend.clone(),
        weight: backend.weight,
        filters: http_filters(path, &backend.filters, problems),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn method(match_type: Option<&str>, service: Option<&str>, name: Option<&str>) -> GRPCMethodMatch {
        GRPCMethodMatch {
            match_type: match_type.map(Into::into),
            service: service.map(Into::into),
            method: name.map(Into::into),
        }
    }

    fn path(match_type: PathMatchType, value: &str) -> PathMatch {
        PathMatch { match_type: Some(match_type), value: Some(value.into()) }
    }

    #[test]
    fn method_matches_are_path_matches() {
        let of = |m: GRPCMethodMatch| method_path("m", &m);
        assert_eq!(
            of(method(None, Some("echo.Echo"), Some("Echo"))),
            Ok(path(PathMatchType::Exact, "/echo.Echo/Echo"))
        );
        assert_eq!(
            of(method(Some("Exact"), Some("echo.Echo"), None)),
            Ok(path(PathMatchType::PathPrefix, "/echo.Echo"))
        );
        assert_eq!(
            of(method(None, None, Some("Echo"))),
            Ok(path(PathMatchType::RegularExpression, "/[^/]+/Echo"))
        );
        assert_eq!(
            of(method(Some("RegularExpression"), Some("echo\\..*"), None)),
            Ok(path(PathMatchType::RegularExpression, "/(?:echo\\..*)/(?:[^/]+)"))
        );
    }

    #[test]
    fn bad_method_matches_say_which_field() {
        let of = |m: GRPCMethodMatch| method_path("spec.rules[0].matches[0].method", &m).unwrap_err();
        assert_eq!(
            of(method(None, None, None)),
            "spec.rules[0].matches[0].method: one or both of service and method must be specified"
        );
        assert!(
            of(method(None, Some("echo/Echo"), None)).starts_with("spec.rules[0].matches[0].method.service:")
        );
        assert!(
            of(method(None, None, Some("Echo.Two"))).starts_with("spec.rules[0].matches[0].method.method:")
        );
        assert!(
            of(method(Some("RegularExpression"), None, Some("(?<=a)b")))
                .starts_with("spec.rules[0].matches[0].method.method: \"(?<=a)b\":"),
            "RE2 has no lookbehind"
        );
        assert!(of(method(Some("Prefix"), Some("a"), None)).contains("type: \"Prefix\" is not supported"));
    }

    #[test]
    fn service_and_method_names_follow_gateway_api() {
        assert!(is_service_name("gateway_api_conformance.echo_basic.grpcecho.GrpcEcho"));
        assert!(is_service_name(".leading.Dot"));
        assert!(!is_service_name("two..dots") && !is_service_name("1digit") && !is_service_name(""));
        assert!(is_method_name("EchoTwo") && is_method_name("_x1"));
        assert!(!is_method_name("Echo-Two") && !is_method_name(""));
    }
}
