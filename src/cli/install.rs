//! `envoy-operator install` and `uninstall`: the CRDs and webhook configurations on the
//! current cluster.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use envoy_operator_core::crd;
use envoy_operator_core::names;
use envoy_operator_core::webhook_config::{self, WebhookOptions, WebhookTarget};

use super::generate::read_ca_bundle;
use crate::ops::install::{self, Manifests};

#[derive(clap::Args)]
pub struct InstallArgs {
    /// Point the webhooks at a local `envoy-operator run` (https://127.0.0.1:8443 with the CA
    /// from --ca-file) instead of the in-cluster Service.
    #[arg(long)]
    pub local: bool,
    /// Base URL of the local webhook.
    #[arg(long, default_value = names::LOCAL_WEBHOOK_URL)]
    pub url: String,
    /// CA the local webhook's certificate is signed by.
    #[arg(long, default_value = names::LOCAL_CA_FILE)]
    pub ca_file: PathBuf,
    /// The operator's namespace (excluded from the webhooks; the Service's namespace).
    #[arg(long, default_value = names::OPERATOR_NAMESPACE)]
    pub namespace: String,
    /// The webhook Service's name.
    #[arg(long, default_value = names::WEBHOOK_SERVICE)]
    pub service_name: String,
    /// Seconds to wait for each CRD to be Established.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
}

#[derive(clap::Args)]
pub struct UninstallArgs {
    /// Also delete the CRDs, and with them every Foo and Envoy in the cluster.
    #[arg(long)]
    pub delete_crds: bool,
}

/// The CRDs and webhook configurations for `options`.
fn manifests(options: &WebhookOptions) -> Manifests {
    Manifests {
        crds: crd::all(),
        mutating: webhook_config::mutating_configuration(webhook_config::mutating_webhooks(options)),
        validating: webhook_config::validating_configuration(webhook_config::validating_webhooks(options)),
    }
}

pub fn install(args: InstallArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    let target = if args.local {
        WebhookTarget::Url { base: args.url.clone(), ca_bundle: read_ca_bundle(&args.ca_file)? }
    } else {
        WebhookTarget::Service {
            namespace: args.namespace.clone(),
            name: args.service_name.clone(),
            port: names::WEBHOOK_SERVICE_PORT,
        }
    };
    let manifests = manifests(&WebhookOptions { target, operator_namespace: args.namespace.clone() });
    tokio::runtime::Runtime::new().map_err(super::Error::Runtime)?.block_on(async {
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

pub fn uninstall(args: UninstallArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    // Only the names matter for deleting.
    let manifests = manifests(&WebhookOptions::default());
    tokio::runtime::Runtime::new().map_err(super::Error::Runtime)?.block_on(async {
        let client = kube::Client::try_default().await?;
        install::uninstall(&client, &manifests, args.delete_crds, |line| println!("{line}")).await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    Ok(ExitCode::SUCCESS)
}
