use std::path::PathBuf;

/// Errors of the operator's library code.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },

    #[error("writing {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },

    #[error("{path} is {size} bytes, over the {limit}-byte limit for one input")]
    InputTooLarge { path: PathBuf, size: u64, limit: u64 },

    #[error("{path} holds no documents")]
    NoDocuments { path: PathBuf },

    #[error("serializing YAML: {0}")]
    Yaml(String),

    #[error("starting the async runtime: {0}")]
    Runtime(String),
}

impl Error {
    /// A short, fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Read { .. } => "read",
            Self::Write { .. } => "write",
            Self::InputTooLarge { .. } => "input_too_large",
            Self::NoDocuments { .. } => "no_documents",
            Self::Yaml(_) => "yaml",
            Self::Runtime(_) => "runtime",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
