//! Errors of the command-line shell: reading manifests, writing files and output.

use std::path::PathBuf;

/// What can stop a command before it has an answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },

    #[error("writing {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },

    #[error("{path} is {size} bytes, over the {limit}-byte limit for one input")]
    InputTooLarge { path: PathBuf, size: u64, limit: u64 },

    #[error("{path} holds more than the {limit}-byte limit for one input")]
    StreamTooLarge { path: PathBuf, limit: u64 },

    #[error(transparent)]
    Yaml(#[from] envoy_operator_core::manifest::YamlError),

    /// A flag value that cannot work, with what to give instead.
    #[error("{0}")]
    Invalid(String),

    #[error("writing to standard output: {0}")]
    Output(std::io::Error),

    #[error("starting the async runtime: {0}")]
    Runtime(std::io::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
