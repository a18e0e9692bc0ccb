//! Route configurations: one per listener (of the same name), a virtual host per domain, and
//! each IR route as Envoy's route: its match, and forwarding, redirecting or answering 500.

use crate::envoy::{
    Action, ClusterNotFoundResponseCode, ClusterSpecifier, ClusterWeight, DirectResponseAction,
    HeaderAppendAction, HeaderMatcher, HeaderValue, HeaderValueOption, PathSpecifier, QueryParameterMatcher,
    RedirectAction, RedirectPathRewrite, RedirectResponseCode, RegexMatchAndSubstitute, RegexMatcher, Route,
    RouteAction, RouteConfiguration, RouteMatch, StringMatcher, VirtualHost, WeightedCluster,
};
use crate::ir;

/// The cluster the share of backends that do not resolve goes to. It never exists, and a
/// route naming it answers 500 (`cluster_not_found_response_code`), as Gateway API asks for
/// requests meant for an invalid backend. Cluster names of Services contain `/`; this one
/// cannot collide with them.
pub const INVALID_BACKEND_CLUSTER: &str = "envoy-operator.invalid-backend";

/// What Gateway API answers for a rule that has nowhere to send requests.
pub const NO_BACKEND_STATUS: u32 = 500;

/// The listener's route configuration, named after it. A listener without virtual hosts still
/// has one: it waits for its route configuration before it serves (then answers 404).
pub fn route_configuration(listener: &ir::Listener) -> RouteConfiguration {
    RouteConfiguration {
        name: listener.name.clone(),
        virtual_hosts: listener.virtual_hosts.iter().map(|host| virtual_host(&listener.name, host)).collect(),
        ignore_port_in_host_matching: true,
        validate_clusters: None,
    }
}

fn virtual_host(listener: &str, host: &ir::VirtualHost) -> VirtualHost {
    VirtualHost {
        name: format!("{listener}/{}", host.domain),
        domains: vec![host.domain.to_string()],
        routes: host.routes.iter().map(route).collect(),
    }
}

pub fn route(route: &ir::Route) -> Route {
    let (request_headers_to_add, request_headers_to_remove) = header_changes(&route.request_headers);
    Route {
        name: route.name.clone(),
        route_match: route_match(route),
        action: action(&route.action, &route.path),
        request_headers_to_add,
        request_headers_to_remove,
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
        [] => return Action::DirectResponse(DirectResponseAction { status: NO_BACKEND_STATUS }),
        [only] if forward.unresolved_weight == 0 => ClusterSpecifier::Cluster(only.backend.clone()),
        backends => {
            let mut clusters: Vec<ClusterWeight> = backends
                .iter()
                .map(|weighted| ClusterWeight { name: weighted.backend.clone(), weight: weighted.weight })
                .collect();
            if forward.unresolved_weight > 0 {
                clusters.push(ClusterWeight {
                    name: INVALID_BACKEND_CLUSTER.to_owned(),
                    weight: forward.unresolved_weight,
                });
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
        cluster_not_found_response_code: (forward.unresolved_weight > 0)
            .then_some(ClusterNotFoundResponseCode::InternalServerError),
        timeout: forward.timeout.map(Into::into),
        prefix_rewrite,
        regex_rewrite,
        host_rewrite_literal: forward.host_rewrite.clone(),
    })
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

/// Header changes as Envoy's header options: `set` replaces, `add` appends, `remove` removes.
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
