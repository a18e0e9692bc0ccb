//! Field errors in the API server's shape: a path, a kind, the bad value and a message,
//! printed exactly as `kubectl` prints the API server's validation errors.

use std::fmt;

use serde_json::Value;

use crate::bounded;

/// Field errors listed in one message; more are counted ("and N more"), so an object with a
/// million bad items gets a short answer.
pub const MAX_LISTED_ERRORS: usize = 32;

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
        // The value as JSON, as the API server shows it, cut so that a huge value is not echoed.
        let value = self.value.as_ref().map(Value::to_string).unwrap_or_default();
        let value = bounded::echo(&value);
        // A path may hold a map key the client chose.
        let path = bounded::echo(&self.path);
        match self.kind {
            FieldErrorKind::Required => write!(f, "{path}: Required value")?,
            FieldErrorKind::Invalid => write!(f, "{path}: Invalid value: {value}")?,
            FieldErrorKind::NotSupported => write!(f, "{path}: Unsupported value: {value}")?,
            FieldErrorKind::Duplicate => write!(f, "{path}: Duplicate value: {value}")?,
            FieldErrorKind::Forbidden => write!(f, "{path}: Forbidden")?,
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", bounded::truncate(&self.detail, 4 * bounded::MAX_ECHO_CHARS))?;
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
    /// there is more than one error: at most [`MAX_LISTED_ERRORS`], then `and N more`.
    pub fn message(&self, kind: &str, name: &str) -> String {
        let name = bounded::echo(name);
        match self.0.as_slice() {
            [one] => format!("The {kind} \"{name}\" is invalid: {one}"),
            _ => {
                let mut message = format!("The {kind} \"{name}\" is invalid: ");
                for error in self.listed() {
                    message.push_str(&format!("\n* {error}"));
                }
                if let Some(left_out) = self.left_out() {
                    message.push_str(&format!("\n* and {left_out} more"));
                }
                message
            }
        }
    }

    /// The errors a message lists: the first [`MAX_LISTED_ERRORS`] less one when some are
    /// left out (the last line then counts them).
    pub fn listed(&self) -> &[FieldError] {
        match self.left_out() {
            None => &self.0,
            Some(_) => &self.0[..MAX_LISTED_ERRORS - 1],
        }
    }

    /// How many errors a message leaves out, if any.
    pub fn left_out(&self) -> Option<usize> {
        (self.0.len() > MAX_LISTED_ERRORS).then(|| self.0.len() - (MAX_LISTED_ERRORS - 1))
    }

    /// `Ok(())` when there are no errors.
    pub fn into_result(self) -> Result<(), FieldErrors> {
        if self.is_empty() { Ok(()) } else { Err(self) }
    }
}

impl fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = self.listed().iter().map(ToString::to_string).collect();
        if let Some(left_out) = self.left_out() {
            parts.push(format!("and {left_out} more"));
        }
        f.write_str(&parts.join(", "))
    }
}

impl From<Vec<FieldError>> for FieldErrors {
    fn from(errors: Vec<FieldError>) -> Self {
        Self(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_value_is_echoed_cut() {
        let error = FieldError::invalid("spec.deploymentName", "x".repeat(5 << 20), "too long");
        let text = error.to_string();
        assert!(text.len() < 300, "{} bytes", text.len());
        assert!(text.starts_with("spec.deploymentName: Invalid value: \"xxx"));
        assert!(text.ends_with("more bytes): too long"), "{text}");
    }

    #[test]
    fn a_long_list_of_errors_ends_with_a_count() {
        let errors: FieldErrors = (0..100_000)
            .map(|i| FieldError::invalid(format!("spec.ports[{i}].port"), 0, "must be between 1 and 65535"))
            .collect::<Vec<_>>()
            .into();
        let message = errors.message("Envoy", "e");
        assert_eq!(message.matches("\n* ").count(), MAX_LISTED_ERRORS);
        assert!(
            message.ends_with(&format!("\n* and {} more", 100_000 - (MAX_LISTED_ERRORS - 1))),
            "{message}"
        );
        assert_eq!(errors.listed().len(), MAX_LISTED_ERRORS - 1);
        assert!(errors.to_string().ends_with("more"));
        let few: FieldErrors = vec![FieldError::required("a", ""), FieldError::required("b", "")].into();
        assert_eq!(few.listed().len(), 2);
        assert_eq!(few.left_out(), None);
    }
}
