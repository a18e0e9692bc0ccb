//! The injector's command-line flags, shared by `inject` and the operator's server command
//! so both build their [`InjectConfig`] the same way.

use envoy_operator_core::inject::annotations::parse_xds;
use envoy_operator_core::inject::{InjectConfig, ProxyResources};
use envoy_operator_core::kube_version::{self, KubeVersion};
use envoy_operator_core::names::{
    DEFAULT_ENVOY_IMAGE, DEFAULT_MESH_INIT_IMAGE, DEFAULT_PROXY_CPU_REQUEST, DEFAULT_PROXY_MEMORY_LIMIT,
    DEFAULT_PROXY_MEMORY_REQUEST,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct InjectFlags {
    /// Envoy image of the sidecar.
    #[arg(long, value_name = "IMAGE", default_value = DEFAULT_ENVOY_IMAGE)]
    pub image: String,

    /// Image of a mesh sidecar's capture init container (`envoy-operator mesh-init`): the
    /// operator's own. Set it when the operator runs from another image.
    #[arg(long, value_name = "IMAGE", default_value = DEFAULT_MESH_INIT_IMAGE)]
    pub mesh_init_image: String,

    /// xDS server (`host:port`) for pods that name none; without it they get an admin-only
    /// bootstrap.
    #[arg(long, value_name = "HOST:PORT")]
    pub xds: Option<String>,

    /// Default CPU request of the sidecar (annotation sidecar.example.com/proxy-cpu); "" for none.
    #[arg(long, value_name = "QUANTITY", default_value = DEFAULT_PROXY_CPU_REQUEST)]
    pub proxy_cpu: String,

    /// Default memory request (sidecar.example.com/proxy-memory); "" for none.
    #[arg(long, value_name = "QUANTITY", default_value = DEFAULT_PROXY_MEMORY_REQUEST)]
    pub proxy_memory: String,

    /// Default CPU limit (sidecar.example.com/proxy-cpu-limit); none unless set.
    #[arg(long, value_name = "QUANTITY", default_value = "")]
    pub proxy_cpu_limit: String,

    /// Default memory limit (sidecar.example.com/proxy-memory-limit); "" for none.
    #[arg(long, value_name = "QUANTITY", default_value = DEFAULT_PROXY_MEMORY_LIMIT)]
    pub proxy_memory_limit: String,

    /// Inject native sidecars (init containers with restartPolicy: Always; Kubernetes 1.29+)
    /// unless a pod's sidecar.example.com/native-sidecar annotation says otherwise.
    #[arg(long)]
    pub native_sidecar: bool,

    /// The Kubernetes version (`MAJOR.MINOR`) of the cluster the pods go to, where it cannot be
    /// asked (`inject`, `webhook`; `run` asks the API server). Below 1.29 there are no native
    /// sidecars: pods that run to completion (Jobs) are then left without one. Default: a
    /// current cluster.
    #[arg(long, value_name = "MAJOR.MINOR", value_parser = parse_kube_version)]
    pub kube_version: Option<(u32, u32)>,

    /// Another namespace never injected (repeatable), beyond kube-system, kube-public,
    /// kube-node-lease and the operator's.
    #[arg(long = "exclude-namespace", value_name = "NAMESPACE")]
    pub exclude_namespaces: Vec<String>,
}

impl InjectFlags {
    /// The configuration these flags describe for an operator in `operator_namespace` (never
    /// injected), checked.
    pub fn to_config(&self, operator_namespace: &str) -> Result<InjectConfig, String> {
        let quantity = |value: &str| (!value.is_empty()).then(|| Quantity(value.to_owned()));
        let default_xds = self
            .xds
            .as_deref()
            .map(|xds| parse_xds(xds).map_err(|reason| format!("--xds {xds:?}: {reason}")));
        let config = InjectConfig {
            image: self.image.clone(),
            resources: ProxyResources {
                cpu_request: quantity(&self.proxy_cpu),
                memory_request: quantity(&self.proxy_memory),
                cpu_limit: quantity(&self.proxy_cpu_limit),
                memory_limit: quantity(&self.proxy_memory_limit),
            },
            default_xds: default_xds.transpose()?,
            // The commands that serve or know the control plane set it from their own flags.
            control_plane: None,
            mesh_init_image: self.mesh_init_image.clone(),
            native_sidecar: self.native_sidecar,
            native_sidecars_supported: self.kube_version.is_none_or(supports_native_sidecars),
            operator_namespace: operator_namespace.to_owned(),
            extra_excluded_namespaces: self.exclude_namespaces.clone(),
        };
        config.validate()?;
        Ok(config)
    }
}

/// Whether a Kubernetes `(major, minor)` runs native sidecars (on by default since 1.29).
pub fn supports_native_sidecars((major, minor): (u32, u32)) -> bool {
    KubeVersion::new(major, minor) >= kube_version::NATIVE_SIDECARS
}

/// `1.28`, `v1.30` or `1.31.2` as `(major, minor)`.
pub fn parse_kube_version(value: &str) -> Result<(u32, u32), String> {
    let mut parts = value.trim_start_matches('v').split('.');
    let number = |part: Option<&str>| part.and_then(|p| p.parse::<u32>().ok());
    match (number(parts.next()), number(parts.next())) {
        (Some(major), Some(minor)) => Ok((major, minor)),
        _ => Err(format!("{value:?} is not a Kubernetes version such as 1.29")),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use envoy_operator_core::names::OPERATOR_NAMESPACE;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: InjectFlags,
    }

    #[test]
    fn defaults_match_the_default_configuration() {
        let cli = Cli::parse_from(["test"]);
        assert_eq!(cli.flags.to_config(OPERATOR_NAMESPACE).unwrap(), InjectConfig::default());
    }

    #[test]
    fn flags_are_checked() {
        let cli = Cli::parse_from([
            "test",
            "--xds",
            "xds.mesh:18000",
            "--proxy-memory-limit",
            "",
            "--native-sidecar",
        ]);
        let config = cli.flags.to_config(OPERATOR_NAMESPACE).unwrap();
        assert_eq!(config.default_xds.unwrap().host, "xds.mesh");
        assert_eq!(config.resources.memory_limit, None);
        assert!(config.native_sidecar);
        let old =
            Cli::parse_from(["test", "--kube-version", "1.28"]).flags.to_config(OPERATOR_NAMESPACE).unwrap();
        assert!(!old.native_sidecars_supported);
        assert!(
            Cli::parse_from(["test", "--kube-version", "v1.29.3"])
                .flags
                .to_config(OPERATOR_NAMESPACE)
                .unwrap()
                .native_sidecars_supported
        );
        assert!(Cli::try_parse_from(["test", "--kube-version", "latest"]).is_err());
        let bad = Cli::parse_from(["test", "--xds", "nowhere", "--proxy-cpu", "x"]);
        assert!(bad.flags.to_config(OPERATOR_NAMESPACE).unwrap_err().contains("--xds \"nowhere\""));
    }
}
