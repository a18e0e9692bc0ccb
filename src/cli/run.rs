//! `envoy-operator run`: the whole operator. Its flags, then [`crate::operator::run`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use envoy_operator_core::names;

use super::cluster::ClusterFlags;
use super::control_plane::AdvertiseFlags;
use super::controller::ControllerFlags;
use super::inject_flags::InjectFlags;
use super::usage_error;
use crate::operator::{self, CertMode, RunConfig};
use crate::ops::logging::{self, LogFormat};
use crate::ops::signal;
use crate::webhook::serve::WebhookConfig;
use crate::xds::control_plane::XdsConfig;

/// Runtime threads of `run` at most (see the memory budgets).
pub const MAX_WORKER_THREADS: usize = 2;

#[derive(clap::Args)]
pub struct RunArgs {
    /// Address of the webhook's TLS port.
    #[arg(long, default_value = names::WEBHOOK_LISTEN)]
    pub listen: SocketAddr,
    /// Address of the plain-HTTP operations port (/metrics, /healthz, /readyz).
    #[arg(long, default_value = names::OPERATIONS_LISTEN)]
    pub metrics_listen: SocketAddr,
    /// Where the serving certificate comes from.
    #[arg(long, value_enum, default_value = "self-managed")]
    pub cert_mode: CertMode,
    /// Directory of ca.crt, tls.crt and tls.key (written from the Secret in self-managed mode).
    #[arg(long, default_value = names::CERT_DIR)]
    pub cert_dir: PathBuf,
    /// The webhook Service's name, for the certificate's names.
    #[arg(long, default_value = names::WEBHOOK_SERVICE)]
    pub service_name: String,
    /// This replica's identity for leader election (default: the host name).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// The operator's own namespace: it holds the certificate Secret (self-managed mode) and
    /// the leader Lease, and the webhook Service is in it; it is never injected nor sent to the
    /// webhooks.
    #[arg(long, value_name = "NAMESPACE", default_value = names::OPERATOR_NAMESPACE)]
    pub operator_namespace: String,
    #[command(flatten)]
    pub cluster: ClusterFlags,
    #[command(flatten)]
    pub reconcile: ControllerFlags,
    /// On SIGTERM, seconds to keep serving while not ready (the endpoint and the API
    /// server's connections move away), before the webhook port closes.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(0..=300))]
    pub drain_seconds: u64,
    /// Log format (filter with RUST_LOG, default `info`).
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    #[command(flatten)]
    pub inject: InjectFlags,
    /// Address of the xDS control plane's TLS port (gRPC ADS), on every replica: fleets without
    /// `spec.xds` get their listeners, routes, clusters and endpoints from it.
    #[arg(long, default_value = names::XDS_LISTEN)]
    pub xds_listen: SocketAddr,
    #[command(flatten)]
    pub advertise: AdvertiseFlags,
    /// DEVELOPMENT ONLY, outside a cluster: also accept xDS clients without a client
    /// certificate, serving each the fleet its node metadata names. Anyone who can reach the
    /// xDS port can then read any fleet's configuration.
    #[arg(long)]
    pub xds_insecure_node_identity: bool,
    /// The uid of this replica's Pod (from the downward API): the owner of its xDS report
    /// ConfigMap, which Kubernetes then deletes with the pod.
    #[arg(long, env = "POD_UID", value_name = "UID")]
    pub pod_uid: Option<String>,
}

pub fn run(args: RunArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    logging::init(args.log_format);
    let inject = match args.inject.to_config(&args.operator_namespace) {
        Ok(config) => config,
        Err(message) => return Ok(usage_error(&message)),
    };
    let controllers = match args.reconcile.to_config(&args.operator_namespace) {
        Ok(config) => config,
        Err(message) => return Ok(usage_error(&message)),
    };
    let advertise = match args.advertise.control_plane(&args.operator_namespace) {
        Ok(control_plane) => control_plane,
        Err(message) => return Ok(usage_error(&message)),
    };
    let identity = args
        .identity
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| format!("envoy-operator-{}", std::process::id()));
    // The memory budgets (README, "Memory budget") count the work each runtime thread may hold
    // at once (a review being computed, a request being decoded): their number is bounded
    // here, not left to the node's core count. Two keep both ports well ahead of their load.
    let threads = std::thread::available_parallelism().map_or(1, usize::from).min(MAX_WORKER_THREADS);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .map_err(super::Error::Runtime)?;
    let cluster = runtime.block_on(args.cluster.connect())?;
    let config = RunConfig {
        api_server: cluster.as_ref().map_or_else(|| "none".to_owned(), |c| c.server.clone()),
        listen: args.listen,
        metrics_listen: args.metrics_listen,
        cert_mode: args.cert_mode,
        cert_dir: args.cert_dir,
        service_name: args.service_name,
        identity,
        cert_check_interval: Duration::from_secs(60),
        controllers,
        inject,
        serve: WebhookConfig { drain: Duration::from_secs(args.drain_seconds), ..WebhookConfig::default() },
        xds: Some(XdsConfig {
            listen: args.xds_listen,
            advertise,
            insecure_node_identity: args.xds_insecure_node_identity,
        }),
        pod_uid: args.pod_uid,
    };
    if args.xds_insecure_node_identity {
        tracing::warn!(
            "--xds-insecure-node-identity: a client without a certificate that reaches the xDS port gets the configuration of the fleet it names; for development only"
        );
    }
    let result =
        runtime.block_on(operator::run(config, cluster.map(|c| c.client), signal::shutdown_signal()));
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(error) => {
            tracing::error!(%error, error_kind = error.metric_label(), "envoy-operator failed");
            Ok(ExitCode::FAILURE)
        }
    }
}
