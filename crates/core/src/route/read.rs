//! A defaulted rule ([`EffectiveRule`], what the rule engine makes of EnvoyRoute's and
//! HTTPRoute's shared rule shape) as the model's: matches in the IR's terms, header changes
//! with lowercase names, and the action.

use super::{Action, BackendRef, ClusterKey, Forward, Match, Mirror, Rule, Unresolved};
use crate::api::route::{
    HeaderModifier, HttpHeader, PathMatchType, PathModifier, PathModifierType, ValueMatchType,
};
use crate::ir;
use crate::rules::route::{EffectiveMatch, EffectiveRedirect, EffectiveRule, ValueMatch};

/// The model's rule of `effective`: `backends` holds, for each of its backendRefs, the Service
/// port or why none; `response_headers` and `mirrors` what only some route kinds say.
pub fn rule(
    effective: &EffectiveRule,
    backends: Vec<Result<ClusterKey, Unresolved>>,
    response_headers: ir::HeaderChanges,
    mirrors: Vec<Mirror>,
) -> Rule {
    let action = match &effective.redirect {
        Some(redirect) => Action::Redirect(redirect_of(redirect)),
        None => {
            let rewrite = effective.url_rewrite.as_ref();
            Action::Forward(Forward {
                backends: effective
                    .backend_refs
                    .iter()
                    .zip(backends)
                    .map(|(reference, backend)| BackendRef {
                        backend,
                        weight: u32::try_from(reference.weight).unwrap_or(0),
                        request_headers: ir::HeaderChanges::default(),
                        response_headers: ir::HeaderChanges::default(),
                    })
                    .collect(),
                timeout: effective.request_timeout,
                backend_timeout: effective.backend_request_timeout,
                host_rewrite: rewrite.and_then(|r| r.hostname.clone()),
                path_rewrite: rewrite.and_then(|r| r.path.as_ref()).and_then(path_modifier),
                mirrors,
                unresolved_answer: ir::UnresolvedAnswer::InternalError,
            })
        }
    };
    Rule {
        matches: effective.matches.iter().map(route_match).collect(),
        request_headers: header_changes(effective.header_modifier.as_ref()),
        response_headers,
        action,
    }
}

fn route_match(effective: &EffectiveMatch) -> Match {
    let path = effective.path.clone();
    Match {
        path: match effective.path_type {
            PathMatchType::Exact => ir::PathMatch::Exact(path),
            PathMatchType::PathPrefix => ir::PathMatch::Prefix(path),
            PathMatchType::RegularExpression => ir::PathMatch::RegularExpression(path),
        },
        method: effective.method.map(|method| method.as_str().to_owned()),
        headers: value_matches(&effective.headers, str::to_ascii_lowercase),
        query_params: value_matches(&effective.query_params, str::to_owned),
    }
}

/// Of several matches of one name (`normalize`d: header names ignore case), only the first
/// counts.
fn value_matches(matches: &[ValueMatch], normalize: fn(&str) -> String) -> Vec<ir::ValueMatch> {
    let mut unique: Vec<ir::ValueMatch> = Vec::new();
    for value_match in matches {
        let name = normalize(&value_match.name);
        if !unique.iter().any(|known| known.name == name) {
            let value = match value_match.match_type {
                ValueMatchType::Exact => ir::StringMatch::Exact(value_match.value.clone()),
                ValueMatchType::RegularExpression => {
                    ir::StringMatch::RegularExpression(value_match.value.clone())
                }
            };
            unique.push(ir::ValueMatch { name, value });
        }
    }
    unique
}

fn redirect_of(redirect: &EffectiveRedirect) -> ir::Redirect {
    ir::Redirect {
        scheme: redirect.scheme.map(|scheme| scheme.as_str().to_owned()),
        hostname: redirect.hostname.clone(),
        port: redirect.port.and_then(|port| u32::try_from(port).ok()),
        path: redirect.path.as_ref().and_then(path_modifier),
        // Validation allows 301 and 302 only.
        status_code: u16::try_from(redirect.status_code).unwrap_or(302),
    }
}

/// The new path a modifier asks for; none when its type's value is missing.
fn path_modifier(path: &PathModifier) -> Option<ir::PathModifier> {
    match path.modifier_type {
        PathModifierType::ReplaceFullPath => {
            path.replace_full_path.clone().map(ir::PathModifier::ReplaceFullPath)
        }
        PathModifierType::ReplacePrefixMatch => {
            path.replace_prefix_match.clone().map(ir::PathModifier::ReplacePrefixMatch)
        }
    }
}

/// A header modifier (`RequestHeaderModifier`, `ResponseHeaderModifier`) as the IR's changes,
/// names lowercase.
pub fn header_changes(modifier: Option<&HeaderModifier>) -> ir::HeaderChanges {
    let Some(modifier) = modifier else { return ir::HeaderChanges::default() };
    let headers = |headers: &[HttpHeader]| -> Vec<ir::Header> {
        headers
            .iter()
            .map(|h| ir::Header { name: h.name.to_ascii_lowercase(), value: h.value.clone() })
            .collect()
    };
    ir::HeaderChanges {
        set: headers(&modifier.set),
        add: headers(&modifier.add),
        remove: modifier.remove.iter().map(|name| name.to_ascii_lowercase()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::api::EnvoyRoute;
    use crate::route::backend::REASON_BACKEND_NOT_FOUND;
    use crate::route::conditions::ConditionState;
    use crate::route::{Route, Rule};
    use crate::rules::defaulted;
    use crate::xds as to_envoy;
    use crate::xds::route::INVALID_BACKEND_CLUSTER;

    /// A route of the one rule `rule`, its backendRefs resolving as `backends` say.
    fn checked(rule: Value, backends: Vec<Result<ClusterKey, Unresolved>>) -> Route {
        let object: EnvoyRoute = serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
            "metadata": {"name": "shop", "namespace": "shop"}, "spec": {"parentRefs": [{"name": "edge"}], "rules": [rule]}}))
        .unwrap();
        let effective = defaulted(object).effective().rules[0].clone();
        let rule: Rule = super::rule(&effective, backends, Default::default(), Vec::new());
        let resolved_refs = ConditionState { status: true, reason: "ResolvedRefs", message: String::new() };
        Route {
            kind: "EnvoyRoute",
            namespace: "shop".into(),
            name: "shop".into(),
            created: None,
            hostnames: Vec::new(),
            rules: vec![rule],
            refused: None,
            resolved_refs,
        }
    }

    fn key(service: &str, port: i32) -> Result<ClusterKey, Unresolved> {
        Ok(ClusterKey {
            namespace: "shop".into(),
            service: service.into(),
            port,
            protocol: Default::default(),
        })
    }

    fn missing() -> Result<ClusterKey, Unresolved> {
        Err(Unresolved { reason: REASON_BACKEND_NOT_FOUND, message: "gone".into() })
    }

    /// The route as Envoy gets it.
    fn envoy(checked: &Route, match_index: usize) -> Value {
        serde_json::to_value(to_envoy::route::route(&checked.ir_route(0, match_index).expect("a route")))
            .unwrap()
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
        let keys: Vec<String> = checked.used_clusters().into_iter().map(ClusterKey::cluster_name).collect();
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
}
