//! Validation of a defaulted EnvoyRoute: the rules the CRD schema carries (list sizes, syntax,
//! filter combinations, in Gateway API's words) and a few the schema cannot say (regular
//! expressions compile, one action per header name, backends that cannot work are warned of).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde_json::json;

use super::super::{FieldError, FieldErrors, Warnings, check_format, format};
use super::{BackendView, FilterView, RuleView};
use crate::api::route::{
    EnvoyRoute, FilterType, HeaderMatch, HeaderModifier, MAX_HOSTNAMES, MAX_LIST_ITEMS,
    MAX_MATCHES_PER_ROUTE, MAX_MATCHES_PER_RULE, MAX_PARENT_REFS, MAX_RULES, MAX_WEIGHT, ParentReference,
    PathMatchType, PathModifier, PathModifierType, QueryParamMatch, RequestRedirect, RouteMatch,
    RouteTimeouts, UrlRewrite, ValueMatchType,
};

/// Every error and warning of an EnvoyRoute.
pub(super) fn validate(route: &EnvoyRoute) -> (FieldErrors, Warnings) {
    let mut check = Check::default();
    check.parent_refs(&route.spec.parent_refs);
    let rules: Vec<RuleView> = route.spec.rules.iter().map(RuleView::of_envoy_route).collect();
    check.routing(&route.spec.hostnames, &rules);
    (check.errors, check.warnings)
}

/// Every error and warning of what a route of HTTPRoute's shape says about routing (its
/// hostnames and rules), whatever its kind.
pub(super) fn validate_routing(hostnames: &[String], rules: &[RuleView]) -> (FieldErrors, Warnings) {
    let mut check = Check::default();
    check.routing(hostnames, rules);
    (check.errors, check.warnings)
}

impl Check {
    fn routing(&mut self, hostnames: &[String], rules: &[RuleView]) {
        let check = self;
        check.hostnames(hostnames);
        check.at_most("spec.rules", rules.len(), MAX_RULES);
        let total_matches: usize = rules.iter().map(|rule| rule.matches.len().max(1)).sum();
        if total_matches > MAX_MATCHES_PER_ROUTE {
            check.errors.push(FieldError::invalid(
            "spec.rules",
            total_matches,
            "While 16 rules and 64 matches per rule are allowed, the total number of matches across all rules in a route must be less than 128",
        ));
        }
        for (i, rule) in rules.iter().enumerate() {
            check.rule(&format!("spec.rules[{i}]"), rule);
        }
    }
}

/// What a RequestHeaderModifier does to a header.
#[derive(Clone, Copy, PartialEq, Eq)]
enum HeaderAction {
    Set,
    Add,
    Remove,
}

impl HeaderAction {
    fn field(self) -> &'static str {
        match self {
            Self::Set => "set",
            Self::Add => "add",
            Self::Remove => "remove",
        }
    }

    /// The words of the CRD's rule refusing this action on `Host`.
    fn host_refused(self) -> &'static str {
        match self {
            Self::Set => "the Host header cannot be set here: use a URLRewrite filter's hostname",
            Self::Add => "the Host header cannot be added here: use a URLRewrite filter's hostname",
            Self::Remove => "the Host header cannot be removed",
        }
    }
}

#[derive(Default)]
struct Check {
    errors: FieldErrors,
    warnings: Warnings,
}

impl Check {
    fn at_most(&mut self, path: &str, len: usize, max: usize) {
        if len > max {
            self.errors.push(FieldError::forbidden(path, format!("must have at most {max} items")));
        }
    }

    fn syntax(&mut self, path: &str, value: &str, reasons: Vec<String>) {
        check_format(&mut self.errors, path, value, reasons);
    }

    fn parent_refs(&mut self, parent_refs: &[ParentReference]) {
        if parent_refs.is_empty() {
            self.warnings.push(
                "spec.parentRefs: empty: the route is attached to no Envoy and routes nothing".to_owned(),
            );
        }
        self.at_most("spec.parentRefs", parent_refs.len(), MAX_PARENT_REFS);
        let mut seen = HashSet::new();
        let mut with_section: HashMap<&str, bool> = HashMap::new();
        for (i, parent) in parent_refs.iter().enumerate() {
            let path = format!("spec.parentRefs[{i}]");
            self.syntax(&format!("{path}.name"), &parent.name, format::dns1123_subdomain(&parent.name));
            if let Some(section) = &parent.section_name {
                self.syntax(&format!("{path}.sectionName"), section, format::iana_svc_name(section));
            }
            let has_section = parent.section_name.is_some();
            if *with_section.entry(&parent.name).or_insert(has_section) != has_section {
                self.errors.push(FieldError::invalid(
                    &path,
                    json!({"name": parent.name}),
                    "sectionName must be specified when parentRefs includes 2 or more references to the same parent",
                ));
            } else if !seen.insert((&parent.name, &parent.section_name)) {
                self.errors
                    .push(FieldError::duplicate(&path, serde_json::to_value(parent).unwrap_or_default()));
            }
        }
    }

    fn hostnames(&mut self, hostnames: &[String]) {
        self.at_most("spec.hostnames", hostnames.len(), MAX_HOSTNAMES);
        let mut seen = HashSet::new();
        for (i, hostname) in hostnames.iter().enumerate() {
            let path = format!("spec.hostnames[{i}]");
            self.syntax(&path, hostname, format::route_hostname(hostname));
            if !seen.insert(hostname) {
                self.errors.push(FieldError::duplicate(path, hostname.as_str()));
            }
        }
    }

    fn rule(&mut self, path: &str, rule: &RuleView) {
        self.at_most(&format!("{path}.matches"), rule.matches.len(), MAX_MATCHES_PER_RULE);
        for (j, route_match) in rule.matches.iter().enumerate() {
            self.route_match(&format!("{path}.matches[{j}]"), route_match);
        }
        self.filters(path, rule);
        self.at_most(&format!("{path}.backendRefs"), rule.backend_refs.len(), MAX_LIST_ITEMS);
        for (k, backend) in rule.backend_refs.iter().enumerate() {
            self.backend_ref(&format!("{path}.backendRefs[{k}]"), backend);
        }
        if let Some(timeouts) = rule.timeouts {
            self.timeouts(&format!("{path}.timeouts"), timeouts);
        }
        let redirects = rule.filters.iter().any(|f| f.filter_type == FilterType::RequestRedirect);
        if rule.backend_refs.is_empty() && !redirects {
            self.warnings.push(format!(
                "{path}: no backendRefs and no RequestRedirect filter: matching requests are answered with 500"
            ));
        } else if !rule.backend_refs.is_empty() && rule.backend_refs.iter().all(|b| b.weight == Some(0)) {
            self.warnings.push(format!(
                "{path}.backendRefs: every weight is 0: matching requests are answered with 500"
            ));
        }
    }

    /// Each a Gateway API duration, and `backendRequest` no longer than `request` (the API's
    /// own rule; `request: 0s` is no limit).
    fn timeouts(&mut self, path: &str, timeouts: &RouteTimeouts) {
        let mut duration = |field: &str, value: Option<&str>| {
            let value = value?;
            format::gateway_duration(value)
                .map_err(|reason| {
                    self.errors.push(FieldError::invalid(format!("{path}.{field}"), value, reason))
                })
                .ok()
        };
        let request = duration("request", timeouts.request.as_deref());
        let backend_request = duration("backendRequest", timeouts.backend_request.as_deref());
        if let (Some(request), Some(backend_request)) = (request, backend_request)
            && !request.is_zero()
            && backend_request > request
        {
            self.errors.push(FieldError::invalid(
                format!("{path}.backendRequest"),
                timeouts.backend_request.clone().unwrap_or_default(),
                "backendRequest timeout cannot be longer than request timeout",
            ));
        }
    }

    fn route_match(&mut self, path: &str, route_match: &RouteMatch) {
        if let Some(path_match) = &route_match.path {
            let value = path_match.value.as_deref().unwrap_or(super::DEFAULT_PATH);
            let at = format!("{path}.path.value");
            match path_match.match_type.unwrap_or_default() {
                PathMatchType::Exact | PathMatchType::PathPrefix => {
                    self.syntax(&at, value, format::http_path(value))
                }
                PathMatchType::RegularExpression => {
                    let mut reasons = format::regular_expression(value);
                    if value.len() > crate::api::route::MAX_PATH_LENGTH {
                        reasons.insert(0, "must be no more than 1024 characters".to_owned());
                    }
                    self.syntax(&at, value, reasons);
                }
            }
        }
        let headers = route_match.headers.iter().map(|h: &HeaderMatch| (h.match_type, &h.name, &h.value));
        self.value_matches(&format!("{path}.headers"), headers.collect(), 4096, true);
        let queries =
            route_match.query_params.iter().map(|q: &QueryParamMatch| (q.match_type, &q.name, &q.value));
        self.value_matches(&format!("{path}.queryParams"), queries.collect(), 1024, false);
    }

    /// Header or query parameter matches: `names_fold_case` for headers, whose names compare
    /// case-insensitively (Gateway API would silently ignore all but the first of a name).
    fn value_matches(
        &mut self,
        path: &str,
        matches: Vec<(Option<ValueMatchType>, &String, &String)>,
        max_value: usize,
        names_fold_case: bool,
    ) {
        self.at_most(path, matches.len(), MAX_LIST_ITEMS);
        let mut seen = HashSet::new();
        for (k, (match_type, name, value)) in matches.into_iter().enumerate() {
            let at = format!("{path}[{k}]");
            self.syntax(&format!("{at}.name"), name, format::header_name(name));
            let key = if names_fold_case { name.to_ascii_lowercase() } else { name.clone() };
            if !seen.insert(key) {
                self.errors.push(FieldError::duplicate(format!("{at}.name"), name.as_str()));
            }
            let mut reasons = Vec::new();
            if value.is_empty() {
                reasons.push("must be at least 1 character".to_owned());
            } else if value.len() > max_value {
                reasons.push(format!("must be no more than {max_value} characters"));
            } else if match_type == Some(ValueMatchType::RegularExpression) {
                reasons = format::regular_expression(value);
            }
            self.syntax(&format!("{at}.value"), value, reasons);
        }
    }

    fn filters(&mut self, path: &str, rule: &RuleView) {
        let filters_path = format!("{path}.filters");
        self.at_most(&filters_path, rule.filters.len(), MAX_LIST_ITEMS);
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for filter in &rule.filters {
            *counts.entry(filter.filter_type.as_str()).or_default() += 1;
            self.filter(&format!("{filters_path}[{}]", filter.index), filter);
        }
        for (filter_type, count) in &counts {
            if *count > 1 {
                self.errors.push(FieldError::invalid(
                    &filters_path,
                    *filter_type,
                    format!("{filter_type} filter cannot be repeated"),
                ));
            }
        }
        let has = |filter_type: FilterType| counts.contains_key(filter_type.as_str());
        if has(FilterType::RequestRedirect) && has(FilterType::UrlRewrite) {
            self.errors.push(FieldError::invalid(
                &filters_path,
                "RequestRedirect, URLRewrite",
                "May specify either httpRouteFilterRequestRedirect or httpRouteFilterRequestRewrite, but not both",
            ));
        }
        let redirect = rule.filters.iter().find_map(|f| f.request_redirect);
        if redirect.is_some() && !rule.backend_refs.is_empty() {
            self.errors.push(FieldError::forbidden(
                path,
                "RequestRedirect filter must not be used together with backendRefs",
            ));
        }
        let replaces_prefix = |modifier: Option<&PathModifier>| {
            modifier.is_some_and(|m| {
                m.modifier_type == PathModifierType::ReplacePrefixMatch && m.replace_prefix_match.is_some()
            })
        };
        // No matches is the default one, `PathPrefix /`.
        let one_prefix_match = rule.matches.is_empty()
            || rule.matches.len() == 1
                && rule.matches[0].path.as_ref().and_then(|p| p.match_type).unwrap_or_default()
                    == PathMatchType::PathPrefix;
        let redirect_path = rule.filters.iter().find_map(|f| f.request_redirect?.path.as_ref());
        let rewrite_path = rule.filters.iter().find_map(|f| f.url_rewrite?.path.as_ref());
        for (modifier, filter) in [(redirect_path, "RequestRedirect"), (rewrite_path, "URLRewrite")] {
            if replaces_prefix(modifier) && !one_prefix_match {
                self.errors.push(FieldError::invalid(
                    format!("{path}.matches"),
                    rule.matches.len(),
                    format!("When using {filter} filter with path.replacePrefixMatch, exactly one PathPrefix match must be specified"),
                ));
            }
        }
    }

    fn filter(&mut self, path: &str, filter: &FilterView) {
        let configured = [
            (
                FilterType::RequestHeaderModifier,
                "requestHeaderModifier",
                filter.request_header_modifier.is_some(),
            ),
            (FilterType::RequestRedirect, "requestRedirect", filter.request_redirect.is_some()),
            (FilterType::UrlRewrite, "urlRewrite", filter.url_rewrite.is_some()),
        ];
        for (filter_type, field, present) in configured {
            let name = filter_type.as_str();
            if present && filter.filter_type != filter_type {
                self.errors.push(FieldError::forbidden(
                    format!("{path}.{field}"),
                    format!("filter.{field} must be nil if the filter.type is not {name}"),
                ));
            } else if !present && filter.filter_type == filter_type {
                self.errors.push(FieldError::required(
                    format!("{path}.{field}"),
                    format!("filter.{field} must be specified for {name} filter.type"),
                ));
            }
        }
        if let Some(modifier) = filter.request_header_modifier {
            self.header_modifier(&format!("{path}.requestHeaderModifier"), modifier);
        }
        if let Some(redirect) = filter.request_redirect {
            self.redirect(&format!("{path}.requestRedirect"), redirect);
        }
        if let Some(rewrite) = filter.url_rewrite {
            self.url_rewrite(&format!("{path}.urlRewrite"), rewrite);
        }
    }

    fn header_modifier(&mut self, path: &str, modifier: &HeaderModifier) {
        let mut actions: HashMap<String, HeaderAction> = HashMap::new();
        for (list, action) in [(&modifier.set, HeaderAction::Set), (&modifier.add, HeaderAction::Add)] {
            self.at_most(&format!("{path}.{}", action.field()), list.len(), MAX_LIST_ITEMS);
            for (k, header) in list.iter().enumerate() {
                let at = format!("{path}.{}[{k}]", action.field());
                self.syntax(&format!("{at}.name"), &header.name, format::header_name(&header.name));
                self.header_action(&mut actions, &at, &header.name, action);
                self.syntax(&format!("{at}.value"), &header.value, format::header_value(&header.value));
            }
        }
        self.at_most(&format!("{path}.remove"), modifier.remove.len(), MAX_LIST_ITEMS);
        for (k, name) in modifier.remove.iter().enumerate() {
            let at = format!("{path}.remove[{k}]");
            self.syntax(&at, name, format::header_name(name));
            self.header_action(&mut actions, &at, name, HeaderAction::Remove);
        }
    }

    /// Gateway API allows one action per header name (case-insensitive); Envoy changes `Host`
    /// only by a host rewrite.
    fn header_action(
        &mut self,
        actions: &mut HashMap<String, HeaderAction>,
        at: &str,
        name: &str,
        action: HeaderAction,
    ) {
        let key = name.to_ascii_lowercase();
        if key == "host" {
            self.errors.push(FieldError::invalid(at, name, action.host_refused()));
        }
        match actions.get(&key) {
            Some(&earlier) if earlier == action => self.errors.push(FieldError::duplicate(at, name)),
            Some(&earlier) => self.errors.push(FieldError::invalid(
                at,
                name,
                format!("the header is already in {}: one action per header name", earlier.field()),
            )),
            None => {
                actions.insert(key, action);
            }
        }
    }

    fn redirect(&mut self, path: &str, redirect: &RequestRedirect) {
        if let Some(hostname) = &redirect.hostname {
            self.syntax(&format!("{path}.hostname"), hostname, format::dns1123_subdomain(hostname));
        }
        if let Some(port) = redirect.port {
            let reasons = format::port(port);
            if !reasons.is_empty() {
                self.errors.push(FieldError::invalid(format!("{path}.port"), port, reasons.join(", ")));
            }
        }
        if let Some(status) = redirect.status_code
            && status != 301
            && status != 302
        {
            self.errors.push(FieldError::not_supported(
                format!("{path}.statusCode"),
                status,
                vec![json!(301), json!(302)],
            ));
        }
        if let Some(modifier) = &redirect.path {
            self.path_modifier(&format!("{path}.path"), modifier);
        }
    }

    fn url_rewrite(&mut self, path: &str, rewrite: &UrlRewrite) {
        if let Some(hostname) = &rewrite.hostname {
            self.syntax(&format!("{path}.hostname"), hostname, format::dns1123_subdomain(hostname));
        }
        if let Some(modifier) = &rewrite.path {
            self.path_modifier(&format!("{path}.path"), modifier);
        }
    }

    fn path_modifier(&mut self, path: &str, modifier: &PathModifier) {
        let fields = [
            (PathModifierType::ReplaceFullPath, "replaceFullPath", &modifier.replace_full_path, false),
            (
                PathModifierType::ReplacePrefixMatch,
                "replacePrefixMatch",
                &modifier.replace_prefix_match,
                true,
            ),
        ];
        for (modifier_type, field, value, allow_empty) in fields {
            let name = match modifier_type {
                PathModifierType::ReplaceFullPath => "ReplaceFullPath",
                PathModifierType::ReplacePrefixMatch => "ReplacePrefixMatch",
            };
            match value {
                Some(value) => {
                    let at = format!("{path}.{field}");
                    self.syntax(&at, value, format::replacement_path(value, allow_empty));
                    if modifier.modifier_type != modifier_type {
                        self.errors.push(FieldError::invalid(
                            format!("{path}.type"),
                            json!(modifier.modifier_type),
                            format!("type must be '{name}' when {field} is set"),
                        ));
                    }
                }
                None if modifier.modifier_type == modifier_type => self.errors.push(FieldError::required(
                    format!("{path}.{field}"),
                    format!("{field} must be specified when type is set to '{name}'"),
                )),
                None => {}
            }
        }
    }

    fn backend_ref(&mut self, path: &str, backend: &BackendView) {
        let group = backend.group.unwrap_or(super::DEFAULT_BACKEND_GROUP);
        let kind = backend.kind.unwrap_or(super::DEFAULT_BACKEND_KIND);
        self.syntax(&format!("{path}.group"), group, format::api_group(group));
        self.syntax(&format!("{path}.kind"), kind, format::kind(kind));
        self.syntax(&format!("{path}.name"), backend.name, format::dns1123_subdomain(backend.name));
        let is_service = group == super::DEFAULT_BACKEND_GROUP && kind == super::DEFAULT_BACKEND_KIND;
        match backend.port {
            Some(port) => {
                let reasons = format::port(port);
                if !reasons.is_empty() {
                    self.errors.push(FieldError::invalid(format!("{path}.port"), port, reasons.join(", ")));
                }
            }
            None if is_service => self
                .errors
                .push(FieldError::required(format!("{path}.port"), "Must have port for Service reference")),
            None => {}
        }
        if let Some(weight) = backend.weight
            && !(0..=MAX_WEIGHT).contains(&weight)
        {
            self.errors.push(FieldError::invalid(
                format!("{path}.weight"),
                weight,
                format!("must be between 0 and {MAX_WEIGHT}, inclusive"),
            ));
        }
        if !is_service {
            let group_kind = if group.is_empty() { kind.to_owned() } else { format!("{kind}.{group}") };
            self.warnings.push(format!(
                "{path}: {group_kind} is not a supported backend (only Services are): its share of the requests is answered with 500"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::api::EnvoyRoute;
    use crate::rules::{Rules, defaulted};

    fn verdict(spec: Value) -> Result<Vec<String>, Vec<String>> {
        let route: EnvoyRoute = serde_json::from_value(json!({
            "apiVersion": "example.com/v1", "kind": "EnvoyRoute",
            "metadata": {"name": "shop", "namespace": "shop"}, "spec": spec
        }))
        .expect("a readable route");
        defaulted(route).validate(None).map_err(|errors| errors.iter().map(ToString::to_string).collect())
    }

    fn errors(spec: Value) -> Vec<String> {
        verdict(spec).expect_err("the route should be refused")
    }

    fn backend() -> Value {
        json!([{"name": "web", "port": 80}])
    }

    #[test]
    fn a_full_route_is_valid() {
        let warnings = verdict(json!({
            "parentRefs": [{"name": "edge", "sectionName": "http"}, {"name": "edge", "sectionName": "admin-api"}],
            "hostnames": ["shop.example.com", "*.shop.example.com"],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": "/api"}, "headers": [{"name": "x-env", "type": "RegularExpression", "value": "canary|beta"}],
                             "queryParams": [{"name": "v", "value": "2"}], "method": "POST"}],
                "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x-a", "value": "1"}], "add": [{"name": "x-b", "value": "2"}], "remove": ["x-c"]}},
                            {"type": "URLRewrite", "urlRewrite": {"hostname": "api.internal", "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}}}],
                "backendRefs": [{"name": "web", "port": 80, "weight": 90}, {"name": "web-canary", "port": 80, "weight": 10}],
                "timeouts": {"request": "30s"}
            }, {
                "matches": [{"path": {"type": "Exact", "value": "/old"}}],
                "filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https", "statusCode": 301, "path": {"type": "ReplaceFullPath", "replaceFullPath": "/new"}}}]
            }]
        }));
        assert_eq!(warnings, Ok(vec![]));
    }

    #[test]
    fn warnings_say_what_will_answer_500() {
        let warnings =
            verdict(json!({"rules": [{}, {"backendRefs": [{"name": "web", "port": 80, "weight": 0}]},
            {"backendRefs": [{"kind": "Pod", "name": "web"}]}]}))
            .unwrap();
        assert_eq!(warnings.len(), 4, "{warnings:?}");
        assert!(warnings[0].starts_with("spec.parentRefs: empty"));
        assert!(warnings[1].starts_with("spec.rules[0]: no backendRefs and no RequestRedirect filter"));
        assert!(warnings[2].starts_with("spec.rules[1].backendRefs: every weight is 0"));
        assert!(warnings[3].starts_with("spec.rules[2].backendRefs[0]: Pod is not a supported backend"));
    }

    #[test]
    fn paths_follow_gateway_api() {
        assert_eq!(
            errors(json!({"rules": [{"matches": [{"path": {"type": "Exact", "value": "/a//b"}}]}]})),
            [
                "spec.rules[0].matches[0].path.value: Invalid value: \"/a//b\": must not contain '//' when type one of ['Exact', 'PathPrefix']"
            ]
        );
        let regex = errors(
            json!({"rules": [{"matches": [{"path": {"type": "RegularExpression", "value": "/(a"}}]}]}),
        );
        assert_eq!(regex.len(), 1);
        assert!(regex[0].starts_with("spec.rules[0].matches[0].path.value: Invalid value: \"/(a\": must be a regular expression Envoy's RE2 compiles: missing )"), "{regex:?}");
        assert!(verdict(json!({"rules": [{"matches": [{"path": {"type": "RegularExpression", "value": "/a(b|c)?[0-9]*"}}]}]})).is_ok());
    }

    #[test]
    fn filters_combine_as_gateway_api_allows() {
        let redirect = json!({"type": "RequestRedirect", "requestRedirect": {"hostname": "example.com"}});
        let rewrite = json!({"type": "URLRewrite", "urlRewrite": {"hostname": "example.com"}});
        assert_eq!(
            errors(json!({"rules": [{"filters": [redirect.clone()], "backendRefs": backend()}]})),
            ["spec.rules[0]: Forbidden: RequestRedirect filter must not be used together with backendRefs"]
        );
        assert_eq!(
            errors(json!({"rules": [{"filters": [redirect.clone(), rewrite.clone()]}]})),
            [
                "spec.rules[0].filters: Invalid value: \"RequestRedirect, URLRewrite\": May specify either httpRouteFilterRequestRedirect or httpRouteFilterRequestRewrite, but not both"
            ]
        );
        assert_eq!(
            errors(json!({"rules": [{"filters": [rewrite.clone(), rewrite]}]})),
            ["spec.rules[0].filters: Invalid value: \"URLRewrite\": URLRewrite filter cannot be repeated"]
        );
        assert_eq!(
            errors(json!({"rules": [{"filters": [{"type": "URLRewrite", "requestRedirect": {}}]}]})),
            [
                "spec.rules[0].filters[0].requestRedirect: Forbidden: filter.requestRedirect must be nil if the filter.type is not RequestRedirect",
                "spec.rules[0].filters[0].urlRewrite: Required value: filter.urlRewrite must be specified for URLRewrite filter.type",
            ]
        );
        let prefix = json!({"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"}}});
        assert!(
            verdict(json!({"rules": [{"filters": [prefix.clone()], "backendRefs": backend()}]})).is_ok(),
            "the default match is one PathPrefix"
        );
        assert_eq!(
            errors(
                json!({"rules": [{"matches": [{"path": {"type": "Exact", "value": "/a"}}], "filters": [prefix], "backendRefs": backend()}]})
            ),
            [
                "spec.rules[0].matches: Invalid value: 1: When using URLRewrite filter with path.replacePrefixMatch, exactly one PathPrefix match must be specified"
            ]
        );
        assert_eq!(
            errors(
                json!({"rules": [{"filters": [{"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplaceFullPath", "replacePrefixMatch": "/x"}}}]}]})
            ),
            [
                "spec.rules[0].filters[0].requestRedirect.path.replaceFullPath: Required value: replaceFullPath must be specified when type is set to 'ReplaceFullPath'",
                "spec.rules[0].filters[0].requestRedirect.path.type: Invalid value: \"ReplaceFullPath\": type must be 'ReplacePrefixMatch' when replacePrefixMatch is set",
            ]
        );
    }

    #[test]
    fn one_action_per_header_and_never_host() {
        let modifier = |m: Value| json!({"rules": [{"filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": m}], "backendRefs": backend()}]});
        assert_eq!(
            errors(modifier(json!({"set": [{"name": "X-A", "value": "1"}], "remove": ["x-a"]}))),
            [
                "spec.rules[0].filters[0].requestHeaderModifier.remove[0]: Invalid value: \"x-a\": the header is already in set: one action per header name"
            ]
        );
        assert_eq!(
            errors(modifier(json!({"set": [{"name": "Host", "value": "x"}]}))),
            [
                "spec.rules[0].filters[0].requestHeaderModifier.set[0]: Invalid value: \"Host\": the Host header cannot be set here: use a URLRewrite filter's hostname"
            ]
        );
        assert_eq!(
            errors(modifier(json!({"add": [{"name": "x-a", "value": "a\nb"}]}))),
            [
                "spec.rules[0].filters[0].requestHeaderModifier.add[0].value: Invalid value: \"a\\nb\": must be printable ASCII characters, words separated by a single space or tab"
            ]
        );
    }

    /// Gateway API's own rule: a backend's attempt may not outlast the request, unless the
    /// request has no limit (`0s`).
    #[test]
    fn backend_request_timeouts_fit_in_the_request() {
        let spec = |timeouts: serde_json::Value| json!({"parentRefs": [{"name": "edge"}], "rules": [{"backendRefs": backend(), "timeouts": timeouts}]});
        assert!(verdict(spec(json!({"backendRequest": "500ms"}))).is_ok());
        assert!(verdict(spec(json!({"request": "1s", "backendRequest": "1s"}))).is_ok());
        assert!(verdict(spec(json!({"request": "0s", "backendRequest": "1h"}))).is_ok(), "0s: no limit");
        assert_eq!(
            errors(spec(json!({"request": "1s", "backendRequest": "2s"}))),
            [
                "spec.rules[0].timeouts.backendRequest: Invalid value: \"2s\": backendRequest timeout cannot be longer than request timeout"
            ]
        );
        assert_eq!(errors(spec(json!({"backendRequest": "1d"}))).len(), 1, "not a Gateway API duration");
    }

    #[test]
    fn references_and_limits() {
        assert_eq!(
            errors(json!({"parentRefs": [{"name": "edge"}, {"name": "edge", "sectionName": "http"}]})),
            [
                "spec.parentRefs[1]: Invalid value: {\"name\":\"edge\"}: sectionName must be specified when parentRefs includes 2 or more references to the same parent"
            ]
        );
        assert_eq!(
            errors(json!({"parentRefs": [{"name": "edge"}, {"name": "edge"}]})),
            ["spec.parentRefs[1]: Duplicate value: {\"name\":\"edge\"}"]
        );
        assert_eq!(
            errors(json!({"parentRefs": [{"name": "edge"}], "rules": [{"backendRefs": [{"name": "web"}]}]})),
            ["spec.rules[0].backendRefs[0].port: Required value: Must have port for Service reference"]
        );
        assert_eq!(
            errors(json!({"hostnames": ["a.example.com", "a.example.com", "10.0.0.1"]})).len(),
            2,
            "a duplicate and an IP address"
        );
        let many_matches: Vec<Value> =
            (0..64).map(|i| json!({"path": {"value": format!("/p{i}")}})).collect();
        let rules: Vec<Value> =
            (0..3).map(|_| json!({"matches": many_matches, "backendRefs": backend()})).collect();
        assert_eq!(
            errors(json!({"parentRefs": [{"name": "edge"}], "rules": rules})),
            [
                "spec.rules: Invalid value: 192: While 16 rules and 64 matches per rule are allowed, the total number of matches across all rules in a route must be less than 128"
            ]
        );
        assert_eq!(
            errors(json!({"parentRefs": [{"name": "edge"}], "rules": [{"backendRefs": backend(), "timeouts": {"request": "1.5s"}}]})).len(),
            1
        );
    }
}
