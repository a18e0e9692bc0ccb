//! What the API server checks of an object against a CustomResourceDefinition's
//! `openAPIV3Schema`: the OpenAPI keywords (with formats such as `date-time` and `ipv4`, which
//! the API server checks), list-map keys and sets (`x-kubernetes-list-type`), and the CEL rules
//! of `x-kubernetes-validations`. Neither defaulting nor pruning: what is checked is the object
//! as given.

use serde_json::{Value, json};

/// Why the API server would refuse `object` against `schema` (empty when it would accept it).
/// `old` is the object before an update, for the CEL rules' `oldSelf`.
pub fn errors(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<String> {
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .expect("the schema compiles as JSON Schema");
    let mut errors: Vec<String> =
        validator.iter_errors(object).map(|e| format!("{}: {e}", e.instance_path())).collect();
    errors.extend(list_map_key_errors(schema, object, ""));
    if let Err(cel_errors) = kube_cel::Validator::new().validate(schema, object, old) {
        errors.extend(cel_errors.iter().map(ToString::to_string));
    }
    errors
}

/// The API server's checks of `x-kubernetes-list-type`: no two items of a `map` share their
/// keys, no two items of a `set` are equal.
fn list_map_key_errors(schema: &Value, value: &Value, path: &str) -> Vec<String> {
    let mut errors = Vec::new();
    match value {
        Value::Object(fields) => {
            for (key, child) in fields {
                if let Some(child_schema) = schema.get("properties").and_then(|p| p.get(key)) {
                    errors.extend(list_map_key_errors(child_schema, child, &format!("{path}.{key}")));
                }
            }
        }
        Value::Array(items) => {
            if schema.get("x-kubernetes-list-type") == Some(&json!("map")) {
                let keys = schema["x-kubernetes-list-map-keys"].as_array().cloned().unwrap_or_default();
                let mut seen = Vec::new();
                for item in items {
                    let id: Vec<Value> =
                        keys.iter().filter_map(|k| k.as_str()).map(|k| item[k].clone()).collect();
                    if seen.contains(&id) {
                        errors.push(format!("{path}: Duplicate value: {id:?}"));
                    }
                    seen.push(id);
                }
            }
            if schema.get("x-kubernetes-list-type") == Some(&json!("set")) {
                for (i, item) in items.iter().enumerate() {
                    if items[..i].contains(item) {
                        errors.push(format!("{path}[{i}]: Duplicate value: {item}"));
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
