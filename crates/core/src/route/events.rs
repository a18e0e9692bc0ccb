//! Which changes of a route's `status.parents` deserve an Event on the route, for `kubectl
//! describe`: a Warning when a parent's condition turns bad (`Accepted` or `ResolvedRefs`
//! turns False: the parent refuses the route, a reference does not resolve, the proxies reject
//! it), naming the condition's reason and message; a Normal event when it is good again.
//!
//! Only transitions count: a condition whose status and reason stay the same is told nothing,
//! whatever its message or `lastTransitionTime` do, so a status written again, or judged again
//! by a restarted operator, makes no event. A route's first status tells only what is bad.
//! EnvoyRoutes and HTTPRoutes alike ([`ParentEntry`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::route::status::ParentEntry;

/// The longest note the API server takes (`events.k8s.io/v1`: 1 kB).
pub const NOTE_LIMIT_BYTES: usize = 1024;
/// The longest reason the API server takes.
pub const REASON_LIMIT: usize = 128;

/// Condition types whose True means something is wrong (Gateway API's `PartiallyInvalid`);
/// every other condition of a route is good when True.
const BAD_WHEN_TRUE: &[&str] = &["PartiallyInvalid"];

/// An Event to record on a route about one of its parents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParentEvent<R> {
    /// The parentRef it is about.
    pub parent_ref: R,
    pub warning: bool,
    /// The condition's reason (`NoMatchingParent`, `BackendNotFound`, `Accepted`, …).
    pub reason: String,
    /// What a person reads: the parent, the condition, and the condition's message.
    pub note: String,
    /// The condition's type, as the event's action (`Accepted`, `ResolvedRefs`).
    pub action: String,
}

/// Whether a condition says all is well (`Some(true)`), something is wrong (`Some(false)`), or
/// neither (`Unknown`).
fn good(condition: &Condition) -> Option<bool> {
    let good_when = if BAD_WHEN_TRUE.contains(&condition.type_.as_str()) { "False" } else { "True" };
    match condition.status.as_str() {
        "Unknown" => None,
        status => Some(status == good_when),
    }
}

/// The events that the change of a route's `status.parents` from `previous` to `current`
/// calls for, for the entries of `controller_name`, in `current`'s order. `describe` names a
/// parentRef as a person reads it (`Envoy "edge"`).
pub fn parent_events<E: ParentEntry>(
    previous: &[E],
    current: &[E],
    controller_name: &str,
    describe: impl Fn(&E::Ref) -> String,
) -> Vec<ParentEvent<E::Ref>> {
    let ours = |entry: &&E| entry.controller_name() == controller_name;
    let before: Vec<&E> = previous.iter().filter(ours).collect();
    let mut events = Vec::new();
    for entry in current.iter().filter(ours) {
        let conditions_before = before
            .iter()
            .find(|earlier| earlier.parent_ref() == entry.parent_ref())
            .map(|earlier| earlier.conditions())
            .unwrap_or_default();
        for condition in entry.conditions() {
            let earlier = conditions_before.iter().find(|earlier| earlier.type_ == condition.type_);
            let Some(warning) = transition(earlier, condition) else { continue };
            let parent = describe(entry.parent_ref());
            let (type_, message) = (&condition.type_, condition.message.trim());
            let said = if warning {
                format!("{type_} turned {} for {parent}", condition.status)
            } else {
                format!("{type_} is {} again for {parent}", condition.status)
            };
            let note = if message.is_empty() { said } else { format!("{said}: {message}") };
            events.push(ParentEvent {
                parent_ref: entry.parent_ref().clone(),
                warning,
                reason: cut(&condition.reason, REASON_LIMIT).to_owned(),
                note: bounded_note(note),
                action: cut(type_, REASON_LIMIT).to_owned(),
            });
        }
    }
    events
}

/// Whether going from `before` to `now` is told: `Some(true)` for a Warning (now bad, and it
/// was not, or for another reason), `Some(false)` for a Normal event (good again after bad).
fn transition(before: Option<&Condition>, now: &Condition) -> Option<bool> {
    let was = before.and_then(good);
    match good(now)? {
        false => {
            let same = before.is_some_and(|b| was == Some(false) && b.reason == now.reason);
            (!same).then_some(true)
        }
        true => (was == Some(false)).then_some(false),
    }
}

/// `note` within [`NOTE_LIMIT_BYTES`], cut on a character boundary with an ellipsis.
fn bounded_note(note: String) -> String {
    if note.len() <= NOTE_LIMIT_BYTES {
        return note;
    }
    let ellipsis = "…";
    format!("{}{ellipsis}", cut_bytes(&note, NOTE_LIMIT_BYTES - ellipsis.len()))
}

/// `text`'s first `max_chars` characters.
fn cut(text: &str, max_chars: usize) -> &str {
    text.char_indices().nth(max_chars).map_or(text, |(end, _)| &text[..end])
}

/// `text`'s longest prefix of at most `max_bytes` bytes that ends on a character boundary.
fn cut_bytes(text: &str, max_bytes: usize) -> &str {
    let mut end = max_bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::api::route::{ParentReference, RouteParentStatus};

    const OURS: &str = "example.com/envoy-operator";

    fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: Some(1),
            last_transition_time: Time(Timestamp::from_second(0).unwrap()),
        }
    }

    fn entry(parent: &str, controller: &str, conditions: Vec<Condition>) -> RouteParentStatus {
        let parent_ref = ParentReference { name: parent.into(), section_name: None };
        RouteParentStatus { parent_ref, controller_name: controller.into(), conditions }
    }

    fn accepted(parent: &str) -> RouteParentStatus {
        entry(
            parent,
            OURS,
            vec![
                condition("Accepted", "True", "Accepted", "attached to every listener"),
                condition("ResolvedRefs", "True", "ResolvedRefs", "every backendRef resolves"),
            ],
        )
    }

    fn refused(parent: &str, reason: &str, message: &str) -> RouteParentStatus {
        let mut entry = accepted(parent);
        entry.conditions[0] = condition("Accepted", "False", reason, message);
        entry
    }

    fn unresolved(parent: &str, reason: &str, message: &str) -> RouteParentStatus {
        let mut entry = accepted(parent);
        entry.conditions[1] = condition("ResolvedRefs", "False", reason, message);
        entry
    }

    /// `(warning, reason, parent)` of each event.
    fn told(previous: &[RouteParentStatus], current: &[RouteParentStatus]) -> Vec<(bool, String, String)> {
        parent_events(previous, current, OURS, |parent| format!("Envoy {:?}", parent.name))
            .into_iter()
            .map(|event| (event.warning, event.reason, event.parent_ref.name))
            .collect()
    }

    fn warning(reason: &str, parent: &str) -> (bool, String, String) {
        (true, reason.into(), parent.into())
    }

    fn normal(reason: &str, parent: &str) -> (bool, String, String) {
        (false, reason.into(), parent.into())
    }

    #[test]
    fn a_parent_that_refuses_a_route_is_a_warning_naming_its_reason_and_message() {
        let events = parent_events(
            &[accepted("edge")],
            &[refused("edge", "RejectedByProxy", "Envoy refused: invalid repetition size: {1001}")],
            OURS,
            |parent| format!("Envoy {:?}", parent.name),
        );
        assert_eq!(events.len(), 1, "{events:?}");
        let event = &events[0];
        assert!(event.warning);
        assert_eq!(event.reason, "RejectedByProxy");
        assert_eq!(event.action, "Accepted");
        assert_eq!(
            event.note,
            "Accepted turned False for Envoy \"edge\": Envoy refused: invalid repetition size: {1001}"
        );
        assert_eq!(event.parent_ref.name, "edge");
    }

    #[test]
    fn only_transitions_of_status_or_reason_are_told() {
        let missing = refused("edge", "NoMatchingParent", "the Envoy \"edge\" does not exist");
        // A new route: only what is wrong is told.
        assert_eq!(told(&[], &[accepted("edge")]), []);
        assert_eq!(told(&[], std::slice::from_ref(&missing)), [warning("NoMatchingParent", "edge")]);
        // The same again (a write of the same status, a restart): nothing.
        assert_eq!(told(std::slice::from_ref(&missing), std::slice::from_ref(&missing)), []);
        assert_eq!(told(&[accepted("edge")], &[accepted("edge")]), []);
        // Another message, same status and reason: nothing.
        let reworded = refused("edge", "NoMatchingParent", "still no Envoy \"edge\"");
        assert_eq!(told(std::slice::from_ref(&missing), &[reworded]), []);
        // Another reason while still refused: told.
        let rejected = refused("edge", "RejectedByProxy", "invalid regex");
        assert_eq!(
            told(std::slice::from_ref(&missing), std::slice::from_ref(&rejected)),
            [warning("RejectedByProxy", "edge")]
        );
        // Accepted again: a Normal event.
        assert_eq!(told(&[rejected], &[accepted("edge")]), [normal("Accepted", "edge")]);
    }

    #[test]
    fn references_that_stop_and_start_resolving_are_told_per_parent() {
        let before = [accepted("edge"), accepted("internal")];
        let lost = [
            unresolved("edge", "BackendNotFound", "Service \"api\" not found"),
            unresolved("internal", "BackendNotFound", "Service \"api\" not found"),
        ];
        assert_eq!(
            told(&before, &lost),
            [warning("BackendNotFound", "edge"), warning("BackendNotFound", "internal")]
        );
        let not_permitted = [unresolved("edge", "RefNotPermitted", "no ReferenceGrant"), lost[1].clone()];
        assert_eq!(told(&lost, &not_permitted), [warning("RefNotPermitted", "edge")]);
        assert_eq!(
            told(&not_permitted, &before),
            [normal("ResolvedRefs", "edge"), normal("ResolvedRefs", "internal")]
        );
        // A parent added to the spec that accepts the route at once: nothing to tell.
        let added = [accepted("edge"), accepted("internal"), accepted("public")];
        assert_eq!(told(&before, &added), []);
    }

    #[test]
    fn other_controllers_entries_and_unknown_conditions_tell_nothing() {
        let theirs = entry("edge", "example.net/other", vec![condition("Accepted", "False", "Nope", "")]);
        assert_eq!(told(&[], std::slice::from_ref(&theirs)), []);
        assert_eq!(told(&[accepted("edge")], &[theirs, accepted("edge")]), []);
        let pending = entry("edge", OURS, vec![condition("Accepted", "Unknown", "Pending", "")]);
        assert_eq!(told(&[accepted("edge")], std::slice::from_ref(&pending)), []);
        assert_eq!(
            told(&[pending], &[refused("edge", "NotAllowedByListeners", "")]),
            [warning("NotAllowedByListeners", "edge")]
        );
    }

    #[test]
    fn a_condition_bad_when_true_is_told_when_it_turns_true() {
        let partially = |status: &str| {
            let mut entry = accepted("edge");
            entry.conditions.push(condition("PartiallyInvalid", status, "UnsupportedValue", "rule 2"));
            entry
        };
        assert_eq!(told(&[accepted("edge")], &[partially("False")]), []);
        assert_eq!(told(&[partially("False")], &[partially("True")]), [warning("UnsupportedValue", "edge")]);
        let healed = told(&[partially("True")], &[partially("False")]);
        assert_eq!(healed, [normal("UnsupportedValue", "edge")]);
    }

    #[test]
    fn notes_and_reasons_fit_what_the_api_server_takes() {
        let long = "é".repeat(2000);
        let events = parent_events(&[], &[refused("edge", &"R".repeat(300), &long)], OURS, |parent| {
            format!("Envoy {:?}", parent.name)
        });
        let event = &events[0];
        assert!(event.note.len() <= NOTE_LIMIT_BYTES, "{} bytes", event.note.len());
        assert!(event.note.starts_with("Accepted turned False for Envoy \"edge\": éé"));
        assert!(event.note.ends_with('…'));
        assert_eq!(event.reason.chars().count(), REASON_LIMIT);
    }
}
