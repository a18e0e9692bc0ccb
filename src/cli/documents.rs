//! The one pipeline of the commands over manifests (`check`, `render`, `inject`): read each
//! input, split it into documents, expand `v1 List`s into their items, process every object
//! with the command's pure function, print the results on stdout and what was said about them
//! on stderr, and decide the exit code.
//!
//! Every message names where its object came from the same way: `file (document N, line L)`,
//! with `items[i]` for an item of a List.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use envoy_operator_core::manifest::{self, Outcome, to_yaml};
use serde_json::Value;

use super::error::{Error, Result};

/// Largest input accepted from one file or from standard input.
pub const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;

/// Standard input, as `-f -` names it.
const STDIN: &str = "-";

/// The flags of the commands over manifests: which inputs, and how to print the results.
#[derive(clap::Args, Clone, Debug)]
pub struct ManifestArgs {
    /// Files or directories of YAML/JSON manifests (repeat the flag or separate with commas);
    /// `-` reads standard input.
    #[arg(short = 'f', long = "filename", required = true, value_delimiter = ',')]
    pub files: Vec<PathBuf>,
    /// Read the directories given with -f and their subdirectories.
    #[arg(short = 'R', long)]
    pub recursive: bool,
    /// Output format of the printed objects: a YAML stream, or a JSON `v1 List` as `kubectl
    /// get -o json` prints (render's target statuses, YAML comments, are left out of JSON).
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    pub output: OutputFormat,
}

/// How printed objects are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Yaml,
    Json,
}

/// How a command over manifests reports.
pub struct Pipeline {
    /// What a failed document is called in the summary: "rejected", "failed"…
    pub failed_as: &'static str,
    /// Print every document or none: when any fails, stdout stays empty, so `… | kubectl
    /// apply -f -` never applies part of a set (`inject`). Otherwise each document is printed
    /// as soon as it is processed, holding nothing back (`check`, `render`).
    pub all_or_nothing: bool,
}

/// One source of documents: a file or standard input, opened before anything is processed so
/// a missing file fails the command before it prints anything.
enum Source {
    File { path: PathBuf, file: std::fs::File },
    Stdin,
}

impl Source {
    fn name(&self) -> String {
        match self {
            Self::File { path, .. } => path.display().to_string(),
            Self::Stdin => STDIN.to_owned(),
        }
    }

    fn read(self) -> Result<String> {
        match self {
            Self::File { path, file } => {
                let size =
                    file.metadata().map_err(|source| Error::Read { path: path.clone(), source })?.len();
                if size > MAX_INPUT_BYTES {
                    return Err(Error::InputTooLarge { path, size, limit: MAX_INPUT_BYTES });
                }
                read_limited(&path, file)
            }
            Self::Stdin => read_limited(Path::new(STDIN), std::io::stdin().lock()),
        }
    }
}

/// The sources `paths` name: `-` (standard input), files, and directories (their `.yaml`,
/// `.yml` and `.json` files, sorted; their subdirectories too when `recursive`, as `kubectl
/// apply -R` reads them).
fn open_sources(paths: &[PathBuf], recursive: bool) -> Result<Vec<Source>> {
    let mut sources = Vec::new();
    for path in paths {
        if path.as_os_str() == STDIN {
            sources.push(Source::Stdin);
        } else if path.is_dir() {
            for file in manifest_files(path, recursive)? {
                sources.push(open(&file)?);
            }
        } else {
            sources.push(open(path)?);
        }
    }
    Ok(sources)
}

fn open(path: &Path) -> Result<Source> {
    let file = std::fs::File::open(path).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    Ok(Source::File { path: path.to_owned(), file })
}

/// The manifest files of a directory, sorted, then those of its subdirectories when
/// `recursive`.
fn manifest_files(dir: &Path, recursive: bool) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|source| Error::Read { path: dir.to_owned(), source })?;
    let mut entries: Vec<PathBuf> = entries.filter_map(|entry| entry.ok().map(|e| e.path())).collect();
    entries.sort();
    let mut files: Vec<PathBuf> =
        entries.iter().filter(|p| p.is_file() && has_manifest_extension(p)).cloned().collect();
    if recursive {
        for subdirectory in entries.iter().filter(|p| p.is_dir()) {
            files.extend(manifest_files(subdirectory, true)?);
        }
    }
    Ok(files)
}

fn has_manifest_extension(path: &Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json"))
}

fn read_limited(path: &Path, reader: impl Read) -> Result<String> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| Error::Read { path: path.to_owned(), source })?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        // A stream (or a file that grew while read): its size is not known, only that it is over.
        return Err(Error::StreamTooLarge { path: path.to_owned(), limit: MAX_INPUT_BYTES });
    }
    String::from_utf8(bytes).map_err(|e| Error::Read {
        path: path.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not UTF-8 text: {e}")),
    })
}

/// Every text of `paths`, read one at a time (see [`open_sources`]), as `(name, text)`.
pub fn read_texts(paths: &[PathBuf]) -> Result<Vec<(String, String)>> {
    open_sources(paths, false)?.into_iter().map(|source| Ok((source.name(), source.read()?))).collect()
}

impl Pipeline {
    /// Runs `process` over every object of `paths`, printing as it goes.
    pub fn run(&self, args: &ManifestArgs, mut process: impl FnMut(Value) -> Outcome) -> Result<ExitCode> {
        let paths = &args.files;
        let stdout = std::io::stdout().lock();
        let mut out = match args.output {
            OutputFormat::Json => Printer::json(stdout),
            OutputFormat::Yaml if self.all_or_nothing => Printer::held(stdout),
            OutputFormat::Yaml => Printer::new(stdout),
        };
        let mut err = std::io::stderr().lock();
        let (mut documents, mut failures) = (0usize, 0usize);
        for source in open_sources(paths, args.recursive)? {
            let name = source.name();
            let text = source.read()?;
            for (origin, object) in objects_of(&name, &text) {
                let outcome = object.map_or_else(|outcome| outcome, &mut process);
                documents += 1;
                failures += usize::from(outcome.is_failure());
                report(&mut out, &mut err, &origin, outcome)?;
            }
        }
        if failures > 0 && self.all_or_nothing {
            out.discard();
            eprintln!(
                "nothing printed: every document or none, and {failures} of {documents} {}",
                self.failed_as
            );
            return Ok(ExitCode::FAILURE);
        }
        out.finish()?;
        if documents == 0 {
            let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            eprintln!("error: no documents in {}", names.join(", "));
            return Ok(ExitCode::FAILURE);
        }
        if failures > 0 {
            eprintln!("{failures} of {documents} documents {}", self.failed_as);
            return Ok(ExitCode::FAILURE);
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// Every object of the inputs `args` names, each with its origin, or what makes it unreadable:
/// for a command that needs them all at once (`render --xds`).
pub fn read_objects(args: &ManifestArgs) -> Result<Vec<(String, std::result::Result<Value, Outcome>)>> {
    let mut objects = Vec::new();
    for source in open_sources(&args.files, args.recursive)? {
        let name = source.name();
        let text = source.read()?;
        objects.extend(objects_of(&name, &text));
    }
    Ok(objects)
}

/// The objects of the text of the input `name`, each with its origin, parsed as they are
/// taken; each item of a List counts as a document of its own.
fn objects_of<'a>(
    name: &'a str,
    text: &'a str,
) -> impl Iterator<Item = (String, std::result::Result<Value, Outcome>)> + 'a {
    manifest::documents(text).flat_map(move |document| {
        let origin = format!("{name} (document {}, line {})", document.index, document.line);
        match document.content {
            Ok(object) => expand_list(object, &origin),
            Err(message) => {
                let message = format!("not valid YAML or JSON: {message}");
                vec![(origin, Err(Outcome::Unreadable { message }))]
            }
        }
    })
}

/// The objects of one document: the document itself, or each item of a `v1 List` (what
/// `kubectl get -o yaml` prints for several objects) with its own origin.
fn expand_list(object: Value, origin: &str) -> Vec<(String, Result<Value, Outcome>)> {
    let is_list = object.get("apiVersion").and_then(Value::as_str) == Some("v1")
        && object.get("kind").and_then(Value::as_str) == Some("List");
    if !is_list {
        return vec![(origin.to_owned(), Ok(object))];
    }
    match object.get("items") {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| (format!("{origin} items[{i}]"), Ok(item.clone())))
            .collect(),
        None | Some(Value::Null) => Vec::new(),
        Some(_) => {
            let message = "a v1 List whose items are not a list".to_owned();
            vec![(origin.to_owned(), Err(Outcome::Unreadable { message }))]
        }
    }
}

/// Prints one outcome: its objects on stdout, what it says on stderr.
fn report(out: &mut Printer<impl Write>, err: &mut impl Write, origin: &str, outcome: Outcome) -> Result<()> {
    let mut say = |level: &str, text: &str| writeln!(err, "{level}: {origin}: {text}").map_err(Error::Output);
    match outcome {
        Outcome::Changed { object, warnings, notes } => {
            for warning in &warnings {
                say("Warning", warning)?;
            }
            for note in &notes {
                say("note", note)?;
            }
            out.print(None, &object)
        }
        Outcome::Unchanged { object, note } => {
            say("note", &note)?;
            out.print(None, &object)
        }
        Outcome::Rendered { comment, objects } => {
            let mut comment = Some(comment.as_str());
            for object in &objects {
                out.print(comment.take(), object)?;
            }
            Ok(())
        }
        Outcome::Skipped { note } => say("note", &note),
        Outcome::Rejected { message } | Outcome::Unreadable { message } => say("error", &message),
    }
}

/// The printed objects on stdout: a YAML stream (`---` between documents, a comment's lines
/// as `# …`), or a JSON `v1 List` written at the end.
struct Printer<W: Write> {
    out: W,
    printed: usize,
    /// The stream held back until [`finish`](Self::finish), for all-or-nothing output.
    held: Option<Vec<u8>>,
    /// The objects of a JSON list, when JSON is asked for.
    json: Option<Vec<Value>>,
}

impl<W: Write> Printer<W> {
    fn new(out: W) -> Self {
        Self { out, printed: 0, held: None, json: None }
    }

    fn held(out: W) -> Self {
        Self { held: Some(Vec::new()), ..Self::new(out) }
    }

    fn json(out: W) -> Self {
        Self { json: Some(Vec::new()), ..Self::new(out) }
    }

    /// Drops what was held back: nothing is printed.
    fn discard(&mut self) {
        self.held = self.held.as_ref().map(|_| Vec::new());
        self.json = None;
        self.printed = 0;
    }

    fn print(&mut self, comment: Option<&str>, object: &Value) -> Result<()> {
        if let Some(items) = &mut self.json {
            items.push(object.clone());
            self.printed += 1;
            return Ok(());
        }
        let mut text = String::new();
        if self.printed > 0 {
            text.push_str("---\n");
        }
        for line in comment.into_iter().flat_map(str::lines) {
            text.push_str(&format!("# {line}\n"));
        }
        text.push_str(&to_yaml(object)?);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        match &mut self.held {
            Some(held) => held.extend_from_slice(text.as_bytes()),
            None => self.out.write_all(text.as_bytes()).map_err(Error::Output)?,
        }
        self.printed += 1;
        Ok(())
    }

    fn finish(mut self) -> Result<()> {
        if let Some(held) = self.held.take() {
            self.out.write_all(&held).map_err(Error::Output)?;
        }
        if let Some(items) = self.json.take() {
            let list =
                serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items});
            let text = serde_json::to_string_pretty(&list).map_err(|e| Error::Output(e.into()))?;
            writeln!(self.out, "{text}").map_err(Error::Output)?;
        }
        self.out.flush().map_err(Error::Output)
    }
}

#[cfg(test)]
mod tests {
    use envoy_operator_core::children::render::{Settings, render_object};
    use envoy_operator_core::manifest::parse_documents;
    use envoy_operator_core::names::DEFAULT_NGINX_IMAGE;
    use serde_json::json;

    use super::*;

    const FOO: &str = include_str!("../../examples/foo.yaml");
    const ENVOY: &str = include_str!("../../examples/envoy.yaml");

    #[test]
    fn the_stream_parses_back_to_the_children() {
        let mut out = Printer::new(Vec::new());
        let mut err = Vec::new();
        for document in parse_documents(&format!("{FOO}\n---\n{ENVOY}")) {
            let settings = Settings { nginx_image: DEFAULT_NGINX_IMAGE, control_plane: None };
            let outcome = render_object(&document.content.unwrap(), &settings);
            report(&mut out, &mut err, "example", outcome).unwrap();
        }
        let stream = String::from_utf8(out.out).unwrap();
        assert!(stream.starts_with("# Foo example-foo: the status"));
        let documents = parse_documents(&stream);
        assert_eq!(documents.len(), 4);
        assert!(documents.iter().all(|d| d.content.as_ref().is_ok_and(|v| v["kind"].is_string())));
    }

    #[test]
    fn list_items_are_objects_of_their_own() {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": [{"kind": "A"}, {"kind": "B"}]});
        let items = expand_list(list, "f (document 1, line 1)");
        assert_eq!(items.len(), 2);
        assert_eq!(items[1].0, "f (document 1, line 1) items[1]");
        assert_eq!(items[1].1.as_ref().unwrap()["kind"], "B");
        let other = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        assert_eq!(expand_list(other.clone(), "f").into_iter().next().unwrap().1.unwrap(), other);
    }
}
