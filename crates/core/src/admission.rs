//! Admission of raw objects: the rule engine applied to the JSON the API server (or a file)
//! holds. The object is first checked against the CRD's schema ([`structural`]), so a field of
//! the wrong type is reported in the API server's words next to every other error; defaults
//! become a JSON Patch computed against the raw object, so fields this build does not know are
//! never dropped; validation yields warnings or field errors. The webhook server and the
//! `check` command both call [`admit`].

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, ReplaceOperation};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::{Envoy, EnvoyRoute, Foo};
use crate::kind::AdmittedKind;
use crate::rules::{Defaulted, FieldError, FieldErrors, Rules, Warnings, defaulted};
use crate::structural::{self, Structure};

/// What admission does with each kind.
impl AdmittedKind {
    /// Fields of `object` this kind's schema does not declare (e.g. a misspelt `replica`),
    /// as paths. The API server drops them, or refuses the object under `kubectl apply`'s
    /// default strict field validation.
    pub fn unknown_fields(self, object: &Value) -> Vec<String> {
        match self {
            Self::Foo => unknown_fields::<Foo>(object),
            Self::Envoy => unknown_fields::<Envoy>(object),
            Self::EnvoyRoute => unknown_fields::<EnvoyRoute>(object),
        }
    }

    /// Defaults and validates `object` (and `old_object` on update) as this kind.
    pub fn admit(self, object: &Value, old_object: Option<&Value>) -> Admission {
        match self {
            Self::Foo => admit::<Foo>(object, old_object),
            Self::Envoy => admit::<Envoy>(object, old_object),
            Self::EnvoyRoute => admit::<EnvoyRoute>(object, old_object),
        }
    }

    /// The defaults part of [`admit`](Self::admit) alone; see [`default_patch`].
    pub fn default_patch(self, object: &Value) -> Result<Patch, FieldErrors> {
        match self {
            Self::Foo => default_patch::<Foo>(object),
            Self::Envoy => default_patch::<Envoy>(object),
            Self::EnvoyRoute => default_patch::<EnvoyRoute>(object),
        }
    }

    /// The verdict part of [`admit`](Self::admit) alone; see [`validate`].
    pub fn validate(
        self,
        object: &Value,
        old_object: Option<&Value>,
    ) -> Result<Result<Warnings, FieldErrors>, FieldErrors> {
        match self {
            Self::Foo => validate::<Foo>(object, old_object),
            Self::Envoy => validate::<Envoy>(object, old_object),
            Self::EnvoyRoute => validate::<EnvoyRoute>(object, old_object),
        }
    }
}

/// A kind the operator admits: the rule engine's kinds, with their place in [`AdmittedKind`].
pub trait Admitted: Rules + Serialize + DeserializeOwned {
    const KIND: AdmittedKind;
}

impl Admitted for Foo {
    const KIND: AdmittedKind = AdmittedKind::Foo;
}

impl Admitted for Envoy {
    const KIND: AdmittedKind = AdmittedKind::Envoy;
}

impl Admitted for EnvoyRoute {
    const KIND: AdmittedKind = AdmittedKind::EnvoyRoute;
}

/// What admission made of one object.
#[derive(Debug, Clone)]
pub struct Admission {
    /// Operations that add the defaults to the raw object; empty when it is already defaulted
    /// or cannot be read.
    pub patch: Patch,
    /// The raw object with the patch applied.
    pub defaulted: Value,
    /// Warnings when the defaulted object is valid, every field error when it is not.
    pub verdict: Result<Warnings, FieldErrors>,
    /// Whether the object could be read as its kind: false when a field has the wrong type,
    /// an unsupported value or is missing (the verdict lists those with every other error).
    pub readable: bool,
}

impl Admission {
    pub fn is_allowed(&self) -> bool {
        self.verdict.is_ok()
    }
}

/// An object read as `K` through structural validation: the typed, defaulted object, or
/// every error when it cannot be read (structural errors first, then the rules' own).
struct Read<'a, K: Rules> {
    typed: Defaulted<K>,
    structure: Structure<'a>,
}

fn read<K: Admitted>(object: &Value) -> Result<Read<'_, K>, FieldErrors> {
    let structure = structural::check(K::KIND, object);
    match parse::<K>(&structure.cleaned) {
        Ok(typed) => Ok(Read { typed: defaulted(typed), structure }),
        Err(error) => {
            let mut errors = structure.errors;
            errors.push(*error);
            Err(FieldErrors(errors))
        }
    }
}

impl<K: Rules> Read<'_, K> {
    fn readable(&self) -> bool {
        self.structure.errors.is_empty()
    }

    /// The rules' verdict, with the structural errors in front.
    fn verdict(&self, old: Option<&K>) -> Result<Warnings, FieldErrors> {
        match self.typed.validate(old) {
            Ok(warnings) if self.readable() => Ok(warnings),
            Ok(_) => Err(self.structure.merge(FieldErrors::default())),
            Err(errors) => Err(self.structure.merge(errors)),
        }
    }
}

/// Defaults then validates a raw object of kind `K`; `old_object` is the stored object on update.
pub fn admit<K: Admitted>(object: &Value, old_object: Option<&Value>) -> Admission {
    let unread =
        |verdict| Admission { patch: Patch(Vec::new()), defaulted: object.clone(), verdict, readable: false };
    let read = match read::<K>(object) {
        Ok(read) => read,
        Err(errors) => return unread(Err(errors)),
    };
    let verdict = read.verdict(old_typed::<K>(old_object).as_deref());
    if !read.readable() {
        return unread(verdict);
    }
    let (patch, defaulted) = defaults_of(object, &*read.typed);
    Admission { patch, defaulted, verdict, readable: true }
}

/// Only the defaults of [`admit`], as a patch: for callers that validate elsewhere (the
/// mutating webhook). `Err` with every error when the object cannot be read as `K`.
pub fn default_patch<K: Admitted>(object: &Value) -> Result<Patch, FieldErrors> {
    let read = read::<K>(object)?;
    if !read.readable() {
        return Err(read.verdict(None).err().unwrap_or_default());
    }
    Ok(defaults_patch(object, &*read.typed))
}

/// Only the verdict of [`admit`], without computing the patch: for callers that do not
/// need it (the validating webhook). The outer `Err` is an object that cannot be read as `K`,
/// with every error; the inner result is the verdict on the defaulted object.
pub fn validate<K: Admitted>(
    object: &Value,
    old_object: Option<&Value>,
) -> Result<Result<Warnings, FieldErrors>, FieldErrors> {
    let read = read::<K>(object)?;
    let verdict = read.verdict(old_typed::<K>(old_object).as_deref());
    if read.readable() { Ok(verdict) } else { Err(verdict.err().unwrap_or_default()) }
}

/// A defaulted, valid object of kind `K` with its warnings, or every error: what `render`
/// builds children from.
pub fn defaulted_valid<K: Admitted>(object: &Value) -> Result<(Defaulted<K>, Warnings), FieldErrors> {
    let read = read::<K>(object)?;
    let warnings = read.verdict(None)?;
    Ok((read.typed, warnings))
}

/// The stored object on update, defaulted. One that no longer reads (e.g. written before a
/// schema change) is validated as if created: the update rules need a readable old object.
fn old_typed<K: Admitted>(old_object: Option<&Value>) -> Option<Defaulted<K>> {
    read::<K>(old_object?).ok().filter(Read::readable).map(|read| read.typed)
}

/// The patch adding `typed`'s defaults to the raw `object`, and the patched object.
fn defaults_of<K: Serialize>(object: &Value, typed: &K) -> (Patch, Value) {
    let patch = defaults_patch(object, typed);
    let mut patched = object.clone();
    match json_patch::patch(&mut patched, &patch) {
        Ok(()) => (patch, patched),
        // The patch only adds where `object` has containers, so this cannot fail; if it ever
        // did, the object is admitted without defaults rather than with half of them.
        Err(_) => (Patch(Vec::new()), object.clone()),
    }
}

/// The patch adding `typed`'s defaults to the raw `object`, built without copying it.
fn defaults_patch<K: Serialize>(object: &Value, typed: &K) -> Patch {
    let mut operations = Vec::new();
    // Serializing plain data cannot fail; if it ever did, the object gets no defaults.
    if let Ok(with_defaults) = serde_json::to_value(typed) {
        absent_ops(object, &with_defaults, &mut PointerBuf::root(), &mut operations);
    }
    Patch(operations)
}

/// Parses a raw object, turning a type mismatch into a field error at its path.
pub fn parse<K: DeserializeOwned>(object: &Value) -> Result<K, Box<FieldError>> {
    serde_path_to_error::deserialize(object).map_err(|error| {
        let path = error.path().to_string();
        let pointer = pointer_of(error.path());
        let detail = error.into_inner().to_string();
        if let Some(field) = missing_field(&detail) {
            let parent = if path == "." { String::new() } else { format!("{path}.") };
            return Box::new(FieldError::required(format!("{parent}{field}"), ""));
        }
        let error = match object.pointer(&pointer) {
            Some(value) if path != "." => FieldError::invalid(path, value.clone(), detail),
            _ => {
                FieldError::invalid(if path == "." { "<root>".to_owned() } else { path }, Value::Null, detail)
            }
        };
        Box::new(error)
    })
}

fn unknown_fields<K: DeserializeOwned>(object: &Value) -> Vec<String> {
    let mut unknown = Vec::new();
    let parsed: Result<K, _> = serde_ignored::deserialize(object, |path| {
        let path = field_path(&path);
        // ObjectMeta and the status are the API server's; only our own schema is checked.
        if !(path.starts_with("metadata")
            || path.starts_with("status")
            || path == "apiVersion"
            || path == "kind")
        {
            unknown.push(path);
        }
    });
    if parsed.is_err() {
        return Vec::new(); // A type error is reported by `admit` instead.
    }
    unknown
}

/// A path as the API server writes it: `spec.ports[0].protocol`.
fn field_path(path: &serde_ignored::Path) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", field_path(parent)),
        Path::Map { parent, key } => match field_path(parent) {
            parent if parent.is_empty() => key.clone(),
            parent => format!("{parent}.{key}"),
        },
        Path::Some { parent } | Path::NewtypeStruct { parent } | Path::NewtypeVariant { parent } => {
            field_path(parent)
        }
    }
}

/// The field serde's "missing field `x`" message names.
fn missing_field(detail: &str) -> Option<&str> {
    detail.strip_prefix("missing field `")?.split('`').next()
}

fn pointer_of(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut pointer = String::new();
    for segment in path.iter() {
        pointer.push('/');
        match segment {
            Segment::Seq { index } => pointer.push_str(&index.to_string()),
            Segment::Map { key } => pointer.push_str(&key.replace('~', "~0").replace('/', "~1")),
            Segment::Enum { variant } => pointer.push_str(variant),
            Segment::Unknown => pointer.push('?'),
        }
    }
    pointer
}

/// The operations that copy into `base` what `top` has and `base` lacks (absent or null),
/// recursing into objects and same-length arrays; an empty array takes `top`'s whole. Values
/// `base` already holds are never changed, so defaulting can only add.
fn absent_ops(base: &Value, top: &Value, at: &mut PointerBuf, operations: &mut Vec<PatchOperation>) {
    match (base, top) {
        (Value::Object(base), Value::Object(top)) => {
            for (key, top_value) in top {
                at.push_back(key.as_str());
                match base.get(key) {
                    Some(base_value) if !base_value.is_null() => {
                        absent_ops(base_value, top_value, at, operations)
                    }
                    // Null stays null: nothing to change.
                    Some(_) if top_value.is_null() => {}
                    // `add` sets a member whether it is absent or null (RFC 6902).
                    _ => operations.push(PatchOperation::Add(AddOperation {
                        path: at.clone(),
                        value: top_value.clone(),
                    })),
                }
                at.pop_back();
            }
        }
        (Value::Array(base), Value::Array(top)) if base.is_empty() && !top.is_empty() => {
            operations.push(PatchOperation::Replace(ReplaceOperation {
                path: at.clone(),
                value: Value::Array(top.clone()),
            }));
        }
        (Value::Array(base), Value::Array(top)) if base.len() == top.len() => {
            for (index, (base_item, top_item)) in base.iter().zip(top).enumerate() {
                at.push_back(index);
                absent_ops(base_item, top_item, at, operations);
                at.pop_back();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn absent_ops_only_add() {
        let mut base =
            json!({"a": 1, "b": null, "c": {"x": "keep"}, "d": [], "e": [{"k": 1}], "g": null, "a/b~": {}});
        let top = json!({"a": 2, "b": 3, "c": {"x": "replace", "y": true}, "d": [9], "e": [{"k": 2, "n": 0}], "f": "new", "g": null, "a/b~": {"z": 1}});
        let mut operations = Vec::new();
        absent_ops(&base, &top, &mut PointerBuf::root(), &mut operations);
        let patch = Patch(operations);
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!([
                {"op": "add", "path": "/b", "value": 3},
                {"op": "add", "path": "/c/y", "value": true},
                {"op": "replace", "path": "/d", "value": [9]},
                {"op": "add", "path": "/e/0/n", "value": 0},
                {"op": "add", "path": "/f", "value": "new"},
                {"op": "add", "path": "/a~1b~0/z", "value": 1},
            ])
        );
        json_patch::patch(&mut base, &patch).unwrap();
        assert_eq!(
            base,
            json!({"a": 1, "b": 3, "c": {"x": "keep", "y": true}, "d": [9], "e": [{"k": 1, "n": 0}], "g": null, "a/b~": {"z": 1}, "f": "new"})
        );
        let mut again = Vec::new();
        absent_ops(&base, &top, &mut PointerBuf::root(), &mut again);
        assert!(again.is_empty(), "a defaulted object needs no patch");
    }

    #[test]
    fn type_mismatch_names_the_field() {
        let object = json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
            "metadata": {"name": "x"}, "spec": {"replicas": "three"}});
        let admission = admit::<Foo>(&object, None);
        let errors = admission.verdict.unwrap_err();
        assert_eq!(errors.0.len(), 1);
        assert_eq!(errors.0[0].path, "spec.replicas");
        // As the API server says it: the value's type, not the value.
        assert_eq!(errors.0[0].value, Some(json!("string")));
        assert!(admission.patch.0.is_empty());
        assert!(!admission.readable);
    }

    #[test]
    fn a_type_error_does_not_hide_the_other_errors() {
        let object = json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
            "metadata": {"name": "x"}, "spec": {"replicas": "three", "deploymentName": "Bad_Name"}});
        let errors = admit::<Foo>(&object, None).verdict.unwrap_err();
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["spec.replicas", "spec.deploymentName"]);
        let envoy = json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {"name": "x"},
            "spec": {"serviceType": "Headless", "replicas": -1}});
        let errors = AdmittedKind::Envoy.validate(&envoy, None).unwrap_err();
        assert_eq!(
            errors.to_string(),
            "spec.serviceType: Unsupported value: \"Headless\": supported values: \"ClusterIP\", \"NodePort\", \"LoadBalancer\", spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        );
    }

    #[test]
    fn a_missing_spec_is_defaulted_like_an_empty_one() {
        let object = json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": {"name": "x"}});
        let admission = admit::<Foo>(&object, None);
        assert_eq!(admission.verdict, Ok(vec![]));
        assert_eq!(admission.defaulted["spec"], json!({"deploymentName": "x", "replicas": 1}));
        assert_eq!(
            serde_json::to_value(&admission.patch).unwrap(),
            json!([{"op": "add", "path": "/spec", "value": {"deploymentName": "x", "replicas": 1}}])
        );
    }

    #[test]
    fn known_kinds_at_unserved_versions_are_errors() {
        assert_eq!(AdmittedKind::resolve("example.com/v1", "Envoy"), Ok(Some(AdmittedKind::Envoy)));
        assert_eq!(AdmittedKind::resolve("example.com/v1", "EnvoyRoute"), Ok(Some(AdmittedKind::EnvoyRoute)));
        let error = AdmittedKind::resolve("example.com/v1", "Envoyroute").unwrap_err();
        assert!(error.contains("did you mean EnvoyRoute (example.com/v1)"), "{error}");
        assert_eq!(AdmittedKind::resolve("v1", "ConfigMap"), Ok(None));
        assert_eq!(AdmittedKind::resolve("widgets.io/v1", "Foo"), Ok(None), "another group's Foo");
        let error = AdmittedKind::resolve("samplecontroller.k8s.io/v1", "Foo").unwrap_err();
        assert!(
            error.starts_with(
                "Foo is served as samplecontroller.k8s.io/v1alpha1, not samplecontroller.k8s.io/v1"
            ),
            "{error}"
        );
        let error = AdmittedKind::resolve("samplecontroller.k8s.io/v1alpha1", "foo").unwrap_err();
        assert!(error.contains("did you mean Foo (samplecontroller.k8s.io/v1alpha1)"), "{error}");
    }

    #[test]
    fn unknown_fields_are_named() {
        let object = json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
            "metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {"replica": 3, "deploymentName": "x"},
            "status": {"whatever": 1}});
        assert_eq!(AdmittedKind::Foo.unknown_fields(&object), ["spec.replica"]);
        let envoy = json!({"apiVersion": "example.com/v1", "kind": "Envoy", "metadata": {"name": "e"},
            "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP"}], "xds": {"host": "x", "port": 1, "tls": true}}});
        assert_eq!(AdmittedKind::Envoy.unknown_fields(&envoy), ["spec.ports[0].protocol", "spec.xds.tls"]);
    }

    #[test]
    fn missing_required_field_is_required_at_its_path() {
        let object = json!({"apiVersion": "example.com/v1", "kind": "Envoy",
            "metadata": {"name": "x"}, "spec": {"xds": {"port": 19000}}});
        let errors = admit::<Envoy>(&object, None).verdict.unwrap_err();
        assert_eq!(errors.to_string(), "spec.xds.host: Required value");
    }

    #[test]
    fn the_parts_agree_with_admit() {
        let objects = [
            json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": {"name": "x"}, "spec": {}}),
            json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": {"name": "x"}, "spec": {"replicas": -1}}),
            json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": {"name": "x"}, "spec": {"replicas": "three"}}),
        ];
        let old = json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "metadata": {"name": "x"}, "spec": {"deploymentName": "y"}});
        for object in &objects {
            let admission = AdmittedKind::Foo.admit(object, Some(&old));
            match (AdmittedKind::Foo.default_patch(object), AdmittedKind::Foo.validate(object, Some(&old))) {
                (Ok(patch), Ok(verdict)) => {
                    assert_eq!(patch, admission.patch);
                    assert_eq!(verdict, admission.verdict);
                }
                (Err(error), Err(same)) => {
                    assert_eq!(error, same);
                    assert_eq!(admission.verdict, Err(error));
                }
                other => panic!("the parts disagree: {other:?}"),
            }
        }
    }
}
