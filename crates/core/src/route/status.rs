//! A route's `status.parents`, for every route kind: the entries of the operator's parents
//! written from their [`ConditionState`]s, others' kept, transition times moved only on change.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::backend::Unresolved;
use super::conditions::{ACCEPTED, ConditionState, REASON_RESOLVED_REFS, RESOLVED_REFS};
use crate::ir::UnresolvedAnswer;

/// What the parents a route names make of one version of it (`generation`), whatever the
/// route kind: `P` is the kind's outcome per parentRef.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RouteOutcome<P> {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    pub generation: Option<i64>,
    /// One per distinct parentRef the kind's translation judges, sorted.
    pub parents: Vec<P>,
}

/// Gateway API's limit on `status.parents`.
const MAX_PARENTS: usize = 32;

/// `ResolvedRefs` of a route from its backendRefs that do not resolve, each with its field
/// path: true when there is none, else the first one's reason and every one's words.
pub fn resolved_refs(unresolved: &[(String, Unresolved)]) -> ConditionState {
    resolved_refs_answered(unresolved, UnresolvedAnswer::InternalError)
}

/// [`resolved_refs`], saying what the share of the requests of those backendRefs is answered
/// (`answer`: 500 for HTTP, `UNAVAILABLE` for gRPC).
pub fn resolved_refs_answered(
    unresolved: &[(String, Unresolved)],
    answer: UnresolvedAnswer,
) -> ConditionState {
    let answered = match answer {
        UnresolvedAnswer::InternalError => "their share of the requests is answered with 500",
        UnresolvedAnswer::Unavailable => {
            "their share of the requests is answered with gRPC status UNAVAILABLE (HTTP 503)"
        }
        UnresolvedAnswer::Closed => "their share of the connections is closed",
    };
    match unresolved.first() {
        None => ConditionState {
            status: true,
            reason: REASON_RESOLVED_REFS,
            message: "every backendRef resolves to a Service port".to_owned(),
        },
        Some((_, first)) => {
            let messages: Vec<String> = unresolved.iter().map(|(at, why)| format!("{at}: {why}")).collect();
            ConditionState {
                status: false,
                reason: first.reason,
                message: format!("{}; {answered}", messages.join("; ")),
            }
        }
    }
}

/// An entry of a route's `status.parents`, of EnvoyRoute's or HTTPRoute's own type.
pub trait ParentEntry: Sized {
    type Ref: PartialEq + Clone;
    fn new(parent_ref: Self::Ref, controller_name: String, conditions: Vec<Condition>) -> Self;
    fn controller_name(&self) -> &str;
    fn parent_ref(&self) -> &Self::Ref;
    fn conditions(&self) -> &[Condition];
}

/// A route's `status.parents`: other controllers' entries kept as they are; ours, one per
/// distinct parentRef of the spec that `judged` has `Accepted` and `ResolvedRefs` for, in the
/// spec's order (entries for parentRefs no longer in the spec dropped); at most Gateway API's
/// 32. A condition's `lastTransitionTime` moves only when its status changes.
pub fn parent_statuses<'a, E: ParentEntry + Clone>(
    previous: &[E],
    parent_refs: &'a [E::Ref],
    controller_name: &str,
    generation: Option<i64>,
    now: &Time,
    judged: impl Fn(&E::Ref) -> Option<(&'a ConditionState, &'a ConditionState)>,
) -> Vec<E> {
    let mut parents: Vec<E> =
        previous.iter().filter(|p| p.controller_name() != controller_name).cloned().collect();
    for parent_ref in distinct(parent_refs) {
        let Some((accepted, resolved_refs)) = judged(parent_ref) else { continue };
        let before = previous
            .iter()
            .find(|p| p.controller_name() == controller_name && p.parent_ref() == parent_ref)
            .map(ParentEntry::conditions)
            .unwrap_or_default();
        parents.push(E::new(
            parent_ref.clone(),
            controller_name.to_owned(),
            vec![
                condition(ACCEPTED, accepted, before, generation, now),
                condition(RESOLVED_REFS, resolved_refs, before, generation, now),
            ],
        ));
    }
    parents.truncate(MAX_PARENTS);
    parents
}

/// The parentRefs, each once, in their order.
pub fn distinct<R: PartialEq>(parent_refs: &[R]) -> Vec<&R> {
    let mut seen: Vec<&R> = Vec::new();
    for parent_ref in parent_refs {
        if !seen.contains(&parent_ref) {
            seen.push(parent_ref);
        }
    }
    seen
}

/// The condition `type_` in the state `state`, judging `generation`: its `lastTransitionTime`
/// is kept from `before` unless its status changes.
pub fn condition(
    type_: &str,
    state: &ConditionState,
    before: &[Condition],
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let status = if state.status { "True" } else { "False" };
    let last_transition_time = before
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: state.reason.to_owned(),
        message: state.message.clone(),
        observed_generation: generation,
        last_transition_time,
    }
}
