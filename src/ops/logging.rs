//! Log output for the long-running commands: `RUST_LOG` filters (default `info`), text for
//! people or JSON for log pipelines.
//!
//! Field values can come from clients (a review's uid, an object's name) and hold newlines or
//! terminal escape sequences, which in text logs would forge lines or repaint a terminal. Text
//! logs escape every control character ([`EscapedFields`]); JSON escapes them by its nature.
//!
//! Values are logged as a person reads them: an address as `0.0.0.0:8443` (a field that may
//! be absent is left out, never `Some(…)`), and an error from the API server as its message,
//! reason and code ([`KubeError`], [`readable`]): kube's own `Display` appends the whole
//! `Status` in Rust's debug form.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::{MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::format::Writer;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Installs the global subscriber; later calls (e.g. from tests) are no-ops.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.fmt_fields(EscapedFields).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(false).try_init(),
    };
}

/// Formats fields as tracing's default text format does (`message key=value …`, string
/// values quoted), with every control character of a value escaped (`\n`, `\u{1b}`).
#[derive(Clone, Copy, Debug, Default)]
pub struct EscapedFields;

impl<'a> MakeVisitor<Writer<'a>> for EscapedFields {
    type Visitor = EscapedVisitor<'a>;

    fn make_visitor(&self, writer: Writer<'a>) -> Self::Visitor {
        EscapedVisitor { writer, first: true, result: Ok(()) }
    }
}

pub struct EscapedVisitor<'a> {
    writer: Writer<'a>,
    first: bool,
    result: fmt::Result,
}

impl EscapedVisitor<'_> {
    fn record(&mut self, field: &Field, value: fmt::Arguments<'_>) {
        if self.result.is_err() {
            return;
        }
        let raw = value.to_string();
        let text = escape_controls(&raw);
        let separator = if self.first { "" } else { " " };
        self.first = false;
        self.result = match field.name() {
            "message" => write!(self.writer, "{separator}{text}"),
            name => write!(self.writer, "{separator}{name}={text}"),
        };
    }
}

impl Visit for EscapedVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        // Quoted (and escaped) as the default format writes strings.
        self.record(field, format_args!("{value:?}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.record(field, format_args!("{value:?}"));
    }
}

impl VisitOutput<fmt::Result> for EscapedVisitor<'_> {
    fn finish(self) -> fmt::Result {
        self.result
    }
}

impl VisitFmt for EscapedVisitor<'_> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        &mut self.writer
    }
}

/// `text` with every control character written as its escape (`\n`, `\t`, `\u{1b}`).
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            let _ = write!(escaped, "{}", c.escape_default());
        } else {
            escaped.push(c);
        }
    }
    std::borrow::Cow::Owned(escaped)
}

/// A Kubernetes client error as a person reads it: a request the API server refused as its
/// message, reason and code (`deployments.apps "web" is forbidden: … (Forbidden, 403)`); any
/// other error as it displays.
pub struct KubeError<'a>(pub &'a kube::Error);

impl fmt::Display for KubeError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            kube::Error::Api(status) => api_status(status, f),
            other => write!(f, "{other}"),
        }
    }
}

fn api_status(status: &kube::core::Status, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let reason = if status.reason.is_empty() { "Failure" } else { status.reason.as_str() };
    match status.message.trim() {
        "" => write!(f, "{reason} ({})", status.code),
        message => write!(f, "{message} ({reason}, {})", status.code),
    }
}

/// `error` as it displays, with every Kubernetes API error in its chain of sources said as
/// [`KubeError`] says it: for errors of libraries that embed kube's `Display` in theirs.
pub fn readable(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = Some(error);
    while let Some(current) = next {
        if let Some(kube_error @ kube::Error::Api(_)) = current.downcast_ref::<kube::Error>() {
            text = text.replace(&kube_error.to_string(), &KubeError(kube_error).to_string());
        }
        next = current.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Log lines written to a shared buffer.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn text_logs_escape_what_clients_send() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .fmt_fields(EscapedFields)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let uid = "u1\n2026-01-01T00:00:00Z  INFO forged: admission review allowed";
            let name = "web\u{1b}[2J";
            tracing::info!(uid = %uid, name = %name, namespace = "shop\r", "admission review");
        });
        let output = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert_eq!(output.lines().count(), 1, "one event, one line: {output:?}");
        assert!(output.contains(r"uid=u1\n2026-01-01T00:00:00Z  INFO forged"), "{output}");
        assert!(output.contains(r"name=web\u{1b}[2J"), "{output}");
        assert!(output.contains(r#"namespace="shop\r""#), "{output}");
        assert!(output.contains(" admission review uid="), "the message first, as usual: {output}");
    }

    #[test]
    fn only_control_characters_are_escaped() {
        assert_eq!(escape_controls("plain é \"quoted\""), "plain é \"quoted\"");
        assert_eq!(escape_controls("a\tb\u{7f}"), "a\\tb\\u{7f}");
    }

    /// What the API server answers a create in a namespace being deleted.
    fn terminating() -> kube::Error {
        let status = serde_json::from_value(serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "deployments.apps \"web\" is forbidden: unable to create new content in namespace shop because it is being terminated",
            "reason": "Forbidden",
            "details": {"name": "web", "group": "apps", "kind": "deployments", "causes": [
                {"reason": "NamespaceTerminating", "message": "namespace shop is being terminated", "field": "metadata.namespace"}]},
            "code": 403}))
        .expect("a Status");
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn an_api_error_reads_as_its_message_reason_and_code() {
        let error = terminating();
        assert!(error.to_string().contains("Status {"), "kube's own text: {error}");
        assert_eq!(
            KubeError(&error).to_string(),
            "deployments.apps \"web\" is forbidden: unable to create new content in namespace shop because it is being terminated (Forbidden, 403)"
        );
        let bare = kube::Error::Api(Box::new(kube::core::Status { code: 500, ..Default::default() }));
        assert_eq!(KubeError(&bare).to_string(), "Failure (500)");
    }

    #[test]
    fn an_api_error_inside_another_error_reads_the_same() {
        #[derive(Debug, thiserror::Error)]
        #[error("watching Foos: {0}")]
        struct Watching(#[source] kube::Error);
        let error = Watching(terminating());
        let text = readable(&error);
        assert!(text.starts_with("watching Foos: deployments.apps \"web\" is forbidden"), "{text}");
        assert!(text.ends_with("(Forbidden, 403)"), "{text}");
        assert!(!text.contains("Some("), "{text}");
    }
}
