//! The committed CRDs match the code, and are schemas a real API server accepts: structural,
//! with CEL rules that compile within the cost budget, printer columns and scale paths that
//! point at real fields.

use std::path::Path;

use envoy_operator_core::crd;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

fn schema(crd: &CustomResourceDefinition) -> Value {
    let version = &crd.spec.versions[0];
    let schema = version.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()).expect("a schema");
    serde_json::to_value(schema).expect("schema serializes")
}

#[test]
fn committed_crds_match_the_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
    let regenerate = "regenerate them with `cargo run -- crds --out crds/` and commit the result";
    let mut expected_files = Vec::new();
    for definition in crd::all() {
        let file = crd::file_name(&definition);
        let committed = std::fs::read_to_string(dir.join(&file))
            .unwrap_or_else(|e| panic!("crds/{file} is missing ({e}): {regenerate}"));
        let generated = crd::to_yaml(&definition).expect("CRDs serialize");
        assert!(committed == generated, "crds/{file} differs from what the code generates: {regenerate}");
        expected_files.push(file);
    }
    let mut present: Vec<String> = std::fs::read_dir(&dir)
        .expect("crds/ exists")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".yaml") && name != "kustomization.yaml")
        .collect();
    present.sort();
    expected_files.sort();
    assert_eq!(present, expected_files, "crds/ holds files the code no longer generates: {regenerate}");
}

/// Every violation of the structural-schema rules the API server enforces.
fn structural_violations(node: &Value, path: &str, violations: &mut Vec<String>) {
    let exempt = node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
        || node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if !exempt && node.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
        violations.push(format!("{path}: type must be set"));
    }
    for forbidden in ["$ref", "anyOf", "oneOf", "allOf", "not", "definitions", "$defs"] {
        if node.get(forbidden).is_some() {
            violations.push(format!("{path}: {forbidden} is not allowed in a structural schema"));
        }
    }
    if node.get("properties").is_some() && node.get("additionalProperties").is_some() {
        violations.push(format!("{path}: properties and additionalProperties are mutually exclusive"));
    }
    if node.get("x-kubernetes-list-type") == Some(&Value::String("map".into())) {
        let items = &node["items"];
        let required: Vec<&Value> =
            items["required"].as_array().map(|r| r.iter().collect()).unwrap_or_default();
        for key in node["x-kubernetes-list-map-keys"].as_array().into_iter().flatten() {
            if !required.contains(&key)
                && items["properties"][key.as_str().unwrap_or("")].get("default").is_none()
            {
                violations.push(format!("{path}: list-map key {key} must be required or defaulted"));
            }
        }
    }
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            structural_violations(child, &format!("{path}.{name}"), violations);
        }
    }
    for nested in ["items", "additionalProperties"] {
        if let Some(child) = node.get(nested).filter(|c| c.is_object()) {
            structural_violations(child, &format!("{path}[{nested}]"), violations);
        }
    }
}

#[test]
fn schemas_are_structural() {
    for definition in crd::all() {
        let mut violations = Vec::new();
        structural_violations(&schema(&definition), "", &mut violations);
        assert!(violations.is_empty(), "{}: {violations:#?}", crd::file_name(&definition));
    }
}

/// Every schema node carrying CEL rules, with its path.
fn nodes_with_rules<'a>(node: &'a Value, path: String, found: &mut Vec<(String, &'a Value)>) {
    if node.get("x-kubernetes-validations").is_some() {
        found.push((path.clone(), node));
    }
    for (name, child) in node["properties"].as_object().into_iter().flatten() {
        nodes_with_rules(child, format!("{path}.{name}"), found);
    }
    for nested in ["items", "additionalProperties"] {
        if node[nested].is_object() {
            nodes_with_rules(&node[nested], format!("{path}[{nested}]"), found);
        }
    }
}

#[test]
fn cel_rules_compile_and_stay_in_budget() {
    let mut total = 0;
    for definition in crd::all() {
        let schema = schema(&definition);
        let mut nodes = Vec::new();
        nodes_with_rules(&schema, String::new(), &mut nodes);
        for (path, node) in nodes {
            let compiled = kube_cel::compile_schema(node);
            let errors = compiled.compilation_errors();
            assert!(errors.is_empty(), "{path}: CEL rules fail to compile: {errors:?}");
            for rule in node["x-kubernetes-validations"].as_array().into_iter().flatten() {
                let rule = rule["rule"].as_str().expect("a rule is a string");
                total += 1;
                let over_budget: Vec<_> = kube_cel::estimate_rule_cost(rule, &compiled)
                    .into_iter()
                    .filter(|w| w.kind == kube_cel::WarningKind::CostExceeded)
                    .collect();
                assert!(over_budget.is_empty(), "{path}: {rule}: {over_budget:?}");
            }
        }
    }
    assert!(total >= 3, "the Envoy CRD carries its immutability, port-uniqueness and reserved-port rules");
    assert!(total >= 30, "the EnvoyRoute CRD carries Gateway API's path, filter and reference rules");
}

/// Whether a simple JSONPath like `.status.conditions[?(...)].status` names a schema field.
fn path_exists(schema: &Value, json_path: &str) -> bool {
    // Drop bracketed filters and indices (`[?(@.type=="Ready")]`, `[0]`): they select items.
    let mut plain = String::new();
    let mut depth = 0;
    for c in json_path.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    if plain.starts_with(".metadata.") {
        return true; // ObjectMeta belongs to the API server, not to the CRD schema.
    }
    let mut node = schema;
    for field in plain.trim_start_matches('.').split('.') {
        if node["type"] == "array" {
            node = &node["items"];
        }
        match node["properties"].get(field) {
            Some(child) => node = child,
            None => return false,
        }
    }
    true
}

#[test]
fn printer_columns_and_scale_paths_name_real_fields() {
    for definition in crd::all() {
        let schema = schema(&definition);
        let version = &definition.spec.versions[0];
        let columns = version.additional_printer_columns.as_ref().expect("printer columns");
        assert!(columns.iter().any(|c| c.name == "Age"), "columns end with Age, like built-in kinds");
        for column in columns {
            assert!(
                path_exists(&schema, &column.json_path),
                "column {} -> {}",
                column.name,
                column.json_path
            );
        }
        let subresources = version.subresources.as_ref().expect("subresources");
        assert!(subresources.status.is_some(), "status subresource");
        // Kinds with replicas scale (`kubectl scale`, HPAs); an EnvoyRoute has none.
        let replicas = path_exists(&schema, ".spec.replicas");
        assert_eq!(
            subresources.scale.is_some(),
            replicas,
            "{}: a scale subresource exactly with replicas",
            crd::file_name(&definition)
        );
        if let Some(scale) = &subresources.scale {
            assert!(path_exists(&schema, &scale.spec_replicas_path));
            assert!(path_exists(&schema, &scale.status_replicas_path));
            assert!(path_exists(&schema, scale.label_selector_path.as_deref().expect("label selector path")));
        }
        let names = &definition.spec.names;
        assert!(names.short_names.as_ref().is_some_and(|s| !s.is_empty()), "short names");
        assert_eq!(names.categories.as_deref(), Some(&["envoy-operator".to_owned()][..]));
        assert_eq!(definition.spec.scope, "Namespaced");
    }
}

/// Why the API server would print only part of what `json_path` selects, or print it as
/// JSON: a printer column shows the first value a path finds, and a list or an object as JSON.
/// A filter on a list keyed by the filtered field (`conditions[?(@.type=="Ready")]`) selects
/// one item at most; `[*]` or another filter selects many.
fn column_problem(schema: &Value, json_path: &str) -> Option<String> {
    if json_path.starts_with(".metadata.") {
        return None; // ObjectMeta's scalars, printed by the API server.
    }
    let mut node = schema;
    let mut rest = json_path;
    while !rest.is_empty() {
        if let Some(field_path) = rest.strip_prefix('.') {
            let end = field_path.find(['.', '[']).unwrap_or(field_path.len());
            let field = &field_path[..end];
            if node["type"] == "array" {
                return Some(format!("{field} is read from every item of a list"));
            }
            node = node["properties"].get(field)?;
            rest = &field_path[end..];
        } else if let Some(selector_path) = rest.strip_prefix('[') {
            let end = selector_path.find(']')?;
            let selector = &selector_path[..end];
            let keys = node["x-kubernetes-list-map-keys"].as_array().cloned().unwrap_or_default();
            let one_item = selector.parse::<usize>().is_ok()
                || selector
                    .strip_prefix("?(@.")
                    .and_then(|filter| filter.split_once("=="))
                    .is_some_and(|(key, _)| keys == [Value::from(key)]);
            if !one_item {
                return Some(format!("[{selector}] selects many items, of which only the first is printed"));
            }
            node = &node["items"];
            rest = &selector_path[end + 1..];
        } else {
            return Some(format!("cannot read {rest:?}"));
        }
    }
    match node["type"].as_str() {
        Some("array" | "object") => Some(format!("a whole {} is printed as JSON", node["type"])),
        _ => None,
    }
}

#[test]
fn printer_columns_print_one_value_as_text() {
    for definition in crd::all() {
        let schema = schema(&definition);
        for column in definition.spec.versions[0].additional_printer_columns.iter().flatten() {
            if let Some(problem) = column_problem(&schema, &column.json_path) {
                panic!(
                    "{}: column {} ({}): {problem}",
                    crd::file_name(&definition),
                    column.name,
                    column.json_path
                );
            }
        }
    }
    // The check sees what `kubectl get er` used to print: the first parent's Accepted only,
    // and the hostnames as JSON.
    let routes = crd::all().into_iter().find(|d| d.spec.names.kind == "EnvoyRoute").expect("EnvoyRoute");
    let schema = schema(&routes);
    let first_only = r#".status.parents[*].conditions[?(@.type=="Accepted")].status"#;
    assert!(column_problem(&schema, first_only).is_some_and(|p| p.contains("[*]")));
    assert!(column_problem(&schema, ".spec.hostnames").is_some_and(|p| p.contains("JSON")));
    assert_eq!(
        column_problem(&schema, r#".status.parents[0].conditions[?(@.type=="Accepted")].status"#),
        None
    );
}

#[test]
fn k8s_io_groups_carry_the_api_approval_annotation() {
    for definition in crd::all() {
        let group = &definition.spec.group;
        if group.ends_with(".k8s.io") || group.ends_with(".kubernetes.io") {
            let annotations = definition.metadata.annotations.clone().unwrap_or_default();
            assert!(annotations.contains_key("api-approved.kubernetes.io"), "{group} needs api-approved");
        }
    }
}
