//! Runs the built `envoy-operator` as a user does, from the repository's root, for the tests of
//! the offline commands. The binary's path is the caller's (`env!("CARGO_BIN_EXE_envoy-operator")`,
//! which only the root package's integration tests have).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `binary <args>` with `stdin` on its standard input (written from another thread, so a large
/// input cannot deadlock against a full output pipe).
pub fn run(binary: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(binary)
        .args(args)
        .current_dir(crate::repository())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let input = stdin.unwrap_or_default().to_owned();
    let mut pipe = child.stdin.take().expect("stdin is piped");
    let writer = std::thread::spawn(move || pipe.write_all(input.as_bytes()));
    let output = child.wait_with_output().expect("the binary finishes");
    match writer.join().expect("stdin writer") {
        Ok(()) => {}
        // A command that ends before reading its input (a usage error exits at once) closes
        // the pipe under the writer: a race, not a failure of the command.
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(error) => panic!("stdin not written: {error}"),
    }
    output
}
