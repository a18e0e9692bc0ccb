//! The admission decisions: pure functions from an AdmissionRequest to an AdmissionResponse,
//! calling the one rule engine ([`envoy_operator_core::admission`]). No I/O, no side effects, so a
//! dry-run request is answered exactly like any other.

use envoy_operator_core::bounded;
use envoy_operator_core::kind::AdmittedKind;
use envoy_operator_core::rules::FieldErrors;
use serde_json::Value;

use super::review::{
    AdmissionRequest, AdmissionResponse, Operation, ReviewError, ReviewReader, parse_request_with,
};

/// Mutating admission of Foo and Envoy: the defaults as a JSON Patch against the raw object
/// (unknown fields kept; an already-defaulted object gets no patch). Rule violations are left
/// to the validating webhook, which runs after every mutation; an object that cannot be read
/// as its kind at all is rejected here already.
///
/// Both handlers call the rule engine's parts ([`AdmittedKind::default_patch`],
/// [`AdmittedKind::validate`]) rather than the whole [`AdmittedKind::admit`], so each does
/// only the work its answer needs; a test in `admission` holds the parts equal to the whole.
pub fn mutate(request: &AdmissionRequest) -> AdmissionResponse {
    let uid = request.uid.as_str();
    if passes_through(request) {
        return AdmissionResponse::allow(uid);
    }
    let Some(kind) = admitted_kind(request) else {
        return unexpected_kind(request);
    };
    let Some(object) = object_to_admit(request) else {
        return AdmissionResponse::allow(uid);
    };
    match kind.default_patch(object) {
        Ok(patch) => AdmissionResponse::allow_with_patch(uid, &patch),
        Err(errors) => unreadable(request, kind, &errors),
    }
}

/// Validating admission of Foo and Envoy: the object (defaulted the same way as by
/// [`mutate`], in case that webhook did not run) against the rules, with `oldObject` for the
/// update rules. Denials list every field error; warnings go back to the user.
pub fn validate(request: &AdmissionRequest) -> AdmissionResponse {
    let uid = request.uid.as_str();
    if passes_through(request) {
        return AdmissionResponse::allow(uid);
    }
    let Some(kind) = admitted_kind(request) else {
        return unexpected_kind(request);
    };
    let Some(object) = object_to_admit(request) else {
        return AdmissionResponse::bad_request(
            uid,
            format!("{} of a {}: the request carries no object", request.operation.as_str(), kind.kind()),
        );
    };
    let old = match request.operation {
        Operation::Update => request.old_object.as_ref().filter(|old| !old.is_null()),
        _ => None,
    };
    match kind.validate(object, old) {
        Ok(Ok(warnings)) => AdmissionResponse::allow(uid).with_warnings(warnings),
        Ok(Err(errors)) => {
            AdmissionResponse::invalid(uid, &kind.group(), &kind.kind(), &request.display_name(), &errors)
        }
        Err(errors) => unreadable(request, kind, &errors),
    }
}

/// DELETE and CONNECT carry no object to judge, and subresources (`status`, `scale`) are
/// the controller's and the autoscaler's: all are allowed, whatever the kind, so a
/// misconfigured webhook can never block a deletion.
fn passes_through(request: &AdmissionRequest) -> bool {
    matches!(request.operation, Operation::Delete | Operation::Connect) || request.sub_resource.is_some()
}

/// The kind this request is about, dispatched by group and kind (any version).
fn admitted_kind(request: &AdmissionRequest) -> Option<AdmittedKind> {
    AdmittedKind::from_group_kind(&request.kind.group, &request.kind.kind)
}

/// The answer for a kind this webhook does not admit.
fn unexpected_kind(request: &AdmissionRequest) -> AdmissionResponse {
    let gvk = &request.kind;
    let known: Vec<String> =
        AdmittedKind::ALL.iter().map(|kind| format!("{}.{}", kind.kind(), kind.group())).collect();
    let known = match known.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => known.join(""),
    };
    let group = if gvk.group.is_empty() { "core" } else { gvk.group.as_str() };
    AdmissionResponse::bad_request(
        &request.uid,
        format!(
            "this webhook admits {}; it was sent a {}.{} (check the webhook configuration's rules)",
            known,
            bounded::echo(&gvk.kind),
            bounded::echo(group)
        ),
    )
}

/// The object to default and validate, unless absent or null.
fn object_to_admit(request: &AdmissionRequest) -> Option<&Value> {
    request.object.as_ref().filter(|object| !object.is_null())
}

/// The 400 answer for an object that cannot be read as `kind` at all (a field of the wrong
/// type or value set), listing every error the way `kubectl` shows API errors.
fn unreadable(request: &AdmissionRequest, kind: AdmittedKind, errors: &FieldErrors) -> AdmissionResponse {
    let message = errors.message(&kind.kind(), &request.display_name());
    AdmissionResponse::bad_request(&request.uid, message)
}

/// A whole review, from request body to response body: what an HTTP endpoint does, reading
/// the review with `read` (the endpoint's [`ReviewReader`], see [`parse_request_with`]).
pub fn review_with(
    admit: impl Fn(&AdmissionRequest) -> AdmissionResponse,
    read: ReviewReader,
    body: &[u8],
) -> Result<Reviewed, ReviewError> {
    let request = parse_request_with(body, read)?;
    let response = admit(&request);
    let body = response.to_review_json();
    Ok(Reviewed { request, response, body })
}

/// One answered review: the request (for logs), the decision, and the body to send.
#[derive(Debug)]
pub struct Reviewed {
    pub request: AdmissionRequest,
    pub response: AdmissionResponse,
    pub body: Vec<u8>,
}
