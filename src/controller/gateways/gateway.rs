//! A Gateway of one of the operator's classes gets its fleet ([`super::fleets`]) and the status
//! the translation judged (`addresses`, `conditions`, `listeners`), and an event when that
//! status turns for the worse (refused, a listener's reference lost, not programmed), when it is
//! programmed, when its fleet cannot be applied, moves or goes, and when its proxies reject their
//! configuration. A Gateway not accepted has no fleet; one whose class is not (or no longer)
//! the operator's gets nothing, and loses the fleet the operator applied for it.

use std::sync::Arc;

use envoy_operator_core::api::Envoy;
use envoy_operator_core::api::envoy::CONFIG_ACCEPTED;
use envoy_operator_core::api::gateway::{GROUP, Gateway, GatewayStatus};
use envoy_operator_core::children::status::now;
use envoy_operator_core::fleet::status::EVENT_CONFIG_REJECTED as REASON_CONFIG_REJECTED;
use envoy_operator_core::translate::gateway::conditions::{
    ACCEPTED, CONFLICTED, PROGRAMMED, REASON_ADDRESS_NOT_ASSIGNED, REASON_PENDING, RESOLVED_REFS,
};
use envoy_operator_core::translate::gateway::fleet;
use envoy_operator_core::translate::gateway::status::gateway_status;
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
    let rejected = fleet.and_then(rejected_configuration);
    let gate = ctx.shared.rejection_events.check(&backoff_key(gateway), rejected, std::time::Instant::now());
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

/// What the fleet's `ConfigAccepted` condition says when it is False: its proxies reject the
/// configuration they are sent.
fn rejected_configuration(fleet: &Envoy) -> Option<&str> {
    let conditions = &fleet.status.as_ref()?.conditions;
    conditions.iter().find(|c| c.type_ == CONFIG_ACCEPTED && c.status == "False").map(|c| c.message.as_str())
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn condition(type_: &str, status: &str, reason: &str) -> Value {
        json!({"type": type_, "status": status, "reason": reason, "message": format!("{type_} {reason}"),
               "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1})
    }

    fn status(conditions: Vec<Value>, listener: Vec<Value>) -> GatewayStatus {
        serde_json::from_value(json!({"conditions": conditions,
            "listeners": [{"name": "https", "supportedKinds": [], "attachedRoutes": 0, "conditions": listener}]}))
        .expect("a Gateway status")
    }

    fn told(before: &GatewayStatus, after: &GatewayStatus) -> Vec<(String, String, Option<String>)> {
        status_events(before, after)
            .into_iter()
            .map(|ObjectEvent { event, field_path }| (format!("{:?}", event.type_), event.reason, field_path))
            .collect()
    }

    #[test]
    fn a_gateway_is_told_of_refusals_lost_references_and_a_fleet_it_cannot_make_not_of_its_start() {
        let accepted = condition(ACCEPTED, "True", "Accepted");
        let resolved = condition(RESOLVED_REFS, "True", "ResolvedRefs");
        let starting =
            status(vec![accepted.clone(), condition(PROGRAMMED, "False", "Pending")], vec![resolved.clone()]);
        assert!(told(&GatewayStatus::default(), &starting).is_empty(), "a fleet starting is no news");

        let programmed =
            status(vec![accepted.clone(), condition(PROGRAMMED, "True", "Programmed")], vec![resolved]);
        assert_eq!(told(&starting, &programmed), [("Normal".to_owned(), "Programmed".to_owned(), None)]);

        let lost = condition(RESOLVED_REFS, "False", "InvalidCertificateRef");
        let clash = status(vec![accepted, condition(PROGRAMMED, "False", "Invalid")], vec![lost]);
        assert_eq!(
            told(&programmed, &clash),
            [
                ("Warning".to_owned(), "Invalid".to_owned(), None),
                (
                    "Warning".to_owned(),
                    "InvalidCertificateRef".to_owned(),
                    Some("spec.listeners{https}".to_owned())
                ),
            ]
        );
        assert!(told(&clash, &clash).is_empty(), "at rest");

        let refused = status(
            vec![
                condition(ACCEPTED, "False", "ListenersNotValid"),
                condition(PROGRAMMED, "False", "Invalid"),
            ],
            vec![condition(RESOLVED_REFS, "False", "InvalidCertificateRef")],
        );
        let said: Vec<String> = told(&starting, &refused).into_iter().map(|(_, reason, _)| reason).collect();
        assert_eq!(
            said,
            ["ListenersNotValid", "InvalidCertificateRef"],
            "Programmed adds nothing to a refusal"
        );
    }

    #[test]
    fn a_fleets_rejected_configuration_is_its_config_accepted_false() {
        let fleet = |conditions: Value| -> Envoy {
            serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Envoy",
                "metadata": {"name": "edge-envoy"}, "spec": {}, "status": {"conditions": conditions}}))
            .expect("an Envoy")
        };
        let rejected = fleet(json!([condition(CONFIG_ACCEPTED, "False", "Rejected")]));
        assert_eq!(rejected_configuration(&rejected), Some("ConfigAccepted Rejected"));
        let accepted = fleet(json!([condition(CONFIG_ACCEPTED, "True", "Accepted")]));
        assert_eq!(rejected_configuration(&accepted), None);
        assert_eq!(rejected_configuration(&fleet(json!([]))), None);
    }
}
