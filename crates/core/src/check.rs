//! Offline admission (`envoy-operator check`): an object goes through the same defaulting and
//! validation as the admission webhooks; a Gateway or an HTTPRoute through the operator's
//! Gateway API translation (`check/gateway.rs`).

mod gateway;

use serde_json::Value;

use crate::kind::AdmittedKind;
use crate::manifest::{Outcome, display_name, type_meta};

/// Defaults and validates one object, or checks a Gateway or an HTTPRoute; other kinds are
/// passed through with a note.
pub fn check_object(object: Value) -> Outcome {
    let (api_version, kind) = match type_meta(&object) {
        Ok(type_meta) => type_meta,
        Err(unreadable) => return unreadable,
    };
    // The API server decodes strictly before anything else: an unknown field refuses the object.
    if let Err(refused) = crate::strict::check(&object) {
        return refused;
    }
    if gateway::is_checked(api_version, kind) {
        let kind = kind.to_owned();
        return gateway::check(object, &kind);
    }
    let admitted = match AdmittedKind::resolve(api_version, kind) {
        Ok(Some(admitted)) => admitted,
        Ok(None) => {
            let note =
                format!("{api_version} {kind} is not a kind envoy-operator admits: passed through unchanged");
            return Outcome::Unchanged { object, note };
        }
        Err(message) => return Outcome::Rejected { message },
    };

    let admission = admitted.admit(&object, None);
    match admission.verdict {
        Ok(warnings) => Outcome::Changed { object: admission.defaulted, warnings, notes: Vec::new() },
        Err(errors) => Outcome::Rejected { message: errors.message(kind, &display_name(&object)) },
    }
}
