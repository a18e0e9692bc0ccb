//! `envoy-operator render`: the children the reconcilers would apply for manifests' Foos and
//! Envoys.

use std::path::PathBuf;
use std::process::ExitCode;

use envoy_operator_core::children::envoy::ControlPlaneTrust;
use envoy_operator_core::children::render::{Settings, render_object};
use envoy_operator_core::names::{self, DEFAULT_NGINX_IMAGE};

use super::control_plane::AdvertiseFlags;
use super::documents::{ManifestArgs, Pipeline};
use super::usage_error;

#[derive(clap::Args)]
pub struct RenderArgs {
    #[command(flatten)]
    pub manifests: ManifestArgs,
    /// Image of a Foo's nginx pods.
    #[arg(long, default_value = DEFAULT_NGINX_IMAGE)]
    pub nginx_image: String,
    /// The operator's namespace (where its xDS Service is).
    #[arg(long, value_name = "NAMESPACE", default_value = names::OPERATOR_NAMESPACE)]
    pub operator_namespace: String,
    #[command(flatten)]
    pub advertise: AdvertiseFlags,
    /// The CA of the operator's xDS server (PEM), for the CA file of the bootstrap ConfigMaps of
    /// Envoys without `spec.xds`. With it or `--xds-advertise`, such Envoys get the bootstrap of
    /// the operator's control plane (which `run` does not serve yet); without either, the
    /// admin-only bootstrap `run` gives them today.
    #[arg(long, value_name = "FILE")]
    pub xds_ca_file: Option<PathBuf>,
}

pub fn run(args: &RenderArgs) -> super::Result<ExitCode> {
    let control_plane = match args.advertise.control_plane(&args.operator_namespace) {
        Ok(control_plane) => control_plane,
        Err(message) => return Ok(usage_error(&message)),
    };
    let ca_pem = match &args.xds_ca_file {
        Some(path) => Some(String::from_utf8_lossy(&super::generate::read_ca_bundle(path)?).into_owned()),
        None => None,
    };
    // `run` does not serve the control plane yet, so its fleets without `spec.xds` are
    // admin-only; render shows the same unless asked for the control plane's bootstrap.
    let asked = args.advertise.xds_advertise.is_some() || ca_pem.is_some();
    let trust = ControlPlaneTrust { control_plane, ca_pem };
    let settings = Settings { nginx_image: &args.nginx_image, control_plane: asked.then_some(&trust) };
    Pipeline { failed_as: "not rendered", all_or_nothing: false }
        .run(&args.manifests, |object| render_object(&object, &settings))
}
