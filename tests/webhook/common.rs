//! Fixtures and decoding shared by the webhook tests.

use std::path::PathBuf;

use base64::Engine;
use envoy_operator::webhook::handler::{self, Reviewed};
use envoy_operator::webhook::review::{AdmissionRequest, AdmissionResponse, ReviewError, read_whole};
use serde_json::Value;

pub fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/admission").join(name)
}

pub fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixture_path(name)).unwrap_or_else(|e| panic!("reading fixture {name}: {e}"))
}

pub fn fixture_json(name: &str) -> Value {
    serde_json::from_slice(&fixture(name)).unwrap()
}

/// The `response` of an AdmissionReview body, checked to be a v1 review.
pub fn response_of(body: &[u8]) -> Value {
    let review: Value = serde_json::from_slice(body).expect("the answer is JSON");
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    review["response"].clone()
}

/// The decoded JSON Patch of a response, or `None` when it has none.
pub fn patch_of(response: &Value) -> Option<json_patch::Patch> {
    let patch = response.get("patch")?.as_str().expect("patch is a base64 string");
    assert_eq!(response["patchType"], "JSONPatch");
    let bytes = base64::engine::general_purpose::STANDARD.decode(patch).expect("valid base64");
    Some(serde_json::from_slice(&bytes).expect("a JSON Patch"))
}

/// An admission handler (`handler::mutate`, `handler::validate`), as the tests pass them around.
pub type AdmitFn = fn(&AdmissionRequest) -> AdmissionResponse;

/// A whole review, from request body to response body, as the server's `/mutate` and
/// `/validate` endpoints answer it: the body read whole, then decided by `admit`.
pub fn review_whole(admit: AdmitFn, body: &[u8]) -> Result<Reviewed, ReviewError> {
    handler::review_with(admit, read_whole, body)
}
