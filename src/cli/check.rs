//! `envoy-operator check`: every Foo and Envoy of manifests defaulted and validated offline,
//! every GatewayClass, Gateway and HTTPRoute checked against what the operator can serve.

use std::process::ExitCode;

use envoy_operator_core::check::check_object;

use super::documents::{ManifestArgs, Pipeline};

#[derive(clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub manifests: ManifestArgs,
}

pub fn run(args: &CheckArgs) -> super::Result<ExitCode> {
    Pipeline { failed_as: "rejected", all_or_nothing: false }.run(&args.manifests, check_object)
}
