//! Field errors in the API server's shape: a path, a kind, the bad value and a message,
//! printed exactly as `kubectl` prints the API server's validation errors.

use std::fmt;

use serde_json::Value;

/// What is wrong with a field (the API server's `field.ErrorType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldErrorKind {
    Required,
    Invalid,
    /// A value outside the fixed set the field allows (`Unsupported value`).
    NotSupported,
    Duplicate,
    Forbidden,
}

/// One validation failure at one field.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// Dotted path with indices, e.g. `spec.ports[1].port`.
    pub path: String,
    pub kind: FieldErrorKind,
    /// The offending value; absent for `Required` and `Forbidden`.
    pub value: Option<Value>,
    pub detail: String,
}

impl FieldError {
    pub fn invalid(path: impl Into<String>, value: impl Into<Value>, detail: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            kind: FieldErrorKind::Invalid,
            value: Some(value.into()),
            detail: detail.into(),
        }
    }

    pub fn required(path: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { path: path.into(), kind: FieldErrorKind::Required, value: None, detail: detail.into() }
    }

    /// `value` is not one of `supported`, as the API server says of an enum.
    pub fn not_supported(path: impl Into<String>, value: impl Into<Value>, supported: Vec<Value>) -> Self {
        let supported: Vec<String> = supported.iter().map(Value::to_string).collect();
        Self {
            path: path.into(),
            kind: FieldErrorKind::NotSupported,
            value: Some(value.into()),
            detail: format!("supported values: {}", supported.join(", ")),
        }
    }

    pub fn duplicate(path: impl Into<String>, value: impl Into<Value>) -> Self {
        Self {
            path: path.into(),
            kind: FieldErrorKind::Duplicate,
            value: Some(value.into()),
            detail: String::new(),
        }
    }

    pub fn forbidden(path: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { path: path.into(), kind: FieldErrorKind::Forbidden, value: None, detail: detail.into() }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = self.value.as_ref().map(Value::to_string).unwrap_or_default();
        match self.kind {
            FieldErrorKind::Required => write!(f, "{}: Required value", self.path)?,
            FieldErrorKind::Invalid => write!(f, "{}: Invalid value: {value}", self.path)?,
            FieldErrorKind::NotSupported => write!(f, "{}: Unsupported value: {value}", self.path)?,
            FieldErrorKind::Duplicate => write!(f, "{}: Duplicate value: {value}", self.path)?,
            FieldErrorKind::Forbidden => write!(f, "{}: Forbidden", self.path)?,
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// Every field error of one object.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldErrors(pub Vec<FieldError>);

impl FieldErrors {
    pub fn push(&mut self, error: FieldError) {
        self.0.push(error);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &FieldError> {
        self.0.iter()
    }

    /// The API server's message for an invalid object, as `kubectl` prints it:
    /// `The Foo "x" is invalid: spec.replicas: Invalid value: -1: …`, or a bullet list when
    /// there is more than one error.
    pub fn message(&self, kind: &str, name: &str) -> String {
        match self.0.as_slice() {
            [one] => format!("The {kind} \"{name}\" is invalid: {one}"),
            many => {
                let mut message = format!("The {kind} \"{name}\" is invalid: ");
                for error in many {
                    message.push_str(&format!("\n* {error}"));
                }
                message
            }
        }
    }

    /// `Ok(())` when there are no errors.
    pub fn into_result(self) -> Result<(), FieldErrors> {
        if self.is_empty() { Ok(()) } else { Err(self) }
    }
}

impl fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join(", "))
    }
}

impl From<Vec<FieldError>> for FieldErrors {
    fn from(errors: Vec<FieldError>) -> Self {
        Self(errors)
    }
}
