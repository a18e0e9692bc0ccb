//! The injector's command-line flags, shared by `inject` and the operator's server command
//! so both build their [`InjectConfig`] the same way.

use envoy_operator_core::inject::annotations::parse_xds;
use envoy_operator_core::inject::{InjectConfig, ProxyResources};
use envoy_operator_core::names::{
    DEFAULT_ENVOY_IMAGE, OPERATOR_NAMESPACE, PROXY_CPU_REQUEST, PROXY_MEMORY_LIMIT, PROXY_MEMORY_REQUEST,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct InjectFlags {
    /// Envoy image of the sidecar.
    #[arg(long, value_name = "IMAGE", default_value = DEFAULT_ENVOY_IMAGE)]
    pub image: String,

    /// xDS server (`host:port`) for pods that name none; without it they get an admin-only
    /// bootstrap.
    #[arg(long, value_name = "HOST:PORT")]
    pub xds: Option<String>,

    /// Default CPU request of the sidecar (annotation sidecar.example.com/proxy-cpu); "" for none.
    #[arg(long, value_name = "QUANTITY", default_value = PROXY_CPU_REQUEST)]
    pub proxy_cpu: String,

    /// Default memory request (sidecar.example.com/proxy-memory); "" for none.
    #[arg(long, value_name = "QUANTITY", default_value = PROXY_MEMORY_REQUEST)]
    pub proxy_memory: String,

    /// Default CPU limit (sidecar.example.com/proxy-cpu-limit); none unless set.
    #[arg(long, value_name = "QUANTITY", default_value = "")]
    pub proxy_cpu_limit: String,

    /// Default memory limit (sidecar.example.com/proxy-memory-limit); "" for none.
    #[arg(long, value_name = "QUANTITY", default_value = PROXY_MEMORY_LIMIT)]
    pub proxy_memory_limit: String,

    /// Inject native sidecars (init containers with restartPolicy: Always; Kubernetes 1.29+)
    /// unless a pod's sidecar.example.com/native-sidecar annotation says otherwise.
    #[arg(long)]
    pub native_sidecar: bool,

    /// The operator's namespace, never injected.
    #[arg(long, value_name = "NAMESPACE", default_value = OPERATOR_NAMESPACE)]
    pub operator_namespace: String,

    /// Another namespace never injected (repeatable), beyond kube-system, kube-public,
    /// kube-node-lease and the operator's.
    #[arg(long = "exclude-namespace", value_name = "NAMESPACE")]
    pub exclude_namespaces: Vec<String>,
}

impl InjectFlags {
    /// The configuration these flags describe, checked.
    pub fn to_config(&self) -> Result<InjectConfig, String> {
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
            native_sidecar: self.native_sidecar,
            operator_namespace: self.operator_namespace.clone(),
            extra_excluded_namespaces: self.exclude_namespaces.clone(),
        };
        config.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        flags: InjectFlags,
    }

    #[test]
    fn defaults_match_the_default_configuration() {
        let cli = Cli::parse_from(["test"]);
        assert_eq!(cli.flags.to_config().unwrap(), InjectConfig::default());
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
        let config = cli.flags.to_config().unwrap();
        assert_eq!(config.default_xds.unwrap().host, "xds.mesh");
        assert_eq!(config.resources.memory_limit, None);
        assert!(config.native_sidecar);
        let bad = Cli::parse_from(["test", "--xds", "nowhere", "--proxy-cpu", "x"]);
        assert!(bad.flags.to_config().unwrap_err().contains("--xds \"nowhere\""));
    }
}
