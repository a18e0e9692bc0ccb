//! Offline admission (`envoy-operator check`): every document of a manifest goes through the
//! same defaulting and validation as the admission webhooks.

use serde_json::Value;

use crate::admission::AdmittedKind;
use crate::manifest::{Document, parse_documents};

/// What `check` made of one document.
#[derive(Debug)]
pub enum Outcome {
    /// A Foo or Envoy that passed: the defaulted object and any warnings.
    Accepted { object: Value, warnings: Vec<String> },
    /// A Foo or Envoy that failed validation, with the API server's message.
    Rejected { message: String },
    /// Another kind, printed unchanged, with a note saying so.
    PassedThrough { object: Value, note: String },
    /// A document that is not a Kubernetes object.
    Unreadable { message: String },
}

/// One document's outcome with where it came from.
#[derive(Debug)]
pub struct Checked {
    /// `path (document N, line L)`.
    pub origin: String,
    pub outcome: Outcome,
}

/// Checks every document of one input named `source`.
pub fn check_text(source: &str, text: &str) -> Vec<Checked> {
    parse_documents(text)
        .into_iter()
        .map(|document| Checked {
            origin: format!("{source} (document {}, line {})", document.index, document.line),
            outcome: check_document(document),
        })
        .collect()
}

fn check_document(document: Document) -> Outcome {
    let object = match document.content {
        Ok(object) => object,
        Err(message) => return Outcome::Unreadable { message: format!("not valid YAML or JSON: {message}") },
    };
    let Some(fields) = object.as_object() else {
        return Outcome::Unreadable {
            message: format!("expected a Kubernetes object (a mapping), found {}", json_type(&object)),
        };
    };
    let field = |name: &str| fields.get(name).and_then(Value::as_str).filter(|s| !s.is_empty());
    let (Some(api_version), Some(kind)) = (field("apiVersion"), field("kind")) else {
        return Outcome::Unreadable {
            message: "not a Kubernetes object: `apiVersion` and `kind` must both be set to non-empty strings"
                .to_owned(),
        };
    };

    let Some(admitted) = AdmittedKind::from_type_meta(api_version, kind) else {
        let note = match AdmittedKind::ALL.into_iter().find(|k| k.kind() == kind) {
            Some(ours) => format!(
                "{kind} is served as {}, not {api_version}: passed through unchanged",
                ours.api_version()
            ),
            None => {
                format!("{api_version} {kind} is not a kind envoy-operator admits: passed through unchanged")
            }
        };
        return Outcome::PassedThrough { object, note };
    };

    let unknown = admitted.unknown_fields(&object);
    let admission = admitted.admit(&object, None);
    match admission.verdict {
        Ok(mut warnings) => {
            warnings.extend(unknown.into_iter().map(|path| {
                format!("{path}: unknown field: the API server drops it (kubectl apply --validate=strict refuses the object)")
            }));
            Outcome::Accepted { object: admission.defaulted, warnings }
        }
        Err(errors) => Outcome::Rejected { message: errors.message(kind, &display_name(&object)) },
    }
}

/// The object's name as messages show it: its name, else its `generateName` prefix.
pub fn display_name(object: &Value) -> String {
    let metadata = &object["metadata"];
    metadata["name"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| metadata["generateName"].as_str().map(|prefix| format!("{prefix}*")))
        .unwrap_or_else(|| "<unnamed>".to_owned())
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}
