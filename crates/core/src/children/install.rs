//! One writer per object when several installs of the operator watch one namespace (a
//! namespaced install beside a cluster-wide one, or two namespaced installs).
//!
//! Both installs see the same parents, and the owner references alone cannot tell their writes
//! apart (they name the parent, not the install), so without more each would rewrite the
//! children with its own CA and xDS address in turn, forever. Hence:
//!
//! - An install has an identity, [`InstallId`]: `<operator namespace>/<leader Lease>` unless
//!   told otherwise (`--install-id`). Every replica of an install shares it (they elect their
//!   leader on that Lease), it survives restarts, and two installs differ in it (two installs
//!   in one namespace would share the Lease, and so are one install).
//! - Every child it applies carries it in the annotation [`INSTALL_ANNOTATION`] (an annotation:
//!   the identity has a `/`, which a label value may not).
//! - One child of each parent decides (the one every reconcile applies first: a Foo's
//!   Deployment, an Envoy's bootstrap ConfigMap): when it carries another install's identity,
//!   the parent is that install's, and this one writes none of its children (nor its status,
//!   nor its routes' status), saying so once with a Warning event and the condition
//!   [`MANAGED_ELSEWHERE`] naming the other install ([`standby_condition`]). Deciding on one
//!   child means two installs never each hold part of the children and both stand aside. A
//!   child without the annotation (from a version of the operator before it) is adopted when
//!   the parent controls it (its owner reference; a child the parent does not control is still
//!   never touched). When both installs apply at once, the last writer holds the mark; the
//!   other sees it on its next reconcile and stands aside, so they converge to one writer.
//! - The condition is written under a field manager of its own ([`STANDBY_FIELD_MANAGER`],
//!   shared by every install), and `conditions` is a map keyed by `type`: the managing
//!   install's status applies never own that entry, so they leave it, and they compare the
//!   status without it ([`without_standby`]), so nobody writes at rest.
//!
//! Handing a parent over (the managing install is gone for good): remove the annotation from
//! its children (`kubectl annotate … envoy-operator.example.com/install-`); the next install to
//! reconcile it adopts them.
//!
//! [`INSTALL_ANNOTATION`]: crate::names::INSTALL_ANNOTATION
//! [`STANDBY_FIELD_MANAGER`]: crate::names::STANDBY_FIELD_MANAGER

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use serde_json::Value;

use crate::names::{INSTALL_ANNOTATION, LEADER_LEASE, OPERATOR_NAMESPACE};

/// Condition type on a parent whose children another install manages.
pub const MANAGED_ELSEWHERE: &str = "ManagedElsewhere";
/// Reason of [`MANAGED_ELSEWHERE`]`=True`: written by an install that leaves the parent alone.
pub const REASON_OTHER_INSTALL: &str = "OtherInstall";
/// Reason of [`MANAGED_ELSEWHERE`]`=False`: written by the managing install over a condition
/// that named another one (it took the parent over).
pub const REASON_THIS_INSTALL: &str = "ThisInstall";
/// Reason of the Warning event an install records when it stands aside.
pub const EVENT_MANAGED_ELSEWHERE: &str = "ManagedElsewhere";

/// Longest identity accepted: it is repeated in annotations, messages and events.
pub const MAX_INSTALL_ID: usize = 253;

/// The identity of one install of the operator (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InstallId(String);

/// Why a string is no install identity.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InvalidInstallId {
    #[error("an install identity may not be empty")]
    Empty,
    #[error("an install identity has at most {MAX_INSTALL_ID} characters; this one has {0}")]
    TooLong(usize),
    #[error("an install identity is printable and without spaces; {0:?} is not")]
    Unprintable(String),
}

impl InstallId {
    /// `id` when it fits in an annotation value and a message: non-empty, printable, no spaces.
    pub fn new(id: &str) -> Result<Self, InvalidInstallId> {
        let length = id.chars().count();
        if id.is_empty() {
            Err(InvalidInstallId::Empty)
        } else if length > MAX_INSTALL_ID {
            Err(InvalidInstallId::TooLong(length))
        } else if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
            Err(InvalidInstallId::Unprintable(id.to_owned()))
        } else {
            Ok(Self(id.to_owned()))
        }
    }

    /// The identity of the install running in `operator_namespace`: its replicas elect their
    /// leader on the Lease [`LEADER_LEASE`] there, which makes them one install.
    pub fn of_namespace(operator_namespace: &str) -> Self {
        Self(format!("{operator_namespace}/{LEADER_LEASE}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for InstallId {
    /// The install of `deploy/`.
    fn default() -> Self {
        Self::of_namespace(OPERATOR_NAMESPACE)
    }
}

impl fmt::Display for InstallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who manages an existing child, by its mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Manager<'a> {
    /// Marked by this install.
    ThisInstall,
    /// Not marked (applied by an operator that did not mark): adopted.
    Unmarked,
    /// Marked by the install named: left alone.
    Other(&'a str),
}

/// Who manages the child whose metadata is `meta`, as seen by the install `this`.
pub fn manager<'a>(meta: &'a ObjectMeta, this: &InstallId) -> Manager<'a> {
    match meta.annotations.as_ref().and_then(|annotations| annotations.get(INSTALL_ANNOTATION)) {
        None => Manager::Unmarked,
        Some(marked) if *marked == this.0 => Manager::ThisInstall,
        Some(marked) => Manager::Other(marked),
    }
}

/// The install other than `this` that manages the child whose metadata is `meta`, if any.
pub fn other_manager<'a>(meta: &'a ObjectMeta, this: &InstallId) -> Option<&'a str> {
    match manager(meta, this) {
        Manager::Other(other) => Some(other),
        Manager::ThisInstall | Manager::Unmarked => None,
    }
}

/// Marks a desired child as managed by `this`.
pub fn mark(meta: &mut ObjectMeta, this: &InstallId) {
    meta.annotations.get_or_insert_default().insert(INSTALL_ANNOTATION.to_owned(), this.0.clone());
}

/// The message of [`MANAGED_ELSEWHERE`], whoever writes it: it names only the managing install,
/// so every install that stands aside writes the same entry and none undoes another's.
pub fn managed_by_message(manager: &str) -> String {
    format!("its children are managed by the operator install {manager:?} ({INSTALL_ANNOTATION})")
}

/// The note of the Warning event of an install `this` that leaves a `kind` to `manager`.
pub fn standing_aside_note(kind: &str, this: &InstallId, manager: &str) -> String {
    format!(
        "The operator install {:?} leaves this {kind} to the install {manager:?}, which manages its children ({INSTALL_ANNOTATION}); it writes none of them",
        this.0
    )
}

/// The [`MANAGED_ELSEWHERE`] condition to write about a parent at `generation` whose children
/// `manager` manages, as the install `this` sees it; `None` when `current` (the parent's
/// conditions) already says it, so nobody writes at rest.
///
/// An install standing aside (`manager` is another one) wants `True`, naming the manager. The
/// managing install writes only over a condition naming someone else (it took the parent
/// over): `False`, naming itself. Both name the same install, so they agree.
pub fn standby_condition(
    current: &[Condition],
    generation: Option<i64>,
    this: &InstallId,
    manager: &str,
    now: &Time,
) -> Option<Condition> {
    let existing = current.iter().find(|condition| condition.type_ == MANAGED_ELSEWHERE);
    let message = managed_by_message(manager);
    let (status, reason) = if manager == this.0 {
        match existing {
            Some(condition) if condition.message != message => ("False", REASON_THIS_INSTALL),
            _ => return None,
        }
    } else {
        ("True", REASON_OTHER_INSTALL)
    };
    let unchanged = existing.is_some_and(|condition| {
        condition.status == status
            && condition.reason == reason
            && condition.message == message
            && condition.observed_generation == generation
    });
    if unchanged {
        return None;
    }
    let since = existing
        .filter(|condition| condition.status == status)
        .map_or_else(|| now.clone(), |condition| condition.last_transition_time.clone());
    Some(Condition {
        type_: MANAGED_ELSEWHERE.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        observed_generation: generation,
        last_transition_time: since,
    })
}

/// A status (as JSON) without the [`MANAGED_ELSEWHERE`] condition: what the managing install
/// compares with the status it would write, since that entry is not its own.
pub fn without_standby(mut status: Value) -> Value {
    if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
        conditions.retain(|condition| condition["type"] != MANAGED_ELSEWHERE);
        if conditions.is_empty()
            && let Some(status) = status.as_object_mut()
        {
            status.remove("conditions");
        }
    }
    status
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    use super::*;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).expect("a valid time"))
    }

    fn a() -> InstallId {
        InstallId::of_namespace("ops-a")
    }

    fn b() -> InstallId {
        InstallId::of_namespace("ops-b")
    }

    #[test]
    fn identities_are_checked() {
        assert_eq!(InstallId::default().as_str(), "envoy-operator/envoy-operator-leader");
        assert_eq!(InstallId::new(""), Err(InvalidInstallId::Empty));
        assert!(matches!(InstallId::new("a b"), Err(InvalidInstallId::Unprintable(_))));
        assert!(matches!(InstallId::new(&"x".repeat(254)), Err(InvalidInstallId::TooLong(254))));
        assert_eq!(InstallId::new("team-a/edge").map(|id| id.to_string()), Ok("team-a/edge".to_owned()));
    }

    #[test]
    fn a_mark_tells_this_install_from_another_and_from_none() {
        let mut meta = ObjectMeta::default();
        assert_eq!(manager(&meta, &a()), Manager::Unmarked);
        mark(&mut meta, &a());
        assert_eq!(manager(&meta, &a()), Manager::ThisInstall);
        assert_eq!(other_manager(&meta, &b()), Some("ops-a/envoy-operator-leader"));
        assert_eq!(other_manager(&meta, &a()), None);
    }

    #[test]
    fn the_install_standing_aside_says_so_once_per_generation() {
        let now = at(100);
        let written = standby_condition(&[], Some(3), &b(), a().as_str(), &now).expect("new");
        assert_eq!((written.status.as_str(), written.reason.as_str()), ("True", REASON_OTHER_INSTALL));
        assert!(written.message.contains("\"ops-a/envoy-operator-leader\""), "{}", written.message);
        assert!(!written.message.contains("ops-b"), "the message names the manager only");
        // Read back: nothing more to write, however late.
        let current = [written.clone()];
        assert_eq!(standby_condition(&current, Some(3), &b(), a().as_str(), &at(900)), None);
        // A new generation: restamped, its transition time kept.
        let restamped = standby_condition(&current, Some(4), &b(), a().as_str(), &at(900)).expect("stale");
        assert_eq!(restamped.last_transition_time, now);
        assert_eq!(restamped.observed_generation, Some(4));
    }

    #[test]
    fn the_managing_install_leaves_a_condition_naming_it_and_corrects_one_naming_another() {
        let says_a = standby_condition(&[], Some(1), &b(), a().as_str(), &at(1)).expect("new");
        assert_eq!(standby_condition(&[], Some(1), &a(), a().as_str(), &at(2)), None, "nothing to say");
        assert_eq!(
            standby_condition(std::slice::from_ref(&says_a), Some(1), &a(), a().as_str(), &at(2)),
            None
        );
        // `b` took over: the condition naming `a` is wrong now.
        let took_over = standby_condition(&[says_a], Some(1), &b(), b().as_str(), &at(2)).expect("stale");
        assert_eq!((took_over.status.as_str(), took_over.reason.as_str()), ("False", REASON_THIS_INSTALL));
        assert_eq!(took_over.message, managed_by_message(b().as_str()));
        assert_eq!(
            standby_condition(std::slice::from_ref(&took_over), Some(1), &b(), b().as_str(), &at(3)),
            None
        );
        // Another install still standing aside turns it back to True, naming `b`: then at rest.
        let aside = standby_condition(&[took_over], Some(1), &a(), b().as_str(), &at(3)).expect("differs");
        assert_eq!(aside.status, "True");
        assert_eq!(standby_condition(&[aside], Some(1), &b(), b().as_str(), &at(4)), None);
    }

    #[test]
    fn the_status_compared_leaves_out_the_standby_condition() {
        let status = json!({"replicas": 2, "conditions": [{"type": "Ready"}, {"type": MANAGED_ELSEWHERE}]});
        assert_eq!(without_standby(status), json!({"replicas": 2, "conditions": [{"type": "Ready"}]}));
        let only = json!({"conditions": [{"type": MANAGED_ELSEWHERE}]});
        assert_eq!(without_standby(only), json!({}));
        assert_eq!(without_standby(json!({"parents": []})), json!({"parents": []}));
    }
}
