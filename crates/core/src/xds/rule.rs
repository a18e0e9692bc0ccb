//! One Envoy route per rule × match of an EnvoyRoute: the match (path, headers, method, query
//! parameters), the action (forward to the backends by weight, redirect, or answer 500) and the
//! filters (header changes, host and path rewrites).

use super::attach::CheckedRoute;
use super::backends::{ClusterKey, Unresolved};
use super::model::{
    Action, ClusterNotFoundResponseCode, ClusterSpecifier, ClusterWeight, DirectResponseAction,
    HeaderAppendAction, HeaderMatcher, HeaderValue, HeaderValueOption, PathSpecifier, QueryParameterMatcher,
    RedirectAction, RedirectPathRewrite, RedirectResponseCode, RegexMatchAndSubstitute, RegexMatcher, Route,
    RouteAction, RouteMatch, StringMatcher, WeightedCluster,
};
use crate::api::route::{
    HeaderModifier, PathMatchType, PathModifier, PathModifierType, RedirectScheme, ValueMatchType,
};
use crate::rules::route::{EffectiveMatch, EffectiveRedirect, EffectiveRule, ValueMatch};

/// The cluster the share of backends that do not resolve goes to. It never exists, and a
/// route naming it answers 500 (`cluster_not_found_response_code`), as Gateway API asks for
/// requests meant for an invalid backend. Cluster names of Services contain `/`; this one
/// cannot collide with them.
pub const INVALID_BACKEND_CLUSTER: &str = "envoy-operator.invalid-backend";

/// What Gateway API answers for a rule that has nowhere to send requests.
pub const NO_BACKEND_STATUS: u32 = 500;

/// The Envoy route for match `match_index` of rule `rule_index` of a (valid) route.
pub fn envoy_route(checked: &CheckedRoute, rule_index: usize, match_index: usize) -> Option<Route> {
    let rule = checked.route.effective().rules.get(rule_index)?;
    let route_match = rule.matches.get(match_index)?;
    let backends = checked.backends.get(rule_index).map(Vec::as_slice).unwrap_or_default();
    let (request_headers_to_add, request_headers_to_remove) = header_changes(rule.header_modifier.as_ref());
    Some(Route {
        name: format!("{}/{}/rule/{rule_index}/match/{match_index}", checked.namespace(), checked.name()),
        route_match: envoy_match(route_match),
        action: action(rule, route_match, backends),
        request_headers_to_add,
        request_headers_to_remove,
    })
}

/// The clusters a (valid) route sends requests to.
pub fn used_clusters(checked: &CheckedRoute) -> Vec<ClusterKey> {
    let rules = checked.route.effective().rules.iter().zip(&checked.backends);
    rules
        .filter(|(rule, _)| rule.redirect.is_none())
        .flat_map(|(rule, backends)| weighted(rule, backends).0.into_iter().map(|(key, _)| key))
        .collect()
}

pub fn envoy_match(route_match: &EffectiveMatch) -> RouteMatch {
    let path = &route_match.path;
    let path_specifier = match route_match.path_type {
        PathMatchType::Exact => PathSpecifier::Path(path.clone()),
        // Whole segments: `/foo` matches `/foo` and `/foo/x`, not `/foobar`; a trailing `/` of
        // the value is ignored, as Gateway API says.
        PathMatchType::PathPrefix => match path.trim_end_matches('/') {
            "" => PathSpecifier::Prefix("/".to_owned()),
            segments => PathSpecifier::PathSeparatedPrefix(segments.to_owned()),
        },
        PathMatchType::RegularExpression => PathSpecifier::SafeRegex(RegexMatcher { regex: path.clone() }),
    };
    let mut headers: Vec<HeaderMatcher> = route_match
        .method
        .map(|method| HeaderMatcher {
            name: ":method".to_owned(),
            string_match: StringMatcher::Exact(method.as_str().to_owned()),
        })
        .into_iter()
        .collect();
    // Of several matches of one name (header names ignore case), only the first counts.
    let mut names = Vec::new();
    for header in &route_match.headers {
        let name = header.name.to_ascii_lowercase();
        if !names.contains(&name) {
            headers.push(HeaderMatcher { name: name.clone(), string_match: string_match(header) });
            names.push(name);
        }
    }
    let mut query_parameters: Vec<QueryParameterMatcher> = Vec::new();
    for query in &route_match.query_params {
        if !query_parameters.iter().any(|q| q.name == query.name) {
            query_parameters
                .push(QueryParameterMatcher { name: query.name.clone(), string_match: string_match(query) });
        }
    }
    RouteMatch { path_specifier, headers, query_parameters }
}

fn string_match(value_match: &ValueMatch) -> StringMatcher {
    match value_match.match_type {
        ValueMatchType::Exact => StringMatcher::Exact(value_match.value.clone()),
        ValueMatchType::RegularExpression => {
            StringMatcher::SafeRegex(RegexMatcher { regex: value_match.value.clone() })
        }
    }
}

fn action(
    rule: &EffectiveRule,
    route_match: &EffectiveMatch,
    backends: &[Result<ClusterKey, Unresolved>],
) -> Action {
    if let Some(redirect) = &rule.redirect {
        return Action::Redirect(redirect_action(redirect, route_match));
    }
    let (valid, invalid_weight) = weighted(rule, backends);
    let cluster_specifier = match valid.as_slice() {
        [] => return Action::DirectResponse(DirectResponseAction { status: NO_BACKEND_STATUS }),
        [(key, _)] if invalid_weight == 0 => ClusterSpecifier::Cluster(key.cluster_name()),
        _ => {
            let mut clusters: Vec<ClusterWeight> = valid
                .iter()
                .map(|(key, weight)| ClusterWeight { name: key.cluster_name(), weight: *weight })
                .collect();
            if invalid_weight > 0 {
                clusters
                    .push(ClusterWeight { name: INVALID_BACKEND_CLUSTER.to_owned(), weight: invalid_weight });
            }
            ClusterSpecifier::WeightedClusters(WeightedCluster { clusters })
        }
    };
    let rewrite = rule.url_rewrite.as_ref();
    let path_rewrite =
        rewrite.and_then(|r| r.path.as_ref()).and_then(|path| forward_path_rewrite(path, route_match));
    let (prefix_rewrite, regex_rewrite) = match path_rewrite {
        Some(PathRewrite::Prefix(prefix)) => (Some(prefix), None),
        Some(PathRewrite::Regex(regex)) => (None, Some(regex)),
        None => (None, None),
    };
    Action::Route(RouteAction {
        cluster_specifier,
        cluster_not_found_response_code: (invalid_weight > 0)
            .then_some(ClusterNotFoundResponseCode::InternalServerError),
        timeout: rule.request_timeout.map(Into::into),
        prefix_rewrite,
        regex_rewrite,
        host_rewrite_literal: rewrite.and_then(|r| r.hostname.clone()),
    })
}

/// The rule's backends with a share of the requests: those that resolve, merged by cluster in
/// the order of the rule, and the total weight of those that do not. Weight 0 sends nothing.
fn weighted(
    rule: &EffectiveRule,
    backends: &[Result<ClusterKey, Unresolved>],
) -> (Vec<(ClusterKey, u32)>, u32) {
    let mut valid: Vec<(ClusterKey, u32)> = Vec::new();
    let mut invalid_weight = 0u32;
    for (backend, resolution) in rule.backend_refs.iter().zip(backends) {
        let weight = u32::try_from(backend.weight).unwrap_or(0);
        if weight == 0 {
            continue;
        }
        // Validation bounds them (16 of at most 1_000_000); saturating all the same.
        match resolution {
            Ok(key) => match valid.iter_mut().find(|(known, _)| known == key) {
                Some((_, total)) => *total = total.saturating_add(weight),
                None => valid.push((key.clone(), weight)),
            },
            Err(_) => invalid_weight = invalid_weight.saturating_add(weight),
        }
    }
    (valid, invalid_weight)
}

fn redirect_action(redirect: &EffectiveRedirect, route_match: &EffectiveMatch) -> RedirectAction {
    let path_rewrite_specifier = redirect.path.as_ref().and_then(|path| match path.modifier_type {
        PathModifierType::ReplaceFullPath => {
            path.replace_full_path.clone().map(RedirectPathRewrite::PathRedirect)
        }
        PathModifierType::ReplacePrefixMatch => {
            let replacement = path.replace_prefix_match.as_deref()?;
            match prefix_rewrite(matched_prefix(route_match), replacement)? {
                PathRewrite::Prefix(prefix) => Some(RedirectPathRewrite::PrefixRewrite(prefix)),
                PathRewrite::Regex(regex) => Some(RedirectPathRewrite::RegexRewrite(regex)),
            }
        }
    });
    RedirectAction {
        scheme_redirect: redirect.scheme.map(|scheme| scheme.as_str().to_owned()),
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
fn redirect_port(redirect: &EffectiveRedirect) -> Option<u32> {
    match (redirect.port, redirect.scheme) {
        (Some(port), _) => u32::try_from(port).ok(),
        (None, Some(RedirectScheme::Https)) => Some(443),
        (None, Some(RedirectScheme::Http)) => Some(80),
        (None, None) => None,
    }
}

/// A new path for a forwarded request, in one of Envoy's two ways.
#[derive(Clone, Debug, PartialEq, Eq)]
enum PathRewrite {
    /// The matched prefix is replaced by this.
    Prefix(String),
    Regex(RegexMatchAndSubstitute),
}

fn forward_path_rewrite(path: &PathModifier, route_match: &EffectiveMatch) -> Option<PathRewrite> {
    match path.modifier_type {
        PathModifierType::ReplaceFullPath => Some(PathRewrite::Regex(RegexMatchAndSubstitute {
            pattern: RegexMatcher { regex: "^.*$".to_owned() },
            substitution: path.replace_full_path.clone()?,
        })),
        PathModifierType::ReplacePrefixMatch => {
            prefix_rewrite(matched_prefix(route_match), path.replace_prefix_match.as_deref()?)
        }
    }
}

/// The prefix a `ReplacePrefixMatch` replaces: the rule's one `PathPrefix` match (validation
/// sees to it; for any other match, the whole path value).
fn matched_prefix(route_match: &EffectiveMatch) -> &str {
    match route_match.path_type {
        PathMatchType::RegularExpression => "/",
        PathMatchType::Exact | PathMatchType::PathPrefix => &route_match.path,
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

/// Gateway API's `RequestHeaderModifier` as Envoy's header options: `set` replaces, `add`
/// appends, `remove` removes.
fn header_changes(modifier: Option<&HeaderModifier>) -> (Vec<HeaderValueOption>, Vec<String>) {
    let Some(modifier) = modifier else { return (Vec::new(), Vec::new()) };
    let option = |name: &str, value: &str, append_action| HeaderValueOption {
        header: HeaderValue { key: name.to_ascii_lowercase(), value: value.to_owned() },
        append_action,
    };
    let set =
        modifier.set.iter().map(|h| option(&h.name, &h.value, HeaderAppendAction::OverwriteIfExistsOrAdd));
    let add = modifier.add.iter().map(|h| option(&h.name, &h.value, HeaderAppendAction::AppendIfExistsOrAdd));
    let remove = modifier.remove.iter().map(|name| name.to_ascii_lowercase()).collect();
    (set.chain(add).collect(), remove)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::backends::REASON_BACKEND_NOT_FOUND;
    use super::*;
    use crate::api::EnvoyRoute;

    fn checked(rule: Value, backends: Vec<Result<ClusterKey, Unresolved>>) -> CheckedRoute {
        let route: EnvoyRoute = serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
            "metadata": {"name": "shop", "namespace": "shop"}, "spec": {"parentRefs": [{"name": "edge"}], "rules": [rule]}}))
        .unwrap();
        let mut checked = CheckedRoute::new(&route, &[]);
        checked.backends = vec![backends];
        checked
    }

    fn key(service: &str, port: i32) -> Result<ClusterKey, Unresolved> {
        Ok(ClusterKey { namespace: "shop".into(), service: service.into(), port })
    }

    fn missing() -> Result<ClusterKey, Unresolved> {
        Err(Unresolved { reason: REASON_BACKEND_NOT_FOUND, message: "gone".into() })
    }

    fn envoy(checked: &CheckedRoute, match_index: usize) -> Value {
        serde_json::to_value(envoy_route(checked, 0, match_index).expect("a route")).unwrap()
    }

    #[test]
    fn matches() {
        let rule = json!({"matches": [
            {"path": {"type": "PathPrefix", "value": "/api/"}, "method": "GET",
             "headers": [{"name": "X-Env", "value": "canary"}, {"name": "x-env", "value": "ignored"}, {"type": "RegularExpression", "name": "x-v", "value": "v[12]"}],
             "queryParams": [{"name": "debug", "value": "1"}]},
            {"path": {"type": "Exact", "value": "/login"}},
            {"path": {"type": "RegularExpression", "value": "/items/[0-9]+"}},
            {}
        ], "backendRefs": [{"name": "web", "port": 80}]});
        let checked = checked(rule, vec![key("web", 80)]);
        assert_eq!(
            envoy(&checked, 0)["match"],
            json!({"path_separated_prefix": "/api", "headers": [
                {"name": ":method", "string_match": {"exact": "GET"}},
                {"name": "x-env", "string_match": {"exact": "canary"}},
                {"name": "x-v", "string_match": {"safe_regex": {"regex": "v[12]"}}}],
                "query_parameters": [{"name": "debug", "string_match": {"exact": "1"}}]})
        );
        assert_eq!(envoy(&checked, 1)["match"], json!({"path": "/login"}));
        assert_eq!(envoy(&checked, 2)["match"], json!({"safe_regex": {"regex": "/items/[0-9]+"}}));
        assert_eq!(envoy(&checked, 3)["match"], json!({"prefix": "/"}));
        assert_eq!(envoy(&checked, 0)["name"], "shop/shop/rule/0/match/0");
        assert_eq!(envoy(&checked, 0)["route"], json!({"cluster": "shop/web/80"}));
    }

    #[test]
    fn weights_split_resolved_backends_and_the_rest_answers_500() {
        let rule = json!({"backendRefs": [
            {"name": "web", "port": 80, "weight": 3}, {"name": "canary", "port": 80, "weight": 1},
            {"name": "gone", "port": 80, "weight": 2}, {"name": "idle", "port": 80, "weight": 0},
            {"name": "web", "port": 80, "weight": 1}]});
        let checked = checked(
            rule,
            vec![key("web", 80), key("canary", 80), missing(), key("idle", 80), key("web", 80)],
        );
        assert_eq!(
            envoy(&checked, 0)["route"],
            json!({"weighted_clusters": {"clusters": [
                {"name": "shop/web/80", "weight": 4}, {"name": "shop/canary/80", "weight": 1},
                {"name": INVALID_BACKEND_CLUSTER, "weight": 2}]},
                "cluster_not_found_response_code": "INTERNAL_SERVER_ERROR"})
        );
        let keys: Vec<String> = used_clusters(&checked).iter().map(ClusterKey::cluster_name).collect();
        assert_eq!(keys, ["shop/web/80", "shop/canary/80"], "weight 0 needs no cluster");
    }

    #[test]
    fn nowhere_to_send_answers_500() {
        let status = |rule: Value, backends| envoy(&checked(rule, backends), 0)["direct_response"].clone();
        assert_eq!(status(json!({}), vec![]), json!({"status": 500}));
        assert_eq!(
            status(json!({"backendRefs": [{"name": "web", "port": 80, "weight": 0}]}), vec![key("web", 80)]),
            json!({"status": 500})
        );
        assert_eq!(
            status(json!({"backendRefs": [{"name": "gone", "port": 80}]}), vec![missing()]),
            json!({"status": 500})
        );
    }

    #[test]
    fn filters_become_header_options_rewrites_and_redirects() {
        let rule = json!({"matches": [{"path": {"value": "/shop"}}],
            "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "X-A", "value": "1"}], "add": [{"name": "x-b", "value": "2"}], "remove": ["X-C"]}},
                        {"type": "URLRewrite", "urlRewrite": {"hostname": "internal", "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/store/"}}}],
            "backendRefs": [{"name": "web", "port": 80}], "timeouts": {"request": "1m"}});
        let route = envoy(&checked(rule, vec![key("web", 80)]), 0);
        assert_eq!(
            route["route"],
            json!({"cluster": "shop/web/80", "timeout": "60s", "prefix_rewrite": "/store", "host_rewrite_literal": "internal"})
        );
        assert_eq!(
            route["request_headers_to_add"],
            json!([{"header": {"key": "x-a", "value": "1"}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"},
                   {"header": {"key": "x-b", "value": "2"}, "append_action": "APPEND_IF_EXISTS_OR_ADD"}])
        );
        assert_eq!(route["request_headers_to_remove"], json!(["x-c"]));

        let rule = json!({"matches": [{"path": {"type": "Exact", "value": "/old"}}],
            "filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "hostname": "shop.example.com", "port": 8443, "statusCode": 301,
                         "path": {"type": "ReplaceFullPath", "replaceFullPath": "/new"}}}]});
        assert_eq!(
            envoy(&checked(rule, vec![]), 0)["redirect"],
            json!({"scheme_redirect": "https", "host_redirect": "shop.example.com", "port_redirect": 8443,
                   "path_redirect": "/new", "response_code": "MOVED_PERMANENTLY"})
        );
        let rule = json!({"filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}]});
        assert_eq!(
            envoy(&checked(rule, vec![]), 0)["redirect"],
            json!({"scheme_redirect": "https", "port_redirect": 443, "response_code": "FOUND"}),
            "a new scheme without a port goes to the scheme's port"
        );
        let rule = json!({"filters": [{"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/index.html"}}}],
            "backendRefs": [{"name": "web", "port": 80}]});
        assert_eq!(
            envoy(&checked(rule, vec![key("web", 80)]), 0)["route"]["regex_rewrite"],
            json!({"pattern": {"regex": "^.*$"}, "substitution": "/index.html"})
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
