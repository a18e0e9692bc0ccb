//! The `envoy-operator` command line: a thin shell over the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use envoy_operator::check::{Outcome, check_text};
use envoy_operator::reconcile::{self, controller::ControllerConfig, foo::DEFAULT_NGINX_IMAGE, render};
use envoy_operator::{crd, manifest};

#[derive(Parser)]
#[command(name = "envoy-operator", version, about = "Kubernetes operator for Foo and Envoy resources")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Default and validate Foo and Envoy manifests offline, as the admission webhooks would.
    ///
    /// Prints every document (defaulted where it is a Foo or Envoy) as YAML on stdout,
    /// warnings and errors on stderr, and exits 1 when any object is rejected or unreadable.
    Check {
        /// Files or directories of YAML/JSON manifests; `-` reads standard input.
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<PathBuf>,
    },
    /// Run the Foo and Envoy reconcilers against the current kubeconfig context (or the
    /// in-cluster configuration) until SIGTERM or SIGINT.
    Controller {
        /// Watch only this namespace (default: all namespaces).
        #[arg(long, short = 'n', env = "WATCH_NAMESPACE")]
        namespace: Option<String>,
        /// Reconciles running at once, per kind (0: unbounded).
        #[arg(long, default_value_t = 4)]
        concurrency: u16,
        /// Image of a Foo's nginx pods.
        #[arg(long, default_value = DEFAULT_NGINX_IMAGE)]
        nginx_image: String,
        /// Log as JSON lines instead of text (filter with RUST_LOG, default `info`).
        #[arg(long)]
        log_json: bool,
    },
    /// Print the children the reconcilers would apply for the Foos and Envoys in manifests,
    /// each parent's target status as a comment before them; exits 1 when any is rejected.
    Render {
        /// Files or directories of YAML/JSON manifests; `-` reads standard input.
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<PathBuf>,
        /// Image of a Foo's nginx pods.
        #[arg(long, default_value = DEFAULT_NGINX_IMAGE)]
        nginx_image: String,
    },
    /// Print the CustomResourceDefinitions, or write one file per CRD into a directory.
    Crds {
        /// Directory to write `<name>.yaml` files into (e.g. `crds/`).
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check { files } => check(&files),
        Command::Crds { out } => crds(out),
        Command::Controller { namespace, concurrency, nginx_image, log_json } => {
            let settings = reconcile::Settings { nginx_image, ..Default::default() };
            controller(ControllerConfig { namespace, concurrency, settings }, log_json)
        }
        Command::Render { files, nginx_image } => render(&files, &nginx_image),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn check(files: &[PathBuf]) -> envoy_operator::Result<ExitCode> {
    let inputs = manifest::read_inputs(files)?;
    let mut printed = Vec::new();
    let mut failures = 0;
    let mut documents = 0;
    for input in &inputs {
        for checked in check_text(&input.path.display().to_string(), &input.text) {
            documents += 1;
            match checked.outcome {
                Outcome::Accepted { object, warnings } => {
                    for warning in warnings {
                        eprintln!("Warning: {}: {warning}", checked.origin);
                    }
                    printed.push(object);
                }
                Outcome::PassedThrough { object, note } => {
                    eprintln!("note: {}: {note}", checked.origin);
                    printed.push(object);
                }
                Outcome::Rejected { message } | Outcome::Unreadable { message } => {
                    eprintln!("error: {}: {message}", checked.origin);
                    failures += 1;
                }
            }
        }
    }
    print!("{}", manifest::to_yaml_stream(&printed)?);
    if documents == 0 {
        eprintln!("error: no documents in {}", display_paths(files));
        return Ok(ExitCode::FAILURE);
    }
    if failures > 0 {
        eprintln!("{failures} of {documents} documents rejected");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn controller(config: ControllerConfig, log_json: bool) -> envoy_operator::Result<ExitCode> {
    init_tracing(log_json);
    let runtime = tokio::runtime::Runtime::new()
        .map_err(|source| envoy_operator::Error::Runtime(source.to_string()))?;
    let result = runtime.block_on(async {
        let client = kube::Client::try_default().await.map_err(reconcile::Error::Client)?;
        reconcile::controller::run(client, config, reconcile::controller::shutdown_signal(), |ctx| ctx).await
    });
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(error) => {
            tracing::error!(%error, error_kind = error.metric_label(), "controller failed");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn init_tracing(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    if json { builder.json().init() } else { builder.init() }
}

fn render(files: &[PathBuf], nginx_image: &str) -> envoy_operator::Result<ExitCode> {
    let inputs = manifest::read_inputs(files)?;
    let mut results = Vec::new();
    for input in &inputs {
        results.extend(render::render_text(&input.path.display().to_string(), &input.text, nginx_image));
    }
    let mut failures = 0;
    for item in &results {
        match &item.outcome {
            render::Outcome::Rendered { .. } => {}
            render::Outcome::Skipped { note } => eprintln!("note: {}: {note}", item.origin),
            render::Outcome::Rejected { message } | render::Outcome::Unreadable { message } => {
                eprintln!("error: {}: {message}", item.origin);
                failures += 1;
            }
        }
    }
    print!("{}", render::to_stream(&results)?);
    if failures > 0 {
        eprintln!("{failures} of {} documents not rendered", results.len());
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn display_paths(files: &[PathBuf]) -> String {
    files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

fn crds(out: Option<PathBuf>) -> envoy_operator::Result<ExitCode> {
    let crds = crd::all();
    match out {
        None => {
            let rendered: Result<Vec<String>, _> = crds.iter().map(crd::to_yaml).collect();
            print!("{}", rendered?.join("---\n"));
        }
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .map_err(|source| envoy_operator::Error::Write { path: dir.clone(), source })?;
            for definition in &crds {
                let path = dir.join(crd::file_name(definition));
                std::fs::write(&path, crd::to_yaml(definition)?)
                    .map_err(|source| envoy_operator::Error::Write { path: path.clone(), source })?;
                eprintln!("wrote {}", path.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
