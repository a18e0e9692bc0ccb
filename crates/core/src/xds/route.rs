//! Route configurations: one per plain listener (of the same name) or per TLS server of an
//! HTTPS listener, a virtual host per domain, and each IR route as Envoy's route: its match,
//! and forwarding, redirecting or answering 500.

use super::tls;
use crate::envoy::{
    Action, ClusterNotFoundResponseCode, ClusterSpecifier, ClusterWeight, DirectResponseAction,
    FractionalPercent, FractionalPercentDenominator, HeaderAppendAction, HeaderMatcher, HeaderValue,
    HeaderValueOption, PathSpecifier, QueryParameterMatcher, RedirectAction, RedirectPathRewrite,
    RedirectResponseCode, RegexMatchAndSubstitute, RegexMatcher, RequestMirrorPolicy, RetryPolicy, Route,
    RouteAction, RouteConfiguration, RouteMatch, RuntimeFractionalPercent, StringMatcher, VirtualHost,
    WeightedCluster,
};
use crate::ir;

/// The cluster the share of backends that do not resolve goes to. It never exists, and a
/// route naming it answers 500 (`cluster_not_found_response_code`), as Gateway API asks for
/// requests meant for an invalid backend. Cluster names of Services contain `/`; this one
/// cannot collide with them.
pub const INVALID_BACKEND_CLUSTER: &str = "envoy-operator.invalid-backend";

/// What Gateway API answers for an HTTPRoute's rule that has nowhere to send requests
/// ([`ir::UnresolvedAnswer`]: a GRPCRoute's is answered 503).
pub const NO_BACKEND_STATUS: u32 = 500;

/// The plain HTTP listener's route configuration, named after it. A listener without virtual
/// hosts still has one: it waits for its route configuration before it serves (then answers
/// 404).
pub fn route_configuration(listener: &ir::Listener) -> RouteConfiguration {
    named_route_configuration(listener.name.clone(), &listener.virtual_hosts)
}

/// Every route configuration the listener's connection managers use: for plain HTTP, the
/// listener's ([`route_configuration`]); for HTTPS, one per TLS server with a filter chain
/// ([`tls::route_configuration_name`]).
pub fn route_configurations(listener: &ir::Listener) -> Vec<RouteConfiguration> {
    if let Some(outbound) = &listener.outbound {
        return super::outbound::route_configurations(listener, outbound);
    }
    // TLS passed through is never read as HTTP: nothing to route.
    if !listener.passthrough.is_empty() {
        return Vec::new();
    }
    if listener.tls_servers.is_empty() {
        return vec![route_configuration(listener)];
    }
    tls::distinct_servers(listener)
        .map(|server| {
            let name = tls::route_configuration_name(&listener.name, &server.name);
            named_route_configuration(name, &server.virtual_hosts)
        })
        .collect()
}

pub(super) fn named_route_configuration(name: String, hosts: &[ir::VirtualHost]) -> RouteConfiguration {
    RouteConfiguration {
        virtual_hosts: hosts.iter().map(|host| virtual_host(&name, host)).collect(),
        name,
        ignore_port_in_host_matching: true,
        validate_clusters: None,
        // A backendRef's header filters are applied after its rule's: the backend's own win.
        most_specific_header_mutations_wins: true,
    }
}

/// Named after its route configuration and domain (unique in the configuration, as Envoy
/// requires).
fn virtual_host(configuration: &str, host: &ir::VirtualHost) -> VirtualHost {
    VirtualHost {
        name: format!("{configuration}/{}", host.domain),
        domains: vec![host.domain.to_string()],
        routes: host.routes.iter().map(route).collect(),
    }
}

pub fn route(route: &ir::Route) -> Route {
    let (request_headers_to_add, request_headers_to_remove) = header_changes(&route.request_headers);
    let (response_headers_to_add, response_headers_to_remove) = header_changes(&route.response_headers);
    Route {
        name: route.name.clone(),
        route_match: route_match(route),
        action: action(&route.action, &route.path),
        request_headers_to_add,
        request_headers_to_remove,
        response_headers_to_add,
        response_headers_to_remove,
    }
}

fn route_match(route: &ir::Route) -> RouteMatch {
    let path_specifier = match &route.path {
        ir::PathMatch::Exact(path) => PathSpecifier::Path(path.clone()),
        // Whole segments: `/foo` matches `/foo` and `/foo/x`, not `/foobar`; a trailing `/` of
        // the value is ignored, as Gateway API says.
        ir::PathMatch::Prefix(path) => match path.trim_end_matches('/') {
            "" => PathSpecifier::Prefix("/".to_owned()),
            segments => PathSpecifier::PathSeparatedPrefix(segments.to_owned()),
        },
        ir::PathMatch::RegularExpression(regex) => {
            PathSpecifier::SafeRegex(RegexMatcher { regex: regex.clone() })
        }
    };
    let method = route.method.as_ref().map(|method| HeaderMatcher {
        name: ":method".to_owned(),
        string_match: StringMatcher::Exact(method.clone()),
    });
    let headers = route.headers.iter().map(|header| HeaderMatcher {
        name: header.name.clone(),
        string_match: string_matcher(&header.value),
    });
    let query_parameters = route
        .query_params
        .iter()
        .map(|query| QueryParameterMatcher {
            name: query.name.clone(),
            string_match: string_matcher(&query.value),
        })
        .collect();
    RouteMatch { path_specifier, headers: method.into_iter().chain(headers).collect(), query_parameters }
}

fn string_matcher(value: &ir::StringMatch) -> StringMatcher {
    match value {
        ir::StringMatch::Exact(exact) => StringMatcher::Exact(exact.clone()),
        ir::StringMatch::RegularExpression(regex) => {
            StringMatcher::SafeRegex(RegexMatcher { regex: regex.clone() })
        }
    }
}

fn action(action: &ir::Action, path: &ir::PathMatch) -> Action {
    let forward = match action {
        ir::Action::Redirect(redirect) => return Action::Redirect(redirect_action(redirect, path)),
        ir::Action::Forward(forward) => forward,
    };
    let cluster_specifier = match forward.backends.as_slice() {
        [] => {
            let status = u32::from(forward.unresolved_answer.status());
            return Action::DirectResponse(DirectResponseAction { status });
        }
        // Header changes of a backend's own are a weighted cluster's: one backend with some is
        // a weighted cluster of one.
        [only] if forward.unresolved_weight == 0 && !only.changes_headers() => {
            ClusterSpecifier::Cluster(only.backend.clone())
        }
        backends => {
            let mut clusters: Vec<ClusterWeight> = backends.iter().map(cluster_weight).collect();
            if forward.unresolved_weight > 0 {
                clusters.push(cluster_weight(&ir::WeightedBackend::new(
                    INVALID_BACKEND_CLUSTER,
                    forward.unresolved_weight,
                )));
            }
            ClusterSpecifier::WeightedClusters(WeightedCluster { clusters })
        }
    };
    let (prefix_rewrite, regex_rewrite) =
        match forward.path_rewrite.as_ref().and_then(|p| path_rewrite(p, path)) {
            Some(PathRewrite::Prefix(prefix)) => (Some(prefix), None),
            Some(PathRewrite::Regex(regex)) => (None, Some(regex)),
            None => (None, None),
        };
    Action::Route(RouteAction {
        cluster_specifier,
        cluster_not_found_response_code: (forward.unresolved_weight > 0).then_some(
            match forward.unresolved_answer {
                ir::UnresolvedAnswer::InternalError => ClusterNotFoundResponseCode::InternalServerError,
                ir::UnresolvedAnswer::Unavailable | ir::UnresolvedAnswer::Closed => {
                    ClusterNotFoundResponseCode::ServiceUnavailable
                }
            },
        ),
        // The request's bound is the route's; without one, a backend's bound is the route's
        // too, so Envoy's default of 15 s cuts no longer attempt short.
        timeout: forward.timeout.or(forward.backend_timeout).map(Into::into),
        prefix_rewrite,
        regex_rewrite,
        host_rewrite_literal: forward.host_rewrite.clone(),
        request_mirror_policies: forward.mirrors.iter().map(mirror_policy).collect(),
        // Each attempt's bound (Envoy Gateway's mapping of `backendRequest` once retries exist):
        // its 504 says the backend was too slow, while the route's bounds the whole request.
        retry_policy: forward
            .backend_timeout
            .filter(|timeout| !timeout.is_zero())
            .map(|timeout| RetryPolicy { num_retries: 0, per_try_timeout: timeout.into() }),
    })
}

/// A weighted backend as Envoy's weighted cluster, with its own header changes.
fn cluster_weight(weighted: &ir::WeightedBackend) -> ClusterWeight {
    let (request_headers_to_add, request_headers_to_remove) = header_changes(&weighted.request_headers);
    let (response_headers_to_add, response_headers_to_remove) = header_changes(&weighted.response_headers);
    ClusterWeight {
        name: weighted.backend.clone(),
        weight: weighted.weight,
        request_headers_to_add,
        request_headers_to_remove,
        response_headers_to_add,
        response_headers_to_remove,
    }
}

/// A mirror as Envoy's policy; every request when no share is given.
fn mirror_policy(mirror: &ir::Mirror) -> RequestMirrorPolicy {
    RequestMirrorPolicy {
        cluster: mirror.backend.clone(),
        runtime_fraction: mirror
            .share
            .map(|share| RuntimeFractionalPercent { default_value: fractional_percent(share) }),
    }
}

/// A share as Envoy's: over the smallest of its denominators (100, 10 000, 1 000 000) that
/// holds it exactly (25/50 is 50/100, 1/3 is 333 333/1 000 000); else over a million, rounded to
/// the nearest (off by at most half a millionth). Capped at the whole.
fn fractional_percent(share: ir::Fraction) -> FractionalPercent {
    use FractionalPercentDenominator::{Hundred, Million, TenThousand};
    let (numerator, denominator) = (u64::from(share.numerator), u64::from(share.denominator.max(1)));
    let over = |envoy: FractionalPercentDenominator| {
        let scaled = numerator * envoy.value();
        let exact = scaled.is_multiple_of(denominator);
        let rounded = (scaled + denominator / 2) / denominator;
        (exact, u32::try_from(rounded.min(envoy.value())).unwrap_or(u32::MAX))
    };
    let exactly = [Hundred, TenThousand].into_iter().find_map(|envoy| match over(envoy) {
        (true, numerator) => Some(FractionalPercent { numerator, denominator: envoy }),
        (false, _) => None,
    });
    exactly.unwrap_or_else(|| FractionalPercent { numerator: over(Million).1, denominator: Million })
}

fn redirect_action(redirect: &ir::Redirect, path: &ir::PathMatch) -> RedirectAction {
    let path_rewrite_specifier = redirect.path.as_ref().and_then(|modifier| match modifier {
        ir::PathModifier::ReplaceFullPath(full) => Some(RedirectPathRewrite::PathRedirect(full.clone())),
        ir::PathModifier::ReplacePrefixMatch(replacement) => {
            match prefix_rewrite(matched_prefix(path), replacement)? {
                PathRewrite::Prefix(prefix) => Some(RedirectPathRewrite::PrefixRewrite(prefix)),
                PathRewrite::Regex(regex) => Some(RedirectPathRewrite::RegexRewrite(regex)),
            }
        }
    });
    RedirectAction {
        scheme_redirect: redirect.scheme.clone(),
        host_redirect: redirect.hostname.clone(),
        port_redirect: redirect_port(redirect),
        path_rewrite_specifier,
        response_code: if redirect.status_code == 301 {
            RedirectResponseCode::MovedPermanently
        } else {
            RedirectResponseCode::Found
        },
    }
}

/// The port of a redirect's location: the one given; else, with a new scheme, that scheme's
/// well-known port, as Gateway API says it must be (Envoy alone would keep the request's port,
/// e.g. send `http://shop:8080` to `https://shop:8080`; with it, the location says `:443`);
/// else the request's.
fn redirect_port(redirect: &ir::Redirect) -> Option<u32> {
    match (redirect.port, redirect.scheme.as_deref()) {
        (Some(port), _) => Some(port),
        (None, Some("https")) => Some(443),
        (None, Some("http")) => Some(80),
        (None, _) => None,
    }
}

/// A new path for a forwarded request, in one of Envoy's two ways.
#[derive(Clone, Debug, PartialEq, Eq)]
enum PathRewrite {
    /// The matched prefix is replaced by this.
    Prefix(String),
    Regex(RegexMatchAndSubstitute),
}

fn path_rewrite(modifier: &ir::PathModifier, path: &ir::PathMatch) -> Option<PathRewrite> {
    match modifier {
        ir::PathModifier::ReplaceFullPath(full) => Some(PathRewrite::Regex(RegexMatchAndSubstitute {
            pattern: RegexMatcher { regex: "^.*$".to_owned() },
            substitution: full.clone(),
        })),
        ir::PathModifier::ReplacePrefixMatch(replacement) => {
            prefix_rewrite(matched_prefix(path), replacement)
        }
    }
}

/// The prefix a `ReplacePrefixMatch` replaces: the rule's one `PathPrefix` match (validation
/// sees to it; for any other match, the whole path value).
fn matched_prefix(path: &ir::PathMatch) -> &str {
    match path {
        ir::PathMatch::RegularExpression(_) => "/",
        ir::PathMatch::Exact(path) | ir::PathMatch::Prefix(path) => path,
    }
}

/// Gateway API's `ReplacePrefixMatch`, in whole segments: with the prefix `/foo`, `/xyz`
/// makes `/foo/bar` `/xyz/bar` and `/foo` `/xyz`; an empty (or `/`) replacement makes
/// `/foo/bar` `/bar` and `/foo` `/`. `None` when nothing changes.
fn prefix_rewrite(prefix: &str, replacement: &str) -> Option<PathRewrite> {
    let prefix = prefix.trim_end_matches('/');
    let replacement = replacement.trim_end_matches('/');
    match (prefix.is_empty(), replacement.is_empty()) {
        (true, true) => None,
        // Envoy's prefix rewrite would leave `//bar`: drop the prefix and the slashes after it.
        (false, true) => Some(PathRewrite::Regex(RegexMatchAndSubstitute {
            pattern: RegexMatcher { regex: format!("^{}/*", re2_escape(prefix)) },
            substitution: "/".to_owned(),
        })),
        // The matched prefix is `/`: keep a `/` between the replacement and the rest.
        (true, false) => Some(PathRewrite::Prefix(format!("{replacement}/"))),
        (false, false) => Some(PathRewrite::Prefix(replacement.to_owned())),
    }
}

/// `text` as an RE2 pattern matching it literally.
fn re2_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// Header changes (of a request or a response) as Envoy's header options: `set` replaces, `add`
/// appends, `remove` removes.
fn header_changes(changes: &ir::HeaderChanges) -> (Vec<HeaderValueOption>, Vec<String>) {
    let option = |header: &ir::Header, append_action| HeaderValueOption {
        header: HeaderValue { key: header.name.clone(), value: header.value.clone() },
        append_action,
    };
    let set = changes.set.iter().map(|h| option(h, HeaderAppendAction::OverwriteIfExistsOrAdd));
    let add = changes.add.iter().map(|h| option(h, HeaderAppendAction::AppendIfExistsOrAdd));
    (set.chain(add).collect(), changes.remove.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Response header changes become the route's response header options; mirrors its
    /// mirror policies, with a share only where one is given (capped at 100%).
    /// gRPC's share of backends that do not resolve is answered 503, which Envoy turns into
    /// `grpc-status: 14` (UNAVAILABLE) for a gRPC request; HTTP's, 500.
    #[test]
    fn unresolved_backends_are_answered_in_the_route_kinds_terms() {
        let rendered = |backends: Vec<ir::WeightedBackend>, unresolved_answer| {
            let ir_route = ir::Route {
                name: "shop/api/rule/0/match/0".into(),
                path: ir::PathMatch::Prefix("/".into()),
                method: None,
                headers: Vec::new(),
                query_params: Vec::new(),
                request_headers: ir::HeaderChanges::default(),
                response_headers: ir::HeaderChanges::default(),
                action: ir::Action::Forward(ir::Forward {
                    backends,
                    unresolved_weight: 1,
                    unresolved_answer,
                    timeout: None,
                    backend_timeout: None,
                    host_rewrite: None,
                    path_rewrite: None,
                    mirrors: Vec::new(),
                }),
            };
            serde_json::to_value(route(&ir_route)).unwrap()
        };
        let one = || vec![ir::WeightedBackend::new("shop/grpc/8080/h2c", 1)];
        assert_eq!(rendered(Vec::new(), ir::UnresolvedAnswer::Unavailable)["direct_response"]["status"], 503);
        assert_eq!(
            rendered(Vec::new(), ir::UnresolvedAnswer::InternalError)["direct_response"]["status"],
            500
        );
        assert_eq!(
            rendered(one(), ir::UnresolvedAnswer::Unavailable)["route"]["cluster_not_found_response_code"],
            "SERVICE_UNAVAILABLE"
        );
        assert_eq!(
            rendered(one(), ir::UnresolvedAnswer::InternalError)["route"]["cluster_not_found_response_code"],
            "INTERNAL_SERVER_ERROR"
        );
    }

    #[test]
    fn response_headers_and_mirrors_are_rendered_on_the_route() {
        let header = |name: &str, value: &str| ir::Header { name: name.into(), value: value.into() };
        let mirror = |backend: &str, percent: Option<u32>| ir::Mirror {
            backend: backend.into(),
            share: percent.map(ir::Fraction::percent),
        };
        let ir_route = ir::Route {
            name: "shop/web/rule/0/match/0".into(),
            path: ir::PathMatch::Prefix("/".into()),
            method: None,
            headers: Vec::new(),
            query_params: Vec::new(),
            request_headers: ir::HeaderChanges::default(),
            response_headers: ir::HeaderChanges {
                set: vec![header("x-set", "1")],
                add: vec![header("x-add", "2")],
                remove: vec!["x-remove".into()],
            },
            action: ir::Action::Forward(ir::Forward {
                backends: vec![ir::WeightedBackend::new("shop/v1/80", 1)],
                unresolved_weight: 0,
                unresolved_answer: Default::default(),
                timeout: None,
                backend_timeout: None,
                host_rewrite: None,
                path_rewrite: None,
                mirrors: vec![
                    mirror("shop/v2/80", None),
                    mirror("shop/v3/80", Some(20)),
                    mirror("shop/v4/80", Some(500)),
                ],
            }),
        };
        let rendered = serde_json::to_value(route(&ir_route)).unwrap();
        assert_eq!(
            rendered["response_headers_to_add"],
            serde_json::json!([
                {"header": {"key": "x-set", "value": "1"}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"},
                {"header": {"key": "x-add", "value": "2"}, "append_action": "APPEND_IF_EXISTS_OR_ADD"},
            ])
        );
        assert_eq!(rendered["response_headers_to_remove"], serde_json::json!(["x-remove"]));
        let share = |numerator: u32| serde_json::json!({"default_value": {"numerator": numerator, "denominator": "HUNDRED"}});
        assert_eq!(
            rendered["route"]["request_mirror_policies"],
            serde_json::json!([
                {"cluster": "shop/v2/80"},
                {"cluster": "shop/v3/80", "runtime_fraction": share(20)},
                {"cluster": "shop/v4/80", "runtime_fraction": share(100)},
            ])
        );
        assert_eq!(rendered["route"]["cluster"], "shop/v1/80");
    }

    /// Gateway API's shares as Envoy's denominators hold them: exactly where one of 100, 10 000
    /// or 1 000 000 does, else the nearest millionth.
    #[test]
    fn mirror_shares_take_the_smallest_exact_denominator() {
        use FractionalPercentDenominator::{Hundred, Million, TenThousand};
        let envoy = |numerator, denominator| fractional_percent(ir::Fraction { numerator, denominator });
        let share = |numerator, denominator| FractionalPercent { numerator, denominator };
        assert_eq!(envoy(25, 50), share(50, Hundred), "the suite's fraction: 50%");
        assert_eq!(envoy(20, 100), share(20, Hundred));
        assert_eq!(envoy(1, 8), share(1250, TenThousand));
        assert_eq!(envoy(7, 1_000_000), share(7, Million));
        assert_eq!(envoy(1, 3), share(333_333, Million), "rounded to the nearest millionth");
        assert_eq!(envoy(2, 3), share(666_667, Million));
        assert_eq!(envoy(0, 7), share(0, Hundred));
        assert_eq!(envoy(9, 9), share(100, Hundred));
    }

    /// A backend's own header changes are its weighted cluster's, so a lone backend with some
    /// is a weighted cluster of one; the rest keep the plain form.
    #[test]
    fn a_backends_header_changes_are_its_weighted_clusters() {
        let header = |name: &str, value: &str| ir::Header { name: name.into(), value: value.into() };
        let with_headers = ir::WeightedBackend {
            request_headers: ir::HeaderChanges { set: vec![header("backend", "v1")], ..Default::default() },
            response_headers: ir::HeaderChanges { remove: vec!["server".into()], ..Default::default() },
            ..ir::WeightedBackend::new("shop/v1/80", 1)
        };
        let forward = |backends| {
            ir::Action::Forward(ir::Forward {
                backends,
                unresolved_weight: 0,
                unresolved_answer: Default::default(),
                timeout: None,
                backend_timeout: None,
                host_rewrite: None,
                path_rewrite: None,
                mirrors: Vec::new(),
            })
        };
        let rendered = |backends| {
            serde_json::to_value(action(&forward(backends), &ir::PathMatch::Prefix("/".into()))).unwrap()
        };
        assert_eq!(
            rendered(vec![with_headers.clone()])["route"],
            serde_json::json!({"weighted_clusters": {"clusters": [{"name": "shop/v1/80", "weight": 1,
                "request_headers_to_add": [{"header": {"key": "backend", "value": "v1"}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}],
                "response_headers_to_remove": ["server"]}]}})
        );
        assert_eq!(
            rendered(vec![ir::WeightedBackend::new("shop/v1/80", 1)])["route"],
            serde_json::json!({"cluster": "shop/v1/80"})
        );
        let two = rendered(vec![with_headers, ir::WeightedBackend::new("shop/v2/80", 3)]);
        assert_eq!(
            two["route"]["weighted_clusters"]["clusters"][1],
            serde_json::json!({"name": "shop/v2/80", "weight": 3})
        );
    }

    #[test]
    fn prefix_replacement_follows_gateway_apis_table() {
        let prefix = |p: &str| Some(PathRewrite::Prefix(p.to_owned()));
        let regex = |r: &str| {
            Some(PathRewrite::Regex(RegexMatchAndSubstitute {
                pattern: RegexMatcher { regex: r.to_owned() },
                substitution: "/".to_owned(),
            }))
        };
        assert_eq!(prefix_rewrite("/foo", "/xyz"), prefix("/xyz"));
        assert_eq!(prefix_rewrite("/foo/", "/xyz/"), prefix("/xyz"));
        assert_eq!(prefix_rewrite("/foo", ""), regex("^/foo/*"));
        assert_eq!(prefix_rewrite("/foo/", "/"), regex("^/foo/*"));
        assert_eq!(prefix_rewrite("/", "/xyz"), prefix("/xyz/"));
        assert_eq!(prefix_rewrite("/", "/"), None);
        assert_eq!(prefix_rewrite("/a.b+c", ""), regex(r"^/a\.b\+c/*"));
    }
}
