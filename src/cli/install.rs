//! `envoy-operator install` and `uninstall`: the CRDs and webhook configurations on the
//! current cluster.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use envoy_operator_core::crd;
use envoy_operator_core::names;
use envoy_operator_core::webhook_config::{self, WebhookOptions, WebhookTarget};

use super::cluster::ClusterFlags;
use super::generate::local_target;
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
    #[arg(long, value_name = "NAMESPACE", default_value = names::OPERATOR_NAMESPACE)]
    pub operator_namespace: String,
    /// The webhook Service's name.
    #[arg(long, default_value = names::WEBHOOK_SERVICE)]
    pub service_name: String,
    /// Seconds to wait for each CRD to be Established.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
    #[command(flatten)]
    pub cluster: ClusterFlags,
}

#[derive(clap::Args)]
pub struct UninstallArgs {
    /// Also delete the CRDs, and with them every Foo and Envoy in the cluster (asks first).
    #[arg(long)]
    pub delete_crds: bool,
    /// Do not ask before deleting the CRDs.
    #[arg(long, short = 'y')]
    pub yes: bool,
    #[command(flatten)]
    pub cluster: ClusterFlags,
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
        local_target(&args.url, &args.ca_file)?
    } else {
        WebhookTarget::Service {
            namespace: args.operator_namespace.clone(),
            name: args.service_name.clone(),
            port: names::WEBHOOK_SERVICE_PORT,
        }
    };
    let manifests =
        manifests(&WebhookOptions { target, operator_namespace: args.operator_namespace.clone() });
    tokio::runtime::Runtime::new().map_err(super::Error::Runtime)?.block_on(async {
        let cluster = args.cluster.require().await?;
        install::install(&cluster.client, &manifests, Duration::from_secs(args.timeout), |line| {
            println!("{line}")
        })
        .await
        .map_err(|error| format!("{}: {error}", cluster.server))?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    if !args.local {
        println!(
            "note: the webhooks call the Service {}/{}, which answers only once the operator runs there \
             (kubectl apply -k deploy/). Until then creating or changing a Foo or Envoy fails \
             (failurePolicy Fail) and pods are created without a sidecar (Ignore). To develop against \
             a local run instead: envoy-operator install --local",
            args.operator_namespace, args.service_name
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub fn uninstall(args: UninstallArgs) -> Result<ExitCode, Box<dyn std::error::Error>> {
    if args.delete_crds && !args.yes && !confirmed_deleting_crds()? {
        eprintln!("nothing deleted");
        return Ok(ExitCode::FAILURE);
    }
    // Only the names matter for deleting.
    let manifests = manifests(&WebhookOptions::default());
    tokio::runtime::Runtime::new().map_err(super::Error::Runtime)?.block_on(async {
        let cluster = args.cluster.require().await?;
        install::uninstall(&cluster.client, &manifests, args.delete_crds, |line| println!("{line}"))
            .await
            .map_err(|error| format!("{}: {error}", cluster.server))?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Asks on the terminal before `--delete-crds` deletes every Foo and Envoy; refuses without a
/// terminal to ask on (scripts say `--yes`).
fn confirmed_deleting_crds() -> Result<bool, Box<dyn std::error::Error>> {
    use std::io::{BufRead, IsTerminal, Write};
    if !std::io::stdin().is_terminal() {
        return Err("--delete-crds deletes every Foo and Envoy in the cluster: confirm with --yes".into());
    }
    eprint!(
        "Deleting the CRDs deletes every Foo and Envoy in the cluster, and their children. Continue? [y/N] "
    );
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}
