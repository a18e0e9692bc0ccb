//! `envoy-operator controller`: the reconcilers alone, and their flags (shared with `run`).

use std::process::ExitCode;

use envoy_operator_core::names::DEFAULT_NGINX_IMAGE;

use super::cluster::ClusterFlags;
use crate::controller::{self, ControllerConfig, Settings};
use crate::ops::logging::{self, LogFormat};
use crate::ops::signal;

/// The reconcilers' flags, shared by `controller` and `run`.
#[derive(clap::Args)]
pub struct ControllerFlags {
    /// Reconcile only this namespace (default: all namespaces).
    #[arg(long = "watch-namespace", value_name = "NAMESPACE", env = "WATCH_NAMESPACE")]
    pub watch_namespace: Option<String>,
    /// Reconciles running at once, per kind (0: unbounded).
    #[arg(long, default_value_t = 4)]
    pub concurrency: u16,
    /// Image of a Foo's nginx pods.
    #[arg(long, default_value = DEFAULT_NGINX_IMAGE)]
    pub nginx_image: String,
}

impl ControllerFlags {
    pub fn to_config(&self) -> ControllerConfig {
        ControllerConfig {
            namespace: self.watch_namespace.clone(),
            concurrency: self.concurrency,
            settings: Settings { nginx_image: self.nginx_image.clone(), ..Default::default() },
            // `run` sets it: it serves xDS; `controller` alone does not.
            xds_reports_namespace: None,
        }
    }
}

#[derive(clap::Args)]
pub struct ControllerArgs {
    #[command(flatten)]
    pub cluster: ClusterFlags,
    #[command(flatten)]
    pub reconcile: ControllerFlags,
    /// Log format (filter with RUST_LOG, default `info`).
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

pub fn run(args: ControllerArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    logging::init(args.log_format);
    let runtime = tokio::runtime::Runtime::new().map_err(super::Error::Runtime)?;
    let cluster = runtime.block_on(args.cluster.require())?;
    tracing::info!(server = %cluster.server, "reconciling");
    let result = runtime.block_on(controller::run(
        cluster.client,
        args.reconcile.to_config(),
        signal::shutdown_signal(),
        |ctx| ctx,
    ));
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(error) => {
            tracing::error!(%error, error_kind = error.metric_label(), "controller failed");
            Ok(ExitCode::FAILURE)
        }
    }
}
