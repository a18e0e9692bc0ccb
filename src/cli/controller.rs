//! `envoy-operator controller`: the reconcilers alone, and their flags (shared with `run`).

use std::process::ExitCode;

use envoy_operator_core::children::install::InstallId;
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
    /// This install's identity, marked on every child it applies; children another install
    /// marked are left to it. Installs whose watched namespaces overlap must differ in it, and
    /// every replica of one install shares it. Default: `<operator namespace>/envoy-operator-leader`
    /// (the Lease the replicas elect their leader on).
    #[arg(long, value_name = "ID", env = "ENVOY_OPERATOR_INSTALL_ID")]
    pub install_id: Option<String>,
}

impl ControllerFlags {
    /// The reconcilers' configuration for an operator running in `operator_namespace` (where the
    /// default install identity comes from); an error message for an invalid `--install-id`.
    pub fn to_config(&self, operator_namespace: &str) -> Result<ControllerConfig, String> {
        let install = match &self.install_id {
            Some(id) => InstallId::new(id).map_err(|error| format!("--install-id: {error}"))?,
            None => InstallId::of_namespace(operator_namespace),
        };
        Ok(ControllerConfig {
            namespace: self.watch_namespace.clone(),
            concurrency: self.concurrency,
            settings: Settings { nginx_image: self.nginx_image.clone(), install, ..Default::default() },
            // `run` sets it: it serves xDS; `controller` alone does not.
            xds_reports_namespace: None,
        })
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
    // The namespace it runs in (the downward API's, else the in-cluster or kubeconfig one).
    let namespace =
        std::env::var("POD_NAMESPACE").unwrap_or_else(|_| cluster.client.default_namespace().to_owned());
    let config = match args.reconcile.to_config(&namespace) {
        Ok(config) => config,
        Err(message) => return Ok(super::usage_error(&message)),
    };
    tracing::info!(server = %cluster.server, install = %config.settings.install, "reconciling");
    let result =
        runtime.block_on(controller::run(cluster.client, config, signal::shutdown_signal(), |ctx| ctx));
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(error) => {
            tracing::error!(%error, error_kind = error.metric_label(), "controller failed");
            Ok(ExitCode::FAILURE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(install_id: Option<&str>) -> ControllerFlags {
        ControllerFlags {
            watch_namespace: None,
            concurrency: 4,
            nginx_image: DEFAULT_NGINX_IMAGE.to_owned(),
            install_id: install_id.map(str::to_owned),
        }
    }

    #[test]
    fn the_install_identity_defaults_to_the_operator_namespace_and_its_lease() {
        let config = flags(None).to_config("team-ops").expect("valid");
        assert_eq!(config.settings.install.as_str(), "team-ops/envoy-operator-leader");
        let config = flags(Some("edge-install")).to_config("team-ops").expect("valid");
        assert_eq!(config.settings.install.as_str(), "edge-install");
    }

    #[test]
    fn an_invalid_install_identity_is_a_usage_error() {
        let error = flags(Some("two words")).to_config("team-ops").expect_err("refused");
        assert!(error.starts_with("--install-id: "), "{error}");
    }
}
