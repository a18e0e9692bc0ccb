//! Events when a status's conditions change: `kubectl describe` shows why an object is refused
//! or stopped working without the reader decoding its conditions. An event is told when a
//! condition turns to a state worth telling (a status, or a new reason in it) between the
//! status stored and the one written, so a reconcile at rest tells nothing, and a restart of
//! the operator, which finds the status already written, tells nothing again. Repeats within
//! minutes (a condition flapping) fold into one event's series: the context's recorder does it
//! for events of the same reason about the same object or part of it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Resource;
use kube::runtime::events::{Event, EventType};
use tracing::warn;

use super::Context;

/// A condition state worth an event: the condition `type_` with `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tell {
    pub type_: &'static str,
    pub status: &'static str,
    /// A Warning (something needs a human), else Normal.
    pub warning: bool,
}

impl Tell {
    pub const fn warning(type_: &'static str, status: &'static str) -> Self {
        Self { type_, status, warning: true }
    }

    pub const fn normal(type_: &'static str, status: &'static str) -> Self {
        Self { type_, status, warning: false }
    }
}

/// An event about an object, or about a part of it (`field_path`, e.g. `spec.listeners{https}`,
/// as Kubernetes names a pod's container): events of the same reason about two parts stay two.
pub struct ObjectEvent {
    pub event: Event,
    pub field_path: Option<String>,
}

impl ObjectEvent {
    pub fn of_object(event: Event) -> Self {
        Self { event, field_path: None }
    }
}

/// A part of an object whose conditions are told: its words in the note (`listener https`) and
/// its field path.
#[derive(Clone, Copy, Debug)]
pub struct Part<'a> {
    pub subject: &'a str,
    pub field_path: &'a str,
}

/// The events for the conditions of `after` in a state of `tell` that `before` did not have
/// (no such condition, another status, or another reason): the condition's reason, its
/// message (after the part's subject, for a part) and its type as the action.
pub fn transitions(
    before: &[Condition],
    after: &[Condition],
    tell: &[Tell],
    part: Option<Part<'_>>,
) -> Vec<ObjectEvent> {
    after
        .iter()
        .filter_map(|condition| {
            let tell = tell.iter().find(|t| t.type_ == condition.type_ && t.status == condition.status)?;
            let known = before.iter().any(|b| {
                b.type_ == condition.type_ && b.status == condition.status && b.reason == condition.reason
            });
            if known {
                return None;
            }
            let note = match part {
                Some(part) => format!("{}: {}", part.subject, condition.message),
                None => condition.message.clone(),
            };
            let event = Event {
                type_: if tell.warning { EventType::Warning } else { EventType::Normal },
                reason: condition.reason.clone(),
                note: Some(note),
                action: condition.type_.clone(),
                secondary: None,
            };
            Some(ObjectEvent { event, field_path: part.map(|part| part.field_path.to_owned()) })
        })
        .collect()
}

/// Publishes `events` about `object`. Events are best effort: a failure is logged, never fails
/// the reconcile.
pub async fn publish<K: Resource<DynamicType = ()>>(ctx: &Context, object: &K, events: Vec<ObjectEvent>) {
    for ObjectEvent { event, field_path } in events {
        let mut regarding = object.object_ref(&());
        regarding.field_path = field_path;
        let published = ctx.recorder.publish(&event, &regarding).await;
        ctx.metrics.wrote("Event", "publish");
        if let Err(error) = published {
            warn!(%error, reason = event.reason, "could not publish event");
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: Some(1),
            last_transition_time: Time(Default::default()),
        }
    }

    const TELL: [Tell; 2] = [Tell::warning("Accepted", "False"), Tell::normal("Programmed", "True")];

    fn told(before: &[Condition], after: &[Condition]) -> Vec<(bool, String, String)> {
        let part = Part { subject: "listener http", field_path: "spec.listeners{http}" };
        transitions(before, after, &TELL, Some(part))
            .into_iter()
            .inspect(|e| assert_eq!(e.field_path.as_deref(), Some("spec.listeners{http}")))
            .map(|ObjectEvent { event: e, .. }| {
                (e.type_ == EventType::Warning, e.reason, e.note.unwrap_or_default())
            })
            .collect()
    }

    #[test]
    fn a_condition_turning_to_a_told_state_is_told_once() {
        let refused = condition("Accepted", "False", "ListenersNotValid", "no listener is valid");
        let accepted = condition("Accepted", "True", "Accepted", "1 of 1");
        let programmed = condition("Programmed", "True", "Programmed", "served");
        let pending = condition("Programmed", "False", "Pending", "waiting");

        let warning =
            (true, "ListenersNotValid".to_owned(), "listener http: no listener is valid".to_owned());
        assert_eq!(
            told(&[], std::slice::from_ref(&refused)),
            std::slice::from_ref(&warning),
            "a first status"
        );
        assert_eq!(told(std::slice::from_ref(&accepted), std::slice::from_ref(&refused)), [warning]);
        assert!(told(std::slice::from_ref(&refused), std::slice::from_ref(&refused)).is_empty(), "at rest");
        let new_message = condition("Accepted", "False", "ListenersNotValid", "another message");
        assert!(told(std::slice::from_ref(&refused), &[new_message]).is_empty(), "the same reason");
        let new_reason = condition("Accepted", "False", "Invalid", "bad name");
        assert_eq!(told(std::slice::from_ref(&refused), &[new_reason]).len(), 1, "a new reason");
        assert!(told(std::slice::from_ref(&refused), std::slice::from_ref(&accepted)).is_empty(), "not told");
        assert!(told(&[], std::slice::from_ref(&pending)).is_empty(), "a state not told");

        let normal = told(std::slice::from_ref(&pending), std::slice::from_ref(&programmed));
        assert_eq!(normal, [(false, "Programmed".to_owned(), "listener http: served".to_owned())]);
    }
}
