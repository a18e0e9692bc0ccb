//! The rule engine: defaulting and validation for Foo, Envoy and EnvoyRoute. Pure functions over the
//! typed objects, and the single source of truth that the admission webhooks, the reconcilers
//! and the offline CLI all call.
//!
//! Update policy (what may change after creation):
//! - `Foo.spec.deploymentName` may change; the warning says the Deployment is replaced (the
//!   reconciler creates the new one and deletes the old one it controls).
//! - `Envoy.spec.name` is immutable: it names the Service that clients address, so a rename
//!   would silently move traffic. The CRD enforces it too (CEL `self == oldSelf`).
//! - `Envoy.spec.configMapName`, `spec.xds` and `spec.image` may change; the warning says the
//!   proxies are rolled.
//! - Scaling to zero is allowed with a warning.
//! - Every field of an EnvoyRoute may change.

pub mod envoy;
mod field;
pub mod foo;
pub mod format;
pub mod quantity;
pub mod re2;
pub mod route;

use std::ops::Deref;

pub use field::{FieldError, FieldErrorKind, FieldErrors, MAX_LISTED_ERRORS};

/// Allowed-but-notable things about an object, shown by `kubectl` as `Warning: …`.
pub type Warnings = Vec<String>;

/// Defaulting and validation of one kind.
pub trait Rules: Sized {
    /// Every defaulted field of the kind, resolved: what the builders of children and status
    /// read, so none of them ever falls back to a default of its own.
    type Effective: Clone + std::fmt::Debug + PartialEq;

    /// Fills every unset field that has a default and returns the resolved values.
    /// Idempotent: a second call changes nothing.
    fn apply_defaults(&mut self) -> Self::Effective;

    /// Validates an object (already defaulted) on create (`old` is `None`) or update.
    fn validate(&self, old: Option<&Self>) -> Result<Warnings, FieldErrors>;
}

/// An object the rule engine has defaulted, with its [`Rules::Effective`] values. Only
/// [`defaulted`] makes one, so whoever takes a `Defaulted<K>` knows every default is in place.
#[derive(Clone, Debug, PartialEq)]
pub struct Defaulted<K: Rules> {
    object: K,
    effective: K::Effective,
}

/// Applies `object`'s defaults.
pub fn defaulted<K: Rules>(mut object: K) -> Defaulted<K> {
    let effective = object.apply_defaults();
    Defaulted { object, effective }
}

impl<K: Rules> Defaulted<K> {
    /// The resolved value of every defaulted field.
    pub fn effective(&self) -> &K::Effective {
        &self.effective
    }

    pub fn into_inner(self) -> K {
        self.object
    }
}

impl<K: Rules> Deref for Defaulted<K> {
    type Target = K;

    fn deref(&self) -> &K {
        &self.object
    }
}

/// Checks that `value` is within `0..=MAX_REPLICAS`.
fn check_replicas(errors: &mut FieldErrors, path: &str, value: Option<i32>) {
    let Some(replicas) = value else { return };
    if replicas < 0 {
        errors.push(FieldError::invalid(path, replicas, "must be greater than or equal to 0"));
    } else if replicas > crate::api::MAX_REPLICAS {
        errors.push(FieldError::invalid(
            path,
            replicas,
            format!("must be less than or equal to {}", crate::api::MAX_REPLICAS),
        ));
    }
}

/// Longest label value: an object's name that becomes one must fit.
pub const MAX_LABEL_VALUE: usize = 63;

/// Checks that an object's name fits in a label value; `becomes` says which label.
fn check_name_fits_label(errors: &mut FieldErrors, name: Option<&str>, becomes: &str) {
    if let Some(name) = name
        && name.len() > MAX_LABEL_VALUE
    {
        errors.push(FieldError::invalid(
            "metadata.name",
            name,
            format!(
                "must be no more than {MAX_LABEL_VALUE} characters: the name is the label value {becomes}"
            ),
        ));
    }
}

/// Adds one `Invalid` error per reason a syntax check gave.
fn check_format(errors: &mut FieldErrors, path: &str, value: &str, reasons: Vec<String>) {
    if !reasons.is_empty() {
        errors.push(FieldError::invalid(path, value, reasons.join(", ")));
    }
}
