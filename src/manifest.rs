//! Reading and writing manifests: multi-document YAML or JSON from files, directories or
//! standard input, each document parsed on its own so one bad document is reported by its
//! position and never hides the others.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{Error, Result};

/// Largest input accepted from one file or from standard input.
pub const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;

/// One input: where it came from and its text.
#[derive(Debug)]
pub struct Input {
    pub path: PathBuf,
    pub text: String,
}

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

/// Reads `-` (standard input), files, and directories (their `.yaml`, `.yml` and `.json`
/// files, sorted, not recursing).
pub fn read_inputs(paths: &[PathBuf]) -> Result<Vec<Input>> {
    let mut inputs = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            inputs.push(read_limited(path, std::io::stdin().lock())?);
        } else if path.is_dir() {
            let read_dir =
                std::fs::read_dir(path).map_err(|source| Error::Read { path: path.clone(), source })?;
            let mut files: Vec<PathBuf> = read_dir
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && has_manifest_extension(p))
                .collect();
            files.sort();
            for file in files {
                inputs.push(read_file(&file)?);
            }
        } else {
            inputs.push(read_file(path)?);
        }
    }
    Ok(inputs)
}

fn has_manifest_extension(path: &Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
}

fn read_file(path: &Path) -> Result<Input> {
    let file = std::fs::File::open(path).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    read_limited(path, file)
}

fn read_limited(path: &Path, reader: impl Read) -> Result<Input> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| Error::Read { path: path.to_owned(), source })?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(Error::InputTooLarge {
            path: path.to_owned(),
            size: bytes.len() as u64,
            limit: MAX_INPUT_BYTES,
        });
    }
    let text = String::from_utf8(bytes).map_err(|e| Error::Read {
        path: path.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not UTF-8 text: {e}")),
    })?;
    Ok(Input { path: path.to_owned(), text })
}

/// Splits a text into documents: a stream of JSON values when it starts with `{` or `[`,
/// YAML documents separated by `---` lines otherwise. Documents that hold nothing (blank,
/// comments only, or `null`) are left out.
pub fn parse_documents(text: &str) -> Vec<Document> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim_start().starts_with(['{', '[']) {
        return parse_json_stream(text);
    }
    split_yaml(text)
        .into_iter()
        .enumerate()
        .filter_map(|(i, (line, source))| {
            let content = serde_saphyr::from_str::<Value>(&source).map_err(|e| e.to_string());
            match &content {
                Ok(Value::Null) => None,
                _ => Some(Document { index: i + 1, line, content }),
            }
        })
        .collect()
}

fn parse_json_stream(text: &str) -> Vec<Document> {
    let mut documents = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    loop {
        let offset = stream.byte_offset();
        let rest = &text[offset..];
        let start = offset + (rest.len() - rest.trim_start().len());
        let line = 1 + text[..start].matches('\n').count();
        match stream.next() {
            None => break,
            Some(Ok(value)) => {
                documents.push(Document { index: documents.len() + 1, line, content: Ok(value) })
            }
            Some(Err(error)) => {
                // The stream cannot resume after a syntax error: report it and stop.
                documents.push(Document {
                    index: documents.len() + 1,
                    line,
                    content: Err(error.to_string()),
                });
                break;
            }
        }
    }
    documents
}

/// YAML documents with the line each starts on. A line beginning with `---` (followed by
/// nothing or whitespace) starts a document, as in the YAML spec and kubectl's reader; a
/// line `...` ends one. Blank and comment-only documents are dropped.
fn split_yaml(text: &str) -> Vec<(usize, String)> {
    let mut documents = Vec::new();
    let mut current = String::new();
    let mut start = 1;
    let mut ended = false;
    let is_blank = |doc: &str| doc.lines().all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'));
    for (i, line) in text.lines().enumerate() {
        let marker_rest =
            line.strip_prefix("---").filter(|rest| rest.is_empty() || rest.starts_with([' ', '\t']));
        if let Some(rest) = marker_rest {
            if !is_blank(&current) {
                documents.push((start, std::mem::take(&mut current)));
            }
            current.clear();
            current.push_str(rest);
            current.push('\n');
            // Content starts on the marker line only when it follows the marker there.
            start = if rest.trim().is_empty() { i + 2 } else { i + 1 };
            ended = false;
        } else if line == "..." {
            ended = true;
        } else if !ended {
            current.push_str(line);
            current.push('\n');
        }
    }
    if !is_blank(&current) {
        documents.push((start, current));
    }
    documents
}

/// Renders values as a YAML stream, `---` between documents.
pub fn to_yaml_stream<'a>(values: impl IntoIterator<Item = &'a Value>) -> Result<String> {
    let mut out = String::new();
    for (i, value) in values.into_iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(&serde_saphyr::to_string(value).map_err(|e| Error::Yaml(e.to_string()))?);
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
