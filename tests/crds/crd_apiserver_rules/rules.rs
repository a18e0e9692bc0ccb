//! The rules for `x-kubernetes-validations`: their fields, as
//! `ValidateCustomResourceDefinitionOpenAPISchema` checks them, and their CEL, as `cel.Compile`
//! and the cost limits (`StaticEstimatedCostLimit`, `StaticEstimatedCRDCostLimit`) judge it.

use std::borrow::Cow;

use kube_cel::cel::Program;
use serde_json::{Value, json};

use super::cost::{self, Estimate, MAX_REQUEST_SIZE_BYTES, Ty};
use super::schema::{Ctx, resolve_field_path};
use super::{Violation, forbidden, invalid, not_supported, required};

/// The most one expression may cost (`StaticEstimatedCostLimit`).
pub const RULE_COST_LIMIT: u64 = 10_000_000;
/// The most all the rules of one schema may cost together (`StaticEstimatedCRDCostLimit`).
pub const CRD_COST_LIMIT: u64 = 100_000_000;
const REASONS: [&str; 4] =
    ["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"];

fn rules(node: &Value) -> impl Iterator<Item = (usize, &Value)> {
    node.get("x-kubernetes-validations").and_then(Value::as_array).into_iter().flatten().enumerate()
}

fn text<'a>(rule: &'a Value, key: &str) -> Option<&'a str> {
    rule.get(key).and_then(Value::as_str)
}

/// `[\n\r]+`, the line breaks the API server refuses in messages and field paths.
fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// The fields of each rule, as `ValidateCustomResourceDefinitionOpenAPISchema` checks them: a
/// rule, a one-line message (required when the rule spans lines), a `reason` the API server
/// knows, and a `fieldPath` naming a property declared under the node (`cel.ValidFieldPath`:
/// `.name` and `['name']` steps, no list indices, and at the root no implicit `metadata`).
pub fn check_rule_fields(node: &Value, ctx: &Ctx, out: &mut Vec<Violation>) {
    for (i, rule) in rules(node) {
        let at = |key: &str| format!("{}.x-kubernetes-validations[{i}].{key}", ctx.path);
        let expression = text(rule, "rule").unwrap_or("").trim();
        let message = text(rule, "message");
        let trimmed_message = message.unwrap_or("").trim();
        if expression.is_empty() {
            out.push(required(at("rule"), "rule is not specified"));
        } else if message.is_some_and(|m| !m.is_empty()) && trimmed_message.is_empty() {
            out.push(invalid(at("message"), message.unwrap_or(""), "message must be non-empty if specified"));
        } else if has_newlines(trimmed_message) {
            out.push(invalid(at("message"), trimmed_message, "message must not contain line breaks"));
        } else if has_newlines(expression) && trimmed_message.is_empty() {
            out.push(required(at("message"), "message must be specified if rule contains line breaks"));
        }
        if text(rule, "messageExpression").is_some_and(|m| !m.is_empty() && m.trim().is_empty()) {
            out.push(required(at("messageExpression"), "messageExpression must be non-empty if specified"));
        }
        if let Some(reason) = rule.get("reason").filter(|r| !r.is_null()) {
            let reason = reason.as_str().unwrap_or("");
            if !REASONS.contains(&reason) {
                out.push(not_supported(at("reason"), reason, &REASONS));
            }
        }
        let Some(field_path) = text(rule, "fieldPath").filter(|p| !p.is_empty()) else { continue };
        if field_path.trim().is_empty() {
            out.push(invalid(at("fieldPath"), field_path, "fieldPath must be non-empty if specified"));
        }
        if has_newlines(field_path) {
            out.push(invalid(at("fieldPath"), field_path, "fieldPath must not contain line breaks"));
        }
        if let Err(why) = resolve_field_path(field_path, node, true) {
            out.push(invalid(at("fieldPath"), field_path, format!("fieldPath must be a valid path: {why}")));
        }
    }
}

/// What `self` is to a rule on `node`: at the root of a resource the API server adds
/// `apiVersion`, `kind` and `metadata.name`/`metadata.generateName` (`WithTypeAndObjectMeta`).
fn self_schema<'a>(node: &'a Value, ctx: &Ctx) -> Cow<'a, Value> {
    if !ctx.resource_root {
        return Cow::Borrowed(node);
    }
    let mut with_meta = node.clone();
    let string = json!({"type": "string"});
    let metadata = json!({"type": "object", "properties": {"name": string, "generateName": string}});
    if let Some(properties) = with_meta.as_object_mut().map(|o| o.entry("properties").or_insert(json!({}))) {
        properties["apiVersion"] = string.clone();
        properties["kind"] = string.clone();
        properties["metadata"] = metadata;
    }
    Cow::Owned(with_meta)
}

/// Each rule (and `messageExpression`) of `node`, type-checked and estimated.
fn estimates<'a>(
    node: &Value,
    self_schema: &'a Value,
) -> Vec<(usize, &'static str, String, Result<Estimate<'a>, String>)> {
    let mut found = Vec::new();
    for (i, rule) in rules(node) {
        for key in ["rule", "messageExpression"] {
            let Some(expression) = text(rule, key).filter(|e| !e.trim().is_empty()) else { continue };
            let estimate = Ty::of_schema(self_schema)
                .ok_or_else(|| "rule declared on schema that does not support validation rules".to_string())
                .and_then(|self_ty| cost::estimate(expression, self_ty));
            found.push((i, key, expression.to_owned(), estimate));
        }
    }
    found
}

/// That each rule compiles as `cel.Compile` would have it: it parses, names only `self`,
/// `oldSelf` and fields the schema declares (escaped as `cel.Escape` does), calls functions
/// with operands of the right types as far as the schema tells them, and evaluates to a bool
/// (a `messageExpression` to a string); `oldSelf` only where old and new values correlate
/// (not under a list other than `x-kubernetes-list-type: map`, nor an atomic map), and
/// `optionalOldSelf` only with `oldSelf`.
pub fn check_rules_compile(node: &Value, ctx: &Ctx, out: &mut Vec<Violation>) {
    let self_schema = self_schema(node, ctx);
    for (i, key, expression, estimate) in estimates(node, &self_schema) {
        let at = format!("{}.x-kubernetes-validations[{i}].{key}", ctx.path);
        match estimate {
            Err(why) => out.push(invalid(&at, &expression, why)),
            Ok(estimate) if key == "rule" && !estimate.ty.is_bool() => {
                out.push(invalid(&at, &expression, "cel expression must evaluate to a bool"));
            }
            Ok(estimate) if key == "messageExpression" && !estimate.ty.is_string() => {
                out.push(invalid(&at, &expression, "messageExpression must evaluate to a string"));
            }
            Ok(_) => {}
        }
    }
    for (i, rule) in rules(node) {
        let at = |key: &str| format!("{}.x-kubernetes-validations[{i}].{key}", ctx.path);
        let expression = text(rule, "rule").unwrap_or("");
        let uses_old_self =
            Program::compile(expression).is_ok_and(|program| program.references().has_variable("oldSelf"));
        match (&ctx.uncorrelatable, uses_old_self) {
            (Some(within), true) => out.push(invalid(
                at("rule"),
                expression,
                format!("oldSelf cannot be used on the uncorrelatable portion of the schema within {within}"),
            )),
            (_, false) if rule.get("optionalOldSelf").is_some_and(|o| !o.is_null()) => {
                out.push(invalid(
                    at("optionalOldSelf"),
                    "true",
                    "may not be set if oldSelf is not used in rule",
                ));
            }
            _ => {}
        }
    }
}

/// What the rules of one schema cost, rule by rule.
#[derive(Default, Debug)]
pub struct CostTally {
    pub total: u64,
    pub rules: usize,
    /// Each expression's path and estimated cost (per evaluation × how often it runs).
    pub costs: Vec<(String, u64)>,
}

/// How many times a rule on `node` can run: the product of its enclosing lists' `maxItems`
/// (maps' `maxProperties`), or when one is unbounded, as many of the node's smallest values as
/// fit in a request (`getExpressionCost`, `MaxCardinality`).
fn cardinality(node: &Value, ctx: &Ctx) -> u64 {
    ctx.cardinality.unwrap_or_else(|| MAX_REQUEST_SIZE_BYTES / (cost::min_size(node) + 1))
}

/// `getCostErrorMessage`.
fn cost_message(what: &str, cost: u64, limit: u64) -> String {
    let exceed = cost as f64 / limit as f64;
    let factor = if exceed > 100.0 {
        "more than 100x".to_owned()
    } else if exceed < 1.5 {
        format!("{exceed:.6}x")
    } else {
        format!("{exceed:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, \
         maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// Each expression's estimated cost (see `cost.rs`) times how often it runs, against
/// `StaticEstimatedCostLimit`, tallied for `check_total_cost`. A `messageExpression` is
/// multiplied like its rule, where the API server counts it once: this errs high.
pub fn check_rule_costs(node: &Value, ctx: &Ctx, tally: &mut CostTally, out: &mut Vec<Violation>) {
    let self_schema = self_schema(node, ctx);
    let runs = cardinality(node, ctx);
    for (i, key, _, estimate) in estimates(node, &self_schema) {
        let Ok(estimate) = estimate else { continue }; // `check_rules_compile` reports it
        let at = format!("{}.x-kubernetes-validations[{i}].{key}", ctx.path);
        let cost = estimate.cost.saturating_mul(runs);
        if cost > RULE_COST_LIMIT {
            let what = if key == "rule" { "estimated rule cost" } else { "estimated messageExpression cost" };
            out.push(forbidden(&at, cost_message(what, cost, RULE_COST_LIMIT)));
        }
        tally.total = tally.total.saturating_add(cost);
        tally.rules += usize::from(key == "rule");
        tally.costs.push((at, cost));
    }
}

/// The sum over a schema against `StaticEstimatedCRDCostLimit`, naming the dearest rules as
/// the API server does (those of at least 1% of the limit, four at most).
pub fn check_total_cost(tally: &CostTally, schema_path: &str, out: &mut Vec<Violation>) {
    if tally.total <= CRD_COST_LIMIT {
        return;
    }
    let mut dearest: Vec<&(String, u64)> =
        tally.costs.iter().filter(|(_, c)| *c >= CRD_COST_LIMIT / 100).collect();
    dearest.sort_by_key(|(_, cost)| std::cmp::Reverse(*cost));
    for (path, _) in dearest.into_iter().take(4) {
        out.push(forbidden(
            path,
            "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
        ));
    }
    let what = "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema";
    out.push(forbidden(schema_path, cost_message(what, tally.total, CRD_COST_LIMIT)));
}

/// This project's rule, stricter than the API server: a rule iterates lists and scans
/// strings only where the schema bounds them (`maxItems`, `maxLength`, `maxProperties`), so
/// its cost does not rest on the request size.
pub fn check_rule_bounds(node: &Value, ctx: &Ctx, out: &mut Vec<Violation>) {
    let self_schema = self_schema(node, ctx);
    for (i, key, expression, estimate) in estimates(node, &self_schema) {
        let Ok(estimate) = estimate else { continue };
        for what in estimate.unbounded {
            let at = format!("{}.x-kubernetes-validations[{i}].{key}", ctx.path);
            out.push(invalid(
                at,
                &expression,
                format!("unbounded: {what} (project rule: bound it in the schema)"),
            ));
        }
    }
}
