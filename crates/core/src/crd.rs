//! The CustomResourceDefinitions, generated from the API types and committed under `crds/`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSON, JSONSchemaProps,
};
use kube::CustomResourceExt;

use crate::api::{Envoy, EnvoyRoute, Foo};
use crate::manifest::{YamlError, to_yaml as yaml};
use crate::rules::MAX_LABEL_VALUE;

/// Every CRD this operator serves.
pub fn all() -> Vec<CustomResourceDefinition> {
    let mut foo = Foo::crd();
    let mut envoy = Envoy::crd();
    // Their names become label values of the pods they run (`controller=<name>`,
    // `app.kubernetes.io/instance=<name>`).
    name_at_most(&mut foo, MAX_LABEL_VALUE);
    name_at_most(&mut envoy, MAX_LABEL_VALUE);
    let mut crds = vec![foo, envoy, EnvoyRoute::crd()];
    crds.iter_mut().for_each(spec_defaults_to_empty);
    crds.iter_mut().for_each(readable_descriptions);
    crds
}

/// `kubectl explain` prints a description as it is stored: the line breaks of doc comments
/// become breaks mid-sentence, and an array's description runs into its items' own. Each
/// description is made one line per paragraph (list items keep their lines), and an array that
/// says what it holds drops its items' description.
fn readable_descriptions(crd: &mut CustomResourceDefinition) {
    for version in &mut crd.spec.versions {
        let Some(schema) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) else {
            continue;
        };
        let Ok(mut value) = serde_json::to_value(&*schema) else { continue };
        readable(&mut value);
        if let Ok(readable) = serde_json::from_value(value) {
            *schema = readable;
        }
    }
}

/// Rewrites the descriptions of `schema` and of the schemas within it.
fn readable(schema: &mut serde_json::Value) {
    let Some(fields) = schema.as_object_mut() else { return };
    if let Some(serde_json::Value::String(text)) = fields.get_mut("description") {
        *text = one_line_per_paragraph(text);
        if let Some(items) = fields.get_mut("items").and_then(serde_json::Value::as_object_mut) {
            items.remove("description");
        }
    }
    for (key, value) in fields.iter_mut() {
        match key.as_str() {
            "properties" => value.as_object_mut().into_iter().flat_map(|p| p.values_mut()).for_each(readable),
            "items" | "additionalProperties" | "not" => readable(value),
            "allOf" | "anyOf" | "oneOf" => value.as_array_mut().into_iter().flatten().for_each(readable),
            _ => {}
        }
    }
}

/// `text` with the line breaks inside its paragraphs made spaces, but before a list item.
pub fn one_line_per_paragraph(text: &str) -> String {
    let paragraphs = text.split("\n\n").map(|paragraph| {
        let mut joined = String::new();
        for line in paragraph.lines().map(str::trim).filter(|line| !line.is_empty()) {
            if !joined.is_empty() {
                let list_item = line.starts_with("- ") || line.starts_with("* ");
                joined.push(if list_item { '\n' } else { ' ' });
            }
            joined.push_str(line);
        }
        joined
    });
    paragraphs.filter(|paragraph| !paragraph.is_empty()).collect::<Vec<_>>().join("\n\n")
}

/// Bounds `metadata.name` in the schema itself. The API server lets a CRD's root schema say
/// this much of `metadata` (its `type` and `name`/`generateName` constraints) and nothing more;
/// a CEL rule on `self.metadata.name` would need a `fieldPath`, and a `fieldPath` may only name
/// a property the schema declares.
fn name_at_most(crd: &mut CustomResourceDefinition, max_length: usize) {
    let name = JSONSchemaProps {
        type_: Some("string".to_owned()),
        max_length: Some(max_length as i64),
        ..Default::default()
    };
    let metadata = JSONSchemaProps {
        type_: Some("object".to_owned()),
        properties: Some([("name".to_owned(), name)].into()),
        ..Default::default()
    };
    for version in &mut crd.spec.versions {
        if let Some(root) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) {
            root.properties
                .get_or_insert_with(Default::default)
                .insert("metadata".to_owned(), metadata.clone());
        }
    }
}

/// Every field of a spec has a default, so an object without one is an empty one: the API
/// server makes `spec` `{}` (structural defaulting) and the webhook fills it, instead of
/// refusing the object with `spec: Required value`.
fn spec_defaults_to_empty(crd: &mut CustomResourceDefinition) {
    for version in &mut crd.spec.versions {
        let Some(root) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) else {
            continue;
        };
        if let Some(required) = &mut root.required {
            required.retain(|field| field != "spec");
            if required.is_empty() {
                root.required = None;
            }
        }
        if let Some(spec) = root.properties.as_mut().and_then(|p| p.get_mut("spec")) {
            spec.default = Some(JSON(serde_json::json!({})));
        }
    }
}

/// The file name a CRD is committed under: `<plural>.<group>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or("unnamed"))
}

/// A CRD as the YAML committed in `crds/`, with a header saying how it was made.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, YamlError> {
    let body = yaml(crd)?;
    Ok(format!(
        "# Generated by `envoy-operator crds --out crds/` from crates/core/src/api/. Do not edit.\n{body}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{CATEGORY, MAX_REPLICAS};

    #[test]
    fn descriptions_read_as_sentences_and_arrays_say_what_they_hold_once() {
        assert_eq!(
            one_line_per_paragraph("Ports of the\nlisteners.\n\nAt most\n- one\n- two"),
            "Ports of the listeners.\n\nAt most\n- one\n- two"
        );
        fn check(schema: &serde_json::Value, path: &str) {
            let Some(fields) = schema.as_object() else { return };
            if let Some(text) = fields.get("description").and_then(serde_json::Value::as_str) {
                for paragraph in text.split("\n\n") {
                    for line in paragraph.lines().skip(1) {
                        assert!(
                            line.starts_with("- ") || line.starts_with("* "),
                            "{path}: a break mid-sentence in {text:?}"
                        );
                    }
                }
                assert!(
                    fields.get("items").is_none_or(|items| items.get("description").is_none()),
                    "{path}: two descriptions"
                );
            }
            for (key, value) in fields {
                match key.as_str() {
                    "properties" => value
                        .as_object()
                        .into_iter()
                        .flatten()
                        .for_each(|(name, p)| check(p, &format!("{path}.{name}"))),
                    "items" | "additionalProperties" => check(value, &format!("{path}[]")),
                    _ => {}
                }
            }
        }
        for crd in all() {
            for version in &crd.spec.versions {
                let schema = serde_json::to_value(
                    version.schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap(),
                )
                .unwrap();
                check(&schema, &crd.metadata.name.clone().unwrap_or_default());
            }
        }
    }

    #[test]
    fn every_kind_is_in_the_category_and_replicas_have_one_bound() {
        let mut with_replicas = 0;
        for crd in all() {
            assert_eq!(crd.spec.names.categories.as_deref(), Some(&[CATEGORY.to_owned()][..]));
            let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
            let replicas = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"];
            if !replicas.is_null() {
                with_replicas += 1;
                assert_eq!(
                    replicas["maximum"].as_f64(),
                    Some(f64::from(MAX_REPLICAS)),
                    "{}",
                    file_name(&crd)
                );
                // The scale subresource refuses a negative count itself: a `minimum` would say
                // it a second time.
                assert!(replicas.get("minimum").is_none(), "{}", file_name(&crd));
            }
        }
        assert_eq!(with_replicas, 2, "Foo and Envoy have replicas");
    }
}
