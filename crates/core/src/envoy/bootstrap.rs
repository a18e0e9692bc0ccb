//! `envoy.config.bootstrap.v3.Bootstrap`, the parts the operator sets: what a proxy starts
//! with (see [`crate::bootstrap`] for what goes in it).

use std::collections::BTreeMap;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::cluster::Cluster;
use super::core::{Address, ApiVersion, ConfigSource};
use super::listener::Listener;

/// `envoy.config.bootstrap.v3.Bootstrap`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Bootstrap {
    /// Only its metadata: the id and cluster come from `--service-node`/`--service-cluster`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<Node>,
    pub admin: Admin,
    pub static_resources: StaticResources,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dynamic_resources: Option<DynamicResources>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layered_runtime: Option<LayeredRuntime>,
}

impl Bootstrap {
    /// The bootstrap as YAML, the form stored in ConfigMaps and read by `envoy -c`.
    pub fn to_yaml(&self) -> String {
        // Plain structs of strings and numbers always serialize.
        serde_saphyr::to_string(self).unwrap_or_default()
    }

    /// The bootstrap as one line of JSON (valid YAML too), for `envoy --config-yaml`.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A short, stable hash of the configuration, for pod-template annotations and status.
    pub fn hash(&self) -> String {
        let digest = Sha256::digest(self.to_json().as_bytes());
        digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
    }
}

/// `envoy.config.core.v3.Node`, its metadata only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Node {
    pub metadata: BTreeMap<String, String>,
}

/// `envoy.config.bootstrap.v3.Admin`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Admin {
    pub address: Address,
}

/// `envoy.config.bootstrap.v3.Bootstrap.StaticResources`: what a proxy serves without asking
/// anyone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StaticResources {
    pub listeners: Vec<Listener>,
    pub clusters: Vec<Cluster>,
}

/// `envoy.config.bootstrap.v3.Bootstrap.DynamicResources`: listeners and clusters over ADS.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DynamicResources {
    pub ads_config: ApiConfigSource,
    pub lds_config: ConfigSource,
    pub cds_config: ConfigSource,
}

/// `envoy.config.core.v3.ApiConfigSource`, over gRPC.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApiConfigSource {
    pub api_type: ApiType,
    pub transport_api_version: ApiVersion,
    pub set_node_on_first_message_only: bool,
    pub grpc_services: Vec<GrpcService>,
}

/// `envoy.config.core.v3.ApiConfigSource.ApiType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ApiType {
    /// State of the world.
    Grpc,
    /// Incremental.
    DeltaGrpc,
}

/// `envoy.config.core.v3.GrpcService`, with the oneof `target_specifier` set to `envoy_grpc`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GrpcService {
    pub envoy_grpc: EnvoyGrpc,
}

/// `envoy.config.core.v3.GrpcService.EnvoyGrpc`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EnvoyGrpc {
    pub cluster_name: String,
}

/// `envoy.config.bootstrap.v3.LayeredRuntime`: static layers only. Without an admin layer,
/// `/runtime_modify` stays refused, and the proxy runs what its bootstrap says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LayeredRuntime {
    pub layers: Vec<RuntimeLayer>,
}

/// `envoy.config.bootstrap.v3.RuntimeLayer` with a `static_layer` of numeric keys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RuntimeLayer {
    pub name: String,
    pub static_layer: BTreeMap<String, u64>,
}
