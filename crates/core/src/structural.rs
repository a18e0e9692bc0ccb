//! Structural validation against the CRD's own OpenAPI schema, as the API server makes it
//! before any rule: every field of `spec` has its declared type and, where the schema lists
//! them, one of its values; required fields are there. Errors use the API server's words
//! (`spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer:
//! "string"`), and a bad field never hides the others: it is replaced, in a working copy, by a
//! placeholder of the right type, so the typed rules still run and report everything else.
//! Rule errors at a replaced field are dropped (its structural error says it).

use std::borrow::Cow;
use std::sync::LazyLock;

use serde_json::{Map, Value};

use crate::kind::AdmittedKind;
use crate::rules::{FieldError, FieldErrors};

/// What structural validation made of an object.
#[derive(Debug)]
pub struct Structure<'a> {
    /// The object with every bad field replaced and a missing `spec` made `{}`: the object
    /// itself where neither was needed, so a good object (most are) is never copied.
    pub cleaned: Cow<'a, Value>,
    /// The structural errors, in document order.
    pub errors: Vec<FieldError>,
    /// Paths of the replaced fields: rule errors at or below them say nothing new.
    replaced: Vec<String>,
}

impl Structure<'_> {
    /// The structural errors followed by the rule errors that are not about replaced fields.
    pub fn merge(&self, rules: FieldErrors) -> FieldErrors {
        let mut merged = self.errors.clone();
        merged.extend(
            rules.0.into_iter().filter(|error| !self.replaced.iter().any(|path| covers(path, &error.path))),
        );
        FieldErrors(merged)
    }
}

/// Whether the field at `path` contains (or is) `inner`.
fn covers(path: &str, inner: &str) -> bool {
    inner == path || inner.strip_prefix(path).is_some_and(|rest| rest.starts_with(['.', '[']))
}

static SCHEMAS: LazyLock<Vec<(AdmittedKind, Value)>> = LazyLock::new(|| {
    crate::crd::all()
        .into_iter()
        .filter_map(|crd| {
            let kind = AdmittedKind::from_group_kind(&crd.spec.group, &crd.spec.names.kind)?;
            let schema = crd.spec.versions.first()?.schema.as_ref()?.open_api_v3_schema.as_ref()?;
            Some((kind, serde_json::to_value(schema).ok()?))
        })
        .collect()
});

/// Checks `object`'s `spec` against `kind`'s schema.
pub fn check(kind: AdmittedKind, object: &Value) -> Structure<'_> {
    let (mut errors, mut replaced) = (Vec::new(), Vec::new());
    let Some(root) = object.as_object() else {
        return Structure { cleaned: Cow::Borrowed(object), errors, replaced };
    };
    // The walk replaces bad fields in a copy of `spec` alone: the rest of the object
    // (metadata, managedFields and all) is copied only when the copy must go into it.
    // Every field of a spec has a default: a missing (or null) spec is an empty one.
    let (mut spec, missing) = match root.get("spec") {
        None | Some(Value::Null) => (Value::Object(Map::new()), true),
        Some(spec) => (spec.clone(), false),
    };
    let schema = SCHEMAS.iter().find(|(k, _)| *k == kind).map(|(_, schema)| &schema["properties"]["spec"]);
    if let Some(schema) = schema {
        let mut walk = Walk { errors: &mut errors, replaced: &mut replaced };
        walk.value("spec", &mut spec, schema);
    }
    let cleaned = if missing || !replaced.is_empty() {
        let mut root = root.clone();
        root.insert("spec".to_owned(), spec);
        Cow::Owned(Value::Object(root))
    } else {
        Cow::Borrowed(object)
    };
    Structure { cleaned, errors, replaced }
}

struct Walk<'a> {
    errors: &'a mut Vec<FieldError>,
    replaced: &'a mut Vec<String>,
}

impl Walk<'_> {
    fn replace(&mut self, path: &str, value: &mut Value, schema: &Value, error: FieldError) {
        self.errors.push(error);
        self.replaced.push(path.to_owned());
        *value = placeholder(schema);
    }

    fn value(&mut self, path: &str, value: &mut Value, schema: &Value) {
        if value.is_null() {
            return; // Absent: defaulted, or reported as required by the parent.
        }
        let expected = schema.get("type").and_then(Value::as_str);
        let int_or_string = schema.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true);
        let actual = json_type(value);
        let fits = match expected {
            _ if int_or_string => matches!(actual, "integer" | "string"),
            None => true,
            Some("number") => matches!(actual, "integer" | "number"),
            Some(expected) => actual == expected,
        };
        if !fits {
            let expected = if int_or_string { "integer,string" } else { expected.unwrap_or_default() };
            let detail = format!("{path} in body must be of type {expected}: \"{actual}\"");
            let error = FieldError::invalid(path, actual, detail);
            return self.replace(path, value, schema, error);
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
            let allowed: Vec<&Value> = allowed.iter().filter(|v| !v.is_null()).collect();
            if !allowed.contains(&&*value) {
                let error =
                    FieldError::not_supported(path, value.clone(), allowed.into_iter().cloned().collect());
                return self.replace(path, value, schema, error);
            }
        }
        if actual == "integer" && schema.get("format").and_then(Value::as_str) == Some("int32") {
            let number = value.as_i64();
            if number.is_none_or(|n| i32::try_from(n).is_err()) {
                let detail = match schema.get("maximum").and_then(Value::as_f64) {
                    Some(maximum) => format!("must be less than or equal to {maximum}"),
                    None => "must be a 32-bit integer".to_owned(),
                };
                let error = FieldError::invalid(path, value.clone(), detail);
                return self.replace(path, value, schema, error);
            }
        }
        match value {
            Value::Object(fields) => self.object(path, fields, schema),
            Value::Array(items) => {
                let Some(item_schema) = schema.get("items") else { return };
                for (i, item) in items.iter_mut().enumerate() {
                    self.value(&format!("{path}[{i}]"), item, item_schema);
                }
            }
            _ => {}
        }
    }

    fn object(&mut self, path: &str, fields: &mut Map<String, Value>, schema: &Value) {
        let properties = schema.get("properties").and_then(Value::as_object);
        for (key, field) in fields.iter_mut() {
            let field_schema = properties
                .and_then(|p| p.get(key))
                .or_else(|| schema.get("additionalProperties").filter(|additional| additional.is_object()));
            if let Some(field_schema) = field_schema {
                self.value(&field_path(path, key, properties.is_some()), field, field_schema);
            }
        }
        for required in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            let Some(name) = required.as_str() else { continue };
            if fields.get(name).is_none_or(Value::is_null) {
                let field_path = format!("{path}.{name}");
                self.errors.push(FieldError::required(&field_path, ""));
                self.replaced.push(field_path);
                let field_schema = properties.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
                fields.insert(name.to_owned(), placeholder(field_schema));
            }
        }
    }
}

/// The path of a field: `parent.name` for a declared property, `parent[key]` for a map entry
/// (as the API server writes `spec.resources.requests[cpu]`).
fn field_path(parent: &str, key: &str, declared: bool) -> String {
    if declared { format!("{parent}.{key}") } else { format!("{parent}[{key}]") }
}

/// A value of the schema's type that the typed model reads without complaint.
fn placeholder(schema: &Value) -> Value {
    if let Some(first) =
        schema.get("enum").and_then(Value::as_array).and_then(|v| v.iter().find(|v| !v.is_null()))
    {
        return first.clone();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("integer" | "number") => Value::from(0),
        Some("boolean") => Value::Bool(false),
        Some("array") => Value::Array(Vec::new()),
        Some("object") => Value::Object(Map::new()),
        _ if schema.get("x-kubernetes-int-or-string").is_some() => Value::from(0),
        _ => Value::String(String::new()),
    }
}

/// The JSON type name the API server reports.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn messages(kind: AdmittedKind, spec: Value) -> Vec<String> {
        let object = json!({"apiVersion": kind.api_version(), "kind": kind.kind(), "metadata": {"name": "x"}, "spec": spec});
        check(kind, &object).errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn type_errors_read_like_the_api_server() {
        assert_eq!(
            messages(AdmittedKind::Foo, json!({"replicas": "three"})),
            [
                "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""
            ]
        );
        assert_eq!(
            messages(AdmittedKind::Envoy, json!({"serviceType": "Headless"})),
            [
                "spec.serviceType: Unsupported value: \"Headless\": supported values: \"ClusterIP\", \"NodePort\", \"LoadBalancer\""
            ]
        );
        assert_eq!(
            messages(AdmittedKind::Envoy, json!({"resources": {"requests": {"cpu": 1.5}}})),
            [
                "spec.resources.requests[cpu]: Invalid value: \"number\": spec.resources.requests[cpu] in body must be of type integer,string: \"number\""
            ]
        );
    }

    #[test]
    fn every_structural_error_is_found_and_replaced() {
        let object = json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {"name": "x"},
            "spec": {"replicas": 3000000000i64, "ports": [{"name": 7}, {"name": "ok", "port": 80}], "xds": {"port": 1}}});
        let structure = check(AdmittedKind::Envoy, &object);
        let paths: Vec<&str> = structure.errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["spec.replicas", "spec.ports[0].name", "spec.ports[0].port", "spec.xds.host"]);
        assert_eq!(structure.errors[0].detail, "must be less than or equal to 1000");
        let cleaned: crate::api::Envoy =
            serde_json::from_value(structure.cleaned.into_owned()).expect("the typed model reads it");
        assert_eq!(cleaned.spec.ports[1].name, "ok");
    }

    #[test]
    fn a_missing_spec_is_an_empty_one() {
        let object = json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": {"name": "x"}});
        let structure = check(AdmittedKind::Foo, &object);
        assert!(structure.errors.is_empty());
        assert_eq!(structure.cleaned["spec"], json!({}));
    }

    #[test]
    fn a_good_object_is_not_copied() {
        let object = json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": {"name": "x"},
            "spec": {"deploymentName": "x", "replicas": 1}});
        let structure = check(AdmittedKind::Foo, &object);
        assert!(structure.errors.is_empty());
        assert!(matches!(structure.cleaned, Cow::Borrowed(cleaned) if std::ptr::eq(cleaned, &object)));
    }

    #[test]
    fn rule_errors_about_replaced_fields_are_dropped() {
        let object = json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {"name": "x"},
            "spec": {"xds": {"port": 1}}});
        let structure = check(AdmittedKind::Envoy, &object);
        let rules = FieldErrors(vec![
            FieldError::required("spec.xds.host", "the xDS server's DNS name or IP address"),
            FieldError::invalid("spec.replicas", 5000, "must be less than or equal to 1000"),
        ]);
        let merged: Vec<String> = structure.merge(rules).iter().map(|e| e.path.clone()).collect();
        assert_eq!(merged, ["spec.xds.host", "spec.replicas"]);
        assert!(covers("spec.ports[0]", "spec.ports[0].name") && !covers("spec.ports[1]", "spec.ports[10]"));
    }
}
