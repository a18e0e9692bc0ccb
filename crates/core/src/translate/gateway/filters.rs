//! The HTTPRoute filters EnvoyRoute does not have, read into the rule's response header changes
//! and mirrors: `ResponseHeaderModifier` (Gateway API's extended feature
//! `HTTPRouteResponseHeaderModification`) and `RequestMirror` (`HTTPRouteRequestMirror`), whose
//! backendRef resolves as a backendRef does; and the header modifiers of a backendRef
//! (`HTTPRouteBackendRequestHeaderModification`). The rule engine never sees them, so their
//! checks are here.

use std::collections::HashMap;

use crate::api::gateway::{HTTPBackendRef, HTTPRouteFilter, HTTPRouteRule, RequestMirror};
use crate::api::route::{HeaderModifier, HttpHeader, MAX_LIST_ITEMS};
use crate::ir;
use crate::route::backend::{ClusterKey, Unresolved};
use crate::route::{Mirror, header_changes};
use crate::rules::format;

/// A rule's response header changes and the mirrors whose backend resolves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extensions {
    pub response_headers: ir::HeaderChanges,
    pub mirrors: Vec<Mirror>,
}

pub const RESPONSE_HEADER_MODIFIER: &str = "ResponseHeaderModifier";
pub const REQUEST_MIRROR: &str = "RequestMirror";

/// Whether `filter` is read here rather than by the rule engine.
pub fn is_extension(filter: &HTTPRouteFilter) -> bool {
    matches!(filter.filter_type.as_str(), RESPONSE_HEADER_MODIFIER | REQUEST_MIRROR)
}

/// What a rule does beyond the rule engine's filters (`path` is the rule's, `spec.rules[i]`). What is wrong with them goes to
/// `problems` (the route is then refused); the mirrors whose backendRef does not resolve are
/// returned with their field path (they make `ResolvedRefs` false and mirror nothing).
pub fn read_rule(
    path: &str,
    rule: &HTTPRouteRule,
    resolve: impl Fn(&HTTPBackendRef) -> Result<ClusterKey, Unresolved>,
    problems: &mut Vec<String>,
) -> (Extensions, Vec<(String, Unresolved)>) {
    let mut extensions = Extensions::default();
    let mut unresolved = Vec::new();
    let mut response_modifiers = 0;
    for (k, filter) in rule.filters.iter().enumerate() {
        let at = format!("{path}.filters[{k}]");
        match filter.filter_type.as_str() {
            RESPONSE_HEADER_MODIFIER => {
                let Some(modifier) = &filter.response_header_modifier else {
                    problems.push(format!(
                        "{at}.responseHeaderModifier: must be specified for the ResponseHeaderModifier filter type"
                    ));
                    continue;
                };
                response_modifiers += 1;
                if response_modifiers > 1 {
                    problems.push(format!("{at}: a rule may have one ResponseHeaderModifier filter only"));
                    continue;
                }
                check_header_modifier(
                    &format!("{at}.responseHeaderModifier"),
                    modifier,
                    RESPONSE_HOST,
                    problems,
                );
                extensions.response_headers = header_changes(Some(modifier));
            }
            REQUEST_MIRROR => {
                let Some(mirror) = &filter.request_mirror else {
                    problems.push(format!(
                        "{at}.requestMirror: must be specified for the RequestMirror filter type"
                    ));
                    continue;
                };
                let Ok(share) = mirror_share(&format!("{at}.requestMirror"), mirror) else {
                    problems.push(mirror_share(&format!("{at}.requestMirror"), mirror).unwrap_err());
                    continue;
                };
                let reference =
                    HTTPBackendRef { backend: mirror.backend_ref.clone(), weight: None, filters: Vec::new() };
                match resolve(&reference) {
                    Ok(backend) => extensions.mirrors.push(Mirror { backend, share }),
                    Err(why) => unresolved.push((format!("{at}.requestMirror.backendRef"), why)),
                }
            }
            _ => {}
        }
    }
    (extensions, unresolved)
}

/// The share of the requests a mirror copies, as given (`percent` of 100, or `fraction`, not
/// both; none: every request), or why it is none.
fn mirror_share(path: &str, mirror: &RequestMirror) -> Result<Option<ir::Fraction>, String> {
    match (mirror.percent, &mirror.fraction) {
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(format!("{path}: percent and fraction are exclusive: give one")),
        (Some(percent), None) => match u32::try_from(percent) {
            Ok(percent) if percent <= 100 => Ok(Some(ir::Fraction::percent(percent))),
            _ => Err(format!("{path}.percent: {percent} is not a percentage (0 to 100)")),
        },
        (None, Some(fraction)) => {
            let denominator = fraction.denominator.unwrap_or(100);
            match (u32::try_from(fraction.numerator), u32::try_from(denominator)) {
                (Ok(numerator), Ok(denominator)) if denominator >= 1 && numerator <= denominator => {
                    Ok(Some(ir::Fraction { numerator, denominator }))
                }
                _ => Err(format!(
                    "{path}.fraction: {}/{denominator} is not a share: the denominator is at least 1, the numerator 0 to the denominator",
                    fraction.numerator
                )),
            }
        }
    }
}

/// The filter types a backendRef may have.
const BACKEND_FILTERS: &str = "RequestHeaderModifier, ResponseHeaderModifier";

/// Why a header modifier may not change `Host`: a response has none that matters, and a
/// request's is changed by a `URLRewrite` (Envoy's host rewrite), never by a header change.
const RESPONSE_HOST: &str = "the Host header of a response cannot be changed";
const REQUEST_HOST: &str =
    "the Host header of a request is changed by a URLRewrite filter's hostname, not by a header modifier";

/// The header changes of a backendRef's own filters (`path` is the backendRef's,
/// `spec.rules[i].backendRefs[k]`): the requests sent to it and its responses. What is wrong
/// with them, and filters of other types, go to `problems` (the route is then refused).
pub fn read_backend(
    path: &str,
    backend: &HTTPBackendRef,
    problems: &mut Vec<String>,
) -> (ir::HeaderChanges, ir::HeaderChanges) {
    let (mut request, mut response) = (None, None);
    for (k, filter) in backend.filters.iter().enumerate() {
        let at = format!("{path}.filters[{k}]");
        let (found, kept, field, host) = match filter.filter_type.as_str() {
            "RequestHeaderModifier" => {
                (&filter.request_header_modifier, &mut request, "requestHeaderModifier", REQUEST_HOST)
            }
            RESPONSE_HEADER_MODIFIER => {
                (&filter.response_header_modifier, &mut response, "responseHeaderModifier", RESPONSE_HOST)
            }
            other => {
                problems.push(format!(
                    "{at}: filter type {other:?} is not supported on a backendRef (supported there: {BACKEND_FILTERS})"
                ));
                continue;
            }
        };
        let Some(modifier) = found else {
            problems
                .push(format!("{at}.{field}: must be specified for the {} filter type", filter.filter_type));
            continue;
        };
        if kept.is_some() {
            problems.push(format!("{at}: a backendRef may have one {} filter only", filter.filter_type));
            continue;
        }
        check_header_modifier(&format!("{at}.{field}"), modifier, host, problems);
        *kept = Some(modifier);
    }
    (header_changes(request), header_changes(response))
}

/// Checks a header modifier the rule engine does not see as Gateway API checks one: at most
/// 16 headers per list, valid names and values, one action per name, never `Host` (`host`
/// says why). (The rule engine checks a rule's `RequestHeaderModifier` alike, in its field
/// errors' words.)
fn check_header_modifier(path: &str, modifier: &HeaderModifier, host: &str, problems: &mut Vec<String>) {
    let mut actions: HashMap<String, &str> = HashMap::new();
    let mut claim = |at: &str, name: &str, action: &'static str, problems: &mut Vec<String>| {
        let key = name.to_ascii_lowercase();
        if key == "host" {
            problems.push(format!("{at}: {host}"));
        }
        match actions.get(&key) {
            Some(earlier) => problems
                .push(format!("{at}: header {name:?} is already in {earlier}: one action per header name")),
            None => {
                actions.insert(key, action);
            }
        }
    };
    let mut headers = |list: &[HttpHeader], field: &'static str, problems: &mut Vec<String>| {
        if list.len() > MAX_LIST_ITEMS {
            problems.push(format!("{path}.{field}: at most {MAX_LIST_ITEMS} headers, not {}", list.len()));
        }
        for (k, header) in list.iter().enumerate().take(MAX_LIST_ITEMS) {
            let at = format!("{path}.{field}[{k}]");
            syntax(&format!("{at}.name"), &header.name, format::header_name(&header.name), problems);
            syntax(&format!("{at}.value"), &header.value, format::header_value(&header.value), problems);
            claim(&at, &header.name, field, problems);
        }
    };
    headers(&modifier.set, "set", problems);
    headers(&modifier.add, "add", problems);
    if modifier.remove.len() > MAX_LIST_ITEMS {
        problems
            .push(format!("{path}.remove: at most {MAX_LIST_ITEMS} headers, not {}", modifier.remove.len()));
    }
    for (k, name) in modifier.remove.iter().enumerate().take(MAX_LIST_ITEMS) {
        let at = format!("{path}.remove[{k}]");
        syntax(&at, name, format::header_name(name), problems);
        claim(&at, name, "remove", problems);
    }
}

fn syntax(at: &str, value: &str, reasons: Vec<String>, problems: &mut Vec<String>) {
    if !reasons.is_empty() {
        problems.push(format!("{at}: {value:?} {}", reasons.join(", ")));
    }
}
