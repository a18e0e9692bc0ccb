//! Manifests as text: multi-document YAML or JSON split into documents, each parsed on its
//! own so one bad document is reported by its position and never hides the others; what the
//! offline commands make of each object ([`Outcome`]); and YAML streams back out.

use serde_json::Value;

/// YAML could not be written (plain data always serializes; kept for the signature's honesty).
#[derive(Debug, thiserror::Error)]
#[error("serializing YAML: {0}")]
pub struct YamlError(String);

/// One document of an input.
#[derive(Debug)]
pub struct Document {
    /// 1-based position in its input.
    pub index: usize,
    /// 1-based line of the input where the document starts.
    pub line: usize,
    /// The parsed document, or why it could not be parsed.
    pub content: Result<Value, String>,
}

/// What an offline command (`check`, `inject`, `render`) made of one object.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// The object as the command changed it (defaulted, injected, uninjected), with warnings
    /// (allowed but notable, as `kubectl` shows them) and notes (what was done).
    Changed { object: Value, warnings: Vec<String>, notes: Vec<String> },
    /// The object as it was, with the reason it was left alone.
    Unchanged { object: Value, note: String },
    /// What the object stands for, in its place (the children `render` prints), introduced by
    /// a comment.
    Rendered { comment: String, objects: Vec<Value> },
    /// Nothing to print for this object, with the reason.
    Skipped { note: String },
    /// The object breaks the rules (the API server's message) or cannot be processed as it is.
    Rejected { message: String },
    /// The document is not a readable Kubernetes object.
    Unreadable { message: String },
}

impl Outcome {
    pub fn is_failure(&self) -> bool {
        matches!(self, Self::Rejected { .. } | Self::Unreadable { .. })
    }
}

/// The `apiVersion` and `kind` of a document that is a Kubernetes object.
pub fn type_meta(object: &Value) -> Result<(&str, &str), Outcome> {
    let Some(fields) = object.as_object() else {
        return Err(Outcome::Unreadable {
            message: format!("expected a Kubernetes object (a mapping), found {}", json_type(object)),
        });
    };
    let field = |name: &str| fields.get(name).and_then(Value::as_str).filter(|s| !s.is_empty());
    match (field("apiVersion"), field("kind")) {
        (Some(api_version), Some(kind)) => Ok((api_version, kind)),
        _ => Err(Outcome::Unreadable {
            message: "not a Kubernetes object: `apiVersion` and `kind` must both be set to non-empty strings"
                .to_owned(),
        }),
    }
}

/// The object's name as messages show it: its name, else its `generateName` prefix.
pub fn display_name(object: &Value) -> String {
    let metadata = &object["metadata"];
    metadata["name"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| metadata["generateName"].as_str().map(|prefix| format!("{prefix}*")))
        .unwrap_or_else(|| "<unnamed>".to_owned())
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}

/// Splits a text into documents: a stream of JSON values when it starts with `{` or `[`,
/// YAML documents separated by `---` lines otherwise. Documents that hold nothing (blank,
/// comments only, or `null`) are left out.
pub fn parse_documents(text: &str) -> Vec<Document> {
    documents(text).collect()
}

/// The documents of a text one at a time, each parsed only when asked for: a large input is
/// never held parsed in memory all at once.
pub fn documents(text: &str) -> Box<dyn Iterator<Item = Document> + '_> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim_start().starts_with(['{', '[']) {
        return Box::new(JsonDocuments::new(text));
    }
    Box::new(YamlParts::new(text).enumerate().filter_map(|(i, part)| {
        let content = serde_saphyr::from_str::<Value>(&part.text)
            .map_err(|e| yaml_error_message(&e, part.first_line - 1));
        match &content {
            Ok(Value::Null) => None,
            _ => Some(Document { index: i + 1, line: part.line, content }),
        }
    }))
}

/// A YAML error as the user should read it: lines and the snippet counted in the whole input
/// (`preceding_lines` come before the document), and kubectl's words where they differ.
fn yaml_error_message(error: &serde_saphyr::Error, preceding_lines: usize) -> String {
    let options = serde_saphyr::render_options! {
        formatter: &KubernetesWording,
        line_offset: preceding_lines as u64,
    };
    error.render_with_options(options)
}

/// serde-saphyr's messages, with kubectl's (yaml.v3's) wording for what users meet most.
struct KubernetesWording;

impl serde_saphyr::MessageFormatter for KubernetesWording {
    fn format_message<'a>(&self, error: &'a serde_saphyr::Error) -> std::borrow::Cow<'a, str> {
        use serde_saphyr::Error;
        use serde_saphyr::budget::BudgetBreach;
        match error {
            Error::DuplicateMappingKey { key: Some(key), .. } => {
                format!("mapping key {key:?} already defined").into()
            }
            Error::DuplicateMappingKey { key: None, .. } => "mapping key already defined".into(),
            Error::Budget { breach, .. } => {
                let what = match breach {
                    BudgetBreach::Nodes { .. } | BudgetBreach::Events { .. } => {
                        "it expands to too many values (aliases included)"
                    }
                    BudgetBreach::Aliases { .. } | BudgetBreach::AliasAnchorRatio { .. } => {
                        "it uses too many aliases"
                    }
                    BudgetBreach::Depth { .. } => "it nests too deeply",
                    _ => "it exceeds the reader's limits",
                };
                format!("the document is refused to protect memory: {what}").into()
            }
            _ => serde_saphyr::DefaultMessageFormatter.format_message(error),
        }
    }
}

/// A stream of JSON values, with the line each starts on (counted as the stream advances).
struct JsonDocuments<'a> {
    text: &'a str,
    stream: serde_json::StreamDeserializer<'a, serde_json::de::StrRead<'a>, Value>,
    index: usize,
    /// Lines counted up to `counted` (a byte offset).
    line: usize,
    counted: usize,
    failed: bool,
}

impl<'a> JsonDocuments<'a> {
    fn new(text: &'a str) -> Self {
        let stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
        Self { text, stream, index: 0, line: 1, counted: 0, failed: false }
    }
}

impl Iterator for JsonDocuments<'_> {
    type Item = Document;

    fn next(&mut self) -> Option<Document> {
        if self.failed {
            return None;
        }
        let offset = self.stream.byte_offset();
        let rest = &self.text[offset..];
        let start = offset + (rest.len() - rest.trim_start().len());
        self.line += self.text[self.counted..start].matches('\n').count();
        self.counted = start;
        let content = match self.stream.next()? {
            Ok(value) => Ok(value),
            Err(error) => {
                // The stream cannot resume after a syntax error: report it and stop.
                self.failed = true;
                Err(error.to_string())
            }
        };
        self.index += 1;
        Some(Document { index: self.index, line: self.line, content })
    }
}

/// YAML documents with the line each starts on. A line beginning with `---` (followed by
/// nothing or whitespace) starts a document, as in the YAML spec and kubectl's reader; a
/// line `...` ends one. Blank and comment-only documents are dropped.
///
/// Split by hand rather than with the YAML library's multi-document reader, deliberately: a
/// syntax error there ends the whole stream, and the documents after it, with their
/// positions, are lost.
struct YamlParts<'a> {
    lines: std::iter::Enumerate<std::str::Lines<'a>>,
    current: YamlPart,
    ended: bool,
    finished: bool,
}

impl<'a> YamlParts<'a> {
    fn new(text: &'a str) -> Self {
        let current = YamlPart { line: 1, first_line: 1, text: String::new() };
        Self { lines: text.lines().enumerate(), current, ended: false, finished: false }
    }
}

fn is_blank(document: &str) -> bool {
    document.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
}

impl Iterator for YamlParts<'_> {
    type Item = YamlPart;

    fn next(&mut self) -> Option<YamlPart> {
        for (i, line) in self.lines.by_ref() {
            let marker_rest =
                line.strip_prefix("---").filter(|rest| rest.is_empty() || rest.starts_with([' ', '\t']));
            if let Some(rest) = marker_rest {
                // The part's text starts with what follows the marker on its line.
                let next = YamlPart {
                    // Content starts on the marker line only when it follows the marker there.
                    line: if rest.trim().is_empty() { i + 2 } else { i + 1 },
                    first_line: i + 1,
                    text: format!("{rest}\n"),
                };
                let done = std::mem::replace(&mut self.current, next);
                self.ended = false;
                if !is_blank(&done.text) {
                    return Some(done);
                }
            } else if line == "..." {
                self.ended = true;
            } else if !self.ended {
                self.current.text.push_str(line);
                self.current.text.push('\n');
            }
        }
        if self.finished {
            return None;
        }
        self.finished = true;
        let last =
            std::mem::replace(&mut self.current, YamlPart { line: 0, first_line: 0, text: String::new() });
        (!is_blank(&last.text)).then_some(last)
    }
}

/// One YAML document's text and where it stands in its input.
struct YamlPart {
    /// 1-based line where the document's content starts (what messages name).
    line: usize,
    /// 1-based line of the input that is the text's first line.
    first_line: usize,
    text: String,
}

/// One value as YAML.
pub fn to_yaml(value: &impl serde::Serialize) -> Result<String, YamlError> {
    serde_saphyr::to_string(value).map_err(|e| YamlError(e.to_string()))
}

/// Renders values as a YAML stream, `---` between documents.
pub fn to_yaml_stream<'a>(values: impl IntoIterator<Item = &'a Value>) -> Result<String, YamlError> {
    let mut out = String::new();
    for (i, value) in values.into_iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(&to_yaml(value)?);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_documents_keep_their_positions() {
        let text = "# leading comment\n---\na: 1\n---\n\n---\n# only a comment\n---\nb: [1, 2]\n...\n";
        let docs = parse_documents(text);
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].content.as_ref().unwrap()["a"], 1);
        assert_eq!(docs[1].content.as_ref().unwrap()["b"][1], 2);
        assert_eq!(docs[1].line, 9);
    }

    #[test]
    fn broken_yaml_is_reported_per_document() {
        let docs = parse_documents("a: 1\n---\nb: [unclosed\n---\nc: 3\n");
        assert_eq!(docs.len(), 3);
        assert!(docs[0].content.is_ok());
        assert!(docs[1].content.is_err());
        assert_eq!(docs[1].index, 2);
        assert!(docs[2].content.is_ok());
    }

    #[test]
    fn yaml_errors_count_lines_in_the_whole_input() {
        let docs = parse_documents("a: 1\n---\nb: 1\nc: 2\nc: 3\n");
        let message = docs[1].content.as_ref().unwrap_err();
        assert!(message.contains("mapping key \"c\" already defined"), "{message}");
        assert!(message.contains(":5:"), "the file's line 5, not the document's line 3: {message}");
        assert!(message.contains("5 | c: 3"), "{message}");
    }

    #[test]
    fn alias_bombs_are_refused_in_words() {
        let mut text = format!("a: &a [{}]\n", ["x"; 10].join(","));
        for i in 1..12 {
            let previous = if i == 1 { "*a".to_owned() } else { format!("*b{}", i - 1) };
            text.push_str(&format!("b{i}: &b{i} [{}]\n", vec![previous; 10].join(",")));
        }
        let message = parse_documents(&text).remove(0).content.unwrap_err();
        assert!(message.contains("refused to protect memory"), "{message}");
        assert!(!message.contains("Nodes {"), "{message}");
    }

    #[test]
    fn json_streams() {
        let docs = parse_documents("{\"a\": 1}\n{\"b\": 2}\n{oops");
        assert_eq!(docs.len(), 3);
        assert!(docs[2].content.is_err());
        assert_eq!(docs[2].line, 3);
    }

    #[test]
    fn yaml_round_trip() {
        let value =
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"x": "a: b\n", "n": "1"}});
        let text = to_yaml_stream([&value, &value]).unwrap();
        let back = parse_documents(&text);
        assert_eq!(back.len(), 2);
        assert_eq!(back[1].content.as_ref().unwrap(), &value);
    }
}
