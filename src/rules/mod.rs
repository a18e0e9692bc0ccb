//! The rule engine: defaulting and validation for Foo and Envoy. Pure functions over the
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

pub mod envoy;
mod field;
pub mod foo;
pub mod format;

pub use field::{FieldError, FieldErrorKind, FieldErrors};

/// Allowed-but-notable things about an object, shown by `kubectl` as `Warning: …`.
pub type Warnings = Vec<String>;

/// Defaulting and validation of one kind.
pub trait Rules {
    /// Fill every unset field that has a default. Idempotent: a second call changes nothing.
    fn apply_defaults(&mut self);

    /// Validate an object (already defaulted) on create (`old` is `None`) or update.
    fn validate(&self, old: Option<&Self>) -> Result<Warnings, FieldErrors>;
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

/// Adds one `Invalid` error per reason a syntax check gave.
fn check_format(errors: &mut FieldErrors, path: &str, value: &str, reasons: Vec<String>) {
    if !reasons.is_empty() {
        errors.push(FieldError::invalid(path, value, reasons.join(", ")));
    }
}
