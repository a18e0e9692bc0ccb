//! What the API server checks of an object against a CustomResourceDefinition: the
//! `openAPIV3Schema`'s OpenAPI keywords (with formats such as `date-time` and `ipv4`, which the
//! API server checks), list-map keys and sets (`x-kubernetes-list-type`), the CEL rules of
//! `x-kubernetes-validations`, and the scale subresource's own check of the replica counts.
//! Errors are those the API server reports: a string's first failing keyword only (`maxLength`,
//! then `minLength`, then `pattern`), and no CEL rule run once a blocking error (wrong type,
//! unsupported value, missing field, too long, too many) is found. Neither defaulting nor
//! pruning: what is checked is the object as given.

use std::fmt;

use jsonschema::error::ValidationErrorKind;
use jsonschema::paths::{Location, LocationSegment};
use serde_json::{Value, json};

/// One reason the API server refuses an object: the field it is about, as the API server
/// writes it (`spec.rules[0].matches[0].path`; `.spec.replicas` for the scale subresource's
/// check; empty for the object as a whole), and what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// What the API server says in place of the CEL rules it did not run.
pub const RULES_NOT_CHECKED: &str = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// Why the API server would refuse `object` against `schema` (empty when it would accept it).
/// `old` is the object before an update, for the CEL rules' `oldSelf`.
pub fn errors(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<String> {
    field_errors(schema, object, old).iter().map(ToString::to_string).collect()
}

/// Why the API server would refuse `object` as an object of `crd` (a CustomResourceDefinition
/// as JSON): its version's schema and, for a kind with a scale subresource, the replica counts.
pub fn crd_errors(crd: &Value, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let versions = crd["spec"]["versions"].as_array().map(Vec::as_slice).unwrap_or_default();
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    let version = versions
        .iter()
        .find(|v| v["name"].as_str().is_some_and(|name| api_version == format!("{group}/{name}")))
        .or(versions.first())
        .expect("a CRD has a version");
    let mut errors = field_errors(&version["schema"]["openAPIV3Schema"], object, old);
    if let Some(scale) = version["subresources"].get("scale") {
        errors.extend(scale_errors(scale, object));
    }
    errors
}

/// [`errors`], each with the field it is about.
pub fn field_errors(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .expect("the schema compiles as JSON Schema");
    let mut found: Vec<(FieldError, Option<u8>)> = Vec::new();
    let mut blocking = false;
    for error in validator.iter_errors(object) {
        // kube-openapi checks a string's keywords in this order and stops at the first failing.
        let string_rank = match error.kind() {
            ValidationErrorKind::MaxLength { .. } => Some(0),
            ValidationErrorKind::MinLength { .. } => Some(1),
            ValidationErrorKind::Pattern { .. } => Some(2),
            _ => None,
        };
        blocking |= matches!(
            error.kind(),
            ValidationErrorKind::Type { .. }
                | ValidationErrorKind::Enum { .. }
                | ValidationErrorKind::Required { .. }
                | ValidationErrorKind::MaxLength { .. }
                | ValidationErrorKind::MaxItems { .. }
                | ValidationErrorKind::MaxProperties { .. }
        );
        let error = FieldError { path: field_path(error.instance_path()), message: error.to_string() };
        found.push((error, string_rank));
    }
    let first_of_its_string = |(error, rank): &(FieldError, Option<u8>)| {
        rank.is_none_or(|rank| {
            !found.iter().any(|(other, other_rank)| {
                other.path == error.path && other_rank.is_some_and(|other_rank| other_rank < rank)
            })
        })
    };
    let mut errors: Vec<FieldError> =
        found.iter().filter(|e| first_of_its_string(e)).map(|(error, _)| error.clone()).collect();
    errors.extend(list_map_key_errors(schema, object, ""));
    if blocking {
        if has_rules(schema) {
            errors.push(FieldError { path: String::new(), message: RULES_NOT_CHECKED.to_owned() });
        }
    } else if let Err(cel_errors) = kube_cel::Validator::new().validate(schema, object, old) {
        errors.extend(
            cel_errors.iter().map(|e| FieldError { path: e.field_path.clone(), message: e.message.clone() }),
        );
    }
    errors
}

/// The scale subresource's check of an object's replica counts (`scale` is a CRD version's
/// `subresources.scale`), as the API server makes it on every write besides the schema's: each
/// path, when present, read as a 64-bit integer within 0..=2^31-1, and the label selector as a
/// string.
pub fn scale_errors(scale: &Value, object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for key in ["specReplicasPath", "statusReplicasPath"] {
        let Some(path) = scale[key].as_str() else { continue };
        let Some(value) = at_path(object, path) else { continue };
        let (value, detail) = match value.as_i64() {
            None => (
                0,
                format!(
                    "{path} accessor error: {} is of the type {}, expected int64",
                    go_value(value),
                    go_type(value)
                ),
            ),
            Some(n) if n < 0 => (n, "should be a non-negative integer".to_owned()),
            Some(n) if n > i64::from(i32::MAX) => {
                (n, format!("should be less than or equal to {}", i32::MAX))
            }
            Some(_) => continue,
        };
        errors
            .push(FieldError { path: path.to_owned(), message: format!("Invalid value: {value}: {detail}") });
    }
    if let Some(path) = scale["labelSelectorPath"].as_str()
        && let Some(value) = at_path(object, path).filter(|v| !v.is_string())
    {
        let detail = format!(
            "{path} accessor error: {} is of the type {}, expected string",
            go_value(value),
            go_type(value)
        );
        errors.push(FieldError { path: path.to_owned(), message: format!("Invalid value: \"\": {detail}") });
    }
    errors
}

/// The value at a dotted path (`.spec.replicas`), if the object has one (`null` included).
fn at_path<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.trim_start_matches('.').split('.').try_fold(object, |node, field| node.as_object()?.get(field))
}

/// How Go's `%v` prints a decoded JSON value, near enough for messages.
fn go_value(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// How Go's `%T` names the type a decoded JSON value has.
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// A JSON pointer into the object as the API server writes a field: `spec.ports[0].name`.
fn field_path(location: &Location) -> String {
    let mut path = String::new();
    for segment in location {
        match segment {
            LocationSegment::Index(i) => path.push_str(&format!("[{i}]")),
            LocationSegment::Property(name) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&name);
            }
        }
    }
    path
}

/// Whether any node of `schema` carries CEL rules.
fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(fields) => {
            fields.contains_key("x-kubernetes-validations") || fields.values().any(has_rules)
        }
        Value::Array(items) => items.iter().any(has_rules),
        _ => false,
    }
}

/// The API server's checks of `x-kubernetes-list-type`: no two items of a `map` share their
/// keys, no two items of a `set` are equal.
fn list_map_key_errors(schema: &Value, value: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match value {
        Value::Object(fields) => {
            for (key, child) in fields {
                if let Some(child_schema) = schema.get("properties").and_then(|p| p.get(key)) {
                    let child_path = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                    errors.extend(list_map_key_errors(child_schema, child, &child_path));
                }
            }
        }
        Value::Array(items) => {
            if schema.get("x-kubernetes-list-type") == Some(&json!("map")) {
                let keys = schema["x-kubernetes-list-map-keys"].as_array().cloned().unwrap_or_default();
                let mut seen = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let id: Vec<Value> =
                        keys.iter().filter_map(|k| k.as_str()).map(|k| item[k].clone()).collect();
                    if seen.contains(&id) {
                        let message = format!("Duplicate value: {id:?}");
                        errors.push(FieldError { path: format!("{path}[{i}]"), message });
                    }
                    seen.push(id);
                }
            }
            if schema.get("x-kubernetes-list-type") == Some(&json!("set")) {
                for (i, item) in items.iter().enumerate() {
                    if items[..i].contains(item) {
                        errors.push(FieldError {
                            path: format!("{path}[{i}]"),
                            message: format!("Duplicate value: {item}"),
                        });
                    }
                }
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    errors.extend(list_map_key_errors(item_schema, item, &format!("{path}[{i}]")));
                }
            }
        }
        _ => {}
    }
    errors
}
