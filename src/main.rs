//! The `envoy-operator` command line: parses, dispatches to the command's module, and turns
//! an error into a message and an exit code.

use std::process::ExitCode;

use clap::Parser;
use envoy_operator::cli::{self, Cli, Command};

fn main() -> ExitCode {
    let result: Result<ExitCode, Box<dyn std::error::Error>> = match Cli::parse().command {
        Command::Check(args) => cli::check::run(&args).map_err(Into::into),
        Command::Render(args) => cli::render::run(&args).map_err(Into::into),
        Command::ProxyConfig(args) => cli::proxy_config::run(args),
        Command::Inject(args) => cli::inject::run(&args).map_err(Into::into),
        Command::Run(args) => cli::run::run(*args),
        Command::Controller(args) => cli::controller::run(args),
        Command::Install(args) => cli::install::install(args),
        Command::Uninstall(args) => cli::install::uninstall(args),
        Command::Webhook(args) => cli::webhook::run(args),
        Command::MeshInit(args) => Ok(cli::mesh_init::run(&args)),
        Command::Crds(args) => cli::generate::crds(args).map_err(Into::into),
        Command::Certs(args) => cli::generate::certs(args).map_err(Into::into),
        Command::WebhookConfig(args) => cli::generate::webhook_config(args),
        Command::Version => Ok(cli::version()),
        Command::Completion { shell } => Ok(cli::completion(shell)),
    };
    result.unwrap_or_else(|error| {
        // A reader that went away (`… | head`) needs no message.
        if !matches!(error.downcast_ref(), Some(cli::Error::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe) {
            eprintln!("error: {error}");
        }
        ExitCode::FAILURE
    })
}
