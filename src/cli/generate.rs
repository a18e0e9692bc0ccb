//! The commands that generate files: `crds`, `webhook-config` and `certs`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use envoy_operator_core::crd;
use envoy_operator_core::names;
use envoy_operator_core::webhook_config::{self, WebhookOptions, WebhookTarget};

use super::{Error, Result};
use crate::tls;

#[derive(clap::Args)]
pub struct CrdsArgs {
    /// Directory to write `<name>.yaml` files into (e.g. `crds/`).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn crds(args: CrdsArgs) -> Result<ExitCode> {
    let files = crd::all()
        .iter()
        .map(|definition| Ok((crd::file_name(definition), crd::to_yaml(definition)?)))
        .collect::<Result<Vec<_>>>()?;
    print_or_write(files, args.out)
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum WebhookMode {
    /// Reach the webhook through its Service (caBundle patched in by the operator).
    Cluster,
    /// Reach the webhook by URL with the local CA as caBundle.
    Local,
}

#[derive(clap::Args)]
pub struct WebhookConfigArgs {
    #[arg(long, value_enum, default_value = "cluster")]
    pub mode: WebhookMode,
    /// The webhook Service's name (cluster mode).
    #[arg(long, default_value = names::WEBHOOK_SERVICE)]
    pub service_name: String,
    /// The operator's namespace: the Service's, and excluded from the webhooks.
    #[arg(long, default_value = names::OPERATOR_NAMESPACE)]
    pub namespace: String,
    /// The Service's port (cluster mode).
    #[arg(long, default_value_t = names::WEBHOOK_SERVICE_PORT, value_parser = clap::value_parser!(i32).range(1..=65535))]
    pub port: i32,
    /// Base URL of the webhook (local mode).
    #[arg(long, default_value = names::LOCAL_WEBHOOK_URL)]
    pub url: String,
    /// CA certificate for caBundle (local mode).
    #[arg(long, default_value = names::LOCAL_CA_FILE)]
    pub ca_file: PathBuf,
    /// Directory to write the files into (e.g. `webhook-config/`); stdout when absent.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl WebhookConfigArgs {
    /// What the configurations are generated from (reads the CA file in local mode).
    pub fn options(&self) -> Result<WebhookOptions> {
        let target = match self.mode {
            WebhookMode::Cluster => WebhookTarget::Service {
                namespace: self.namespace.clone(),
                name: self.service_name.clone(),
                port: self.port,
            },
            WebhookMode::Local => {
                WebhookTarget::Url { base: self.url.clone(), ca_bundle: read_ca_bundle(&self.ca_file)? }
            }
        };
        Ok(WebhookOptions { target, operator_namespace: self.namespace.clone() })
    }
}

pub fn webhook_config(args: WebhookConfigArgs) -> std::result::Result<ExitCode, Box<dyn std::error::Error>> {
    let files = webhook_config::render(&args.options()?)?;
    let files = files.into_iter().map(|(name, yaml)| (name.to_owned(), yaml)).collect();
    Ok(print_or_write(files, args.out)?)
}

/// Reads a PEM CA bundle for `caBundle`.
pub fn read_ca_bundle(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|source| Error::Read { path: path.to_owned(), source })
}

/// Prints `(file name, text)` pairs as one YAML stream, or writes each into `out`.
fn print_or_write(files: Vec<(String, String)>, out: Option<PathBuf>) -> Result<ExitCode> {
    match out {
        None => print!("{}", files.into_iter().map(|(_, yaml)| yaml).collect::<Vec<_>>().join("---\n")),
        Some(dir) => {
            std::fs::create_dir_all(&dir).map_err(|source| Error::Write { path: dir.clone(), source })?;
            for (name, yaml) in files {
                let path = dir.join(name);
                std::fs::write(&path, yaml).map_err(|source| Error::Write { path: path.clone(), source })?;
                eprintln!("wrote {}", path.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args)]
pub struct CertsArgs {
    /// Directory to write the files into.
    #[arg(long, default_value = names::CERT_DIR)]
    pub out: PathBuf,
    /// The webhook Service's name (the certificate names `<service>.<namespace>.svc`).
    #[arg(long, default_value = names::WEBHOOK_SERVICE)]
    pub service_name: String,
    /// The namespace of the webhook Service.
    #[arg(long, default_value = names::OPERATOR_NAMESPACE)]
    pub namespace: String,
    /// Validity in days.
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..=3650))]
    pub days: u32,
    /// A further name the serving certificate is valid for: a DNS name or an IP address, e.g.
    /// the host address a cluster dials for a webhook run outside it (repeatable).
    #[arg(long = "name", value_name = "NAME")]
    pub names: Vec<String>,
    /// Replace existing files.
    #[arg(long)]
    pub force: bool,
}

pub fn certs(args: CertsArgs) -> std::result::Result<ExitCode, tls::TlsError> {
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: WebhookConfigArgs,
    }

    #[test]
    fn the_default_flags_generate_the_in_cluster_install() {
        let options = Cli::parse_from(["webhook-config"]).args.options().unwrap();
        assert_eq!(options.target, WebhookOptions::default().target);
        assert_eq!(options.operator_namespace, WebhookOptions::default().operator_namespace);
    }
}
