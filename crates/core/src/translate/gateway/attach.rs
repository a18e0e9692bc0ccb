//! Attachment: which listeners of a Gateway a route's parentRef attaches it to, with the
//! hostnames it serves on each, and why none when it attaches nowhere.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;

use super::conditions::{
    ConditionState, REASON_ACCEPTED, REASON_NO_MATCHING_LISTENER_HOSTNAME, REASON_NO_MATCHING_PARENT,
    REASON_NOT_ALLOWED_BY_LISTENERS, REASON_UNSUPPORTED_VALUE, state,
};
use super::hostnames::intersect;
use super::listeners::JudgedListener;
use super::selector::selects;
use crate::api::gateway::{GROUP, Gateway, ParentReference};
use crate::route::Route;

/// Whether `parent_ref` of a route of `route_namespace` names a Gateway (by group and kind),
/// and then its namespace.
pub fn gateway_namespace<'a>(parent_ref: &'a ParentReference, route_namespace: &'a str) -> Option<&'a str> {
    let group = parent_ref.group.as_deref().unwrap_or(GROUP);
    let kind = parent_ref.kind.as_deref().unwrap_or("Gateway");
    (group == GROUP && kind == "Gateway").then(|| parent_ref.namespace.as_deref().unwrap_or(route_namespace))
}

/// What `parent_ref` (naming `gateway`) makes of `route`: `Accepted`, and the listeners (by
/// index) it attaches the route to with the hostnames it serves on each (none unless accepted).
pub fn attach(
    route: &Route,
    parent_ref: &ParentReference,
    gateway: &Gateway,
    listeners: &[JudgedListener],
    namespaces: &[Arc<Namespace>],
) -> (ConditionState, BTreeMap<usize, Vec<String>>) {
    let refused = |reason, message: String| (state(false, reason, message), BTreeMap::new());
    let gateway_name = gateway.metadata.name.as_deref().unwrap_or_default();
    let gateway_namespace = gateway.metadata.namespace.as_deref().unwrap_or_default();
    let candidates: Vec<usize> = listeners
        .iter()
        .enumerate()
        .filter(|(_, listener)| {
            parent_ref.section_name.as_ref().is_none_or(|section| *section == listener.name)
        })
        .filter(|(_, listener)| parent_ref.port.is_none_or(|port| port == listener.port))
        .map(|(i, _)| i)
        .collect();
    if candidates.is_empty() {
        let which = match (&parent_ref.section_name, parent_ref.port) {
            (Some(section), Some(port)) => format!("no listener named {section:?} on port {port}"),
            (Some(section), None) => format!("no listener named {section:?}"),
            (None, Some(port)) => format!("no listener on port {port}"),
            (None, None) => "no listener".to_owned(),
        };
        return refused(
            REASON_NO_MATCHING_PARENT,
            format!("Gateway {gateway_namespace}/{gateway_name} has {which}"),
        );
    }
    let allowed: Vec<usize> = candidates
        .iter()
        .copied()
        // A listener refused (its protocol or port) or in conflict takes no route.
        .filter(|&i| listeners[i].exposed() && listeners[i].takes(route.kind))
        .filter(|&i| allows_namespace(&listeners[i], gateway_namespace, &route.namespace, namespaces))
        .collect();
    if allowed.is_empty() {
        return refused(
            REASON_NOT_ALLOWED_BY_LISTENERS,
            format!(
                "no listener of Gateway {gateway_namespace}/{gateway_name} it names is valid and allows {}s of namespace {:?} (allowedRoutes)",
                route.kind, route.namespace
            ),
        );
    }
    let attached: BTreeMap<usize, Vec<String>> = allowed
        .iter()
        .filter_map(|&i| Some((i, intersect(listeners[i].hostname.as_deref(), &route.hostnames)?)))
        .collect();
    if attached.is_empty() {
        return refused(
            REASON_NO_MATCHING_LISTENER_HOSTNAME,
            format!(
                "no hostname of the route matches the hostname of a listener of Gateway {gateway_namespace}/{gateway_name} it names"
            ),
        );
    }
    if let Some(problem) = &route.refused {
        return refused(REASON_UNSUPPORTED_VALUE, problem.clone());
    }
    let names: Vec<&str> = attached.keys().map(|&i| listeners[i].name.as_str()).collect();
    let plural = if names.len() == 1 { "" } else { "s" };
    let message = format!(
        "attached to listener{plural} {} of Gateway {gateway_namespace}/{gateway_name}",
        names.join(", ")
    );
    (state(true, REASON_ACCEPTED, message), attached)
}

/// Whether `listener` (of a Gateway of `gateway_namespace`) takes routes of `route_namespace`:
/// `allowedRoutes.namespaces.from` `Same` (the default), `All`, or `Selector`.
fn allows_namespace(
    listener: &JudgedListener,
    gateway_namespace: &str,
    route_namespace: &str,
    namespaces: &[Arc<Namespace>],
) -> bool {
    let from = listener.allowed_routes.as_ref().and_then(|allowed| allowed.namespaces.as_ref());
    match from.and_then(|from| from.from.as_deref()).unwrap_or("Same") {
        "All" => true,
        "Same" => route_namespace == gateway_namespace,
        "Selector" => {
            let Some(selector) = from.and_then(|from| from.selector.as_ref()) else { return false };
            let labels = namespaces
                .iter()
                .find(|namespace| namespace.metadata.name.as_deref() == Some(route_namespace))
                .and_then(|namespace| namespace.metadata.labels.clone())
                .unwrap_or_default();
            selects(selector, &labels)
        }
        _ => false,
    }
}
