//! `envoy-operator check`: every Foo and Envoy of manifests defaulted and validated offline.

use std::path::PathBuf;
use std::process::ExitCode;

use envoy_operator_core::check::check_object;

use super::documents::Pipeline;

#[derive(clap::Args)]
pub struct CheckArgs {
    /// Files or directories of YAML/JSON manifests; `-` reads standard input.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
}

pub fn run(args: &CheckArgs) -> super::Result<ExitCode> {
    Pipeline { failed_as: "rejected", all_or_nothing: false }.run(&args.files, check_object)
}
