//! The commands that generate files: `crds`, `webhook-config` and `certs`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use envoy_operator_core::crd;
use envoy_operator_core::names;
use envoy_operator_core::webhook_config::{self, WebhookOptions, WebhookTarget};

use super::documents::OutputFormat;
use super::{Error, Result};
use crate::certs::{pem, serving};

#[derive(clap::Args)]
pub struct CrdsArgs {
    /// Directory to write `<name>.yaml` files into (e.g. `crds/`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Output format when printing.
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    pub output: OutputFormat,
}

pub fn crds(args: CrdsArgs) -> Result<ExitCode> {
    if args.output == OutputFormat::Json {
        return print_json_list(crd::all().iter().map(serde_json::to_value));
    }
    let files = crd::all()
        .iter()
        .map(|definition| Ok((crd::file_name(definition), crd::to_yaml(definition)?)))
        .collect::<Result<Vec<_>>>()?;
    print_or_write(files, args.out)
}

/// Objects printed as a JSON `v1 List`, as `kubectl get -o json` prints several.
fn print_json_list(items: impl Iterator<Item = serde_json::Result<serde_json::Value>>) -> Result<ExitCode> {
    let items = items.collect::<serde_json::Result<Vec<_>>>().map_err(|e| Error::Output(e.into()))?;
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items});
    let text = serde_json::to_string_pretty(&list).map_err(|e| Error::Output(e.into()))?;
    println!("{text}");
    Ok(ExitCode::SUCCESS)
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
    #[arg(long, value_name = "NAMESPACE", default_value = names::OPERATOR_NAMESPACE)]
    pub operator_namespace: String,
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
    /// Output format when printing.
    #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
    pub output: OutputFormat,
}

impl WebhookConfigArgs {
    /// What the configurations are generated from (reads the CA file in local mode).
    pub fn options(&self) -> Result<WebhookOptions> {
        let target = match self.mode {
            WebhookMode::Cluster => WebhookTarget::Service {
                namespace: self.operator_namespace.clone(),
                name: self.service_name.clone(),
                port: self.port,
            },
            WebhookMode::Local => local_target(&self.url, &self.ca_file)?,
        };
        Ok(WebhookOptions { target, operator_namespace: self.operator_namespace.clone() })
    }
}

pub fn webhook_config(args: WebhookConfigArgs) -> std::result::Result<ExitCode, Box<dyn std::error::Error>> {
    let options = args.options()?;
    if args.output == OutputFormat::Json {
        let mutating = webhook_config::mutating_configuration(webhook_config::mutating_webhooks(&options));
        let validating =
            webhook_config::validating_configuration(webhook_config::validating_webhooks(&options));
        return Ok(print_json_list(
            [serde_json::to_value(mutating), serde_json::to_value(validating)].into_iter(),
        )?);
    }
    let files = webhook_config::render(&options)?;
    let files = files.into_iter().map(|(name, yaml)| (name.to_owned(), yaml)).collect();
    Ok(print_or_write(files, args.out)?)
}

/// The webhook at `url` (HTTPS: the API server calls webhooks over TLS only), trusting the CA
/// in `ca_file`.
pub fn local_target(url: &str, ca_file: &Path) -> Result<WebhookTarget> {
    let https = url
        .parse::<http::Uri>()
        .ok()
        .filter(|uri| uri.scheme_str() == Some("https") && uri.host().is_some() && uri.query().is_none());
    if https.is_none() {
        return Err(Error::Invalid(format!(
            "--url {url:?}: the API server calls webhooks over HTTPS only: give https://HOST[:PORT][/PATH]"
        )));
    }
    Ok(WebhookTarget::Url { base: url.to_owned(), ca_bundle: read_ca_bundle(ca_file)? })
}

/// Reads a PEM CA bundle for `caBundle`: certificates only, at least one, each parsing as
/// X.509, so a private key or any other file never ends up in a webhook configuration.
pub fn read_ca_bundle(path: &Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    let invalid = |detail: String| Error::Invalid(format!("--ca-file {}: {detail}", path.display()));
    let mut certificates = 0;
    for block in pem::blocks(&bytes) {
        let block = block.map_err(|e| invalid(e.to_string()))?;
        if block.label != pem::CERTIFICATE {
            return Err(invalid(format!(
                "holds a {} block: only CA certificates (CERTIFICATE blocks) belong in caBundle",
                block.label
            )));
        }
        block.parse_x509().map_err(|e| invalid(format!("a certificate that does not parse: {e}")))?;
        certificates += 1;
    }
    if certificates == 0 {
        return Err(invalid(
            "no CERTIFICATE block: expected the PEM CA certificate (e.g. certs/ca.crt)".to_owned(),
        ));
    }
    Ok(bytes)
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
    /// The namespace of the webhook Service (the operator's).
    #[arg(long, value_name = "NAMESPACE", default_value = names::OPERATOR_NAMESPACE)]
    pub operator_namespace: String,
    /// Validity in days.
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u32).range(1..=3650))]
    pub days: u32,
    /// A further name the serving certificate is valid for: a DNS name or an IP address, e.g.
    /// the host address a cluster dials for a webhook run outside it (repeatable).
    #[arg(long = "name", value_name = "NAME", value_parser = subject_name)]
    pub names: Vec<String>,
    /// Replace existing files.
    #[arg(long)]
    pub force: bool,
}

pub fn certs(args: CertsArgs) -> std::result::Result<ExitCode, serving::TlsError> {
    let options = serving::CertOptions {
        service_name: args.service_name,
        namespace: args.operator_namespace,
        days: args.days,
        extra_names: args.names,
    };
    let generated = serving::generate(&options)?;
    for path in serving::write(&args.out, &generated, args.force)? {
        eprintln!("wrote {}", path.display());
    }
    eprintln!("serving certificate for: {}", options.subject_alt_names().join(", "));
    Ok(ExitCode::SUCCESS)
}

/// A name a certificate can be issued for: an IP address, or a DNS name (RFC 1123, any case;
/// a leading `*.` for a wildcard).
fn subject_name(value: &str) -> std::result::Result<String, String> {
    if value.parse::<std::net::IpAddr>().is_ok() {
        return Ok(value.to_owned());
    }
    let dns = value.strip_prefix("*.").unwrap_or(value).to_ascii_lowercase();
    if envoy_operator_core::rules::format::dns1123_subdomain(&dns).is_empty() {
        Ok(value.to_owned())
    } else {
        Err(format!("{value:?} is neither an IP address nor a DNS name (letters, digits, '-' and '.')"))
    }
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
    fn local_mode_needs_https_and_a_ca_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let generated = serving::generate(&serving::CertOptions {
            service_name: "s".into(),
            namespace: "n".into(),
            days: 1,
            extra_names: vec![],
        })
        .unwrap();
        let (ca, key) = (dir.path().join("ca.crt"), dir.path().join("tls.key"));
        std::fs::write(&ca, &generated.ca_pem).unwrap();
        std::fs::write(&key, &generated.key_pem).unwrap();
        assert!(local_target("https://127.0.0.1:8443", &ca).is_ok());
        let error = local_target("http://127.0.0.1:8443", &ca).unwrap_err().to_string();
        assert!(error.contains("HTTPS only"), "{error}");
        let error = local_target("https://127.0.0.1:8443", &key).unwrap_err().to_string();
        assert!(error.contains("PRIVATE KEY block"), "a private key never becomes a caBundle: {error}");
        std::fs::write(&key, "hello").unwrap();
        assert!(
            local_target("https://127.0.0.1:8443", &key).unwrap_err().to_string().contains("no CERTIFICATE")
        );
    }

    #[test]
    fn certificate_names_are_dns_names_or_ips() {
        for ok in ["172.18.0.1", "fd00::1", "host.minikube.internal", "Webhook.Example.COM", "*.svc.local"] {
            assert_eq!(subject_name(ok), Ok(ok.to_owned()));
        }
        for bad in ["bad name!", "", "-x", "a..b", "http://x"] {
            assert!(subject_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_default_flags_generate_the_in_cluster_install() {
        let options = Cli::parse_from(["webhook-config"]).args.options().unwrap();
        assert_eq!(options.target, WebhookOptions::default().target);
        assert_eq!(options.operator_namespace, WebhookOptions::default().operator_namespace);
    }
}
