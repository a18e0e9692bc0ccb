//! The command line: one module per command (its flags and what it does), over the shells and
//! the pure core. `main.rs` only parses and dispatches.

pub mod check;
pub mod cluster;
pub mod control_plane;
pub mod controller;
pub mod documents;
pub mod error;
pub mod generate;
pub mod inject;
pub mod inject_flags;
pub mod install;
pub mod mesh_init;
pub mod proxy_config;
pub mod render;
pub mod run;
pub mod webhook;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use self::error::{Error, Result};

#[derive(Parser)]
#[command(name = "envoy-operator", version, about = "Kubernetes operator for Foo and Envoy resources")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum Command {
    /// Default and validate Foo and Envoy manifests offline, as the admission webhooks would;
    /// check GatewayClasses, Gateways and HTTPRoutes against what the operator can serve.
    ///
    /// Prints every document (defaulted where it is a Foo or Envoy) as YAML on stdout,
    /// warnings and errors on stderr, and exits 1 when any object is rejected or unreadable
    /// (a Gateway or HTTPRoute: when the operator could not serve it as written).
    Check(check::CheckArgs),
    /// Run the operator: the admission webhooks and the sidecar injector on every replica, the
    /// reconcilers on the one holding the leader Lease. Without a reachable cluster, serves the
    /// webhooks only (from certs/, generated when absent) with reconciling off.
    Run(Box<run::RunArgs>),
    /// Apply the CRDs (waiting until they are Established) and the webhook configurations to
    /// the current cluster with server-side apply.
    Install(install::InstallArgs),
    /// Delete the webhook configurations (and with --delete-crds the CRDs, which deletes every
    /// Foo and Envoy and, through their ownerReferences, their children).
    Uninstall(install::UninstallArgs),
    /// Run the Foo and Envoy reconcilers against the current kubeconfig context (or the
    /// in-cluster configuration) until SIGTERM or SIGINT.
    Controller(controller::ControllerArgs),
    /// Print the children the reconcilers would apply for the Foos and Envoys in manifests,
    /// each parent's target status as a comment before them; exits 1 when any is rejected.
    /// With --xds, the xDS resources and statuses of each Envoy and Gateway the operator's
    /// control plane would serve.
    Render(render::RenderArgs),
    /// Show what the control plane pushed to a running proxy (a fleet's Envoy or a sidecar) and
    /// what the proxy ACKed or NACKed, with Envoy's own words, asked live of the operator replica
    /// serving it; private keys redacted.
    ProxyConfig(proxy_config::ProxyConfigArgs),
    /// Add the Envoy sidecar to Pods and to the pod templates of Deployments, StatefulSets,
    /// DaemonSets, ReplicaSets, ReplicationControllers, Jobs and CronJobs, as the injection
    /// webhook would.
    ///
    /// Prints every document (with the sidecar, or unchanged) as YAML on stdout, notes and
    /// skips on stderr, and exits 1 when a pod is denied or a document is unreadable.
    Inject(inject::InjectArgs),
    /// Install a mesh sidecar's outbound capture in this network namespace: iptables `nat` rules
    /// (IPv4; IPv6 with --capture-ipv6) redirecting outbound TCP to the sidecar's outbound listener, except the
    /// proxy's own uid, loopback and the ports and networks left alone. The first init container
    /// of a pod with a mesh sidecar; needs root with NET_ADMIN and NET_RAW, and iptables.
    MeshInit(mesh_init::MeshInitArgs),
    /// Print the CustomResourceDefinitions, or write one file per CRD into a directory.
    Crds(generate::CrdsArgs),
    /// Generate a CA and a serving certificate for the webhook (ca.crt, tls.crt, tls.key).
    Certs(generate::CertsArgs),
    /// Serve the admission webhooks alone over TLS: Foo and Envoy defaults (POST /mutate) and
    /// rules (POST /validate), and the sidecar injector (POST /inject).
    Webhook(webhook::WebhookArgs),
    /// Print or write the Mutating/ValidatingWebhookConfigurations for Foo, Envoy and pods.
    WebhookConfig(generate::WebhookConfigArgs),
    /// Print the version, and the API versions and defaults it serves.
    Version,
    /// Print a shell completion script, e.g. `envoy-operator completion bash >
    /// /etc/bash_completion.d/envoy-operator`.
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// `envoy-operator version`.
pub fn version() -> ExitCode {
    use envoy_operator_core::kind::AdmittedKind;
    println!("envoy-operator {}", env!("CARGO_PKG_VERSION"));
    for kind in AdmittedKind::ALL {
        println!("  serves {} {}", kind.api_version(), kind.kind());
    }
    println!("  default Envoy image {}", envoy_operator_core::names::DEFAULT_ENVOY_IMAGE);
    ExitCode::SUCCESS
}

/// `envoy-operator completion SHELL`.
pub fn completion(shell: clap_complete::Shell) -> ExitCode {
    use clap::CommandFactory;
    clap_complete::generate(shell, &mut Cli::command(), "envoy-operator", &mut std::io::stdout());
    ExitCode::SUCCESS
}

/// A flag combination that cannot work: said on stderr, exit code 2 (as clap's own).
pub fn usage_error(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}
