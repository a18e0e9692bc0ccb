//! Every generated CRD (`crd::all()`) held to the rules kube-apiserver applies when a CRD is
//! created (`ValidateCustomResourceDefinition`, k8s.io/apiextensions-apiserver), so that a
//! schema the API server would refuse fails `cargo test` rather than `kubectl apply`.
//!
//! No API server runs here. Each check re-implements one part of its validation over the CRD
//! as JSON and names, in its doc comment, the Go function it mirrors:
//!
//! - `spec.rs`: names, group, API approval, versions, printer columns, scale subresource,
//!   the root schema under a status subresource, selectable fields;
//! - `schema.rs`: node by node, the OpenAPI keywords and `x-kubernetes-*` extensions a CRD
//!   may use, the structural-schema invariants (`metadata` at the root, value validations
//!   under `anyOf`/`allOf`/`oneOf`/`not`), and defaults;
//! - `rules.rs` with `cost.rs`: the fields of `x-kubernetes-validations` (`fieldPath` as the
//!   API server parses it), a type check of the CEL against the schema, `oldSelf` placement,
//!   and the estimated cost per rule and per CRD against the API server's limits — from a
//!   conservative re-implementation of cel-go's estimator, not cel-go itself (`cost.rs` says
//!   what it covers and what it does not).
//!
//! Two checks are this project's own, stricter than the API server, and say so in their
//! messages: a rule scans only lists and strings the schema bounds, and a string `format` is
//! one the API server validates rather than drops.
//!
//! Every check has a test below that feeds it a broken copy of a generated CRD and expects
//! the refusal, so none of them passes vacuously.

mod cost;
mod rules;
mod schema;
mod spec;

use std::fmt;

use envoy_operator_core::crd;
use serde_json::{Value, json};

/// One refusal, worded as the API server words a `field.Error`.
#[derive(Debug, Clone)]
pub struct Violation {
    pub path: String,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

pub fn forbidden(path: impl Into<String>, detail: impl fmt::Display) -> Violation {
    Violation { path: path.into(), message: format!("Forbidden: {detail}") }
}

pub fn required(path: impl Into<String>, detail: impl fmt::Display) -> Violation {
    Violation { path: path.into(), message: format!("Required value: {detail}") }
}

pub fn invalid(path: impl Into<String>, value: &str, detail: impl fmt::Display) -> Violation {
    Violation { path: path.into(), message: format!("Invalid value: {value:?}: {detail}") }
}

pub fn not_supported(path: impl Into<String>, value: &str, supported: &[&str]) -> Violation {
    let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    Violation {
        path: path.into(),
        message: format!("Unsupported value: {value:?}: supported values: {}", supported.join(", ")),
    }
}

/// Everything the checks found in one CRD, and what its rules cost.
#[derive(Default)]
struct Report {
    violations: Vec<Violation>,
    costs: rules::CostTally,
}

/// Runs every check over one CRD.
fn check(crd: &Value) -> Report {
    let mut report = Report::default();
    let out = &mut report.violations;
    spec::check_names(crd, out);
    spec::check_api_approval(crd, out);
    spec::check_versions(crd, out);
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array).into_iter().flatten();
    for (i, version) in versions.enumerate() {
        let version_path = format!("spec.versions[{i}]");
        spec::check_printer_columns(version, &version_path, out);
        let Some(root) = version.pointer("/schema/openAPIV3Schema").filter(|s| s.is_object()) else {
            continue;
        };
        spec::check_subresources(version, root, &version_path, out);
        spec::check_root_schema(version, root, &version_path, out);
        spec::check_selectable_fields(version, root, &version_path, out);
        let schema_path = format!("{version_path}.schema.openAPIV3Schema");
        let mut tally = rules::CostTally::default();
        schema::walk(root, &schema::Ctx::root(schema_path.clone()), &mut |node, ctx| {
            schema::check_openapi_node(node, ctx, out);
            schema::check_structural_node(node, ctx, out);
            schema::check_default(node, ctx, out);
            schema::check_string_format(node, ctx, out);
            rules::check_rule_fields(node, ctx, out);
            rules::check_rules_compile(node, ctx, out);
            rules::check_rule_costs(node, ctx, &mut tally, out);
            rules::check_rule_bounds(node, ctx, out);
        });
        rules::check_total_cost(&tally, &schema_path, out);
        report.costs.total = report.costs.total.max(tally.total);
        report.costs.rules += tally.rules;
        report.costs.costs.extend(tally.costs);
    }
    report
}

fn generated() -> Vec<(String, Value)> {
    crd::all()
        .iter()
        .map(|c| (crd::file_name(c), serde_json::to_value(c).expect("a CRD serializes")))
        .collect()
}

/// The generated CRD named `name` (`<plural>.<group>`), as JSON to break.
fn generated_crd(name: &str) -> Value {
    generated().into_iter().find(|(file, _)| file == &format!("{name}.yaml")).expect("a generated CRD").1
}

const ROOT: &str = "/spec/versions/0/schema/openAPIV3Schema";

/// The schema node at `pointer` (under the first version's root) of `crd`.
fn node<'a>(crd: &'a mut Value, pointer: &str) -> &'a mut Value {
    crd.pointer_mut(&format!("{ROOT}{pointer}")).unwrap_or_else(|| panic!("no schema node at {pointer}"))
}

/// Asserts that checking `crd` reports a violation at `path` whose message contains `message`.
#[track_caller]
fn assert_refused(crd: &Value, path: &str, message: &str) {
    let violations = check(crd).violations;
    assert!(
        violations.iter().any(|v| v.path == path && v.message.contains(message)),
        "expected `{path}: …{message}…` among:\n{}",
        violations.iter().map(|v| format!("  {v}\n")).collect::<String>()
    );
}

const ENVOYS: &str = "envoys.example.com";
const ROUTES: &str = "envoyroutes.example.com";
const FOOS: &str = "foos.samplecontroller.k8s.io";
const SCHEMA: &str = "spec.versions[0].schema.openAPIV3Schema";

#[test]
fn generated_crds_pass_the_api_servers_crd_validation() {
    let mut failures = Vec::new();
    let mut rules = 0;
    let mut dearest: Option<(u64, String)> = None;
    for (file, crd) in generated() {
        let report = check(&crd);
        failures.extend(report.violations.iter().map(|v| format!("crds/{file}: {v}")));
        rules += report.costs.rules;
        for (path, cost) in &report.costs.costs {
            if dearest.as_ref().is_none_or(|(worst, _)| cost > worst) {
                dearest = Some((*cost, format!("crds/{file}: {path}")));
            }
        }
        println!(
            "crds/{file}: {} rules, estimated total cost {} of {}",
            report.costs.rules,
            report.costs.total,
            rules::CRD_COST_LIMIT
        );
    }
    if let Some((cost, path)) = &dearest {
        println!("dearest expression: {path}, estimated {cost} of {} per rule", rules::RULE_COST_LIMIT);
    }
    assert!(failures.is_empty(), "the API server would refuse:\n{}", failures.join("\n"));
    // The Envoy CRD's port and immutability rules and the route's Gateway API rules.
    assert!(rules >= 40, "only {rules} CEL rules were checked");
}

#[test]
fn a_root_rule_may_not_point_its_field_path_into_undeclared_metadata() {
    // The bug this file was written for: the root rule on `metadata.name` that kube-apiserver
    // 1.32 refused, on a root that declares no `metadata`.
    let mut route = generated_crd(ROUTES);
    let rule =
        json!({"rule": "self.metadata.name.size() <= 63", "fieldPath": ".metadata.name", "message": "long"});
    node(&mut route, "")["x-kubernetes-validations"] = json!([rule]);
    assert_refused(
        &route,
        &format!("{SCHEMA}.x-kubernetes-validations[0].fieldPath"),
        "fieldPath must be a valid path: does not refer to a valid field",
    );
}

#[test]
fn metadata_at_the_root_may_only_constrain_name_and_generate_name() {
    let mut foo = generated_crd(FOOS);
    node(&mut foo, "/properties/metadata")["description"] = json!("the Foo's metadata");
    assert_refused(
        &foo,
        &format!("{SCHEMA}.properties[metadata]"),
        "must not specify anything other than name",
    );

    let mut foo = generated_crd(FOOS);
    node(&mut foo, "/properties/metadata")["x-kubernetes-validations"] = json!([{"rule": "true"}]);
    assert_refused(
        &foo,
        &format!("{SCHEMA}.properties[metadata]"),
        "must not specify anything other than name",
    );

    let mut foo = generated_crd(FOOS);
    node(&mut foo, "/properties/metadata/properties")["labels"] = json!({"type": "object"});
    assert_refused(
        &foo,
        &format!("{SCHEMA}.properties[metadata]"),
        "must not specify anything other than name",
    );
}

#[test]
fn field_paths_follow_the_api_servers_grammar() {
    let schema = json!({"type": "object", "properties": {
        "a": {"type": "object", "properties": {"b.c": {"type": "string"}}},
        "list": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "string"}}}},
        "map": {"type": "object",
            "additionalProperties": {"type": "object", "properties": {"y": {"type": "string"}}}},
    }});
    let resolves = |path: &str| schema::resolve_field_path(path, &schema, true).map(|n| n.is_some());
    assert_eq!(resolves(".a"), Ok(true));
    assert_eq!(resolves(".a['b.c']"), Ok(true));
    assert_eq!(resolves("['a']['b.c']"), Ok(true));
    assert_eq!(resolves(".map.anyKey.y"), Ok(true));
    assert_eq!(resolves(".map['any.key'].y"), Ok(true));
    assert_eq!(resolves(".list"), Ok(true));
    assert_eq!(resolves(".a.c"), Err("does not refer to a valid field".into()));
    assert_eq!(resolves(".list[0]"), Err("expected single quoted string but got 0".into()));
    assert_eq!(resolves(".list.x"), Err("does not refer to a valid field".into()));
    assert_eq!(resolves("a"), Err("expected [ or . but got: a".into()));
    assert_eq!(resolves(".a."), Err("unexpected end of JSON path".into()));
    assert_eq!(resolves(".a['b.c'"), Err("unexpected end of JSON path".into()));
    assert_eq!(resolves("['a\\q']"), Err("invalid string literal: invalid escape char \\q".into()));
    assert_eq!(
        schema::resolve_field_path(".a['b.c']", &schema, false),
        Err("array notation is not allowed".into())
    );
}

#[test]
fn rule_fields_are_held_to_the_api_servers_rules() {
    let rules = format!("{SCHEMA}.properties[spec].properties[ports].x-kubernetes-validations");
    let mut envoy = generated_crd(ENVOYS);
    node(&mut envoy, "/properties/spec/properties/ports")["x-kubernetes-validations"] = json!([
        {"rule": "self.size() > 0", "reason": "FieldValueTooLong"},
        {"rule": "self.size() > 0", "message": "two\nlines"},
        {"rule": "self.size() > 0 &&\nself.size() < 9"},
        {"rule": "  "},
        {"rule": "self.size() > 0", "messageExpression": " "},
        {"rule": "self.size() > 0", "fieldPath": ".name"},
    ]);
    assert_refused(&envoy, &format!("{rules}[0].reason"), "Unsupported value: \"FieldValueTooLong\"");
    assert_refused(&envoy, &format!("{rules}[1].message"), "message must not contain line breaks");
    assert_refused(
        &envoy,
        &format!("{rules}[2].message"),
        "message must be specified if rule contains line breaks",
    );
    assert_refused(&envoy, &format!("{rules}[3].rule"), "rule is not specified");
    assert_refused(&envoy, &format!("{rules}[4].messageExpression"), "messageExpression must be non-empty");
    assert_refused(&envoy, &format!("{rules}[5].fieldPath"), "fieldPath must be a valid path");
}

#[test]
fn rules_must_compile_against_their_schema() {
    let path = format!("{SCHEMA}.properties[spec].properties[xds].x-kubernetes-validations");
    let mut envoy = generated_crd(ENVOYS);
    node(&mut envoy, "/properties/spec/properties/xds")["x-kubernetes-validations"] = json!([
        {"rule": "self.hostname.size() > 0"},
        {"rule": "self.port >"},
        {"rule": "self.port + 1"},
        {"rule": "self.host == 80"},
        {"rule": "self.host.reverse() == 'a'"},
        {"rule": "request.user == 'admin'"},
        {"rule": "self.port > 0", "messageExpression": "self.port"},
    ]);
    assert_refused(&envoy, &format!("{path}[0].rule"), "undefined field 'hostname'");
    assert_refused(&envoy, &format!("{path}[1].rule"), "compilation failed");
    assert_refused(&envoy, &format!("{path}[2].rule"), "cel expression must evaluate to a bool");
    assert_refused(
        &envoy,
        &format!("{path}[3].rule"),
        "found no matching overload for '_==_' applied to '(string, int)'",
    );
    assert_refused(&envoy, &format!("{path}[4].rule"), "no cost model for function 'reverse'");
    assert_refused(&envoy, &format!("{path}[5].rule"), "undeclared reference to 'request'");
    assert_refused(
        &envoy,
        &format!("{path}[6].messageExpression"),
        "messageExpression must evaluate to a string",
    );
}

#[test]
fn old_self_is_refused_where_old_values_do_not_correlate() {
    let mut route = generated_crd(ROUTES);
    let items = node(&mut route, "/properties/spec/properties/parentRefs/items");
    items["x-kubernetes-validations"] = json!([{"rule": "self.name == oldSelf.name"}]);
    let parent_refs = format!("{SCHEMA}.properties[spec].properties[parentRefs]");
    assert_refused(
        &route,
        &format!("{parent_refs}.items.x-kubernetes-validations[0].rule"),
        &format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {parent_refs}"),
    );

    let mut envoy = generated_crd(ENVOYS);
    node(&mut envoy, "/properties/spec/properties/xds")["x-kubernetes-validations"] =
        json!([{"rule": "self.port > 0", "optionalOldSelf": true}]);
    let path =
        format!("{SCHEMA}.properties[spec].properties[xds].x-kubernetes-validations[0].optionalOldSelf");
    assert_refused(&envoy, &path, "may not be set if oldSelf is not used in rule");
}

#[test]
fn a_rule_iterating_an_unbounded_list_exceeds_the_cost_limit() {
    // The port-uniqueness rule is quadratic in the ports: fine for 16, not for what fits in a
    // request.
    let mut envoy = generated_crd(ENVOYS);
    let ports = node(&mut envoy, "/properties/spec/properties/ports");
    ports.as_object_mut().expect("an object").remove("maxItems");
    let rule = format!("{SCHEMA}.properties[spec].properties[ports].x-kubernetes-validations[0].rule");
    assert_refused(&envoy, &rule, "estimated rule cost exceeds budget by factor of more than 100x");
    assert_refused(&envoy, &rule, "a comprehension iterates up to");
    assert_refused(&envoy, SCHEMA, "estimated rule cost total for entire OpenAPIv3 schema exceeds budget");
}

#[test]
fn the_rules_of_one_crd_share_a_total_cost_limit() {
    // The route's character check on paths costs about 5.5 million across 16 rules of 64
    // matches; twenty of them stay under the per-rule limit and overrun the total.
    let mut route = generated_crd(ROUTES);
    let path =
        node(&mut route, "/properties/spec/properties/rules/items/properties/matches/items/properties/path");
    let rules = path["x-kubernetes-validations"].as_array_mut().expect("path rules");
    let dearest = rules.iter().find(|r| r["rule"].as_str().is_some_and(|r| r.contains("matches("))).cloned();
    rules.extend(std::iter::repeat_n(dearest.expect("the character rule"), 20));
    let violations = check(&route).violations;
    assert!(!violations.iter().any(|v| v.message.contains("estimated rule cost exceeds")), "{violations:#?}");
    assert_refused(&route, SCHEMA, "estimated rule cost total for entire OpenAPIv3 schema exceeds budget");
}

#[test]
fn a_rule_scanning_an_unbounded_string_breaks_the_project_rule() {
    let mut route = generated_crd(ROUTES);
    let path = "/properties/spec/properties/rules/items/properties/matches/items/properties/path";
    node(&mut route, &format!("{path}/properties/value"))
        .as_object_mut()
        .expect("an object")
        .remove("maxLength");
    let matches = format!("{SCHEMA}.properties[spec].properties[rules].items.properties[matches]");
    let rules = format!("{matches}.items.properties[path].x-kubernetes-validations");
    assert_refused(&route, &format!("{rules}[1].rule"), "unbounded: contains traverses a value no maxLength");
}

#[test]
fn structural_schemas_need_types_items_and_no_root_additional_properties() {
    let spec = format!("{SCHEMA}.properties[spec]");
    let mut route = generated_crd(ROUTES);
    node(&mut route, "/properties/spec/properties/hostnames")
        .as_object_mut()
        .expect("an object")
        .remove("items");
    node(&mut route, "/properties/spec/properties/parentRefs/items/properties/name")
        .as_object_mut()
        .expect("an object")
        .remove("type");
    node(&mut route, "")["additionalProperties"] = json!({"type": "string"});
    assert_refused(
        &route,
        &format!("{spec}.properties[hostnames].items"),
        "Required value: must be specified",
    );
    assert_refused(
        &route,
        &format!("{spec}.properties[parentRefs].items.properties[name].type"),
        "must not be empty for specified object fields",
    );
    assert_refused(&route, &format!("{SCHEMA}.additionalProperties"), "must not be used at the root");
}

#[test]
fn value_validations_under_junctors_stay_value_validations() {
    let xds = format!("{SCHEMA}.properties[spec].properties[xds]");
    let mut envoy = generated_crd(ENVOYS);
    node(&mut envoy, "/properties/spec/properties/xds")["anyOf"] = json!([
        {"type": "object", "description": "either", "required": ["host"]},
        {"properties": {"hostname": {"minLength": 1}}},
        {"properties": {"metadata": {}}},
    ]);
    node(&mut envoy, "/properties/spec/properties/xds/properties/host")["pattern"] = json!("^(?!localhost)");
    node(&mut envoy, "/properties/spec/properties/image")["pattern"] = json!("[a-");
    assert_refused(&envoy, &format!("{xds}.anyOf[0].type"), "must be empty to be structural");
    assert_refused(&envoy, &format!("{xds}.anyOf[0].description"), "must be empty to be structural");
    assert_refused(
        &envoy,
        &format!("{xds}.anyOf[1].properties[hostname]"),
        "must be specified outside anyOf",
    );
    assert_refused(
        &envoy,
        &format!("{xds}.anyOf[2].properties[metadata]"),
        "must not be specified in a nested context",
    );
    assert_refused(&envoy, &format!("{xds}.properties[host].pattern"), "must be a valid regular expression");
    let image = format!("{SCHEMA}.properties[spec].properties[image].pattern");
    assert_refused(&envoy, &image, "must be a valid regular expression");
}

#[test]
fn openapi_keywords_and_kubernetes_extensions_are_checked() {
    let spec = format!("{SCHEMA}.properties[spec]");
    let mut envoy = generated_crd(ENVOYS);
    let ports = node(&mut envoy, "/properties/spec/properties/ports");
    ports["uniqueItems"] = json!(true);
    ports["x-kubernetes-list-map-keys"] = json!(["name", "targetPort"]);
    node(&mut envoy, "/properties/spec/properties/image")["x-kubernetes-list-type"] = json!("set");
    node(&mut envoy, "/properties/spec/properties/xds")["$ref"] = json!("#/definitions/Xds");
    node(&mut envoy, "/properties/spec/properties/accessLog")["x-kubernetes-preserve-unknown-fields"] =
        json!(false);
    let ports = format!("{spec}.properties[ports]");
    assert_refused(&envoy, &format!("{ports}.uniqueItems"), "uniqueItems cannot be set to true");
    assert_refused(
        &envoy,
        &format!("{ports}.items.properties[targetPort].default"),
        "must have a default or be a required property",
    );
    assert_refused(&envoy, &format!("{ports}.items.properties[targetPort].nullable"), "cannot be nullable");
    assert_refused(
        &envoy,
        &format!("{spec}.properties[image].type"),
        "must be array if x-kubernetes-list-type is specified",
    );
    assert_refused(&envoy, &format!("{spec}.properties[xds].$ref"), "$ref is not supported");
    assert_refused(
        &envoy,
        &format!("{spec}.properties[accessLog].x-kubernetes-preserve-unknown-fields"),
        "must be true or undefined",
    );
}

#[test]
fn string_formats_are_ones_the_api_server_validates() {
    let mut envoy = generated_crd(ENVOYS);
    node(&mut envoy, "/properties/spec/properties/xds/properties/host")["format"] = json!("ip");
    let host = format!("{SCHEMA}.properties[spec].properties[xds].properties[host].format");
    assert_refused(&envoy, &host, "is not a format the API server validates");
}

#[test]
fn defaults_validate_against_their_schema_and_stay_out_of_metadata() {
    let spec = format!("{SCHEMA}.properties[spec]");
    let mut envoy = generated_crd(ENVOYS);
    node(&mut envoy, "/properties/metadata/properties/name")["default"] = json!("envoy");
    node(&mut envoy, "/properties/spec/properties/replicas")["default"] = json!("three");
    node(&mut envoy, "/properties/spec/properties/xds")["default"] =
        json!({"host": "cp", "port": 18000, "tls": true});
    node(&mut envoy, "/properties/spec/properties/ports")["default"] =
        json!([{"name": "http", "port": 80}, {"name": "web", "port": 80}]);
    assert_refused(
        &envoy,
        &format!("{SCHEMA}.properties[metadata].properties[name].default"),
        "must not be set in top-level metadata",
    );
    assert_refused(&envoy, &format!("{spec}.properties[replicas].default"), "is not of type");
    assert_refused(&envoy, &format!("{spec}.properties[xds].default"), "must not have unknown fields");
    assert_refused(
        &envoy,
        &format!("{spec}.properties[ports].default"),
        "service port numbers must be unique",
    );
}

#[test]
fn names_and_group_are_checked() {
    let mut envoy = generated_crd(ENVOYS);
    envoy["metadata"]["name"] = json!("envoy.example.com");
    envoy["spec"]["names"]["listKind"] = json!("Envoy");
    envoy["spec"]["names"]["shortNames"] = json!(["en_v"]);
    assert_refused(&envoy, "metadata.name", "must be spec.names.plural+\".\"+spec.group");
    assert_refused(&envoy, "spec.names.listKind", "kind and listKind may not be the same");
    assert_refused(&envoy, "spec.names.shortNames[0]", "must be a DNS-1035 label");

    let mut envoy = generated_crd(ENVOYS);
    envoy["spec"]["group"] = json!("example");
    envoy["metadata"]["name"] = json!("envoys.example");
    assert_refused(&envoy, "spec.group", "should be a domain with at least one dot");
}

#[test]
fn kubernetes_groups_need_the_api_approval_annotation() {
    let mut foo = generated_crd(FOOS);
    foo["metadata"]["annotations"] = json!({});
    assert_refused(
        &foo,
        "metadata.annotations[api-approved.kubernetes.io]",
        "protected groups must have approval annotation",
    );
    foo["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": "yes"});
    assert_refused(&foo, "metadata.annotations[api-approved.kubernetes.io]", "with either a URL or a reason");
}

#[test]
fn versions_are_checked() {
    let mut envoy = generated_crd(ENVOYS);
    let mut second = envoy["spec"]["versions"][0].clone();
    second["name"] = json!("V2");
    second.as_object_mut().expect("an object").remove("schema");
    envoy["spec"]["versions"].as_array_mut().expect("versions").push(second);
    assert_refused(&envoy, "spec.versions", "must have exactly one version marked as storage version");
    assert_refused(&envoy, "spec.versions[1].name", "must be a DNS-1035 label");
    assert_refused(&envoy, "spec.versions[1].schema.openAPIV3Schema", "schemas are required");
}

#[test]
fn printer_columns_are_checked() {
    let mut envoy = generated_crd(ENVOYS);
    let column = &mut envoy["spec"]["versions"][0]["additionalPrinterColumns"][0];
    column["type"] = json!("int");
    column["jsonPath"] = json!("spec.replicas");
    let at = "spec.versions[0].additionalPrinterColumns[0]";
    assert_refused(&envoy, &format!("{at}.type"), "must be one of boolean,date,integer,number,string");
    assert_refused(&envoy, &format!("{at}.JSONPath"), "must be a simple json path starting with .");
}

#[test]
fn scale_paths_are_checked() {
    let mut foo = generated_crd(FOOS);
    let scale = &mut foo["spec"]["versions"][0]["subresources"]["scale"];
    scale["specReplicasPath"] = json!(".status.replicas");
    scale["statusReplicasPath"] = json!(".status.wanted");
    scale["labelSelectorPath"] = json!(".status.replicas");
    let at = "spec.versions[0].subresources.scale";
    assert_refused(&foo, &format!("{at}.specReplicasPath"), "should be a json path under .spec");
    assert_refused(&foo, &format!("{at}.statusReplicasPath"), "must name a field of type integer");
    assert_refused(&foo, &format!("{at}.labelSelectorPath"), "must name a field of type string");
}

#[test]
fn the_root_schema_under_a_status_subresource_is_restricted() {
    let mut foo = generated_crd(FOOS);
    node(&mut foo, "")["nullable"] = json!(true);
    node(&mut foo, "")["x-kubernetes-embedded-resource"] = json!(true);
    assert_refused(&foo, &format!("{SCHEMA}.nullable"), "nullable cannot be true at the root");
    assert_refused(
        &foo,
        SCHEMA,
        "fields are allowed at the root of the schema if the status subresource is enabled",
    );
}

#[test]
fn selectable_fields_are_checked() {
    let mut envoy = generated_crd(ENVOYS);
    envoy["spec"]["versions"][0]["selectableFields"] =
        json!([{"jsonPath": ".metadata.name"}, {"jsonPath": ".spec.ports"}, {"jsonPath": ".spec['image']"}]);
    let at = "spec.versions[0].selectableFields";
    assert_refused(&envoy, &format!("{at}[0].jsonPath"), "must not point to fields in metadata");
    assert_refused(
        &envoy,
        &format!("{at}[1].jsonPath"),
        "must point to a field of type string, boolean or integer",
    );
    assert_refused(&envoy, &format!("{at}[2].jsonPath"), "array notation is not allowed");
}

#[test]
fn rule_costs_follow_the_api_servers_estimator() {
    // Hand-computed with cel-go's checker/cost.go: `self.all(h, h.name.lowerAscii() != 'host')`
    // over 16 headers of names up to 256 characters (1024 bytes): the range (1), then per
    // header the loop condition (`@not_strictly_false(@result)`: 2) and step (`@result && …`:
    // 1 + select 2 + lowerAscii 103 + `!=` 1), then the result (1).
    let headers = json!({"type": "array", "maxItems": 16, "items": {"type": "object", "required": ["name"],
        "properties": {"name": {"type": "string", "maxLength": 256}}}});
    let ty = cost::Ty::of_schema(&headers).expect("a list");
    let estimate = cost::estimate("self.all(h, h.name.lowerAscii() != 'host')", ty).expect("it compiles");
    assert_eq!(estimate.cost, 1 + 16 * (2 + 1 + 2 + 103 + 1) + 1);
    assert!(estimate.unbounded.is_empty());

    // The route's dearest rule, `!has(self.value) || (has(self.type) && self.type ==
    // 'RegularExpression') || self.value == '' || self.value.matches(r"""<54 characters>""")`
    // on a path value of up to 1024 characters (4096 bytes): `!has` 3, the type test 2 + 2 +
    // `==` over the 17 bytes of the longest enum value 2, the empty test 3 (`self` 1, `.value`
    // 1, `==` 1), `matches` 2 + ceil(4097 × 0.1) × ceil(54 × 0.25); and it runs for each of 64
    // matches of each of 16 rules.
    let route = check(&generated_crd(ROUTES));
    let path = format!(
        "{SCHEMA}.properties[spec].properties[rules].items.properties[matches].items.properties[path]\
         .x-kubernetes-validations[8].rule"
    );
    let cost = route.costs.costs.iter().find(|(p, _)| *p == path).map(|(_, c)| *c);
    assert_eq!(cost, Some((3 + (2 + 2 + 2) + 3 + (2 + 410 * 14)) * 16 * 64));
}
