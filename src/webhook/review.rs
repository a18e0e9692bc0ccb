//! The `admission.k8s.io/v1` AdmissionReview wire format: only what the webhook needs.
//!
//! Our own small types rather than kube-core's `admission` module, deliberately: the request
//! keeps `object`/`oldObject` as raw JSON (so patches are computed against exactly what the
//! API server holds, unknown fields included), and the response writes `patch` as a base64
//! string, as the API documents Go's `[]byte` (kube-core writes an array of numbers, ~3.5×
//! the size).

use std::borrow::Cow;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use envoy_operator_core::bounded;
use envoy_operator_core::manifest::display_name;
use envoy_operator_core::rules::{FieldErrorKind, FieldErrors};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const API_VERSION: &str = "admission.k8s.io/v1";
/// Warnings in one answer (the API server relays each to the client).
pub const MAX_WARNINGS: usize = 16;
/// Characters of one warning.
pub const MAX_WARNING_CHARS: usize = 512;
pub const KIND: &str = "AdmissionReview";

/// An AdmissionReview as the API server sends it. `O` is how the objects are read: whole into
/// JSON values, or (while parsing) as a type that keeps only what an endpoint looks at.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "O: Deserialize<'de>"))]
pub struct AdmissionReview<O = Value> {
    pub api_version: String,
    pub kind: String,
    pub request: Option<AdmissionRequest<O>>,
}

/// The request inside a review.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "O: Deserialize<'de>"))]
pub struct AdmissionRequest<O = Value> {
    /// Identifies this call; echoed in the response.
    pub uid: String,
    /// The kind of `object`, as the webhook is configured to receive it.
    pub kind: GroupVersionKind,
    #[serde(default)]
    pub resource: GroupVersionResource,
    #[serde(default)]
    pub sub_resource: Option<String>,
    /// Empty on CREATE of an object with only `generateName`.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    pub operation: Operation,
    #[serde(default)]
    pub user_info: UserInfo,
    /// The new object; absent (null) on DELETE.
    #[serde(default = "none")]
    pub object: Option<O>,
    /// The stored object on UPDATE and DELETE.
    #[serde(default = "none")]
    pub old_object: Option<O>,
    #[serde(default)]
    pub dry_run: Option<bool>,
}

fn none<O>() -> Option<O> {
    None
}

/// How an endpoint reads a review, in one pass over its body: its objects whole, or only the
/// parts of them it looks at.
pub type ReviewReader = fn(&[u8]) -> Result<AdmissionReview, serde_json::Error>;

/// Reads the objects whole: what the rule engine needs, since it defaults and validates the
/// raw object, unknown fields included.
pub fn read_whole(body: &[u8]) -> Result<AdmissionReview, serde_json::Error> {
    serde_json::from_str(text(body)?)
}

/// Reads the objects as `O`, a type that builds only part of an object into a value (so the
/// rest is skipped without being built, in the same pass as the envelope).
pub fn read_as<O: DeserializeOwned + Into<Value>>(body: &[u8]) -> Result<AdmissionReview, serde_json::Error> {
    let review: AdmissionReview<O> = serde_json::from_str(text(body)?)?;
    Ok(AdmissionReview {
        api_version: review.api_version,
        kind: review.kind,
        request: review.request.map(AdmissionRequest::into_values),
    })
}

/// The body as text. Checked once, whole: bytes that are not UTF-8 are malformed JSON even in
/// the parts an endpoint skips unread, and the parser then need not check each string again.
fn text(body: &[u8]) -> Result<&str, serde_json::Error> {
    std::str::from_utf8(body)
        .map_err(|error| serde::de::Error::custom(format_args!("the body is not UTF-8: {error}")))
}

impl<O: Into<Value>> AdmissionRequest<O> {
    /// The same request with its objects as values.
    fn into_values(self) -> AdmissionRequest {
        AdmissionRequest {
            object: self.object.map(Into::into),
            old_object: self.old_object.map(Into::into),
            uid: self.uid,
            kind: self.kind,
            resource: self.resource,
            sub_resource: self.sub_resource,
            name: self.name,
            namespace: self.namespace,
            operation: self.operation,
            user_info: self.user_info,
            dry_run: self.dry_run,
        }
    }
}

impl AdmissionRequest {
    /// The name to show in messages: the request's, else the object's (or its
    /// `generateName` prefix).
    pub fn display_name(&self) -> String {
        match (&self.name, &self.object) {
            (Some(name), _) if !name.is_empty() => name.clone(),
            (_, Some(object)) => display_name(object),
            _ => "<unnamed>".to_owned(),
        }
    }

    pub fn is_dry_run(&self) -> bool {
        self.dry_run.unwrap_or(false)
    }

    /// The request's identity for log lines, each value cut to a bounded length: they come
    /// from the client and may be megabytes long.
    pub fn log_fields(&self) -> LogFields<'_> {
        LogFields {
            uid: bounded::echo(&self.uid),
            kind: bounded::echo(&self.kind.kind),
            namespace: bounded::echo(self.namespace.as_deref().unwrap_or("")),
            name: Cow::Owned(bounded::echo(&self.display_name()).into_owned()),
            user: bounded::echo(&self.user_info.username),
        }
    }
}

/// See [`AdmissionRequest::log_fields`].
#[derive(Debug)]
pub struct LogFields<'a> {
    pub uid: Cow<'a, str>,
    pub kind: Cow<'a, str>,
    pub namespace: Cow<'a, str>,
    pub name: Cow<'a, str>,
    pub user: Cow<'a, str>,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    pub kind: String,
}

#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub struct GroupVersionResource {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub resource: String,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct UserInfo {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub groups: Vec<String>,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
            Self::Connect => "CONNECT",
        }
    }
}

/// Why a body is not an AdmissionReview we can answer (the HTTP layer answers 400).
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("the body is not a JSON AdmissionReview: {0}")]
    Malformed(#[from] serde_json::Error),
    #[error(
        "expected apiVersion {API_VERSION} and kind {KIND}, got apiVersion {api_version:?} and kind {kind:?}"
    )]
    WrongType { api_version: String, kind: String },
    #[error("the AdmissionReview has no request")]
    NoRequest,
    #[error("the AdmissionReview request has an empty uid")]
    NoUid,
}

impl ReviewError {
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "malformed",
            Self::WrongType { .. } => "wrong_type",
            Self::NoRequest => "no_request",
            Self::NoUid => "no_uid",
        }
    }
}

/// Parses a request body into the request of an `admission.k8s.io/v1` AdmissionReview,
/// reading the objects whole.
pub fn parse_request(body: &[u8]) -> Result<AdmissionRequest, ReviewError> {
    parse_request_with(body, read_whole)
}

/// [`parse_request`], reading the review with `read`, so each endpoint builds only the part of
/// the objects it looks at.
pub fn parse_request_with(body: &[u8], read: ReviewReader) -> Result<AdmissionRequest, ReviewError> {
    let review = read(body)?;
    if review.api_version != API_VERSION || review.kind != KIND {
        return Err(ReviewError::WrongType {
            api_version: bounded::echo(&review.api_version).into_owned(),
            kind: bounded::echo(&review.kind).into_owned(),
        });
    }
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    if request.uid.is_empty() {
        return Err(ReviewError::NoUid);
    }
    Ok(request)
}

/// The answer to one request. Written by [`to_review_json`](Self::to_review_json).
#[derive(Clone, Debug, PartialEq)]
pub struct AdmissionResponse {
    pub uid: String,
    pub allowed: bool,
    /// Serialized JSON Patch; written as base64 with `patchType: JSONPatch`.
    pub patch: Option<Vec<u8>>,
    pub warnings: Vec<String>,
    pub status: Option<Status>,
}

/// What the webhook decided, for logs and (later) metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Allowed unchanged.
    Allowed,
    /// Allowed with a patch.
    Patched,
    /// Denied: the object breaks the rules (422).
    Denied,
    /// Denied: not an object this webhook can judge (400).
    Rejected,
}

impl Outcome {
    pub fn metric_label(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Patched => "patched",
            Self::Denied => "denied",
            Self::Rejected => "rejected",
        }
    }
}

impl AdmissionResponse {
    pub fn allow(uid: &str) -> Self {
        Self { uid: uid.to_owned(), allowed: true, patch: None, warnings: Vec::new(), status: None }
    }

    /// Allows with a JSON Patch; an empty patch is no patch (reinvocation-safe).
    pub fn allow_with_patch(uid: &str, patch: &json_patch::Patch) -> Self {
        let mut response = Self::allow(uid);
        if !patch.0.is_empty() {
            // Serializing a patch of JSON values cannot fail; without it, allow unchanged.
            response.patch = serde_json::to_vec(patch).ok();
        }
        response
    }

    /// Allows with a JSON Patch given as its JSON text; an empty patch (`[]`) is no patch.
    pub fn allow_with_patch_json(uid: &str, patch: Vec<u8>) -> Self {
        let mut response = Self::allow(uid);
        if patch.as_slice() != b"[]" {
            response.patch = Some(patch);
        }
        response
    }

    /// Adds warnings, at most [`MAX_WARNINGS`] (the last counting the rest), each cut to
    /// [`MAX_WARNING_CHARS`].
    pub fn with_warnings(mut self, warnings: Vec<String>) -> Self {
        let warnings = warnings
            .into_iter()
            .map(|warning| match bounded::truncate(&warning, MAX_WARNING_CHARS) {
                Cow::Borrowed(_) => warning,
                Cow::Owned(cut) => cut,
            })
            .collect();
        self.warnings = bounded::capped(warnings, MAX_WARNINGS, |n| format!("and {n} more warnings"));
        self
    }

    /// Denies an object that breaks the rules: 422 Invalid, every field error listed.
    pub fn invalid(uid: &str, group: &str, kind: &str, name: &str, errors: &FieldErrors) -> Self {
        // As many causes as the message lists, the same cut values: the answer stays small
        // however many errors the object has.
        let causes = errors
            .listed()
            .iter()
            .map(|error| {
                let text = error.to_string();
                let field = bounded::echo(&error.path).into_owned();
                let message = text.strip_prefix(&format!("{field}: ")).unwrap_or(&text).to_owned();
                Cause { reason: cause_reason(error.kind), message, field }
            })
            .collect();
        Self::deny(
            uid,
            Status {
                code: 422,
                reason: "Invalid".to_owned(),
                message: errors.message(kind, name),
                details: Some(StatusDetails {
                    name: bounded::echo(name).into_owned(),
                    group: group.to_owned(),
                    kind: kind.to_owned(),
                    causes,
                }),
                ..Status::default()
            },
        )
    }

    /// Denies a request this webhook cannot judge (wrong kind, unreadable object): 400.
    pub fn bad_request(uid: &str, message: impl Into<String>) -> Self {
        Self::deny(
            uid,
            Status {
                code: 400,
                reason: "BadRequest".to_owned(),
                message: message.into(),
                ..Status::default()
            },
        )
    }

    fn deny(uid: &str, status: Status) -> Self {
        Self { uid: uid.to_owned(), allowed: false, patch: None, warnings: Vec::new(), status: Some(status) }
    }

    pub fn outcome(&self) -> Outcome {
        match (self.allowed, &self.patch, &self.status) {
            (true, Some(_), _) => Outcome::Patched,
            (true, None, _) => Outcome::Allowed,
            (false, _, Some(status)) if status.code == 422 => Outcome::Denied,
            (false, _, _) => Outcome::Rejected,
        }
    }

    /// The full AdmissionReview body answering with this response.
    pub fn to_review_json(&self) -> Vec<u8> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Review<'a> {
            api_version: &'static str,
            kind: &'static str,
            response: Wire<'a>,
        }
        /// The response but its patch, which is written after it (below).
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire<'a> {
            uid: &'a str,
            allowed: bool,
            #[serde(skip_serializing_if = "<[String]>::is_empty")]
            warnings: &'a [String],
            #[serde(skip_serializing_if = "Option::is_none")]
            status: Option<&'a Status>,
        }
        let response = Wire {
            uid: &self.uid,
            allowed: self.allowed,
            warnings: &self.warnings,
            status: self.status.as_ref(),
        };
        let review = Review { api_version: API_VERSION, kind: KIND, response };
        let patch = self.patch.as_ref().map(|patch| (patch, base64::encoded_len(patch.len(), true)));
        // Room for the patch in base64 and the rest, so a sidecar's patch is written without
        // the buffer growing (and being copied) a dozen times.
        let patch_len = patch.and_then(|(_, len)| len).unwrap_or(0);
        let mut body = Vec::with_capacity(patch_len + 512);
        // Plain data with string keys: serialization cannot fail.
        if serde_json::to_writer(&mut body, &review).is_err() {
            return Vec::new();
        }
        if let Some((patch, Some(len))) = patch
            && body.ends_with(b"}}")
        {
            // Into the response, before its closing brace and the review's. Base64 needs no
            // escaping in JSON, so it is encoded straight into the body rather than handed to
            // the JSON writer as a string it would scan again, byte by byte, for escapes.
            body.truncate(body.len() - 2);
            body.extend_from_slice(br#","patch":""#);
            let start = body.len();
            body.resize(start + len, 0);
            // `len` is exactly what the encoding needs: it cannot run out of room.
            let written = BASE64.encode_slice(patch, &mut body[start..]).unwrap_or(0);
            body.truncate(start + written);
            body.extend_from_slice(br#"","patchType":"JSONPatch"}}"#);
        }
        body
    }
}

fn cause_reason(kind: FieldErrorKind) -> &'static str {
    match kind {
        FieldErrorKind::Required => "FieldValueRequired",
        FieldErrorKind::Invalid => "FieldValueInvalid",
        FieldErrorKind::NotSupported => "FieldValueNotSupported",
        FieldErrorKind::Duplicate => "FieldValueDuplicate",
        FieldErrorKind::Forbidden => "FieldValueForbidden",
    }
}

/// A `metav1.Status`, as in the API server's own errors.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub status: &'static str,
    pub code: u16,
    pub reason: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
}

impl Default for Status {
    fn default() -> Self {
        Self { status: "Failure", code: 0, reason: String::new(), message: String::new(), details: None }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatusDetails {
    pub name: String,
    pub group: String,
    pub kind: String,
    pub causes: Vec<Cause>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cause {
    pub reason: &'static str,
    pub message: String,
    pub field: String,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use envoy_operator_core::inject::pod::PodForInjection;
    use envoy_operator_core::rules::FieldError;

    #[test]
    fn patch_is_base64_with_its_type_and_absent_when_empty() {
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/spec/replicas", "value": 1}])).unwrap();
        let body: Value =
            serde_json::from_slice(&AdmissionResponse::allow_with_patch("u1", &patch).to_review_json())
                .unwrap();
        assert_eq!(body["apiVersion"], API_VERSION);
        assert_eq!(body["kind"], KIND);
        assert_eq!(body["response"]["uid"], "u1");
        assert_eq!(body["response"]["patchType"], "JSONPatch");
        let decoded = BASE64.decode(body["response"]["patch"].as_str().unwrap()).unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&decoded).unwrap(), serde_json::to_value(&patch).unwrap());

        let warned = AdmissionResponse::allow_with_patch_json("u3", br#"[{"op":"add"}]"#.to_vec())
            .with_warnings(vec!["a \"quoted\" note".to_owned()]);
        let body: Value = serde_json::from_slice(&warned.to_review_json()).unwrap();
        assert_eq!(
            body,
            json!({"apiVersion": API_VERSION, "kind": KIND, "response": {
                "uid": "u3", "allowed": true, "warnings": ["a \"quoted\" note"],
                "patch": BASE64.encode(br#"[{"op":"add"}]"#), "patchType": "JSONPatch",
            }})
        );

        let empty = AdmissionResponse::allow_with_patch("u2", &json_patch::Patch(vec![]));
        let body: Value = serde_json::from_slice(&empty.to_review_json()).unwrap();
        assert_eq!(body["response"], json!({"uid": "u2", "allowed": true}));
        assert_eq!(empty.outcome(), Outcome::Allowed);
    }

    #[test]
    fn invalid_lists_every_cause() {
        let errors: FieldErrors = vec![
            FieldError::invalid("spec.replicas", -1, "must be greater than or equal to 0"),
            FieldError::required("spec.xds.host", ""),
        ]
        .into();
        let response = AdmissionResponse::invalid("u", "example.com", "Envoy", "e", &errors);
        assert_eq!(response.outcome(), Outcome::Denied);
        let body: Value = serde_json::from_slice(&response.to_review_json()).unwrap();
        assert_eq!(
            body["response"]["status"],
            json!({
                "status": "Failure", "code": 422, "reason": "Invalid",
                "message": "The Envoy \"e\" is invalid: \n* spec.replicas: Invalid value: -1: must be greater than or equal to 0\n* spec.xds.host: Required value",
                "details": {"name": "e", "group": "example.com", "kind": "Envoy", "causes": [
                    {"reason": "FieldValueInvalid", "message": "Invalid value: -1: must be greater than or equal to 0", "field": "spec.replicas"},
                    {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.xds.host"},
                ]},
            })
        );
    }

    /// A review whose bytes are not UTF-8 is malformed, also where the injector skips them.
    #[test]
    fn bytes_that_are_not_utf8_are_malformed_wherever_they_are() {
        let review = |skipped: &[u8]| {
            let mut body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","object":{"metadata":{"managedFields":[{"f:x":""#.to_vec();
            body.extend_from_slice(skipped);
            body.extend_from_slice(br#""}]},"spec":{"containers":[]}}}}"#);
            body
        };
        let readers: [(&str, ReviewReader); 2] =
            [("whole", read_whole), ("for injection", read_as::<PodForInjection>)];
        for (what, read) in readers {
            assert!(parse_request_with(&review(b"ok"), read).is_ok(), "{what}");
            let error = parse_request_with(&review(b"\xff\xfe"), read).unwrap_err();
            assert_eq!(error.metric_label(), "malformed", "{what}");
            assert!(error.to_string().contains("not UTF-8"), "{what}: {error}");
        }
    }

    #[test]
    fn parse_rejects_what_is_not_a_v1_review() {
        let ok = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","object":null}}"#;
        let request = parse_request(ok).unwrap();
        assert_eq!((request.uid.as_str(), request.operation, request.object), ("x", Operation::Create, None));
        let labels = |body: &[u8]| parse_request(body).unwrap_err().metric_label();
        assert_eq!(labels(b"{"), "malformed");
        assert_eq!(
            labels(br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview"}"#),
            "wrong_type"
        );
        assert_eq!(labels(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#), "no_request");
        assert_eq!(
            labels(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"","kind":{"kind":"Foo"},"operation":"DELETE"}}"#),
            "no_uid"
        );
    }
}
