//! The rules for the CRD around its schema: names, group, versions, printer columns,
//! subresources and selectable fields (`ValidateCustomResourceDefinition` and
//! `validateCustomResourceDefinitionSpec` in apiextensions/validation/validation.go).

use serde_json::Value;

use super::schema::resolve_field_path;
use super::{Violation, forbidden, invalid, not_supported, required};

fn str_at<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

fn strings<'a>(value: &'a Value, pointer: &str) -> Vec<&'a str> {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` parts, `first` allowing what may start one.
fn dns_part(part: &str, first: fn(char) -> bool) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    part.starts_with(first)
        && part.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && part.chars().all(ok)
}

/// `IsDNS1123Subdomain`.
pub fn dns1123_subdomain(name: &str) -> bool {
    let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    name.len() <= 253 && name.split('.').all(|part| dns_part(part, alphanumeric))
}

/// `IsDNS1035Label`.
pub fn dns1035_label(name: &str) -> bool {
    name.len() <= 63 && dns_part(name, |c| c.is_ascii_lowercase())
}

/// `ValidateCustomResourceDefinition`'s name (`<plural>.<group>`, a DNS subdomain), the
/// group and scope of `validateCustomResourceDefinitionSpec`, and
/// `ValidateCustomResourceDefinitionNames` (after the defaulting of `singular` and `listKind`
/// that precedes it).
pub fn check_names(crd: &Value, out: &mut Vec<Violation>) {
    let group = str_at(crd, "/spec/group").unwrap_or("");
    let plural = str_at(crd, "/spec/names/plural").unwrap_or("");
    let kind = str_at(crd, "/spec/names/kind").unwrap_or("");
    let name = str_at(crd, "/metadata/name").unwrap_or("");
    if !dns1123_subdomain(name) {
        out.push(invalid(
            "metadata.name",
            name,
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'",
        ));
    }
    if name != format!("{plural}.{group}") {
        out.push(invalid("metadata.name", name, "must be spec.names.plural+\".\"+spec.group"));
    }
    if group.is_empty() {
        out.push(required("spec.group", ""));
    } else if !dns1123_subdomain(group) {
        out.push(invalid("spec.group", group, "must be a lowercase RFC 1123 subdomain"));
    } else if !group.contains('.') {
        out.push(invalid("spec.group", group, "should be a domain with at least one dot"));
    }
    let scope = str_at(crd, "/spec/scope").unwrap_or("");
    if !["Cluster", "Namespaced"].contains(&scope) {
        out.push(not_supported("spec.scope", scope, &["Cluster", "Namespaced"]));
    }
    let singular = str_at(crd, "/spec/names/singular").map_or_else(|| kind.to_lowercase(), str::to_owned);
    let list_kind = str_at(crd, "/spec/names/listKind").map_or_else(|| format!("{kind}List"), str::to_owned);
    for (field, value) in [("plural", plural), ("kind", kind)] {
        if value.is_empty() {
            out.push(required(format!("spec.names.{field}"), ""));
        }
    }
    let labels = [
        ("plural", plural.to_owned()),
        ("singular", singular),
        ("kind", kind.to_lowercase()),
        ("listKind", list_kind.to_lowercase()),
    ];
    for (field, value) in labels.iter().filter(|(_, v)| !v.is_empty()) {
        if !dns1035_label(value) {
            out.push(invalid(
                format!("spec.names.{field}"),
                value,
                "must be a DNS-1035 label (lowercased for kinds)",
            ));
        }
    }
    if !kind.is_empty() && kind == list_kind {
        out.push(invalid("spec.names.listKind", &list_kind, "kind and listKind may not be the same"));
    }
    for list in ["shortNames", "categories"] {
        for (i, value) in strings(crd, &format!("/spec/names/{list}")).into_iter().enumerate() {
            if !dns1035_label(value) {
                out.push(invalid(format!("spec.names.{list}[{i}]"), value, "must be a DNS-1035 label"));
            }
        }
    }
}

/// `validateAPIApproval`: a CRD in a group of the Kubernetes project (`*.k8s.io`,
/// `*.kubernetes.io`) carries `api-approved.kubernetes.io`, with the URL of its approval or a
/// reason starting with `unapproved`.
pub fn check_api_approval(crd: &Value, out: &mut Vec<Violation>) {
    let group = str_at(crd, "/spec/group").unwrap_or("");
    let protected =
        ["k8s.io", "kubernetes.io"].iter().any(|g| group == *g || group.ends_with(&format!(".{g}")));
    if !protected {
        return;
    }
    let path = "metadata.annotations[api-approved.kubernetes.io]";
    match str_at(crd, "/metadata/annotations/api-approved.kubernetes.io") {
        None => out.push(required(
            path,
            "protected groups must have approval annotation \"api-approved.kubernetes.io\", see \
             https://github.com/kubernetes/enhancements/pull/1111",
        )),
        Some(value) if value.starts_with("unapproved") => {}
        Some(value) => {
            let host = value.strip_prefix("https://").or_else(|| value.strip_prefix("http://"));
            if host.is_none_or(|h| h.is_empty()) {
                let detail = "protected groups must have approval annotation \"api-approved.kubernetes.io\" \
                              with either a URL or a reason starting with \"unapproved\"";
                out.push(invalid(path, value, detail));
            }
        }
    }
}

fn has_default(schema: &Value) -> bool {
    schema.get("default").is_some()
        || schema.as_object().is_some_and(|o| {
            o.iter().any(|(key, child)| match key.as_str() {
                "properties" => child.as_object().is_some_and(|p| p.values().any(has_default)),
                "items" | "additionalProperties" => has_default(child),
                _ => false,
            })
        })
}

/// The versions of `validateCustomResourceDefinitionSpec` and
/// `validateCustomResourceDefinitionVersion`: DNS-1035 names, unique, exactly one stored, each
/// with a schema (`requireOpenAPISchema`), a deprecation warning only on a deprecated version;
/// and `preserveUnknownFields` false where schemas have defaults. (Per-version schemas that
/// are all identical are folded into one on conversion from v1, so that rule never fires.)
pub fn check_versions(crd: &Value, out: &mut Vec<Violation>) {
    let versions =
        crd.pointer("/spec/versions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let mut names = Vec::new();
    for (i, version) in versions.iter().enumerate() {
        let path = format!("spec.versions[{i}]");
        let name = str_at(version, "/name").unwrap_or("");
        if !dns1035_label(name) {
            out.push(invalid(format!("{path}.name"), name, "must be a DNS-1035 label"));
        }
        if names.contains(&name) {
            out.push(invalid("spec.versions", name, "must contain unique version names"));
        }
        names.push(name);
        if version.pointer("/schema/openAPIV3Schema").is_none_or(Value::is_null) {
            out.push(required(format!("{path}.schema.openAPIV3Schema"), "schemas are required"));
        }
        let deprecated = version.get("deprecated") == Some(&Value::Bool(true));
        if let Some(warning) = str_at(version, "/deprecationWarning") {
            if !deprecated {
                out.push(invalid(
                    format!("{path}.deprecationWarning"),
                    warning,
                    "can only be set for deprecated versions",
                ));
            }
            if warning.is_empty() || warning.len() > 256 || warning.chars().any(char::is_control) {
                out.push(invalid(
                    format!("{path}.deprecationWarning"),
                    warning,
                    "must be 1 to 256 printable characters",
                ));
            }
        }
    }
    let stored = versions.iter().filter(|v| v.get("storage") == Some(&Value::Bool(true))).count();
    if stored != 1 {
        out.push(invalid(
            "spec.versions",
            &format!("{stored} stored"),
            "must have exactly one version marked as storage version",
        ));
    }
    let defaults = versions.iter().any(|v| v.pointer("/schema/openAPIV3Schema").is_some_and(has_default));
    if defaults && crd.pointer("/spec/preserveUnknownFields") == Some(&Value::Bool(true)) {
        out.push(invalid(
            "spec.preserveUnknownFields",
            "true",
            "must be false in order to use defaults in the schema",
        ));
    }
}

/// `validateSimpleJSONPath`: a non-empty path that starts with a dot.
fn simple_json_path(path: &str, at: &str, out: &mut Vec<Violation>) -> bool {
    let detail = match path.chars().next() {
        None => "must not be empty",
        Some('.') => return true,
        Some(_) => "must be a simple json path starting with .",
    };
    out.push(invalid(at, path, detail));
    false
}

/// `ValidateCustomResourceColumnDefinition` for each printer column: a name, a known type
/// and format, and a simple JSON path. (That the path names a field is `tests/crds/crds.rs`'s.)
pub fn check_printer_columns(version: &Value, version_path: &str, out: &mut Vec<Violation>) {
    const TYPES: [&str; 5] = ["boolean", "date", "integer", "number", "string"];
    const FORMATS: [&str; 8] = ["byte", "date", "date-time", "double", "float", "int32", "int64", "password"];
    let columns = version.get("additionalPrinterColumns").and_then(Value::as_array).into_iter().flatten();
    for (i, column) in columns.enumerate() {
        let at = |key: &str| format!("{version_path}.additionalPrinterColumns[{i}].{key}");
        if str_at(column, "/name").is_none_or(str::is_empty) {
            out.push(required(at("name"), ""));
        }
        let ty = str_at(column, "/type").unwrap_or("");
        if !TYPES.contains(&ty) {
            out.push(invalid(at("type"), ty, format!("must be one of {}", TYPES.join(","))));
        }
        if let Some(format) = str_at(column, "/format").filter(|f| !f.is_empty() && !FORMATS.contains(f)) {
            out.push(invalid(at("format"), format, format!("must be one of {}", FORMATS.join(","))));
        }
        simple_json_path(str_at(column, "/jsonPath").unwrap_or(""), &at("JSONPath"), out);
    }
}

/// The schema node a dotted path like `.spec.replicas` names.
fn dotted<'a>(schema: &'a Value, path: &str) -> Option<&'a Value> {
    path.strip_prefix('.')?.split('.').try_fold(schema, |node, field| node.get("properties")?.get(field))
}

/// `ValidateCustomResourceDefinitionSubresources`: scale paths are simple JSON paths,
/// `specReplicasPath` under `.spec.`, `statusReplicasPath` under `.status.`,
/// `labelSelectorPath` under either. Beyond the API server's own checks, and what its scale
/// subresource needs at run time: each path names a field of the schema, the replicas
/// integers and the selector a string (else writes through `/scale` are pruned away).
pub fn check_subresources(version: &Value, schema: &Value, version_path: &str, out: &mut Vec<Violation>) {
    let Some(scale) = version.pointer("/subresources/scale").filter(|s| !s.is_null()) else { return };
    let paths = [
        ("specReplicasPath", &[".spec."][..], "integer", "should be a json path under .spec"),
        ("statusReplicasPath", &[".status."][..], "integer", "should be a json path under .status"),
        (
            "labelSelectorPath",
            &[".spec.", ".status."][..],
            "string",
            "should be a json path under either .spec or .status",
        ),
    ];
    for (key, prefixes, ty, detail) in paths {
        let at = format!("{version_path}.subresources.scale.{key}");
        let path = match str_at(scale, &format!("/{key}")) {
            None | Some("") if key == "labelSelectorPath" => continue,
            None | Some("") => {
                out.push(required(&at, ""));
                continue;
            }
            Some(path) => path,
        };
        if !simple_json_path(path, &at, out) {
            continue;
        }
        if !prefixes.iter().any(|p| path.starts_with(p)) {
            out.push(invalid(&at, path, detail));
        } else if dotted(schema, path).and_then(|n| n.get("type")).and_then(Value::as_str) != Some(ty) {
            out.push(invalid(
                &at,
                path,
                format!("must name a field of type {ty} in the schema (scale subresource at run time)"),
            ));
        }
    }
}

/// `validateCustomResourceDefinitionValidation` on the root: never `nullable`, and with the
/// status subresource only `type: object` and the keywords of `allowedFieldsAtRootSchema`.
pub fn check_root_schema(version: &Value, schema: &Value, version_path: &str, out: &mut Vec<Violation>) {
    const ALLOWED: [&str; 22] = [
        "description",
        "type",
        "format",
        "title",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "multipleOf",
        "required",
        "items",
        "properties",
        "externalDocs",
        "example",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-validations",
    ];
    let path = format!("{version_path}.schema.openAPIV3Schema");
    if schema.get("nullable") == Some(&Value::Bool(true)) {
        out.push(forbidden(format!("{path}.nullable"), "nullable cannot be true at the root"));
    }
    if version.pointer("/subresources/status").is_none_or(Value::is_null) {
        return;
    }
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or("");
    if !ty.is_empty() && ty != "object" {
        let detail = "only \"object\" is allowed as the type at the root of the schema if the status \
                      subresource is enabled";
        out.push(invalid(format!("{path}.type"), ty, detail));
    }
    let is_set =
        |v: &Value| !matches!(v, Value::Null | Value::Bool(false)) && v != "" && v != &Value::Array(vec![]);
    let extra: Vec<&String> = schema
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, v)| is_set(v) && !ALLOWED.contains(&k.as_str()))
        .map(|(k, _)| k)
        .collect();
    if !extra.is_empty() {
        let detail = format!(
            "only {ALLOWED:?} fields are allowed at the root of the schema if the status subresource is enabled"
        );
        out.push(invalid(&path, &format!("{extra:?}"), detail));
    }
}

/// `ValidateCustomResourceSelectableFields`: at most 8 distinct paths, each naming a string,
/// boolean or integer field outside `metadata`, without array notation.
pub fn check_selectable_fields(
    version: &Value,
    schema: &Value,
    version_path: &str,
    out: &mut Vec<Violation>,
) {
    let fields =
        version.get("selectableFields").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let mut seen = Vec::new();
    for (i, field) in fields.iter().enumerate() {
        let at = format!("{version_path}.selectableFields[{i}].jsonPath");
        let path = str_at(field, "/jsonPath").unwrap_or("");
        if path.is_empty() {
            out.push(required(&at, ""));
            continue;
        }
        match resolve_field_path(path, schema, false) {
            Err(why) => out.push(invalid(&at, path, format!("is an invalid path: {why}"))),
            Ok(node) => {
                if path.starts_with(".metadata") || path.starts_with("['metadata']") {
                    out.push(invalid(&at, path, "must not point to fields in metadata"));
                }
                let ty = node.and_then(|n| n.get("type")).and_then(Value::as_str).unwrap_or("");
                if !["string", "boolean", "integer"].contains(&ty) {
                    let detail = "must point to a field of type string, boolean or integer. Enum string fields \
                                  and strings with formats are allowed.";
                    out.push(invalid(&at, path, detail));
                }
                if seen.contains(&path) {
                    out.push(forbidden(&at, format!("Duplicate value: {path:?}")));
                }
                seen.push(path);
            }
        }
    }
    if seen.len() > 8 {
        out.push(forbidden(
            format!("{version_path}.selectableFields"),
            format!("Too many: {}: must have at most 8 items", seen.len()),
        ));
    }
}
