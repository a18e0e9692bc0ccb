//! Fixtures and decoding shared by the webhook tests.

use std::path::PathBuf;

use base64::Engine;
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
