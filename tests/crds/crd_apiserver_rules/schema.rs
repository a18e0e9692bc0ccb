//! The rules for the OpenAPI schema itself: what the API server's
//! `ValidateCustomResourceDefinitionOpenAPISchema` (apiextensions/validation/validation.go),
//! `ValidateStructural` (apiserver/schema/validation.go) and `ValidateDefaults`
//! (apiserver/schema/defaulting/validation.go) refuse, node by node.

use serde_json::{Map, Value, json};

use super::{Violation, forbidden, invalid, not_supported, required};

pub fn properties(schema: &Value) -> impl Iterator<Item = (&String, &Value)> {
    schema.get("properties").and_then(Value::as_object).into_iter().flatten()
}

pub fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key) == Some(&Value::Bool(true))
}

pub fn int_or_string(schema: &Value) -> bool {
    flag(schema, "x-kubernetes-int-or-string")
}

fn type_of(schema: &Value) -> &str {
    schema.get("type").and_then(Value::as_str).unwrap_or("")
}

fn str_of<'a>(schema: &'a Value, key: &str) -> Option<&'a str> {
    schema.get(key).and_then(Value::as_str)
}

/// Go's zero value: what a field left out of a `JSONSchemaProps` looks like.
fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(_) => false,
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Level {
    Root,
    Item,
    Field,
}

/// Where a schema node sits, as the API server's recursion tracks it.
#[derive(Clone, Debug)]
pub struct Ctx {
    pub path: String,
    pub level: Level,
    /// The root of the resource, whose `apiVersion`, `kind` and `metadata` CEL always sees.
    pub resource_root: bool,
    /// Inside `metadata`, `kind` or `apiVersion` of a resource (`insideResourceMeta`).
    pub in_meta: bool,
    /// Under `additionalProperties`, where `ValidateDefaults` does not look.
    pub in_additional_properties: bool,
    /// Why a `default` may not be set here (`withForbiddenDefaults`).
    pub defaults_forbidden: Option<String>,
    /// The first enclosing list or atomic map whose items cannot be matched to their old
    /// values, where `oldSelf` is refused (`withForbidOldSelfValidations`).
    pub uncorrelatable: Option<String>,
    /// How many times data here can occur: the product of the enclosing arrays' `maxItems` and
    /// maps' `maxProperties`, `None` when one is unbounded (`CELSchemaContext.MaxCardinality`).
    pub cardinality: Option<u64>,
}

impl Ctx {
    pub fn root(path: String) -> Ctx {
        Ctx {
            path,
            level: Level::Root,
            resource_root: true,
            in_meta: false,
            in_additional_properties: false,
            defaults_forbidden: None,
            uncorrelatable: None,
            cardinality: Some(1),
        }
    }

    fn child(&self, path: String, level: Level, factor: Option<u64>, schema: &Value) -> Ctx {
        Ctx {
            path,
            level,
            resource_root: flag(schema, "x-kubernetes-embedded-resource"),
            cardinality: self.cardinality.zip(factor).map(|(c, f)| c.saturating_mul(f)),
            ..self.clone()
        }
    }
}

/// By how much a node multiplies its children's occurrences (`extractMaxElements`).
fn max_elements(schema: &Value) -> Option<u64> {
    let bound = |key| schema.get(key).map(|v| v.as_u64().unwrap_or(0));
    match type_of(schema) {
        "object" if schema.get("additionalProperties").is_some() => bound("maxProperties"),
        "array" => bound("maxItems"),
        _ => Some(1),
    }
}

/// Visits `node` and every schema under it through `properties`, `items` and
/// `additionalProperties`, with the context the recursion of
/// `ValidateCustomResourceDefinitionOpenAPISchema` carries.
pub fn walk(node: &Value, ctx: &Ctx, visit: &mut dyn FnMut(&Value, &Ctx)) {
    visit(node, ctx);
    let factor = max_elements(node);
    if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
        let mut child = ctx.child(format!("{}.additionalProperties", ctx.path), Level::Field, factor, values);
        child.in_additional_properties = true;
        if ctx.in_meta {
            child.defaults_forbidden = Some("inside additionalProperties applying to object metadata".into());
        }
        walk(values, &child, visit);
    }
    for (name, property) in properties(node) {
        let mut child = ctx.child(format!("{}.properties[{name}]", ctx.path), Level::Field, factor, property);
        if str_of(node, "x-kubernetes-map-type") == Some("atomic") {
            child.uncorrelatable.get_or_insert_with(|| ctx.path.clone());
        }
        if (ctx.level == Level::Root || flag(node, "x-kubernetes-embedded-resource"))
            && ["metadata", "kind", "apiVersion"].contains(&name.as_str())
        {
            child.in_meta = true;
            if ctx.level == Level::Root {
                child.defaults_forbidden = Some(format!("in top-level {name}"));
            }
        }
        walk(property, &child, visit);
    }
    if let Some(items) = node.get("items").filter(|v| v.is_object()) {
        let mut child = ctx.child(format!("{}.items", ctx.path), Level::Item, factor, items);
        if str_of(node, "x-kubernetes-list-type") != Some("map") {
            child.uncorrelatable.get_or_insert_with(|| ctx.path.clone());
        }
        walk(items, &child, visit);
    }
}

/// The per-node checks of `ValidateCustomResourceDefinitionOpenAPISchema` and
/// `specStandardValidatorV3.validate`, `validateMapListKeysMapSet` included: the OpenAPI
/// keywords a CRD may not use, and the consistency of the `x-kubernetes-*` extensions.
pub fn check_openapi_node(node: &Value, ctx: &Ctx, out: &mut Vec<Violation>) {
    let at = |key: &str| format!("{}.{key}", ctx.path);
    let ty = type_of(node);
    const TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];
    if !ty.is_empty() && !TYPES.contains(&ty) {
        out.push(not_supported(at("type"), ty, &TYPES));
    }
    if let (Some(_), Some(reason)) = (node.get("default"), &ctx.defaults_forbidden) {
        out.push(forbidden(at("default"), format!("must not be set {reason}")));
    }
    for (key, what) in [
        ("id", "id is not supported"),
        ("additionalItems", "additionalItems is not supported"),
        ("patternProperties", "patternProperties is not supported"),
        ("definitions", "definitions is not supported"),
        ("dependencies", "dependencies is not supported"),
        ("$ref", "$ref is not supported"),
    ] {
        if node.get(key).is_some_and(|v| !is_zero(v)) {
            out.push(forbidden(at(key), what));
        }
    }
    if ty == "null" {
        out.push(forbidden(at("type"), "type cannot be set to null, use nullable as an alternative"));
    }
    if node.get("items").is_some_and(Value::is_array) {
        out.push(forbidden(at("items"), "items must be a schema object and not an array"));
    }
    if ctx.in_meta && flag(node, "x-kubernetes-embedded-resource") {
        out.push(forbidden(at("x-kubernetes-embedded-resource"), "must not be used inside of resource meta"));
    }
    if flag(node, "uniqueItems") {
        out.push(forbidden(
            at("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    let has_properties = node.get("properties").is_some_and(|p| !is_zero(p));
    if has_properties && node.get("additionalProperties").is_some_and(|a| a.is_object() || a == false) {
        out.push(forbidden(
            at("additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    if node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        out.push(invalid(at("x-kubernetes-preserve-unknown-fields"), "false", "must be true or undefined"));
    }
    check_map_and_list_types(node, ctx, out);
}

/// A missing type is `Required`, a wrong one `Invalid`.
fn type_error(path: String, ty: &str, detail: &str) -> Violation {
    if ty.is_empty() { required(path, detail) } else { invalid(path, ty, detail) }
}

/// `x-kubernetes-map-type`, `x-kubernetes-list-type` and `x-kubernetes-list-map-keys`.
fn check_map_and_list_types(node: &Value, ctx: &Ctx, out: &mut Vec<Violation>) {
    let at = |key: &str| format!("{}.{key}", ctx.path);
    let ty = type_of(node);
    if let Some(map_type) = str_of(node, "x-kubernetes-map-type") {
        if ty != "object" {
            out.push(type_error(at("type"), ty, "must be object if x-kubernetes-map-type is specified"));
        }
        if !["atomic", "granular"].contains(&map_type) {
            out.push(not_supported(at("x-kubernetes-map-type"), map_type, &["atomic", "granular"]));
        }
    }
    let list_type = str_of(node, "x-kubernetes-list-type");
    let items = node.get("items").filter(|i| i.is_object());
    if let Some(list_type) = list_type {
        if ty != "array" {
            out.push(type_error(at("type"), ty, "must be array if x-kubernetes-list-type is specified"));
        }
        if !["atomic", "set", "map"].contains(&list_type) {
            out.push(not_supported(at("x-kubernetes-list-type"), list_type, &["atomic", "set", "map"]));
        }
        if let (Some(items), "set" | "map") = (items, list_type)
            && flag(items, "nullable")
        {
            out.push(forbidden(
                at("items.nullable"),
                format!("cannot be nullable when x-kubernetes-list-type is {list_type}"),
            ));
        }
    }
    if let (Some("set"), Some(items)) = (list_type, items) {
        let atomic = match type_of(items) {
            "array" => str_of(items, "x-kubernetes-list-type").is_none_or(|t| t == "atomic"),
            "object" => str_of(items, "x-kubernetes-map-type") == Some("atomic"),
            _ => true,
        };
        if !atomic {
            out.push(invalid(
                at("items"),
                type_of(items),
                "must be atomic as item of a list with x-kubernetes-list-type=set",
            ));
        }
    }
    let keys: Vec<&str> = node
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .map(|k| k.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !keys.is_empty() && list_type != Some("map") {
        out.push(invalid(
            at("x-kubernetes-list-type"),
            list_type.unwrap_or(""),
            "must be map if x-kubernetes-list-map-keys is non-empty",
        ));
    }
    if list_type != Some("map") {
        return;
    }
    if keys.is_empty() {
        out.push(required(
            at("x-kubernetes-list-map-keys"),
            "must not be empty if x-kubernetes-list-type is map",
        ));
    }
    let Some(items) = items else {
        out.push(required(at("items"), "must have a schema if x-kubernetes-list-type is map"));
        return;
    };
    if type_of(items) != "object" {
        out.push(invalid(
            at("items.type"),
            type_of(items),
            "must be object if parent array's x-kubernetes-list-type is map",
        ));
        return;
    }
    let required_fields = items.get("required").and_then(Value::as_array);
    for (i, key) in keys.iter().enumerate() {
        let key_path = format!("{}.items.properties[{key}]", ctx.path);
        let Some(property) = items.get("properties").and_then(|p| p.get(*key)) else {
            out.push(invalid(
                at("x-kubernetes-list-map-keys"),
                key,
                "entries must all be names of item properties",
            ));
            continue;
        };
        if ["array", "object"].contains(&type_of(property)) {
            out.push(invalid(
                format!("{key_path}.type"),
                type_of(property),
                "must be a scalar type if parent array's x-kubernetes-list-type is map",
            ));
        }
        if keys[..i].contains(key) {
            out.push(invalid(at("x-kubernetes-list-map-keys"), key, "must not contain duplicate entries"));
        }
        let is_required = required_fields.is_some_and(|r| r.iter().any(|f| f == *key));
        if !is_required && property.get("default").is_none() {
            let detail = "this property is in x-kubernetes-list-map-keys, so it must have a default or be a \
                          required property";
            out.push(required(format!("{key_path}.default"), detail));
        }
        if flag(property, "nullable") {
            out.push(forbidden(
                format!("{key_path}.nullable"),
                "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
            ));
        }
    }
}

/// This project's rule on top of `StripUnsupportedFormatsPostProcessorForVersion`
/// (apiserver/validation/formats.go): the API server does not refuse a string `format` it does
/// not know, it drops it and validates nothing, so a schema may only name formats it checks.
pub fn check_string_format(node: &Value, ctx: &Ctx, out: &mut Vec<Violation>) {
    const SUPPORTED: [&str; 24] = [
        "bsonobjectid",
        "uri",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "mac",
        "uuid",
        "uuid3",
        "uuid4",
        "uuid5",
        "isbn",
        "isbn10",
        "isbn13",
        "creditcard",
        "ssn",
        "hexcolor",
        "rgbcolor",
        "byte",
        "password",
        "date",
        "duration",
        "datetime",
    ];
    let Some(format) = str_of(node, "format").filter(|f| !f.is_empty() && type_of(node) == "string") else {
        return;
    };
    if !SUPPORTED.contains(&format.replace('-', "").as_str()) {
        let detail = "is not a format the API server validates: it would be dropped (project rule)";
        out.push(invalid(format!("{}.format", ctx.path), format, detail));
    }
}

/// One node's invariants of a structural schema (`validateStructuralInvariants`): every node
/// has a type, arrays have items, `additionalProperties` is not at the root, `metadata` at the
/// root says nothing but constraints on `name`/`generateName`, and the value validations under
/// `anyOf`/`allOf`/`oneOf`/`not` neither carry structure nor name fields the schema does not
/// declare (`validateNestedValueValidation`, `validateStructuralCompleteness`).
pub fn check_structural_node(node: &Value, ctx: &Ctx, out: &mut Vec<Violation>) {
    let at = |key: &str| format!("{}.{key}", ctx.path);
    let ty = type_of(node);
    let embedded = flag(node, "x-kubernetes-embedded-resource");
    let preserves = flag(node, "x-kubernetes-preserve-unknown-fields");
    if ty == "array" && node.get("items").is_none_or(Value::is_null) {
        out.push(required(at("items"), "must be specified"));
    }
    let additional = node.get("additionalProperties").is_some_and(|a| !a.is_null());
    if additional && ctx.level == Level::Root {
        out.push(forbidden(at("additionalProperties"), "must not be used at the root"));
    }
    if int_or_string(node) && preserves {
        out.push(invalid(
            at("x-kubernetes-preserve-unknown-fields"),
            "true",
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string(node) && embedded {
        out.push(invalid(
            at("x-kubernetes-embedded-resource"),
            "true",
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    check_value_validation(node, node, &ctx.path, int_or_string_patterns(node), out);
    if embedded && ty != "object" {
        out.push(invalid(at("type"), ty, "must be object if x-kubernetes-embedded-resource is true"));
    } else if ty.is_empty() && !int_or_string(node) && !preserves {
        let detail = match ctx.level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        out.push(required(at("type"), detail));
    }
    if embedded && additional {
        out.push(forbidden(
            at("additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if ctx.level == Level::Root && !ty.is_empty() && ty != "object" {
        out.push(invalid(at("type"), ty, "must be object at the root"));
    }
    let resource = ctx.level == Level::Root || embedded;
    for meta in ["kind", "apiVersion"] {
        if let Some(property) = node.get("properties").and_then(|p| p.get(meta)).filter(|_| resource)
            && type_of(property) != "string"
        {
            out.push(invalid(
                format!("{}.properties[{meta}].type", ctx.path),
                type_of(property),
                "must be string",
            ));
        }
    }
    if let Some(metadata) = node.get("properties").and_then(|p| p.get("metadata")) {
        check_metadata(metadata, &format!("{}.properties[metadata]", ctx.path), resource, ctx.level, out);
    }
    if embedded && !preserves && node.get("properties").is_none_or(is_zero) {
        let detail = "must not be empty if x-kubernetes-embedded-resource is true without \
                      x-kubernetes-preserve-unknown-fields";
        out.push(required(at("properties"), detail));
    }
}

/// `validateStructuralMetadataInvariants`: at the root, `metadata` may hold its type and
/// constraints on `name` and `generateName`, nothing else (no description, no rules).
fn check_metadata(metadata: &Value, path: &str, resource: bool, level: Level, out: &mut Vec<Violation>) {
    if resource && type_of(metadata) != "object" {
        out.push(invalid(format!("{path}.type"), type_of(metadata), "must be object"));
    }
    if level != Level::Root {
        return;
    }
    let mut rest: Map<String, Value> = metadata.as_object().cloned().unwrap_or_default();
    // `type` and `default` are checked elsewhere; `example` and `externalDocs` are not
    // structural and dropped before the comparison.
    for key in ["type", "default", "example", "externalDocs"] {
        rest.remove(key);
    }
    let names: Vec<&String> = properties(metadata).map(|(name, _)| name).collect();
    if !names.is_empty() && names.iter().all(|n| *n == "name" || *n == "generateName") {
        rest.remove("properties");
    }
    rest.retain(|_, value| !is_zero(value));
    if !rest.is_empty() {
        let keys: Vec<&String> = rest.keys().collect();
        out.push(forbidden(
            path,
            format!(
                "must not specify anything other than name and generateName, but metadata is implicitly \
                 specified (found {keys:?})"
            ),
        ));
    }
}

/// `validateValueValidation` of the node (or nested validation) `value`, whose structural
/// counterpart is `structural`. The `skip_*` flags exempt the `anyOf` pattern of
/// `x-kubernetes-int-or-string`.
fn check_value_validation(
    value: &Value,
    structural: &Value,
    path: &str,
    (skip_any_of, skip_first_all_of_any_of): (bool, bool),
    out: &mut Vec<Violation>,
) {
    let nested =
        |junctor: &str| value.get(junctor).and_then(Value::as_array).into_iter().flatten().enumerate();
    if !skip_any_of {
        for (i, any_of) in nested("anyOf") {
            check_nested(any_of, Some(structural), &format!("{path}.anyOf[{i}]"), (false, false), out);
        }
    }
    for (i, all_of) in nested("allOf") {
        let skip = (skip_first_all_of_any_of && i == 0, false);
        check_nested(all_of, Some(structural), &format!("{path}.allOf[{i}]"), skip, out);
    }
    for (i, one_of) in nested("oneOf") {
        check_nested(one_of, Some(structural), &format!("{path}.oneOf[{i}]"), (false, false), out);
    }
    if let Some(not) = value.get("not").filter(|n| n.is_object()) {
        check_nested(not, Some(structural), &format!("{path}.not"), (false, false), out);
    }
    if let Some(pattern) = str_of(value, "pattern")
        && let Err(why) = compiles(pattern)
    {
        let detail = format!("must be a valid regular expression, but isn't: {why}");
        out.push(invalid(format!("{path}.pattern"), pattern, detail));
    }
}

/// The flags that exempt a node's `x-kubernetes-int-or-string` `anyOf` pattern, directly or
/// as its first `allOf` (`isIntOrStringAnyOfPattern`, `isIntOrStringAllOfPattern`).
fn int_or_string_patterns(node: &Value) -> (bool, bool) {
    let pattern = |any_of: Option<&Value>| any_of == Some(&json!([{"type": "integer"}, {"type": "string"}]));
    (pattern(node.get("anyOf")), pattern(node.pointer("/allOf/0/anyOf")))
}

/// Whether `pattern` is a regular expression Go's RE2 accepts, approximated with the
/// `jsonschema` crate's regex engine minus the ECMA-262 features RE2 lacks.
fn compiles(pattern: &str) -> Result<(), String> {
    for unsupported in ["(?=", "(?!", "(?<=", "(?<!"] {
        if pattern.contains(unsupported) {
            return Err(format!("RE2 has no lookaround {unsupported}"));
        }
    }
    if (1..=9).any(|n| pattern.contains(&format!("\\{n}"))) {
        return Err("RE2 has no backreferences".into());
    }
    jsonschema::validator_for(&json!({"pattern": pattern})).map(drop).map_err(|e| e.to_string())
}

/// `validateNestedValueValidation` with `validateNestedValueValidationCompleteness`: a value
/// validation nested in a junctor adds constraints only, on fields the schema declares.
fn check_nested(
    nested: &Value,
    structural: Option<&Value>,
    path: &str,
    skips: (bool, bool),
    out: &mut Vec<Violation>,
) {
    let Some(structural) = structural else {
        out.push(required(path, "must be specified outside anyOf/allOf/oneOf/not too, to be structural"));
        return;
    };
    check_value_validation(nested, structural, path, skips, out);
    if let Some(items) = nested.get("items").filter(|i| i.is_object()) {
        check_nested(items, structural.get("items"), &format!("{path}.items"), (false, false), out);
    }
    for (name, property) in properties(nested) {
        let declared = structural.get("properties").and_then(|p| p.get(name));
        check_nested(property, declared, &format!("{path}.properties[{name}]"), (false, false), out);
    }
    for (key, detail) in [
        ("type", "must be empty to be structural"),
        ("additionalProperties", "must be undefined to be structural"),
        ("default", "must be undefined to be structural"),
        ("title", "must be empty to be structural"),
        ("description", "must be empty to be structural"),
        ("nullable", "must be false to be structural"),
        ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
        ("x-kubernetes-embedded-resource", "must be false to be structural"),
        ("x-kubernetes-int-or-string", "must be false to be structural"),
        ("x-kubernetes-list-map-keys", "must be empty to be structural"),
        ("x-kubernetes-list-type", "must be undefined to be structural"),
        ("x-kubernetes-map-type", "must be undefined to be structural"),
        ("x-kubernetes-validations", "must be empty to be structural"),
    ] {
        let set = if key == "default" {
            nested.get(key).is_some_and(|v| !v.is_null())
        } else {
            nested.get(key).is_some_and(|v| !is_zero(v))
        };
        if set {
            out.push(forbidden(format!("{path}.{key}"), detail));
        }
    }
    if nested.get("properties").and_then(|p| p.get("metadata")).is_some() {
        out.push(forbidden(
            format!("{path}.properties[metadata]"),
            "must not be specified in a nested context",
        ));
    }
}

/// `ValidateDefaults`: a default is pruned (has no field the schema drops), and validates
/// against its schema (OpenAPI keywords, through `jsonschema`) and its CEL rules (through
/// `kube-cel`). Like the API server it does not look under `additionalProperties`; defaults
/// where they are forbidden are reported by `check_openapi_node`. Formats are not checked.
pub fn check_default(node: &Value, ctx: &Ctx, out: &mut Vec<Violation>) {
    let Some(default) = node.get("default") else { return };
    if ctx.in_additional_properties || ctx.defaults_forbidden.is_some() {
        return;
    }
    let path = format!("{}.default", ctx.path);
    let shown = default.to_string();
    if let Some(field) = unknown_field(default, node) {
        out.push(invalid(&path, &shown, format!("must not have unknown fields (found {field:?})")));
    }
    match jsonschema::validator_for(&as_json_schema(node)) {
        Ok(validator) => {
            for error in validator.iter_errors(default) {
                out.push(invalid(format!("{path}{}", error.instance_path()), &shown, error.to_string()));
            }
        }
        Err(e) => out.push(invalid(&path, &shown, format!("its schema does not compile: {e}"))),
    }
    if let Err(errors) = kube_cel::Validator::new().validate(node, default, None) {
        for error in errors.iter() {
            out.push(invalid(&path, &shown, error.to_string()));
        }
    }
}

/// The first field of `value` that pruning against `schema` would drop.
fn unknown_field(value: &Value, schema: &Value) -> Option<String> {
    if flag(schema, "x-kubernetes-preserve-unknown-fields") {
        return None;
    }
    match value {
        Value::Object(fields) => match schema.get("additionalProperties") {
            Some(values) if values.is_object() => fields.values().find_map(|v| unknown_field(v, values)),
            Some(Value::Bool(true)) => None,
            _ => {
                fields.iter().find_map(|(name, v)| match schema.get("properties").and_then(|p| p.get(name)) {
                    Some(property) => unknown_field(v, property).map(|inner| format!("{name}.{inner}")),
                    None => Some(name.clone()),
                })
            }
        },
        Value::Array(items) => {
            schema.get("items").and_then(|s| items.iter().find_map(|i| unknown_field(i, s)))
        }
        _ => None,
    }
}

/// A Kubernetes schema as JSON Schema: `nullable` becomes a `null` type.
fn as_json_schema(node: &Value) -> Value {
    let mut converted = node.clone();
    fn convert(schema: &mut Value) {
        let Some(object) = schema.as_object_mut() else { return };
        if object.get("nullable") == Some(&Value::Bool(true)) {
            if let Some(Value::String(ty)) = object.get("type").cloned() {
                object.insert("type".into(), json!([ty, "null"]));
            }
            if let Some(Value::Array(values)) = object.get_mut("enum") {
                values.push(Value::Null);
            }
        }
        for key in ["items", "additionalProperties", "not"] {
            object.get_mut(key).map(convert);
        }
        for key in ["properties", "anyOf", "allOf", "oneOf"] {
            match object.get_mut(key) {
                Some(Value::Object(children)) => children.values_mut().for_each(convert),
                Some(Value::Array(children)) => children.iter_mut().for_each(convert),
                _ => {}
            }
        }
    }
    convert(&mut converted);
    converted
}

/// `cel.ValidFieldPath`: the schema node a `fieldPath` (or selectable field) names. The path is
/// `.name` and `['name']` steps through declared properties, or keys of `additionalProperties`
/// maps; list indices are not paths. `Ok(None)` is a value of an `additionalProperties: true`
/// map.
pub fn resolve_field_path<'a>(
    path: &str,
    schema: &'a Value,
    array_notation: bool,
) -> Result<Option<&'a Value>, String> {
    let mut node = Some(schema);
    let mut tokens = tokenize(path).into_iter();
    let end = || "unexpected end of JSON path".to_string();
    while let Some(token) = tokens.next() {
        let name = match token.as_str() {
            "[" => {
                if !array_notation {
                    return Err("array notation is not allowed".into());
                }
                let quoted = tokens.next().ok_or_else(end)?;
                if quoted.len() < 2 || !quoted.starts_with('\'') || !quoted.ends_with('\'') {
                    return Err(format!("expected single quoted string but got {quoted}"));
                }
                let name = unescape(&quoted[1..quoted.len() - 1])?;
                match tokens.next() {
                    Some(close) if close == "]" => name,
                    Some(other) => return Err(format!("expected ] but got {other}")),
                    None => return Err(end()),
                }
            }
            "." => tokens.next().ok_or_else(end)?,
            other => return Err(format!("expected [ or . but got: {other}")),
        };
        let invalid_field = || "does not refer to a valid field".to_string();
        let parent = node.ok_or_else(invalid_field)?;
        node = if let Some(declared) = parent.get("properties").and_then(Value::as_object) {
            Some(declared.get(&name).ok_or_else(invalid_field)?)
        } else if let Some(values) = parent.get("additionalProperties").filter(|v| !v.is_null()) {
            values.is_object().then_some(values)
        } else {
            return Err(invalid_field());
        };
    }
    Ok(node)
}

/// The tokens of a field path: `.`, `[`, `]`, single-quoted strings and the names between.
fn tokenize(path: &str) -> Vec<String> {
    let chars: Vec<char> = path.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let end = if chars[i] == '\'' {
            let close = (i + 1..chars.len()).find(|&j| chars[j] == '\'' && chars[j - 1] != '\\');
            close.map_or(chars.len(), |j| j + 1)
        } else if matches!(chars[i], '.' | '[' | ']') {
            i + 1
        } else {
            (i..chars.len()).find(|&j| matches!(chars[j], '.' | '[' | ']')).unwrap_or(chars.len())
        };
        tokens.push(chars[i..end].iter().collect());
        i = end;
    }
    tokens
}

fn unescape(quoted: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = quoted.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next() {
            Some('a') => '\u{7}',
            Some('b') => '\u{8}',
            Some('f') => '\u{c}',
            Some('n') => '\n',
            Some('r') => '\r',
            Some('t') => '\t',
            Some('v') => '\u{b}',
            Some(c @ ('\'' | '\\')) => c,
            other => {
                return Err(format!(
                    "invalid string literal: invalid escape char \\{}",
                    other.unwrap_or(' ')
                ));
            }
        });
    }
    Ok(out)
}
