//! An HTTPRoute and a GRPCRoute on one listener with a hostname in common: Gateway API
//! (GRPCRoute's `hostnames`, GEP-1016) has exactly one of them accepted there, the older by
//! creation, then the first by `<namespace>/<name>`; the other's parentRef is `Accepted: False`.
//! Routes of one kind never conflict this way (their matches merge, by precedence).

use std::collections::BTreeSet;

use super::RouteOutcome;
use super::conditions::{REASON_NOT_ALLOWED_BY_LISTENERS, state};
use super::hostnames::intersect;
use super::pass::JudgedGateway;
use crate::route::Route;

/// A route accepted on a listener.
#[derive(Clone, Debug)]
pub struct Attachment {
    /// Index of the route (in the pass's routes read, and their outcomes).
    pub route: usize,
    /// Index of the parent (in the route outcome's `parents`) that attached it.
    pub parent: usize,
    /// The hostnames it serves there; empty: every host.
    pub hostnames: Vec<String>,
}

/// Detaches, on each listener of `gateway`, the routes that lose to a route of the other kind;
/// a parent left attached nowhere on the Gateway turns `Accepted: False`, saying to whom.
pub(super) fn settle_conflicts(gateway: &mut JudgedGateway, read: &[Route], outcomes: &mut [RouteOutcome]) {
    let gateway_name = format!(
        "{}/{}",
        gateway.gateway.metadata.namespace.as_deref().unwrap_or_default(),
        gateway.gateway.metadata.name.as_deref().unwrap_or_default()
    );
    let mut losers: Vec<(Attachment, String)> = Vec::new();
    for (&listener, attached) in gateway.attached.iter_mut() {
        // Only listeners with both kinds have anything to settle.
        let kinds: BTreeSet<&str> = attached.iter().map(|a| read[a.route].kind).collect();
        if kinds.len() < 2 {
            continue;
        }
        let mut by_age: Vec<Attachment> = std::mem::take(attached);
        by_age.sort_by(|a, b| age(&read[a.route]).cmp(&age(&read[b.route])));
        for candidate in by_age {
            let route = &read[candidate.route];
            let winner = attached.iter().find(|kept| {
                read[kept.route].kind != route.kind && overlap(&kept.hostnames, &candidate.hostnames)
            });
            match winner {
                None => attached.push(candidate),
                Some(kept) => {
                    let winner = &read[kept.route];
                    let listener_name = &gateway.listeners[listener].name;
                    let message = format!(
                        "listener {listener_name:?} of Gateway {gateway_name} serves the older {} {}/{} for a hostname of this route: of an HTTPRoute and a GRPCRoute sharing a hostname on a listener, only the older is accepted",
                        winner.kind, winner.namespace, winner.name
                    );
                    let key = (route.kind, route.namespace.clone(), route.name.clone());
                    if let Some(names) = gateway.attached_names.get_mut(&listener) {
                        names.remove(&key);
                    }
                    losers.push((candidate, message));
                }
            }
        }
        // Back in the order attachment made them: the IR does not depend on ages.
        attached.sort_by_key(|a| a.route);
    }
    for (lost, message) in losers {
        let still_attached =
            gateway.attached.values().flatten().any(|a| a.route == lost.route && a.parent == lost.parent);
        if !still_attached && let Some(parent) = outcomes[lost.route].parents.get_mut(lost.parent) {
            parent.accepted = state(false, REASON_NOT_ALLOWED_BY_LISTENERS, message);
        }
    }
}

/// Gateway API's order between routes: older first (a route not stored yet last), then by
/// `<namespace>/<name>`.
fn age(route: &Route) -> (bool, Option<k8s_openapi::jiff::Timestamp>, &str, &str) {
    (route.created.is_none(), route.created, &route.namespace, &route.name)
}

/// Whether two routes serving `a` and `b` on one listener (empty: every host) share a host.
fn overlap(a: &[String], b: &[String]) -> bool {
    a.is_empty() || b.is_empty() || a.iter().any(|hostname| intersect(Some(hostname), b).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn hostnames_overlap_where_one_covers_the_other() {
        assert!(overlap(&[], &names(&["a.example.com"])), "every host");
        assert!(overlap(&names(&["*.example.com"]), &names(&["a.example.com"])));
        assert!(overlap(&names(&["a.example.com"]), &names(&["*.example.com"])));
        assert!(!overlap(&names(&["a.example.com"]), &names(&["b.example.com"])));
        assert!(!overlap(&names(&["*.example.com"]), &names(&["example.com"])));
    }
}
