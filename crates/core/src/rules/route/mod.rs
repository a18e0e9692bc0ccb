//! Defaults and validation of EnvoyRoute, after Gateway API's HTTPRoute: a rule without
//! matches matches every path (`PathPrefix /`), a path match is `PathPrefix /`, header and
//! query matches are `Exact`, a backend is a `Service` of weight 1, a redirect answers 302.
//! Nothing of a route is immutable.

mod validate;

use std::time::Duration;

use super::{FieldErrors, Rules, Warnings, format};
use crate::api::route::{
    BackendRef, EnvoyRoute, FilterType, HeaderModifier, HttpMethod, ParentReference, PathMatch,
    PathMatchType, PathModifier, RedirectScheme, RequestRedirect, RouteMatch, RouteRule, RouteTimeouts,
    UrlRewrite, ValueMatchType,
};

/// Group of a backend that does not say: the core group, where Services are.
pub const DEFAULT_BACKEND_GROUP: &str = "";
/// Kind of a backend that does not say.
pub const DEFAULT_BACKEND_KIND: &str = "Service";
/// Weight of a backend that does not say.
pub const DEFAULT_WEIGHT: i32 = 1;
/// Status code of a redirect that does not say.
pub const DEFAULT_REDIRECT_STATUS: i32 = 302;
/// Path of a match that does not say: every path.
pub const DEFAULT_PATH: &str = "/";

/// A defaulted route: every rule, match and backend with its defaults resolved, what the
/// translation reads.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveRoute {
    pub parent_refs: Vec<ParentReference>,
    pub hostnames: Vec<String>,
    pub rules: Vec<EffectiveRule>,
}

/// A defaulted rule. Of filters of the same type (which validation refuses) the first counts.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveRule {
    /// Never empty.
    pub matches: Vec<EffectiveMatch>,
    pub header_modifier: Option<HeaderModifier>,
    pub redirect: Option<EffectiveRedirect>,
    pub url_rewrite: Option<UrlRewrite>,
    pub backend_refs: Vec<EffectiveBackendRef>,
    /// `timeouts.request`, when set and readable (zero: no timeout).
    pub request_timeout: Option<Duration>,
    /// `timeouts.backendRequest`, when set and readable (zero: no timeout).
    pub backend_request_timeout: Option<Duration>,
}

/// A defaulted match.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveMatch {
    pub path_type: PathMatchType,
    pub path: String,
    pub headers: Vec<ValueMatch>,
    pub query_params: Vec<ValueMatch>,
    pub method: Option<HttpMethod>,
}

/// A defaulted header or query parameter match.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueMatch {
    pub match_type: ValueMatchType,
    pub name: String,
    pub value: String,
}

/// A defaulted redirect.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveRedirect {
    pub scheme: Option<RedirectScheme>,
    pub hostname: Option<String>,
    pub path: Option<PathModifier>,
    pub port: Option<i32>,
    pub status_code: i32,
}

/// A defaulted backend.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveBackendRef {
    pub group: String,
    pub kind: String,
    pub name: String,
    pub port: Option<i32>,
    pub weight: i32,
}

impl EffectiveBackendRef {
    /// Whether it names a Service, the only kind of backend supported.
    pub fn is_service(&self) -> bool {
        self.group == DEFAULT_BACKEND_GROUP && self.kind == DEFAULT_BACKEND_KIND
    }
}

impl Rules for EnvoyRoute {
    type Effective = EffectiveRoute;

    fn apply_defaults(&mut self) -> EffectiveRoute {
        let spec = &mut self.spec;
        if spec.rules.is_empty() {
            spec.rules.push(RouteRule::default());
        }
        for rule in &mut spec.rules {
            default_rule(rule);
        }
        EffectiveRoute {
            parent_refs: spec.parent_refs.clone(),
            hostnames: spec.hostnames.clone(),
            rules: spec.rules.iter().map(effective_rule).collect(),
        }
    }

    fn validate(&self, _old: Option<&Self>) -> Result<Warnings, FieldErrors> {
        let (errors, warnings) = validate::validate(self);
        errors.into_result().map(|()| warnings)
    }
}

fn default_rule(rule: &mut RouteRule) {
    if rule.matches.is_empty() {
        rule.matches.push(RouteMatch::default());
    }
    for route_match in &mut rule.matches {
        let path = route_match.path.get_or_insert_with(PathMatch::default);
        path.match_type.get_or_insert(PathMatchType::PathPrefix);
        path.value.get_or_insert_with(|| DEFAULT_PATH.to_owned());
        for header in &mut route_match.headers {
            header.match_type.get_or_insert(ValueMatchType::Exact);
        }
        for query in &mut route_match.query_params {
            query.match_type.get_or_insert(ValueMatchType::Exact);
        }
    }
    for filter in &mut rule.filters {
        if let Some(redirect) = &mut filter.request_redirect {
            redirect.status_code.get_or_insert(DEFAULT_REDIRECT_STATUS);
        }
    }
    for backend in &mut rule.backend_refs {
        backend.group.get_or_insert_with(|| DEFAULT_BACKEND_GROUP.to_owned());
        backend.kind.get_or_insert_with(|| DEFAULT_BACKEND_KIND.to_owned());
        backend.weight.get_or_insert(DEFAULT_WEIGHT);
    }
}

/// A rule of HTTPRoute's shape, borrowed from a route object of any kind that has it
/// (EnvoyRoute, HTTPRoute): what the rule engine judges and defaults, so each kind is checked
/// by the same rules in the same words, and no kind is dressed up as another.
#[derive(Clone, Debug, Default)]
pub struct RuleView<'a> {
    pub matches: &'a [RouteMatch],
    /// The filters the rule engine knows (the kind's others are its reader's business).
    pub filters: Vec<FilterView<'a>>,
    /// The backendRefs requests can reach.
    pub backend_refs: Vec<BackendView<'a>>,
    pub timeouts: Option<&'a RouteTimeouts>,
}

/// A filter of a type the rule engine knows.
#[derive(Clone, Copy, Debug)]
pub struct FilterView<'a> {
    /// Its place in the object's list, for field paths.
    pub index: usize,
    pub filter_type: FilterType,
    pub request_header_modifier: Option<&'a HeaderModifier>,
    pub request_redirect: Option<&'a RequestRedirect>,
    pub url_rewrite: Option<&'a UrlRewrite>,
}

/// A backendRef, as written (not defaulted).
#[derive(Clone, Copy, Debug)]
pub struct BackendView<'a> {
    pub group: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub name: &'a str,
    pub port: Option<i32>,
    pub weight: Option<i32>,
}

impl<'a> RuleView<'a> {
    pub fn of_envoy_route(rule: &'a RouteRule) -> Self {
        Self {
            matches: &rule.matches,
            filters: rule
                .filters
                .iter()
                .enumerate()
                .map(|(index, filter)| FilterView {
                    index,
                    filter_type: filter.filter_type,
                    request_header_modifier: filter.request_header_modifier.as_ref(),
                    request_redirect: filter.request_redirect.as_ref(),
                    url_rewrite: filter.url_rewrite.as_ref(),
                })
                .collect(),
            backend_refs: rule.backend_refs.iter().map(BackendView::of_envoy_route).collect(),
            timeouts: rule.timeouts.as_ref(),
        }
    }

    /// The rule with its defaults resolved (a rule that was never defaulted reads the same).
    /// Of filters of the same type (which validation refuses) the first counts.
    pub fn effective(&self) -> EffectiveRule {
        let mut matches: Vec<EffectiveMatch> = self.matches.iter().map(effective_match).collect();
        if matches.is_empty() {
            matches.push(effective_match(&RouteMatch::default()));
        }
        EffectiveRule {
            matches,
            header_modifier: self.filters.iter().find_map(|f| f.request_header_modifier).cloned(),
            redirect: self.filters.iter().find_map(|f| f.request_redirect).map(|redirect| {
                EffectiveRedirect {
                    scheme: redirect.scheme,
                    hostname: redirect.hostname.clone(),
                    path: redirect.path.clone(),
                    port: redirect.port,
                    status_code: redirect.status_code.unwrap_or(DEFAULT_REDIRECT_STATUS),
                }
            }),
            url_rewrite: self.filters.iter().find_map(|f| f.url_rewrite).cloned(),
            backend_refs: self
                .backend_refs
                .iter()
                .map(|backend| EffectiveBackendRef {
                    group: backend.group.unwrap_or(DEFAULT_BACKEND_GROUP).to_owned(),
                    kind: backend.kind.unwrap_or(DEFAULT_BACKEND_KIND).to_owned(),
                    name: backend.name.to_owned(),
                    port: backend.port,
                    weight: backend.weight.unwrap_or(DEFAULT_WEIGHT),
                })
                .collect(),
            request_timeout: self
                .timeouts
                .and_then(|timeouts| timeouts.request.as_deref())
                .and_then(|request| format::gateway_duration(request).ok()),
            backend_request_timeout: self
                .timeouts
                .and_then(|timeouts| timeouts.backend_request.as_deref())
                .and_then(|backend_request| format::gateway_duration(backend_request).ok()),
        }
    }
}

impl<'a> BackendView<'a> {
    fn of_envoy_route(backend: &'a BackendRef) -> Self {
        Self {
            group: backend.group.as_deref(),
            kind: backend.kind.as_deref(),
            name: &backend.name,
            port: backend.port,
            weight: backend.weight,
        }
    }
}

/// What the rule engine refuses in a route's `hostnames` and `rules`, whatever its kind.
pub fn validate_routing(hostnames: &[String], rules: &[RuleView]) -> Result<Warnings, FieldErrors> {
    let (errors, warnings) = validate::validate_routing(hostnames, rules);
    errors.into_result().map(|()| warnings)
}

fn effective_rule(rule: &RouteRule) -> EffectiveRule {
    RuleView::of_envoy_route(rule).effective()
}

fn effective_match(route_match: &RouteMatch) -> EffectiveMatch {
    let path = route_match.path.as_ref();
    let value_match = |match_type: Option<ValueMatchType>, name: &str, value: &str| ValueMatch {
        match_type: match_type.unwrap_or_default(),
        name: name.to_owned(),
        value: value.to_owned(),
    };
    EffectiveMatch {
        path_type: path.and_then(|p| p.match_type).unwrap_or_default(),
        path: path.and_then(|p| p.value.clone()).unwrap_or_else(|| DEFAULT_PATH.to_owned()),
        headers: route_match.headers.iter().map(|h| value_match(h.match_type, &h.name, &h.value)).collect(),
        query_params: route_match
            .query_params
            .iter()
            .map(|q| value_match(q.match_type, &q.name, &q.value))
            .collect(),
        method: route_match.method,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::rules::defaulted;

    fn route(spec: serde_json::Value) -> EnvoyRoute {
        serde_json::from_value(json!({
            "apiVersion": "example.com/v1", "kind": "EnvoyRoute",
            "metadata": {"name": "shop", "namespace": "shop"}, "spec": spec
        }))
        .expect("a readable route")
    }

    #[test]
    fn an_empty_route_matches_everything_and_is_idempotent() {
        let mut object = route(json!({"parentRefs": [{"name": "edge"}]}));
        let effective = object.apply_defaults();
        assert_eq!(
            serde_json::to_value(&object.spec).unwrap(),
            json!({"parentRefs": [{"name": "edge"}], "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}]}]})
        );
        assert_eq!(effective.rules.len(), 1);
        assert_eq!(effective.rules[0].matches[0].path_type, PathMatchType::PathPrefix);
        assert_eq!(effective.rules[0].matches[0].path, "/");
        let once = object.clone();
        assert_eq!(object.apply_defaults(), effective);
        assert_eq!(object, once);
    }

    #[test]
    fn every_default_is_gateway_apis() {
        let object = defaulted(route(json!({
            "parentRefs": [{"name": "edge"}],
            "rules": [{
                "matches": [{"path": {"type": "Exact", "value": "/login"}, "headers": [{"name": "x-env", "value": "canary"}],
                             "queryParams": [{"name": "debug", "value": "1"}]},
                            {"path": {"value": "/api"}}, {"method": "GET"}],
                "backendRefs": [{"name": "web", "port": 80}],
                "timeouts": {"request": "1m30s"}
            }, {
                "filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}]
            }]
        })));
        let spec = serde_json::to_value(&object.spec).unwrap();
        assert_eq!(spec["rules"][0]["matches"][0]["headers"][0]["type"], "Exact");
        assert_eq!(spec["rules"][0]["matches"][0]["queryParams"][0]["type"], "Exact");
        assert_eq!(spec["rules"][0]["matches"][1]["path"], json!({"type": "PathPrefix", "value": "/api"}));
        assert_eq!(spec["rules"][0]["matches"][2]["path"], json!({"type": "PathPrefix", "value": "/"}));
        assert_eq!(
            spec["rules"][0]["backendRefs"][0],
            json!({"group": "", "kind": "Service", "name": "web", "port": 80, "weight": 1})
        );
        assert_eq!(spec["rules"][1]["filters"][0]["requestRedirect"]["statusCode"], 302);
        let rules = &object.effective().rules;
        assert_eq!(rules[0].request_timeout, Some(Duration::from_secs(90)));
        assert!(rules[0].backend_refs[0].is_service());
        assert_eq!(rules[1].redirect.as_ref().map(|r| r.status_code), Some(302));
        assert_eq!(rules[1].matches.len(), 1, "a rule without matches matches every path");
        assert_eq!(object.validate(None), Ok(vec![]));
    }
}
