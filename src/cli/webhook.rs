//! `envoy-operator webhook`: the admission server alone, from certificate files.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use envoy_operator_core::inject::{InjectConfig, NoEnvoys};
use envoy_operator_core::names;

use super::control_plane::AdvertiseFlags;
use super::inject::read_catalog;
use super::inject_flags::InjectFlags;
use super::usage_error;
use crate::certs::serving;
use crate::ops::logging::{self, LogFormat};
use crate::ops::signal;
use crate::webhook::metrics::WebhookMetrics;
use crate::webhook::{self, inject::SharedEnvoys};

#[derive(clap::Args)]
pub struct WebhookArgs {
    /// Address to listen on.
    #[arg(long, default_value = names::WEBHOOK_LISTEN)]
    pub listen: SocketAddr,
    /// Directory holding tls.crt and tls.key (reloaded when they change).
    #[arg(long, default_value = names::CERT_DIR)]
    pub cert_dir: PathBuf,
    /// Seconds between checks of the certificate files.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub reload_interval: u64,
    /// Largest AdmissionReview body accepted, in bytes (the API server's request limit).
    #[arg(long, default_value_t = 3 * 1024 * 1024)]
    pub max_body_bytes: usize,
    /// Large reviews computed at once (see README.md, "Memory budget").
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub max_concurrent: u32,
    /// Seconds to answer one request, reading its body included (below the webhooks'
    /// timeoutSeconds).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=60))]
    pub request_timeout: u64,
    /// Envoy manifests the injector resolves `sidecar.example.com/envoy` against (without a
    /// cluster, there is no Envoy cache to look them up in). A pod naming one without spec.xds
    /// gets its configuration from the operator's control plane with --xds-advertise, else an
    /// admin-only sidecar.
    #[arg(long = "envoys", value_name = "FILE")]
    pub envoys: Vec<PathBuf>,
    /// The operator's namespace, whose pods the injector never touches.
    #[arg(long, value_name = "NAMESPACE", default_value = names::OPERATOR_NAMESPACE)]
    pub operator_namespace: String,
    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    #[command(flatten)]
    pub inject: InjectFlags,
    #[command(flatten)]
    pub advertise: AdvertiseFlags,
}

pub fn run(args: WebhookArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    logging::init(args.log_format);
    let inject_config = args
        .inject
        .to_config(&args.operator_namespace)
        .and_then(|config| Ok(InjectConfig { control_plane: args.advertise.given()?, ..config }));
    let inject_config = match inject_config {
        Ok(config) => config,
        Err(message) => return Ok(usage_error(&message)),
    };
    let envoys: SharedEnvoys = match args.envoys.as_slice() {
        [] => Arc::new(NoEnvoys),
        files => match read_catalog(files, "default") {
            Ok(catalog) => Arc::new(catalog),
            Err(message) => return Ok(usage_error(&message)),
        },
    };
    // This command serves no metrics port: the families are counted in no registry.
    let metrics = WebhookMetrics::default();
    let config = webhook::serve::WebhookConfig {
        endpoints: webhook::endpoints(inject_config, envoys, &metrics),
        metrics,
        listen: args.listen,
        limits: webhook::router::Limits {
            max_body_bytes: args.max_body_bytes,
            max_concurrent: args.max_concurrent as usize,
            request_timeout: Duration::from_secs(args.request_timeout),
            ..Default::default()
        },
        reload_interval: Duration::from_secs(args.reload_interval),
        ..Default::default()
    };
    let certs = serving::ReloadingCert::load(serving::CertPaths::in_dir(&args.cert_dir))?;
    let runtime = tokio::runtime::Runtime::new().map_err(super::Error::Runtime)?;
    runtime.block_on(webhook::serve::serve(config, certs, signal::shutdown_signal()))?;
    Ok(ExitCode::SUCCESS)
}
