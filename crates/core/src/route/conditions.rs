//! The conditions a route's parent sets on it, as Gateway API words them: their types, their
//! reasons, and the target state of one.

use serde::Serialize;

/// Condition types.
pub const ACCEPTED: &str = "Accepted";
pub const RESOLVED_REFS: &str = "ResolvedRefs";

// Reasons of `Accepted`; the positive one, which an Envoy's `ConfigAccepted` shares, is
// `crate::names::REASON_ACCEPTED`.
/// The Envoy, or the listener `sectionName` names, does not exist.
pub const REASON_NO_MATCHING_PARENT: &str = "NoMatchingParent";
/// The route breaks the rule engine's rules (stored while the webhook was down).
pub const REASON_UNSUPPORTED_VALUE: &str = "UnsupportedValue";

/// Reasons of `ResolvedRefs` (the others are in [`super::backend`]).
pub const REASON_RESOLVED_REFS: &str = "ResolvedRefs";

/// The target state of one condition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConditionState {
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}
