//! A Gateway of one of the operator's classes gets its fleet ([`super::fleets`]) and the status
//! the translation judged (`addresses`, `conditions`, `listeners`), and an event when that
//! status turns for the worse (refused, a listener's reference lost, not programmed), when it is
//! programmed, when its fleet cannot be applied, moves or goes, and when its proxies reject their
//! configuration. A Gateway not accepted has no fleet; one whose class is not (or no longer)
//! the operator's gets nothing, and loses the fleet the operator applied for it.

use std::sync::Arc;

use envoy_operator_core::api::Envoy;
use envoy_operator_core::api::envoy::CONFIG_ACCEPTED;
use envoy_operator_core::children::status::now;
use envoy_operator_core::fleet::status::EVENT_CONFIG_REJECTED as REASON_CONFIG_REJECTED;
use envoy_operator_core::gateway::api::{GROUP, Gateway, GatewayStatus};
use envoy_operator_core::gateway::conditions::{
    ACCEPTED, CONFLICTED, PROGRAMMED, REASON_ADDRESS_NOT_ASSIGNED, REASON_PENDING, RESOLVED_REFS,
};
use envoy_operator_core::gateway::fleet;
use envoy_operator_core::gateway::status::gateway_status;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use super::fleets::Removal;
use super::status::{Guard, write};
use super::{GatewayContext, fleets};
use crate::controller::rejections::Gate;
use crate::controller::sync::{backoff_key, error_policy as retry, observe};
use crate::controller::transitions::{ObjectEvent, Part, Tell, publish, transitions};
use crate::controller::{Error, Result};

pub(super) const KIND: &str = "Gateway";

pub(super) async fn reconcile(gateway: Arc<Gateway>, ctx: Arc<GatewayContext>) -> Result<Action> {
    let key = backoff_key(gateway.as_ref());
    observe(&ctx.shared, KIND, &key, sync(gateway, ctx.clone())).await
}

pub(super) fn error_policy(gateway: Arc<Gateway>, error: &Error, ctx: Arc<GatewayContext>) -> Action {
    retry(gateway, error, ctx.shared.clone())
}

async fn sync(gateway: Arc<Gateway>, ctx: Arc<GatewayContext>) -> Result<Action> {
    if gateway.meta().deletion_timestamp.is_some() {
        // The fleet's ownerReference and the garbage collector remove it.
        return Ok(Action::await_change());
    }
    let missing = |field| Error::MissingMetadata { kind: KIND, field };
    let namespace = gateway.namespace().ok_or_else(|| missing("namespace"))?;
    let uid = gateway.uid().ok_or_else(|| missing("uid"))?;
    let name = gateway.name_any();
    ctx.listed().await?;
    let envoys = ctx.envoys.store();

    if !ctx.class_is_ours(&gateway.spec.gateway_class_name) {
        fleets::remove(&ctx.shared, envoys, &gateway, None, Removal::ClassNotOurs).await?;
        return Ok(Action::await_change());
    }
    let translation = ctx.outcomes.latest();
    // The outcome of this very Gateway (uid) and generation; else the translation has yet to
    // judge it, and its outcome, when it comes, triggers this reconcile again.
    let outcome = translation.gateways.iter().find(|outcome| {
        outcome.namespace == namespace
            && outcome.name == name
            && outcome.uid.as_deref() == Some(uid.as_str())
            && outcome.generation == gateway.metadata.generation
    });
    let Some(outcome) = outcome else { return Ok(Action::await_change()) };
    let accepted = outcome.conditions.iter().any(|c| c.type_ == ACCEPTED && c.state.status);
    let mut events = Vec::new();
    let mut requeue = ctx.shared.settings.resync;
    match &outcome.fleet {
        Some(fleet) => {
            let owner = fleets::Owner { namespace: &namespace, name: &name, uid: &uid };
            let applied = match fleets::apply(&ctx.shared, envoys, &owner, fleet).await {
                Ok(applied) => applied,
                Err(error) => {
                    let note =
                        format!("the fleet {namespace}/{} could not be applied: {error}", fleet.name_any());
                    let event = warning(REASON_FLEET_NOT_APPLIED, note, "Apply");
                    publish(&ctx.shared, gateway.as_ref(), vec![event]).await;
                    return Err(error);
                }
            };
            let stored = envoys
                .get(&ObjectRef::new(&fleet.name_any()).within(&namespace))
                .filter(|_| applied != fleets::Applied::Foreign);
            // A fleet of an earlier name (the Gateway's own, before fleets were named
            // `<gateway>-<class>`) goes once the current one has a ready proxy, or asks for none.
            let serving = stored.as_deref().is_some_and(fleet::ready) || fleet.spec.replicas == Some(0);
            if serving {
                let keep = Some(fleet.name_any());
                let moved =
                    fleets::remove(&ctx.shared, envoys, &gateway, keep.as_deref(), Removal::Moved).await?;
                events.extend(moved.into_iter().map(|old| {
                    let note = format!(
                        "deleted the fleet {namespace}/{old}: the Gateway's fleet is now {namespace}/{}",
                        fleet.name_any()
                    );
                    normal(REASON_FLEET_MOVED, note, "Delete")
                }));
            }
            if let Some(wait) = rejection_event(&ctx, &gateway, stored.as_deref(), &mut events) {
                requeue = requeue.min(wait);
            }
        }
        // Nothing to serve: no proxies.
        None if !accepted => {
            let gone = fleets::remove(&ctx.shared, envoys, &gateway, None, Removal::NothingToServe).await?;
            events.extend(gone.into_iter().map(|old| {
                let note = format!("deleted the fleet {namespace}/{old}: the Gateway is not accepted");
                normal(REASON_FLEET_DELETED, note, "Delete")
            }));
        }
        // The fleet's name is someone else's Envoy (its status says so): what runs stays.
        None => {}
    }
    let mut status = gateway_status(&gateway, outcome, &now());
    // The API server defaults a route kind's group: written out, the status it stores is the one
    // computed, and the next reconcile finds nothing to write.
    let kinds = status.listeners.iter_mut().flat_map(|listener| listener.supported_kinds.iter_mut());
    for kind in kinds {
        kind.group.get_or_insert_with(|| GROUP.to_owned());
    }
    let current = gateway.status.clone().unwrap_or_default();
    events.extend(status_events(&current, &status));
    let api: Api<Gateway> = Api::namespaced(ctx.shared.client.clone(), &namespace);
    write(&ctx.shared, &api, KIND, gateway.as_ref(), &current, &status, Guard::None).await?;
    publish(&ctx.shared, gateway.as_ref(), events).await;
    Ok(Action::requeue(requeue))
}

/// Event reasons of the Gateway's own (the others are its conditions' reasons).
pub const REASON_FLEET_NOT_APPLIED: &str = "FleetNotApplied";
pub const REASON_FLEET_MOVED: &str = "FleetMoved";
pub const REASON_FLEET_DELETED: &str = "FleetDeleted";

/// The Gateway's conditions worth an event: refused, stopped, or programmed.
const GATEWAY_TELLS: [Tell; 3] =
    [Tell::warning(ACCEPTED, "False"), Tell::warning(PROGRAMMED, "False"), Tell::normal(PROGRAMMED, "True")];
/// A listener's: refused, a reference lost, or in conflict.
const LISTENER_TELLS: [Tell; 3] = [
    Tell::warning(ACCEPTED, "False"),
    Tell::warning(RESOLVED_REFS, "False"),
    Tell::warning(CONFLICTED, "True"),
];

/// The events of the Gateway's status going from `before` to `after`: `Accepted` turning False,
/// `Programmed` turning False for a reason that needs a human (not while the fleet starts:
/// `Pending`, `AddressNotAssigned`; nor when the Gateway is refused, told already) or True; a
/// listener refused, losing a reference, or in conflict.
fn status_events(before: &GatewayStatus, after: &GatewayStatus) -> Vec<ObjectEvent> {
    let refused = after.conditions.iter().any(|c| c.type_ == ACCEPTED && c.status == "False");
    let mut events: Vec<ObjectEvent> =
        transitions(&before.conditions, &after.conditions, &GATEWAY_TELLS, None)
            .into_iter()
            .filter(|ObjectEvent { event, .. }| {
                let starting = [REASON_PENDING, REASON_ADDRESS_NOT_ASSIGNED].contains(&event.reason.as_str());
                event.action != PROGRAMMED || event.type_ == EventType::Normal || !(starting || refused)
            })
            .collect();
    for listener in &after.listeners {
        let known = before.listeners.iter().find(|l| l.name == listener.name);
        let known = known.map(|l| l.conditions.as_slice()).unwrap_or_default();
        let (subject, field_path) =
            (format!("listener {}", listener.name), format!("spec.listeners{{{}}}", listener.name));
        let part = Part { subject: &subject, field_path: &field_path };
        events.extend(transitions(known, &listener.conditions, &LISTENER_TELLS, Some(part)));
    }
    events
}

/// A Warning `ConfigRejected` when the fleet's proxies reject the configuration it is served
/// (its `ConfigAccepted` condition is False), under the same rule as the Envoy's own event: once
/// per new rejection, at most one per interval. Returns when to look again when one is held.
fn rejection_event(
    ctx: &GatewayContext,
    gateway: &Gateway,
    fleet: Option<&Envoy>,
    events: &mut Vec<ObjectEvent>,
) -> Option<std::time::Duration> {
    let rejected = fleet.and_then(|fleet| {
        let conditions = fleet.status.as_ref()?.conditions.iter();
        conditions.clone().find(|c| c.type_ == CONFIG_ACCEPTED && c.status == "False").map(|c| &c.message)
    });
    let gate = ctx.shared.rejection_events.check(
        &backoff_key(gateway),
        rejected.map(String::as_str),
        std::time::Instant::now(),
    );
    match (gate, rejected) {
        (Gate::Tell, Some(message)) => {
            let fleet = fleet.map(ResourceExt::name_any).unwrap_or_default();
            let note = format!("the proxies of the fleet {fleet} reject its configuration: {message}");
            events.push(warning(REASON_CONFIG_REJECTED, note, "Configure"));
            None
        }
        (Gate::Hold(wait), _) => Some(wait),
        _ => None,
    }
}

fn warning(reason: &str, note: String, action: &str) -> ObjectEvent {
    let event = Event {
        type_: EventType::Warning,
        reason: reason.into(),
        note: Some(note),
        action: action.into(),
        secondary: None,
    };
    ObjectEvent::of_object(event)
}

fn normal(reason: &str, note: String, action: &str) -> ObjectEvent {
    let event = Event {
        type_: EventType::Normal,
        reason: reason.into(),
        note: Some(note),
        action: action.into(),
        secondary: None,
    };
    ObjectEvent::of_object(event)
}
