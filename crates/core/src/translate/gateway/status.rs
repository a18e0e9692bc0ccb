//! The statuses the operator writes, from the translation's outcomes (pure, like
//! [`crate::translate::envoyroute::status::route_status`]): every condition carries the generation judged, and
//! keeps its `lastTransitionTime` unless its status changes, so writing twice from the same
//! outcome writes the same status.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::{ClassOutcome, GatewayOutcome, Judged, RouteOutcome};
use crate::api::gateway::{
    Gateway, GatewayClass, GatewayClassStatus, GatewayRoute, GatewayStatus, HTTPRouteStatus, ListenerStatus,
    ParentReference, RouteParentStatus,
};
use crate::route::status::{ParentEntry, condition, parent_statuses};

fn conditions(
    judged: &[Judged],
    before: &[Condition],
    generation: Option<i64>,
    now: &Time,
) -> Vec<Condition> {
    judged.iter().map(|j| condition(j.type_, &j.state, before, generation, now)).collect()
}

/// A GatewayClass's status.
pub fn class_status(class: &GatewayClass, outcome: &ClassOutcome, now: &Time) -> GatewayClassStatus {
    let before = class.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    GatewayClassStatus {
        conditions: conditions(&outcome.conditions, before, outcome.generation, now),
        supported_features: super::features::supported_features(),
    }
}

/// A Gateway's status: its addresses, conditions, and one entry per listener of the spec.
pub fn gateway_status(gateway: &Gateway, outcome: &GatewayOutcome, now: &Time) -> GatewayStatus {
    let previous = gateway.status.as_ref();
    let before = previous.map(|s| s.conditions.as_slice()).unwrap_or_default();
    let listeners = outcome
        .listeners
        .iter()
        .map(|listener| {
            let before = previous
                .and_then(|s| s.listeners.iter().find(|l| l.name == listener.name))
                .map(|l| l.conditions.as_slice())
                .unwrap_or_default();
            ListenerStatus {
                name: listener.name.clone(),
                supported_kinds: listener.supported_kinds.clone(),
                attached_routes: listener.attached_routes,
                conditions: conditions(&listener.conditions, before, outcome.generation, now),
            }
        })
        .collect();
    GatewayStatus {
        addresses: outcome.addresses.clone(),
        conditions: conditions(&outcome.conditions, before, outcome.generation, now),
        listeners,
    }
}

/// A route's (HTTPRoute's, GRPCRoute's) `status.parents`: other controllers' entries kept as
/// they are; ours, one per parentRef of the spec with an outcome, in the spec's order (entries
/// for parentRefs no longer in the spec dropped).
pub fn route_status<R: GatewayRoute>(
    route: &R,
    outcome: &RouteOutcome,
    controller_name: &str,
    now: &Time,
) -> HTTPRouteStatus {
    let previous = route.route_status().map(|s| s.parents.as_slice()).unwrap_or_default();
    let parents = parent_statuses(
        previous,
        route.parent_refs(),
        controller_name,
        outcome.generation,
        now,
        |parent_ref| {
            let parent = outcome.parents.iter().find(|p| &p.parent_ref == parent_ref)?;
            Some((&parent.accepted, &parent.resolved_refs))
        },
    );
    HTTPRouteStatus { parents }
}

impl ParentEntry for RouteParentStatus {
    type Ref = ParentReference;
    fn new(parent_ref: ParentReference, controller_name: String, conditions: Vec<Condition>) -> Self {
        Self { parent_ref, controller_name, conditions }
    }
    fn controller_name(&self) -> &str {
        &self.controller_name
    }
    fn parent_ref(&self) -> &ParentReference {
        &self.parent_ref
    }
    fn conditions(&self) -> &[Condition] {
        &self.conditions
    }
}
