//! `envoy-operator render`: the children the reconcilers would apply for manifests' Foos and
//! Envoys.

use std::process::ExitCode;

use envoy_operator_core::children::render::render_object;
use envoy_operator_core::names::DEFAULT_NGINX_IMAGE;

use super::documents::{ManifestArgs, Pipeline};

#[derive(clap::Args)]
pub struct RenderArgs {
    #[command(flatten)]
    pub manifests: ManifestArgs,
    /// Image of a Foo's nginx pods.
    #[arg(long, default_value = DEFAULT_NGINX_IMAGE)]
    pub nginx_image: String,
}

pub fn run(args: &RenderArgs) -> super::Result<ExitCode> {
    Pipeline { failed_as: "not rendered", all_or_nothing: false }
        .run(&args.manifests, |object| render_object(&object, &args.nginx_image))
}
