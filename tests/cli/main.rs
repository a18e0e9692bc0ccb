//! The command line as a user runs it: the built `envoy-operator` from the repository's root
//! (conventions, `check`, `render`, `inject`, and the committed examples). One test binary.

mod check_cli;
mod cli;
mod examples;
mod gateway_cli;
mod inject;
mod render_cli;

use std::path::Path;
use std::process::Output;

/// `envoy-operator <args>` with `stdin` on its standard input, from the repository's root.
fn envoy_operator(args: &[&str], stdin: Option<&str>) -> Output {
    envoy_operator_testkit::cli::run(Path::new(env!("CARGO_BIN_EXE_envoy-operator")), args, stdin)
}
