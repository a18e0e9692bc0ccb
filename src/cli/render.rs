//! `envoy-operator render`: the children the reconcilers would apply for manifests' Foos and
//! Envoys; with `--xds`, the xDS resources the operator's control plane would serve their
//! Envoys.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use envoy_operator_core::children::envoy::ControlPlaneTrust;
use envoy_operator_core::children::render::{Settings, render_object};
use envoy_operator_core::manifest::{Outcome, to_yaml};
use envoy_operator_core::names::{self, CONTROLLER_NAME, DEFAULT_NGINX_IMAGE};
use envoy_operator_core::render::Manifests;
use serde_json::Value;

use super::control_plane::AdvertiseFlags;
use super::documents::{ManifestArgs, OutputFormat, Pipeline, read_objects};
use super::error::Error;
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
    /// The CA of the operator's xDS server (PEM), for the CA file (`xds-ca.yaml`) of the
    /// bootstrap ConfigMaps of Envoys without `spec.xds`, which `run` writes from its own CA;
    /// without it that file is left out.
    #[arg(long, value_name = "FILE")]
    pub xds_ca_file: Option<PathBuf>,
    /// Print, instead of the children, the xDS resources each Envoy without spec.xds would be
    /// served, translated from the EnvoyRoutes, Services and EndpointSlices of the same
    /// manifests (objects without a namespace are in `default`): per Envoy, the routes'
    /// statuses and one DiscoveryResponse per type (clusters, endpoints, listeners, routes: the
    /// order they are pushed in), in Envoy's own JSON form. Likewise per Gateway of a
    /// GatewayClass of the operator, from the HTTPRoutes, ReferenceGrants and kubernetes.io/tls
    /// Secrets of the manifests: its status, its routes' statuses, and its fleet's resources
    /// (certificates included, private keys redacted). `-o json` prints a JSON array.
    #[arg(long, conflicts_with_all = ["nginx_image", "xds_ca_file", "xds_advertise"])]
    pub xds: bool,
    /// Like --xds, but print each fleet's IR instead of Envoy's resources: what its proxies
    /// should do (listeners, virtual hosts, routes, backends and their endpoints), the step
    /// between the route objects and Envoy's configuration. Certificates are shown by size,
    /// private keys redacted.
    #[arg(long, conflicts_with_all = ["nginx_image", "xds_ca_file", "xds_advertise", "xds"])]
    pub ir: bool,
}

pub fn run(args: &RenderArgs) -> super::Result<ExitCode> {
    if args.xds || args.ir {
        return render_xds(&args.manifests, args.ir);
    }
    let control_plane = match args.advertise.control_plane(&args.operator_namespace) {
        Ok(control_plane) => control_plane,
        Err(message) => return Ok(usage_error(&message)),
    };
    let ca_pem = match &args.xds_ca_file {
        Some(path) => Some(String::from_utf8_lossy(&super::generate::read_ca_bundle(path)?).into_owned()),
        None => None,
    };
    // What `run` applies: fleets without `spec.xds` are served by the operator's control plane.
    let trust = ControlPlaneTrust { control_plane, ca_pem };
    let settings = Settings { nginx_image: &args.nginx_image, control_plane: Some(&trust) };
    Pipeline { failed_as: "not rendered", all_or_nothing: false }
        .run(&args.manifests, |object| render_object(&object, &settings))
}

/// `render --xds` (or `--ir`: each fleet's IR): every object read first (a fleet's
/// configuration depends on all of them), then one document per fleet. Like `render`, prints
/// what can be rendered and exits 1 when any object would be refused.
fn render_xds(args: &ManifestArgs, ir: bool) -> super::Result<ExitCode> {
    const DEFAULT_NAMESPACE: &str = "default";
    let objects = read_objects(args)?;
    let documents = objects.len();
    let mut manifests = Manifests::default();
    let mut failures = 0;
    for (origin, object) in objects {
        match object.and_then(|object| manifests.add(object, DEFAULT_NAMESPACE)) {
            Ok(()) => {}
            Err(Outcome::Skipped { note }) => eprintln!("note: {origin}: {note}"),
            Err(outcome) => {
                failures += usize::from(outcome.is_failure());
                if let Outcome::Rejected { message } | Outcome::Unreadable { message } = outcome {
                    eprintln!("error: {origin}: {message}");
                }
            }
        }
    }
    let (gateways, gateway_notes) = manifests.gateways();
    for note in manifests.unrendered_parents().into_iter().chain(gateway_notes) {
        eprintln!("note: {note}");
    }
    // Envoys first, in the order of the manifests, then Gateways, sorted.
    let fleets = manifests.fleets();
    let rendered: Vec<(String, Value)> = if ir {
        (fleets.iter().map(|fleet| (fleet.comment(), fleet.ir_document())))
            .chain(gateways.iter().map(|gateway| (gateway.comment(), gateway.ir_document())))
            .collect()
    } else {
        (fleets.iter().map(|fleet| (fleet.comment(), fleet.document())))
            .chain(gateways.iter().map(|gateway| (gateway.comment(), gateway.document())))
            .collect()
    };
    let mut out = std::io::stdout().lock();
    match args.output {
        OutputFormat::Json => {
            let array = Value::Array(rendered.into_iter().map(|(_, document)| document).collect());
            let text = serde_json::to_string_pretty(&array).map_err(|e| Error::Output(e.into()))?;
            writeln!(out, "{text}").map_err(Error::Output)?;
        }
        OutputFormat::Yaml => {
            for (i, (comment, document)) in rendered.iter().enumerate() {
                let mut text = String::from(if i > 0 { "---\n" } else { "" });
                for line in comment.lines() {
                    text.push_str(&format!("# {line}\n"));
                }
                text.push_str(&to_yaml(document)?);
                write!(out, "{text}").map_err(Error::Output)?;
            }
        }
    }
    out.flush().map_err(Error::Output)?;
    if failures > 0 {
        eprintln!("{failures} of {documents} documents not rendered");
        return Ok(ExitCode::FAILURE);
    }
    if fleets.is_empty() && gateways.is_empty() {
        eprintln!(
            "error: no Envoy without spec.xds and no Gateway of a GatewayClass of {CONTROLLER_NAME} in the manifests: nothing is served by the operator's control plane"
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
