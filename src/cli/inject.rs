//! `envoy-operator inject`: the sidecar added to the Pods and pod templates of manifests, as
//! the injection webhook would add it (like `istioctl kube-inject`).

use std::path::PathBuf;
use std::process::ExitCode;

use envoy_operator_core::inject::workload::{Options, process_object};
use envoy_operator_core::inject::{EnvoyCatalog, EnvoyLookup, InjectConfig, NoEnvoys};
use envoy_operator_core::names;

use super::control_plane::AdvertiseFlags;
use super::documents::{ManifestArgs, Pipeline, read_texts};
use super::inject_flags::InjectFlags;
use super::usage_error;

#[derive(clap::Args)]
pub struct InjectArgs {
    #[command(flatten)]
    pub manifests: ManifestArgs,
    /// Manifests of the Envoy resources that pods name with sidecar.example.com/envoy. A pod
    /// naming one without spec.xds gets its configuration from the operator's control plane
    /// with --xds-advertise (and the fleet label), else an admin-only sidecar.
    #[arg(long)]
    pub envoys: Vec<PathBuf>,
    /// Namespace of objects that set none.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// Remove the sidecars a previous injection recorded instead of adding them.
    #[arg(long)]
    pub uninject: bool,
    /// The operator's namespace, never injected (as the webhook leaves it alone).
    #[arg(long, value_name = "NAMESPACE", default_value = names::OPERATOR_NAMESPACE)]
    pub operator_namespace: String,
    #[command(flatten)]
    pub flags: InjectFlags,
    #[command(flatten)]
    pub advertise: AdvertiseFlags,
}

pub fn run(args: &InjectArgs) -> super::Result<ExitCode> {
    let config = match args
        .flags
        .to_config(&args.operator_namespace)
        .and_then(|config| Ok(InjectConfig { control_plane: args.advertise.given()?, ..config }))
    {
        Ok(config) => config,
        Err(message) => return Ok(usage_error(&message)),
    };
    let catalog = match args.envoys.as_slice() {
        [] => None,
        files => match read_catalog(files, &args.namespace) {
            Ok(catalog) => Some(catalog),
            Err(message) => return Ok(usage_error(&message)),
        },
    };
    let envoys: &dyn EnvoyLookup = match &catalog {
        Some(catalog) => catalog,
        None => &NoEnvoys,
    };
    let options =
        Options { config: &config, envoys, default_namespace: &args.namespace, uninject: args.uninject };
    Pipeline { failed_as: "failed", all_or_nothing: true }
        .run(&args.manifests, |object| process_object(object, &options))
}

/// The `Envoy` documents of files, directories or `-`. Unreadable Envoys are errors: a catalog
/// that silently lacks one would send pods naming it to the wrong xDS server or deny them.
pub fn read_catalog(paths: &[PathBuf], default_namespace: &str) -> Result<EnvoyCatalog, String> {
    let mut catalog = EnvoyCatalog::default();
    let mut problems = Vec::new();
    for (name, text) in read_texts(paths).map_err(|e| e.to_string())? {
        problems.extend(catalog.add_manifest(&name, &text, default_namespace));
    }
    if problems.is_empty() { Ok(catalog) } else { Err(problems.join("\n")) }
}
