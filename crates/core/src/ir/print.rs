//! The IR's printed form: YAML a person reads (`render --ir`, golden files, logs), with every
//! private key redacted and certificates shown by size.

use std::time::Duration;

use serde::Serializer;

use super::Fleet;

impl Fleet {
    /// The fleet as YAML; keys never appear.
    pub fn to_yaml(&self) -> String {
        serde_saphyr::to_string(self).unwrap_or_else(|error| format!("# the IR did not print: {error}\n"))
    }
}

pub(super) fn redacted<S: Serializer>(_key: &str, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str("<redacted>")
}

pub(super) fn byte_count<S: Serializer>(pem: &str, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&format_args!("<{} bytes>", pem.len()))
}

/// `60s`, `1500ms`, `0s` (no limit): as Gateway API writes durations.
pub(super) fn duration<S: Serializer>(duration: &Option<Duration>, serializer: S) -> Result<S::Ok, S::Error> {
    match duration {
        Some(d) if d.subsec_nanos() == 0 => serializer.collect_str(&format_args!("{}s", d.as_secs())),
        Some(d) => serializer.collect_str(&format_args!("{}ms", d.as_millis())),
        None => serializer.serialize_none(),
    }
}
