//! The `envoy-operator` command line: a thin shell over the library.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};

use envoy_operator::check::{Outcome, check_text};
use envoy_operator::inject::flags::InjectFlags;
use envoy_operator::inject::workload::{self, Options};
use envoy_operator::inject::{EnvoyCatalog, EnvoyLookup, NoEnvoys};
use envoy_operator::ops::logging::{self, LogFormat};
use envoy_operator::ops::metrics::Metrics;
use envoy_operator::ops::signal;
use envoy_operator::reconcile::{self, controller::ControllerConfig, foo::DEFAULT_NGINX_IMAGE, render};
use envoy_operator::{crd, install, manifest, run, tls, webhook, webhook_config};

#[derive(Parser)]
#[command(name = "envoy-operator", version, about = "Kubernetes operator for Foo and Envoy resources")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
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
    /// Run the operator: the admission webhooks and the sidecar injector on every replica, the
    /// reconcilers on the one holding the leader Lease. Without a reachable cluster, serves the
    /// webhooks only (from certs/, generated when absent) with reconciling off.
    Run(Box<RunArgs>),
    /// Apply the CRDs (waiting until they are Established) and the webhook configurations to
    /// the current cluster with server-side apply.
    Install(InstallArgs),
    /// Delete the webhook configurations (and with --delete-crds the CRDs, which deletes every
    /// Foo and Envoy and, through their ownerReferences, their children).
    Uninstall(UninstallArgs),
    /// Run the Foo and Envoy reconcilers against the current kubeconfig context (or the
    /// in-cluster configuration) until SIGTERM or SIGINT.
    Controller {
        #[command(flatten)]
        reconcile: ControllerFlags,
        /// Log format (filter with RUST_LOG, default `info`).
        #[arg(long, value_enum, default_value = "text")]
        log_format: LogFormat,
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
    /// Add the Envoy sidecar to Pods and to the pod templates of Deployments, StatefulSets,
    /// DaemonSets, ReplicaSets, ReplicationControllers, Jobs and CronJobs, as the injection
    /// webhook would.
    ///
    /// Prints every document (with the sidecar, or unchanged) as YAML on stdout, notes and
    /// skips on stderr, and exits 1 when a pod is denied or a document is unreadable.
    Inject {
        /// Files or directories of YAML/JSON manifests; `-` reads standard input.
        #[arg(short = 'f', long = "filename", required = true)]
        files: Vec<PathBuf>,
        /// Manifests of the Envoy resources that pods name with sidecar.example.com/envoy.
        #[arg(long)]
        envoys: Vec<PathBuf>,
        /// Namespace of objects that set none.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
        /// Remove the sidecars a previous injection recorded instead of adding them.
        #[arg(long)]
        uninject: bool,
        #[command(flatten)]
        flags: InjectFlags,
    },
    /// Print the CustomResourceDefinitions, or write one file per CRD into a directory.
    Crds {
        /// Directory to write `<name>.yaml` files into (e.g. `crds/`).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Generate a CA and a serving certificate for the webhook (ca.crt, tls.crt, tls.key).
    Certs(CertsArgs),
    /// Serve the Foo and Envoy admission webhooks over TLS (POST /mutate, /validate).
    Webhook(WebhookArgs),
    /// Print or write the Mutating/ValidatingWebhookConfigurations for Foo and Envoy.
    WebhookConfig(WebhookConfigArgs),
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum WebhookMode {
    /// Reach the webhook through its Service (caBundle patched in by the operator).
    Cluster,
    /// Reach the webhook by URL with the local CA as caBundle.
    Local,
}

#[derive(clap::Args)]
struct WebhookConfigArgs {
    #[arg(long, value_enum, default_value = "cluster")]
    mode: WebhookMode,
    /// The webhook Service's name (cluster mode).
    #[arg(long, default_value = "envoy-operator-webhook")]
    service_name: String,
    /// The operator's namespace: the Service's, and excluded from the webhooks.
    #[arg(long, default_value = "envoy-operator")]
    namespace: String,
    /// The Service's port (cluster mode).
    #[arg(long, default_value_t = 443, value_parser = clap::value_parser!(i32).range(1..=65535))]
    port: i32,
    /// Base URL of the webhook (local mode).
    #[arg(long, default_value = "https://127.0.0.1:8443")]
    url: String,
    /// CA certificate for caBundle (local mode).
    #[arg(long, default_value = "certs/ca.crt")]
    ca_file: PathBuf,
    /// Directory to write the files into (e.g. `webhook-config/`); stdout when absent.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(clap::Args)]
struct CertsArgs {
    /// Directory to write the files into.
    #[arg(long, default_value = "certs")]
    out: PathBuf,
    /// The webhook Service's name (the certificate names `<service>.<namespace>.svc`).
    #[arg(long, default_value = "envoy-operator-webhook")]
    service_name: String,
    /// The namespace of the webhook Service.
    #[arg(long, default_value = "envoy-operator")]
    namespace: String,
    /// Validity in days.
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..=3650))]
    days: u32,
    /// A further name the serving certificate is valid for: a DNS name or an IP address, e.g.
    /// the host address a cluster dials for a webhook run outside it (repeatable).
    #[arg(long = "name", value_name = "NAME")]
    names: Vec<String>,
    /// Replace existing files.
    #[arg(long)]
    force: bool,
}

#[derive(clap::Args)]
struct WebhookArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0:8443")]
    listen: std::net::SocketAddr,
    /// Directory holding tls.crt and tls.key (reloaded when they change).
    #[arg(long, default_value = "certs")]
    cert_dir: PathBuf,
    /// Seconds between checks of the certificate files.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    reload_interval: u64,
    /// Largest AdmissionReview body accepted, in bytes.
    #[arg(long, default_value_t = 6 * 1024 * 1024)]
    max_body_bytes: usize,
    /// Admission requests handled at once.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=65536))]
    max_concurrent: u32,
    /// Seconds to answer one request.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=60))]
    request_timeout: u64,
    /// Envoy manifests the injector resolves `sidecar.example.com/envoy` against (without a
    /// cluster, there is no Envoy cache to look them up in).
    #[arg(long = "envoys", value_name = "FILE")]
    envoys: Vec<PathBuf>,
    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
    #[command(flatten)]
    inject: InjectFlags,
}

/// The reconcilers' flags, shared by `controller` and `run`.
#[derive(clap::Args)]
struct ControllerFlags {
    /// Reconcile only this namespace (default: all namespaces).
    #[arg(long = "watch-namespace", visible_alias = "namespace", short = 'n', env = "WATCH_NAMESPACE")]
    watch_namespace: Option<String>,
    /// Reconciles running at once, per kind (0: unbounded).
    #[arg(long, default_value_t = 4)]
    concurrency: u16,
    /// Image of a Foo's nginx pods.
    #[arg(long, default_value = DEFAULT_NGINX_IMAGE)]
    nginx_image: String,
}

impl ControllerFlags {
    fn to_config(&self) -> ControllerConfig {
        ControllerConfig {
            namespace: self.watch_namespace.clone(),
            concurrency: self.concurrency,
            settings: reconcile::Settings { nginx_image: self.nginx_image.clone(), ..Default::default() },
        }
    }
}

#[derive(clap::Args)]
struct RunArgs {
    /// Address of the webhook's TLS port.
    #[arg(long, default_value = "0.0.0.0:8443")]
    listen: std::net::SocketAddr,
    /// Address of the plain-HTTP operations port (/metrics, /healthz, /readyz).
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_listen: std::net::SocketAddr,
    /// Where the serving certificate comes from.
    #[arg(long, value_enum, default_value = "self-managed")]
    cert_mode: run::CertMode,
    /// Directory of ca.crt, tls.crt and tls.key (written from the Secret in self-managed mode).
    #[arg(long, default_value = "certs")]
    cert_dir: PathBuf,
    /// The webhook Service's name, for the certificate's names.
    #[arg(long, default_value = "envoy-operator-webhook")]
    service_name: String,
    /// This replica's identity for leader election (default: the host name).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    #[command(flatten)]
    reconcile: ControllerFlags,
    /// Log format (filter with RUST_LOG, default `info`).
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
    #[command(flatten)]
    inject: InjectFlags,
}

#[derive(clap::Args)]
struct InstallArgs {
    /// Point the webhooks at a local `envoy-operator run` (https://127.0.0.1:8443 with the CA
    /// from --ca-file) instead of the in-cluster Service.
    #[arg(long)]
    local: bool,
    /// Base URL of the local webhook.
    #[arg(long, default_value = "https://127.0.0.1:8443")]
    url: String,
    /// CA the local webhook's certificate is signed by.
    #[arg(long, default_value = "certs/ca.crt")]
    ca_file: PathBuf,
    /// The operator's namespace (excluded from the webhooks; the Service's namespace).
    #[arg(long, default_value = "envoy-operator")]
    namespace: String,
    /// The webhook Service's name.
    #[arg(long, default_value = "envoy-operator-webhook")]
    service_name: String,
    /// Seconds to wait for each CRD to be Established.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
}

#[derive(clap::Args)]
struct UninstallArgs {
    /// Also delete the CRDs, and with them every Foo and Envoy in the cluster.
    #[arg(long)]
    delete_crds: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Controller { reconcile, log_format } => {
            controller(reconcile.to_config(), log_format).map_err(Into::into)
        }
        Command::Render { files, nginx_image } => render(&files, &nginx_image).map_err(Into::into),
        Command::Check { files } => check(&files).map_err(Into::into),
        Command::Run(args) => run_operator(*args),
        Command::Install(args) => install(args),
        Command::Uninstall(args) => uninstall(args),
        Command::Inject { files, envoys, namespace, uninject, flags } => {
            inject(&files, &envoys, &namespace, uninject, &flags).map_err(Into::into)
        }
        Command::Crds { out } => crds(out).map_err(Into::into),
        Command::Certs(args) => certs(args).map_err(Into::into),
        Command::Webhook(args) => webhook(args),
        Command::WebhookConfig(args) => webhook_config(args).map_err(Into::into),
    };
    let result: Result<ExitCode, Box<dyn std::error::Error>> = result;
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
    finish_documents(&printed, documents, failures, "rejected", files)
}

fn run_operator(args: RunArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    logging::init(args.log_format);
    let inject = match args.inject.to_config() {
        Ok(config) => config,
        Err(message) => return usage_error(&message).map_err(Into::into),
    };
    let identity = args
        .identity
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| format!("envoy-operator-{}", std::process::id()));
    let config = run::RunConfig {
        listen: args.listen,
        metrics_listen: args.metrics_listen,
        cert_mode: args.cert_mode,
        cert_dir: args.cert_dir,
        service_name: args.service_name,
        identity,
        cert_check_interval: Duration::from_secs(60),
        controllers: args.reconcile.to_config(),
        inject,
        serve: webhook::server::ServeConfig::default(),
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let result = runtime.block_on(async {
        let client = match run::reachable_cluster().await {
            Ok(client) => Some(client),
            Err(reason) => {
                tracing::warn!(%reason, "no Kubernetes cluster reachable");
                None
            }
        };
        run::run(config, client, signal::shutdown_signal()).await
    });
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(error) => {
            tracing::error!(%error, error_kind = error.metric_label(), "envoy-operator failed");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The CRDs and webhook configurations `install` and `uninstall` work on.
fn install_manifests(args: &InstallArgs) -> Result<install::Manifests, Box<dyn std::error::Error>> {
    let target = if args.local {
        webhook_config::WebhookTarget::Url {
            base: args.url.clone(),
            ca_bundle: webhook_config::read_ca_bundle(&args.ca_file)?,
        }
    } else {
        webhook_config::WebhookTarget::Service {
            namespace: args.namespace.clone(),
            name: args.service_name.clone(),
            port: 443,
        }
    };
    let options = webhook_config::WebhookOptions { target, operator_namespace: args.namespace.clone() };
    Ok(install::Manifests {
        crds: crd::all(),
        mutating: webhook_config::mutating_configuration(webhook_config::mutating_webhooks(&options)),
        validating: webhook_config::validating_configuration(webhook_config::validating_webhooks(&options)),
    })
}

fn install(args: InstallArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let manifests = install_manifests(&args)?;
    tokio::runtime::Runtime::new()?.block_on(async {
        let client = kube::Client::try_default().await?;
        install::install(&client, &manifests, Duration::from_secs(args.timeout), |line| println!("{line}"))
            .await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    if !args.local {
        println!(
            "the operator patches caBundle into the webhook configurations once it runs (kubectl apply -k deploy/)"
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn uninstall(args: UninstallArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    // Only the names matter for deleting.
    let names = InstallArgs {
        local: false,
        url: String::new(),
        ca_file: PathBuf::new(),
        namespace: "envoy-operator".to_owned(),
        service_name: String::new(),
        timeout: 0,
    };
    let manifests = install_manifests(&names)?;
    tokio::runtime::Runtime::new()?.block_on(async {
        let client = kube::Client::try_default().await?;
        install::uninstall(&client, &manifests, args.delete_crds, |line| println!("{line}")).await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    Ok(ExitCode::SUCCESS)
}

fn controller(config: ControllerConfig, log_format: LogFormat) -> envoy_operator::Result<ExitCode> {
    logging::init(log_format);
    let runtime = tokio::runtime::Runtime::new()
        .map_err(|source| envoy_operator::Error::Runtime(source.to_string()))?;
    let result = runtime.block_on(async {
        let client = kube::Client::try_default().await.map_err(reconcile::Error::Client)?;
        reconcile::controller::run(client, config, signal::shutdown_signal(), |ctx| ctx).await
    });
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(error) => {
            tracing::error!(%error, error_kind = error.metric_label(), "controller failed");
            Ok(ExitCode::FAILURE)
        }
    }
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

fn inject(
    files: &[PathBuf],
    envoy_files: &[PathBuf],
    namespace: &str,
    uninject: bool,
    flags: &InjectFlags,
) -> envoy_operator::Result<ExitCode> {
    let config = match flags.to_config() {
        Ok(config) => config,
        Err(message) => return usage_error(&message),
    };
    let catalog = match envoy_files {
        [] => None,
        files => match EnvoyCatalog::read(files, namespace) {
            Ok(catalog) => Some(catalog),
            Err(message) => return usage_error(&message),
        },
    };
    let envoys: &dyn EnvoyLookup = match &catalog {
        Some(catalog) => catalog,
        None => &NoEnvoys,
    };
    let options = Options { config: &config, envoys, default_namespace: namespace, uninject };
    let inputs = manifest::read_inputs(files)?;
    let (mut printed, mut failures, mut documents) = (Vec::new(), 0, 0);
    for input in &inputs {
        for processed in workload::process_text(&input.path.display().to_string(), &input.text, &options) {
            documents += 1;
            match processed.outcome {
                workload::Outcome::Changed { object, notes } => {
                    notes.iter().for_each(|note| eprintln!("note: {}: {note}", processed.origin));
                    printed.push(object);
                }
                workload::Outcome::Unchanged { object, note } => {
                    eprintln!("note: {}: {note}", processed.origin);
                    printed.push(object);
                }
                workload::Outcome::Denied { message } | workload::Outcome::Unreadable { message } => {
                    eprintln!("error: {}: {message}", processed.origin);
                    failures += 1;
                }
            }
        }
    }
    finish_documents(&printed, documents, failures, "failed", files)
}

fn usage_error(message: &str) -> envoy_operator::Result<ExitCode> {
    eprintln!("error: {message}");
    Ok(ExitCode::from(2))
}

/// The end of a command over manifests: the documents to print on stdout, then a summary and
/// the exit code (failure when nothing was read or any document `failed_as`).
fn finish_documents(
    printed: &[serde_json::Value],
    documents: usize,
    failures: usize,
    failed_as: &str,
    files: &[PathBuf],
) -> envoy_operator::Result<ExitCode> {
    print!("{}", manifest::to_yaml_stream(printed)?);
    if documents == 0 {
        eprintln!("error: no documents in {}", display_paths(files));
        return Ok(ExitCode::FAILURE);
    }
    if failures > 0 {
        eprintln!("{failures} of {documents} documents {failed_as}");
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

fn certs(args: CertsArgs) -> Result<ExitCode, tls::TlsError> {
    let options = tls::CertOptions {
        service_name: args.service_name,
        namespace: args.namespace,
        days: args.days,
        extra_names: args.names,
    };
    let generated = tls::generate(&options)?;
    for path in tls::write(&args.out, &generated, args.force)? {
        eprintln!("wrote {}", path.display());
    }
    eprintln!("serving certificate for: {}", options.subject_alt_names().join(", "));
    Ok(ExitCode::SUCCESS)
}

fn webhook(args: WebhookArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    logging::init(args.log_format);
    let inject_config = match args.inject.to_config() {
        Ok(config) => config,
        Err(message) => return usage_error(&message).map_err(Into::into),
    };
    let envoys: webhook::inject::SharedEnvoys = match args.envoys.as_slice() {
        [] => Arc::new(NoEnvoys),
        files => match EnvoyCatalog::read(files, "default") {
            Ok(catalog) => Arc::new(catalog),
            Err(message) => return usage_error(&message).map_err(Into::into),
        },
    };
    let metrics = Metrics::new();
    let mut endpoints = webhook::router::standard_endpoints();
    endpoints.push(webhook::inject::endpoint(inject_config, envoys, metrics.clone()));
    let config = webhook::server::ServeConfig {
        endpoints,
        metrics,
        listen: args.listen,
        limits: webhook::router::Limits {
            max_body_bytes: args.max_body_bytes,
            max_concurrent: args.max_concurrent as usize,
            request_timeout: Duration::from_secs(args.request_timeout),
        },
        reload_interval: Duration::from_secs(args.reload_interval),
        ..Default::default()
    };
    let certs = tls::ReloadingCert::load(tls::CertPaths::in_dir(&args.cert_dir))?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(webhook::server::serve(config, certs, signal::shutdown_signal()))?;
    Ok(ExitCode::SUCCESS)
}

fn webhook_config(args: WebhookConfigArgs) -> envoy_operator::Result<ExitCode> {
    use envoy_operator::webhook_config::{self, WebhookOptions, WebhookTarget};
    let target = match args.mode {
        WebhookMode::Cluster => WebhookTarget::Service {
            namespace: args.namespace.clone(),
            name: args.service_name,
            port: args.port,
        },
        WebhookMode::Local => {
            WebhookTarget::Url { base: args.url, ca_bundle: webhook_config::read_ca_bundle(&args.ca_file)? }
        }
    };
    let files = webhook_config::render(&WebhookOptions { target, operator_namespace: args.namespace })?;
    match args.out {
        None => print!("{}", files.into_iter().map(|(_, yaml)| yaml).collect::<Vec<_>>().join("---\n")),
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .map_err(|source| envoy_operator::Error::Write { path: dir.clone(), source })?;
            for (name, yaml) in files {
                let path = dir.join(name);
                std::fs::write(&path, yaml)
                    .map_err(|source| envoy_operator::Error::Write { path: path.clone(), source })?;
                eprintln!("wrote {}", path.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
