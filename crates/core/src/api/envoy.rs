//! `Envoy` (`example.com/v1`): a fleet of Envoy proxies. The operator generates the bootstrap
//! configuration (pointing at an xDS server), stores it in a ConfigMap, and runs the fleet as a
//! Deployment behind a Service.

// Several `printcolumn(...)` entries repeat `type_ = …` by design.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::patterns::{
    CLUSTER_NAME, DNS1123_LABEL, DNS1123_SUBDOMAIN, IANA_SVC_NAME, IMAGE_REFERENCE, XDS_HOST,
};

/// Port of Envoy's admin interface, bound to 127.0.0.1 inside each pod.
pub const ADMIN_PORT: i32 = 9901;
/// Port of the readiness listener that exposes the admin `/ready` to the kubelet.
pub const READINESS_PORT: i32 = 9902;

/// An Envoy runs `spec.replicas` Envoy proxies as the Deployment and Service `spec.name`, with a
/// bootstrap configuration in the ConfigMap `spec.configMapName` that points the proxies at the
/// xDS server `spec.xds`.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Envoy",
    namespaced,
    status = "EnvoyStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "env",
    category = "envoy-operator",
    doc = "An Envoy runs a fleet of Envoy proxies configured from an xDS server.",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Desired number of Envoy proxies"
    ),
    printcolumn(
        name = "Ready",
        type_ = "integer",
        json_path = ".status.readyReplicas",
        description = "Envoy proxies that are ready"
    ),
    printcolumn(
        name = "XDS",
        type_ = "string",
        json_path = ".spec.xds.host",
        description = "Host of the fleet's own xDS server (spec.xds); empty when the operator's control plane serves the fleet",
        priority = "1"
    ),
    printcolumn(
        name = "XDS-Port",
        type_ = "integer",
        json_path = ".spec.xds.port",
        description = "Port of the fleet's own xDS server (spec.xds)",
        priority = "1"
    ),
    printcolumn(
        name = "Proxies",
        type_ = "integer",
        json_path = ".status.xds.connectedProxies",
        description = "Proxies connected to the operator's xDS server"
    ),
    printcolumn(
        name = "Config-Accepted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"ConfigAccepted\")].status",
        description = "Whether every connected proxy applied the configuration the operator serves"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct EnvoySpec {
    /// Name of the fleet: the Deployment and the Service are called this. Defaults to the
    /// Envoy's own name. Immutable: clients address the Service by this name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS1123_LABEL))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("is immutable: it names the Deployment and the Service; create a new Envoy instead"))]
    pub name: Option<String>,

    /// Name of the ConfigMap holding the generated bootstrap configuration. Defaults to
    /// `<metadata.name>-bootstrap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS1123_SUBDOMAIN))]
    pub config_map_name: Option<String>,

    /// Number of Envoy proxies, 0 to 1000. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // No `minimum`: the API server's scale subresource refuses a negative count itself
    // (`.spec.replicas: Invalid value: -1: should be a non-negative integer`); a schema
    // bound would say it a second time.
    #[schemars(range(max = super::MAX_REPLICAS))]
    pub replicas: Option<i32>,

    /// The xDS server the proxies fetch listeners and clusters from (ADS over gRPC). Without
    /// it the proxies start with only their admin interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xds: Option<XdsServer>,

    /// Envoy container image. Defaults to a pinned Envoy release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512), regex(pattern = IMAGE_REFERENCE))]
    pub image: Option<String>,

    /// Ports of the listeners the xDS server configures, exposed by the Service. Defaults to
    /// one port `http` 8080. Port names and numbers are unique; 9901 and 9902 are reserved
    /// for the admin interface and the readiness listener.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    #[x_kube(validation = Rule::new("self.all(p, self.filter(q, q.port == p.port).size() == 1)").message("service port numbers must be unique"))]
    pub ports: Vec<ServicePort>,

    /// Type of the Service in front of the fleet. Defaults to ClusterIP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_type: Option<ServiceType>,

    /// The cluster IP the Service asks for: an address of the cluster's Service range no
    /// other Service holds (the API server refuses any other, and the fleet then says why in
    /// its `Degraded` condition). A Service's cluster IP cannot change: changing this field
    /// replaces the Service. Without it the API server picks one.
    #[serde(default, rename = "serviceClusterIP", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 45))]
    pub service_cluster_ip: Option<String>,

    /// Compute resources of each Envoy container. Defaults to requests of 100m CPU and
    /// 64Mi memory and a limit of 256Mi memory. `claims` is not supported: the fleet's pods
    /// declare no resource claims to refer to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("!has(self.claims)").message("claims are not supported: the fleet's pods declare no resourceClaims").field_path(".claims"))]
    pub resources: Option<ResourceRequirements>,

    /// Whether every listener writes a JSON access log line per request to the proxy's
    /// standard output (start time, method, path, response code and flags, bytes, duration,
    /// upstream host, request id, route…). Defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_log: Option<bool>,

    /// Labels and annotations added to every object the fleet is made of: its Deployment and
    /// pods, Service and ConfigMaps (a Gateway's `spec.infrastructure`). Keys the operator sets
    /// itself are refused: `app.kubernetes.io/name`, `app.kubernetes.io/instance`,
    /// `app.kubernetes.io/managed-by` and any of the domain `envoy-operator.example.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_metadata: Option<ChildMetadata>,
}

/// Labels and annotations for the objects of a fleet.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChildMetadata {
    /// Labels, at most 16: a key is an optional DNS subdomain prefix and `/`, then a name of at
    /// most 63 characters; a value has at most 63 characters.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 16))]
    pub labels: BTreeMap<String, String>,

    /// Annotations, at most 16, keyed as labels are.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 16))]
    pub annotations: BTreeMap<String, String>,
}

/// Where the xDS server is: Envoy reaches it through a static cluster of this name.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct XdsServer {
    /// Name of the static cluster for the xDS server. Defaults to `xds_cluster`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128), regex(pattern = CLUSTER_NAME))]
    pub name: Option<String>,

    /// DNS name or IP address of the xDS server, e.g. `xds-service.default`.
    #[schemars(length(min = 1, max = 253), regex(pattern = XDS_HOST))]
    pub host: String,

    /// Port of the xDS server's gRPC endpoint, 1 to 65535.
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
}

/// A port of the fleet's Service and the Envoy listener behind it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("(has(self.targetPort) ? self.targetPort : self.port) != 9901 && (has(self.targetPort) ? self.targetPort : self.port) != 9902").message("listener ports 9901 and 9902 are reserved for the admin interface and the readiness listener"))]
pub struct ServicePort {
    /// Name of the port (IANA service name), e.g. `http`.
    #[schemars(length(min = 1, max = 15), regex(pattern = IANA_SVC_NAME))]
    pub name: String,

    /// Port the Service exposes, 1 to 65535.
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,

    /// Port the Envoy listener binds in the pod. Defaults to `port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub target_port: Option<i32>,
}

impl ServicePort {
    /// The port the Envoy listener binds in the pod.
    pub fn listener_port(&self) -> i32 {
        self.target_port.unwrap_or(self.port)
    }

    /// [`listener_port`](Self::listener_port) when a listener can bind it: a port out of range
    /// (possible only for an Envoy the webhook never saw) has no listener.
    pub fn bound_port(&self) -> Option<u16> {
        u16::try_from(self.listener_port()).ok().filter(|port| *port != 0)
    }
}

/// How the fleet's Service is exposed.
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ServiceType {
    #[default]
    ClusterIP,
    NodePort,
    LoadBalancer,
}

impl ServiceType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClusterIP => "ClusterIP",
            Self::NodePort => "NodePort",
            Self::LoadBalancer => "LoadBalancer",
        }
    }
}

/// What the operator last observed of the fleet.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EnvoyStatus {
    /// Pods of the fleet's Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// Pods that pass their readiness probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,

    /// Pods that have been ready for the Deployment's minReadySeconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,

    /// Label selector of the fleet's pods, serialized, for the scale subresource (HPA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,

    /// The `metadata.generation` this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Hash of the bootstrap configuration the fleet's pod template carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,

    /// Ready, Progressing, Degraded and ConfigAccepted, with reasons and messages; and
    /// ManagedElsewhere, from another install of the operator that leaves the children to the
    /// one it names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,

    /// What the operator's xDS server serves the fleet and what the proxies accepted. Only for
    /// an Envoy without `spec.xds`, whose proxies the operator serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xds: Option<EnvoyXdsStatus>,
}

/// Type of the condition saying whether the fleet's proxies accepted (ACKed) the configuration
/// the xDS server last served them, or refused it (NACK, with Envoy's error as the message).
pub const CONFIG_ACCEPTED: &str = "ConfigAccepted";

/// The fleet as the operator's xDS server sees it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EnvoyXdsStatus {
    /// Proxies of the fleet connected to the xDS server now.
    pub connected_proxies: i32,

    /// Version of the configuration every connected proxy has acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_version: Option<String>,

    /// Version of the configuration the xDS server serves now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_version: Option<String>,
}
