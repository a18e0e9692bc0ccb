//! A static type check and cost estimate of one CEL rule against the schema it sits on, after
//! what kube-apiserver runs when a CRD is written (`cel.Compile` in
//! apiextensions-apiserver/pkg/apiserver/schema/cel/compilation.go).
//!
//! The API server's estimate is cel-go's `checker.Cost` (checker/cost.go) with Kubernetes'
//! `library.CostEstimator` (apiserver/pkg/cel/library/cost.go) for its extension functions, and
//! sizes from the schema (`SchemaDeclType` in apiserver/pkg/cel/common/schemas.go): a string
//! holds `maxLength * 4` bytes, or its longest `enum` value, or else the 3 MiB request; a list
//! `maxItems` items, or else as many of its smallest items as fit in the request. This module
//! follows the same rules, and where it is unsure it errs high, so that a rule it passes the
//! API server passes too:
//!
//! - it follows cel-go's cost of literals (0), identifiers and selections (1), presence tests
//!   (1), list and map literals (10, 30), comprehensions (range × (condition + step), plus
//!   initialisation and result), `&&`/`||` (both sides), `?:` (condition + the dearer branch),
//!   string equality and ordering (0.1 per byte of the shorter side), `contains`, `startsWith`,
//!   `endsWith`, `matches` and string concatenation, and of Kubernetes' `lowerAscii`,
//!   `upperAscii`, `trim`, `substring`, `replace`, `split`, `join`, `indexOf`, `lastIndexOf`,
//!   `isSorted`, `sum`, `min`, `max`, `find`, `findAll`, `url`, `quantity`, `ip`, `cidr`;
//! - it charges at least 1 where the API server may charge 0 (scalar and object equality, a
//!   selection on `dyn`), and sizes an unbounded list or map from the smallest item the schema
//!   allows (never larger than the API server's own smallest);
//! - like the API server, it sizes the keys of a map 0, so scanning them is free: the one place
//!   where the estimate bounds the API server's estimate but not the real cost;
//! - it does not resolve cel-go's overloads, so it types only what a schema or literal says
//!   (a mismatch of declared scalars, an unknown field, a non-boolean rule), and it does not
//!   model `cel.bind`, two-variable comprehensions over maps beyond their sizes, optionals,
//!   the implicit `metadata` of embedded resources seen from rules above them, nor the
//!   runtime limits (`PerCallLimit`, `RuntimeCELCostBudget`).
//!
//! A function it has no cost for is an error, not a guess: teach it the function's cost.

use kube_cel::cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, LiteralValue, SelectExpr};
use kube_cel::cel::parser::Parser;
use serde_json::Value;

use super::schema::{int_or_string, properties};

/// The largest request the API server reads (`DefaultMaxRequestSizeBytes`): the bound of
/// anything the schema leaves unbounded.
pub const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;
const STRING_TRAVERSAL: f64 = 0.1;
const REGEX_STRING_LENGTH: f64 = 0.25;
const LIST_CREATE: u64 = 10;
const MAP_CREATE: u64 = 30;

/// The largest size a value can have, and whether the schema (or the rule) bounds it or the
/// request size does.
#[derive(Clone, Copy, Debug)]
pub struct Len {
    pub max: u64,
    pub declared: bool,
}

impl Len {
    fn of(max: u64) -> Len {
        Len { max, declared: true }
    }

    fn fallback(max: u64) -> Len {
        Len { max, declared: false }
    }

    fn plus(self, other: Len) -> Len {
        Len { max: self.max.saturating_add(other.max), declared: self.declared && other.declared }
    }

    fn or(self, other: Len) -> Len {
        Len { max: self.max.max(other.max), declared: self.declared && other.declared }
    }
}

/// What the type checker knows of a value: its CEL type and, for strings, bytes, lists and
/// maps, how large it can be.
#[derive(Clone, Debug)]
pub enum Ty<'a> {
    /// An object with declared properties (a CEL object type).
    Object(&'a Value),
    List(Len, Box<Ty<'a>>),
    Map(Len, Box<Ty<'a>>),
    Str(Len),
    Bytes(Len),
    /// `x-kubernetes-int-or-string`, or anything CEL only knows at run time.
    Dyn(Len),
    Bool,
    Int,
    Double,
    Null,
    Timestamp,
    Duration,
}

impl<'a> Ty<'a> {
    /// The CEL type of data under `schema`, or `None` when CEL cannot see it (no `type`, or an
    /// array of such), after `SchemaDeclType`.
    pub fn of_schema(schema: &'a Value) -> Option<Ty<'a>> {
        if int_or_string(schema) {
            return Some(Ty::Dyn(string_len(schema)));
        }
        let format = schema.get("format").and_then(Value::as_str);
        Some(match schema.get("type").and_then(Value::as_str)? {
            "array" => {
                let items = schema.get("items")?;
                let len = bound(schema, "maxItems", 1)
                    .unwrap_or_else(|| Len::fallback((MAX_REQUEST_SIZE_BYTES - 2) / (min_size(items) + 1)));
                Ty::List(len, Box::new(Ty::of_schema(items)?))
            }
            "object" => match schema.get("additionalProperties").filter(|a| a.is_object()) {
                Some(values) => {
                    let len = bound(schema, "maxProperties", 1).unwrap_or_else(|| {
                        Len::fallback((MAX_REQUEST_SIZE_BYTES - 2) / (min_size(values) + 6))
                    });
                    let elem =
                        Ty::of_schema(values).unwrap_or(Ty::Dyn(Len::fallback(MAX_REQUEST_SIZE_BYTES)));
                    Ty::Map(len, Box::new(elem))
                }
                None => Ty::Object(schema),
            },
            "string" => match format {
                Some("byte") => Ty::Bytes(
                    bound(schema, "maxLength", 1).unwrap_or(Len::fallback(MAX_REQUEST_SIZE_BYTES - 2)),
                ),
                Some("duration") => Ty::Duration,
                Some("date" | "date-time") => Ty::Timestamp,
                _ => Ty::Str(string_len(schema)),
            },
            "integer" => Ty::Int,
            "number" => Ty::Double,
            "boolean" => Ty::Bool,
            _ => return None,
        })
    }

    fn name(&self) -> &'static str {
        match self {
            Ty::Object(_) => "object",
            Ty::List(..) => "list",
            Ty::Map(..) => "map",
            Ty::Str(_) => "string",
            Ty::Bytes(_) => "bytes",
            Ty::Dyn(_) => "dyn",
            Ty::Bool => "bool",
            Ty::Int => "int",
            Ty::Double => "double",
            Ty::Null => "null_type",
            Ty::Timestamp => "google.protobuf.Timestamp",
            Ty::Duration => "google.protobuf.Duration",
        }
    }

    /// CEL's `size()` of the value, at most. Scalars count 1 and objects 0, as in cel-go.
    fn size(&self) -> Len {
        match self {
            Ty::Str(len) | Ty::Bytes(len) | Ty::List(len, _) | Ty::Map(len, _) | Ty::Dyn(len) => *len,
            Ty::Object(_) => Len::of(0),
            _ => Len::of(1),
        }
    }

    pub fn is_bool(&self) -> bool {
        matches!(self, Ty::Bool | Ty::Dyn(_))
    }

    pub fn is_string(&self) -> bool {
        matches!(self, Ty::Str(_) | Ty::Dyn(_))
    }
}

/// `maxItems`/`maxLength`/`maxProperties` times `scale` (bytes per character for strings).
fn bound(schema: &Value, keyword: &str, scale: u64) -> Option<Len> {
    let max = schema.get(keyword)?.as_u64().unwrap_or(0);
    Some(Len::of(max.saturating_mul(scale)))
}

/// A string's size in bytes: `maxLength` characters of up to 4 bytes, else the longest `enum`
/// value, else the request (`estimateMaxStringLengthPerRequest`).
fn string_len(schema: &Value) -> Len {
    if let Some(len) = bound(schema, "maxLength", 4) {
        return len;
    }
    let longest_enum = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|values| values.iter().filter_map(Value::as_str).map(|v| v.len() as u64).max());
    match longest_enum {
        Some(longest) if !int_or_string(schema) => Len::of(longest),
        _ => Len::fallback(MAX_REQUEST_SIZE_BYTES - 2),
    }
}

/// The fewest bytes data under `schema` serializes to (`MinSerializedSize`), never more than
/// the API server's: it sizes unbounded lists and the times a rule under them runs.
pub fn min_size(schema: &Value) -> u64 {
    if int_or_string(schema) {
        return 1;
    }
    let format = schema.get("format").and_then(Value::as_str);
    match schema.get("type").and_then(Value::as_str) {
        Some("object") if schema.get("additionalProperties").is_some_and(Value::is_object) => 2,
        Some("object") => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let required_fields = properties(schema).filter(|(name, prop)| {
                required.contains(&name.as_str())
                    && prop.get("default").is_none()
                    && Ty::of_schema(prop).is_some()
            });
            2 + required_fields.map(|(name, prop)| name.len() as u64 + min_size(prop) + 4).sum::<u64>()
        }
        Some("string") => match format {
            Some("date") => 12,
            Some("date-time") => 21,
            Some("duration") => 3,
            _ => 2,
        },
        Some("boolean") => 4,
        _ => 1,
    }
}

/// A rule's static cost and type, and the traversals of data the schema leaves unbounded.
pub struct Estimate<'a> {
    pub cost: u64,
    pub ty: Ty<'a>,
    pub unbounded: Vec<String>,
}

/// Type-checks and estimates `expression` with `self` (and `oldSelf`) of type `self_ty`.
pub fn estimate<'a>(expression: &str, self_ty: Ty<'a>) -> Result<Estimate<'a>, String> {
    let parsed = Parser::default().parse(expression).map_err(|e| format!("compilation failed: {e}"))?;
    let mut coster = Coster {
        vars: vec![("self".into(), self_ty.clone()), ("oldSelf".into(), self_ty)],
        unbounded: vec![],
    };
    let (cost, ty) = coster.cost(&parsed.expr)?;
    Ok(Estimate { cost, ty, unbounded: coster.unbounded })
}

/// `ceil(size × factor)`, as cel-go's `MultiplyByCostFactor`, saturating.
fn scaled(size: u64, factor: f64) -> u64 {
    let cost = (size as f64 * factor).ceil();
    if cost >= u64::MAX as f64 { u64::MAX } else { cost as u64 }
}

fn union<'a>(a: Ty<'a>, b: Ty<'a>) -> Ty<'a> {
    match (a, b) {
        (Ty::Str(x), Ty::Str(y)) => Ty::Str(x.or(y)),
        (Ty::Bytes(x), Ty::Bytes(y)) => Ty::Bytes(x.or(y)),
        (Ty::List(x, e), Ty::List(y, f)) => Ty::List(x.or(y), Box::new(union(*e, *f))),
        (Ty::Map(x, e), Ty::Map(y, f)) => Ty::Map(x.or(y), Box::new(union(*e, *f))),
        (Ty::Null, t) | (t, Ty::Null) => t,
        (a, b) if a.name() == b.name() && !matches!(a, Ty::Dyn(_)) => a,
        (a, b) => Ty::Dyn(a.size().or(b.size())),
    }
}

/// Whether cel-go's checker finds an overload of a comparison for these two types.
fn comparable(a: &Ty, b: &Ty) -> bool {
    let numeric = |t: &Ty| matches!(t, Ty::Int | Ty::Double);
    let nullable =
        |t: &Ty| matches!(t, Ty::Object(_) | Ty::List(..) | Ty::Map(..) | Ty::Timestamp | Ty::Duration);
    a.name() == b.name()
        || matches!(a, Ty::Dyn(_))
        || matches!(b, Ty::Dyn(_))
        || (numeric(a) && numeric(b))
        || (matches!(a, Ty::Null) && nullable(b))
        || (matches!(b, Ty::Null) && nullable(a))
}

/// CEL's escaping of a property name into an identifier (`cel.Escape`), `None` when it has none.
pub fn escape(name: &str) -> Option<String> {
    const RESERVED: [&str; 21] = [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut escaped = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                escaped.push_str("__underscores__");
            }
            '.' => escaped.push_str("__dot__"),
            '-' => escaped.push_str("__dash__"),
            '/' => escaped.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => escaped.push(c),
            _ => return None,
        }
    }
    Some(escaped)
}

struct Coster<'a> {
    vars: Vec<(String, Ty<'a>)>,
    unbounded: Vec<String>,
}

impl<'a> Coster<'a> {
    fn cost(&mut self, expr: &Expr) -> Result<(u64, Ty<'a>), String> {
        match expr {
            Expr::Literal(literal) => Ok((0, literal_ty(literal))),
            Expr::Ident(name) => {
                let ty = self.vars.iter().rev().find(|(var, _)| var == name).map(|(_, ty)| ty.clone());
                Ok((1, ty.ok_or_else(|| format!("undeclared reference to '{name}'"))?))
            }
            Expr::Select(select) => self.select(select),
            Expr::Call(call) => self.call(call),
            Expr::List(list) => {
                let mut cost = LIST_CREATE;
                let mut elem = None;
                for element in &list.elements {
                    let (c, ty) = self.cost(&element.expr)?;
                    cost = cost.saturating_add(c);
                    elem = Some(match elem {
                        Some(e) => union(e, ty),
                        None => ty,
                    });
                }
                let elem = elem.unwrap_or(Ty::Dyn(Len::of(0)));
                Ok((cost, Ty::List(Len::of(list.elements.len() as u64), Box::new(elem))))
            }
            Expr::Map(map) => {
                let mut cost = MAP_CREATE;
                let mut elem = Ty::Dyn(Len::of(0));
                for entry in &map.entries {
                    let EntryExpr::MapEntry(entry) = &entry.expr else {
                        return Err("message literals are not CEL for CRDs".into());
                    };
                    let (key_cost, _) = self.cost(&entry.key.expr)?;
                    let (value_cost, value) = self.cost(&entry.value.expr)?;
                    cost = cost.saturating_add(key_cost).saturating_add(value_cost);
                    elem = union(elem, value);
                }
                Ok((cost, Ty::Map(Len::of(map.entries.len() as u64), Box::new(elem))))
            }
            Expr::Comprehension(comprehension) => self.comprehension(comprehension),
            Expr::Struct(_) | Expr::Unspecified => Err("message literals are not CEL for CRDs".into()),
        }
    }

    fn select(&mut self, select: &SelectExpr) -> Result<(u64, Ty<'a>), String> {
        let (cost, operand) = self.cost(&select.operand.expr)?;
        let field = &select.field;
        let ty = match &operand {
            Ty::Object(schema) => {
                let (_, property) = properties(schema)
                    .find(|(name, _)| escape(name).as_deref() == Some(field))
                    .ok_or_else(|| format!("undefined field '{field}'"))?;
                Ty::of_schema(property)
                    .ok_or_else(|| format!("undefined field '{field}' (no type CEL can see)"))?
            }
            Ty::Map(_, values) => (**values).clone(),
            Ty::Dyn(_) => Ty::Dyn(Len::fallback(MAX_REQUEST_SIZE_BYTES)),
            other => return Err(format!("type '{}' does not support field selection", other.name())),
        };
        Ok((cost.saturating_add(1), if select.test { Ty::Bool } else { ty }))
    }

    fn call(&mut self, call: &CallExpr) -> Result<(u64, Ty<'a>), String> {
        let name = call.func_name.as_str();
        let mut operands = Vec::new();
        let mut costs = Vec::new();
        for expr in call.target.iter().map(|t| &t.expr).chain(call.args.iter().map(|a| &a.expr)) {
            let (cost, ty) = self.cost(expr)?;
            costs.push(cost);
            operands.push(ty);
        }
        let sum = |costs: &[u64]| costs.iter().fold(0u64, |a, c| a.saturating_add(*c));
        let wrong_arity =
            || format!("found no matching overload for '{name}' with {} operands", operands.len());
        match (name, operands.as_slice(), costs.as_slice()) {
            ("_?_:_", [condition, yes, no], [c, y, n]) => {
                if !condition.is_bool() {
                    return Err(format!("the condition of '?:' is a '{}', not a bool", condition.name()));
                }
                Ok((c.saturating_add(*y.max(n)), union(yes.clone(), no.clone())))
            }
            ("_?_:_", ..) => Err(wrong_arity()),
            ("_&&_" | "_||_" | "!_", ..) => {
                if let Some(ty) = operands.iter().find(|t| !t.is_bool()) {
                    return Err(format!(
                        "found no matching overload for '{name}' applied to a '{}'",
                        ty.name()
                    ));
                }
                Ok((sum(&costs).saturating_add(u64::from(name == "!_")), Ty::Bool))
            }
            _ => {
                let (cost, ty) = self.function(name, &operands).map_err(|e| e.unwrap_or_else(wrong_arity))?;
                Ok((sum(&costs).saturating_add(cost), ty))
            }
        }
    }

    /// Charges a traversal of `len` bytes or items, and notes it when the schema sets no bound.
    fn traverse(&mut self, what: &str, len: Len, factor: f64) -> u64 {
        if !len.declared {
            self.unbounded.push(format!("{what} traverses a value no maxLength/maxItems bounds"));
        }
        scaled(len.max, factor)
    }

    /// The cost of one function (beyond its operands) and its result. `Err(None)` is a wrong
    /// number of operands.
    fn function(&mut self, name: &str, operands: &[Ty<'a>]) -> Result<(u64, Ty<'a>), Option<String>> {
        let string = |i: usize| -> Result<Len, Option<String>> {
            match operands.get(i) {
                Some(ty) if ty.is_string() => Ok(ty.size()),
                Some(ty) => {
                    Err(Some(format!("found no matching overload for '{name}' applied to a '{}'", ty.name())))
                }
                None => Err(None),
            }
        };
        let list = |i: usize| -> Result<(Len, Ty<'a>), Option<String>> {
            match operands.get(i) {
                Some(Ty::List(len, elem)) => Ok((*len, (**elem).clone())),
                Some(Ty::Dyn(_)) => Ok((Len::fallback(u64::MAX), Ty::Dyn(Len::fallback(u64::MAX)))),
                Some(ty) => {
                    Err(Some(format!("found no matching overload for '{name}' applied to a '{}'", ty.name())))
                }
                None => Err(None),
            }
        };
        let operand = |i: usize| operands.get(i).cloned().ok_or(None);
        Ok(match name {
            "@not_strictly_false" | "-_" | "_-_" | "_*_" | "_/_" | "_%_" => (1, operand(0)?),
            "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" => {
                let (a, b) = (operand(0)?, operand(1)?);
                if !comparable(&a, &b) {
                    return Err(Some(format!(
                        "found no matching overload for '{name}' applied to '({}, {})'",
                        a.name(),
                        b.name()
                    )));
                }
                let ordering = !matches!(name, "_==_" | "_!=_");
                let traversed = !ordering || (a.is_string() && b.is_string());
                let shorter = if a.size().max <= b.size().max { a.size() } else { b.size() };
                let cost = if traversed { self.traverse(name, shorter, STRING_TRAVERSAL) } else { 1 };
                (cost.max(1), Ty::Bool)
            }
            "_+_" => match (operand(0)?, operand(1)?) {
                (Ty::Str(a), Ty::Str(b)) => {
                    let len = a.plus(b);
                    (self.traverse(name, len, STRING_TRAVERSAL), Ty::Str(len))
                }
                (Ty::Bytes(a), Ty::Bytes(b)) => {
                    let len = a.plus(b);
                    (self.traverse(name, len, STRING_TRAVERSAL), Ty::Bytes(len))
                }
                (Ty::List(a, e), Ty::List(b, f)) => (1, Ty::List(a.plus(b), Box::new(union(*e, *f)))),
                (a, _) => (1, a),
            },
            "_[_]" => match (operand(0)?, operand(1)?) {
                (Ty::List(_, elem), Ty::Int | Ty::Dyn(_)) | (Ty::Map(_, elem), Ty::Str(_) | Ty::Dyn(_)) => {
                    (1, *elem)
                }
                (Ty::Dyn(_), _) => (1, Ty::Dyn(Len::fallback(MAX_REQUEST_SIZE_BYTES))),
                (a, b) => {
                    return Err(Some(format!(
                        "found no matching overload for '_[_]' applied to '({}, {})'",
                        a.name(),
                        b.name()
                    )));
                }
            },
            "@in" => {
                let (len, _) = list(1).or_else(|_| match operand(1)? {
                    Ty::Map(len, elem) => Ok((len, *elem)),
                    _ => list(1),
                })?;
                (self.traverse("in", len, 1.0), Ty::Bool)
            }
            "size" => match operand(0)? {
                Ty::Str(_) | Ty::Bytes(_) | Ty::List(..) | Ty::Map(..) | Ty::Dyn(_) => (1, Ty::Int),
                other => {
                    return Err(Some(format!(
                        "found no matching overload for 'size' applied to a '{}'",
                        other.name()
                    )));
                }
            },
            "contains" => {
                let (haystack, needle) = (string(0)?, string(1)?);
                let cost = self.traverse(name, haystack, STRING_TRAVERSAL);
                (cost.saturating_mul(scaled(needle.max, STRING_TRAVERSAL)), Ty::Bool)
            }
            "startsWith" | "endsWith" => {
                string(0)?;
                (self.traverse(name, string(1)?, STRING_TRAVERSAL), Ty::Bool)
            }
            "matches" | "find" | "findAll" => {
                let (text, regex) = (string(0)?, string(1)?);
                let text_cost = self.traverse(name, text.plus(Len::of(1)), STRING_TRAVERSAL);
                let cost = text_cost.saturating_mul(scaled(regex.max, REGEX_STRING_LENGTH));
                let ty = match name {
                    "matches" => Ty::Bool,
                    "find" => Ty::Str(text),
                    _ => Ty::List(text, Box::new(Ty::Str(text))),
                };
                (cost, ty)
            }
            "lowerAscii" | "upperAscii" | "trim" | "substring" => {
                let text = string(0)?;
                (self.traverse(name, text, STRING_TRAVERSAL), Ty::Str(text))
            }
            "replace" => {
                let (text, with) = (string(0)?, string(2)?);
                // Worst case: the replacement lands around every character.
                let replaced =
                    Len { max: text.max.saturating_add(1).saturating_mul(with.max.max(1)), ..text };
                (self.traverse(name, text, 2.0 * STRING_TRAVERSAL), Ty::Str(replaced.plus(text)))
            }
            "split" => {
                let text = string(0)?;
                (self.traverse(name, text, 2.0 * STRING_TRAVERSAL), Ty::List(text, Box::new(Ty::Str(text))))
            }
            "join" => {
                let (len, elem) = list(0)?;
                let separators = operands.get(1).map_or(Len::of(0), Ty::size);
                let joined = Len {
                    max: len.max.saturating_mul(elem.size().max.saturating_add(separators.max)),
                    declared: len.declared && elem.size().declared,
                };
                (self.traverse(name, joined, STRING_TRAVERSAL), Ty::Str(joined))
            }
            "indexOf" | "lastIndexOf" | "isSorted" | "sum" | "min" | "max" => {
                let result = match name {
                    "isSorted" => Ty::Bool,
                    "indexOf" | "lastIndexOf" => Ty::Int,
                    _ => list(0).map(|(_, elem)| elem).unwrap_or(Ty::Int),
                };
                if let Some(Ty::Str(text)) = operands.first() {
                    (self.traverse(name, *text, STRING_TRAVERSAL), result)
                } else {
                    let (len, elem) = list(0)?;
                    let per_item =
                        1 + if elem.is_string() { scaled(elem.size().max, STRING_TRAVERSAL) } else { 0 };
                    (self.traverse(name, len, 1.0).saturating_mul(per_item), result)
                }
            }
            "url" | "isURL" | "quantity" | "isQuantity" | "ip" | "isIP" | "cidr" | "isCIDR" => {
                let text = string(operands.len().saturating_sub(1))?;
                let result = if name.starts_with("is") { Ty::Bool } else { Ty::Dyn(text) };
                (self.traverse(name, text, STRING_TRAVERSAL), result)
            }
            "string" | "bytes" => {
                let input = operand(0)?;
                let cost = match input {
                    Ty::Str(len) | Ty::Bytes(len) => self.traverse(name, len, STRING_TRAVERSAL),
                    _ => 1,
                };
                let len = input.size().or(Len::of(32));
                (cost, if name == "string" { Ty::Str(len) } else { Ty::Bytes(len) })
            }
            "int" | "uint" => (1, Ty::Int),
            "double" => (1, Ty::Double),
            "bool" => (1, Ty::Bool),
            "duration" => (1, Ty::Duration),
            "timestamp" => (1, Ty::Timestamp),
            "dyn" | "type" => (1, Ty::Dyn(operand(0)?.size())),
            _ => {
                return Err(Some(format!(
                    "no cost model for function '{name}': add its cost (cel-go's checker/cost.go, \
                     Kubernetes' library/cost.go) to tests/crds/crd_apiserver_rules/cost.rs"
                )));
            }
        })
    }

    fn comprehension(&mut self, comprehension: &ComprehensionExpr) -> Result<(u64, Ty<'a>), String> {
        let (range_cost, range) = self.cost(&comprehension.iter_range.expr)?;
        let (init_cost, init) = self.cost(&comprehension.accu_init.expr)?;
        let (count, key, value) = match range {
            Ty::List(len, elem) => (len, Ty::Int, *elem),
            // The API server sizes map keys 0 (its string key type has no bound), so scanning
            // them costs nothing; and as no schema keyword can bound them, the project rule on
            // bounds leaves them be.
            Ty::Map(len, elem) => (len, Ty::Str(Len::of(0)), *elem),
            Ty::Dyn(_) => {
                let unknown = Ty::Dyn(Len::fallback(u64::MAX));
                (Len::fallback(u64::MAX), unknown.clone(), unknown)
            }
            other => return Err(format!("cannot iterate over a '{}'", other.name())),
        };
        if !count.declared {
            self.unbounded
                .push(format!("a comprehension iterates up to {} items no maxItems bounds", count.max));
        }
        let accumulator = match &init {
            Ty::List(..) => Ty::List(count, Box::new(value.clone())),
            other => other.clone(),
        };
        let vars = self.vars.len();
        self.vars.push((comprehension.accu_var.clone(), accumulator));
        let single = if matches!(key, Ty::Str(_)) { key.clone() } else { value.clone() };
        match &comprehension.iter_var2 {
            Some(second) => {
                self.vars.push((comprehension.iter_var.clone(), key));
                self.vars.push((second.clone(), value));
            }
            None => self.vars.push((comprehension.iter_var.clone(), single)),
        }
        let (condition_cost, _) = self.cost(&comprehension.loop_cond.expr)?;
        let (step_cost, step) = self.cost(&comprehension.loop_step.expr)?;
        self.vars.truncate(vars + 1);
        let (result_cost, result) = self.cost(&comprehension.result.expr)?;
        self.vars.truncate(vars);
        let loop_cost = count.max.saturating_mul(condition_cost.saturating_add(step_cost));
        let cost = range_cost.saturating_add(init_cost).saturating_add(loop_cost).saturating_add(result_cost);
        let ty = match (init, step) {
            (Ty::List(..), Ty::List(_, elem)) => Ty::List(count, elem),
            _ => result,
        };
        Ok((cost, ty))
    }
}

fn literal_ty<'a>(literal: &LiteralValue) -> Ty<'a> {
    match literal {
        LiteralValue::Boolean(_) => Ty::Bool,
        LiteralValue::Int(_) | LiteralValue::UInt(_) => Ty::Int,
        LiteralValue::Double(_) => Ty::Double,
        LiteralValue::Null => Ty::Null,
        LiteralValue::String(s) => Ty::Str(Len::of(s.inner().chars().count() as u64)),
        LiteralValue::Bytes(b) => Ty::Bytes(Len::of(b.inner().len() as u64)),
    }
}
