//! `Foo` (`samplecontroller.k8s.io/v1alpha1`): the sample-controller's type. A Foo asks for a
//! Deployment of a given name and size; the controller creates it and reports back.

// Several `printcolumn(...)` entries repeat `type_ = …` by design.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::patterns::DNS1123_SUBDOMAIN;

/// A Foo asks for a Deployment named `spec.deploymentName` with `spec.replicas` replicas; the
/// operator creates and owns it, corrects drift, and reports progress in `status`.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "samplecontroller.k8s.io",
    version = "v1alpha1",
    kind = "Foo",
    namespaced,
    status = "FooStatus",
    derive = "PartialEq",
    derive = "Default",
    shortname = "fo",
    category = "envoy-operator",
    doc = "A Foo runs a Deployment named spec.deploymentName with spec.replicas replicas.",
    annotation(
        "api-approved.kubernetes.io",
        "unapproved, experimental-only; please get an approval from Kubernetes API reviewers if you're trying to develop a CRD in the *.k8s.io or *.kubernetes.io groups"
    ),
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(
        name = "Deployment",
        type_ = "string",
        json_path = ".spec.deploymentName",
        description = "Name of the Deployment this Foo runs"
    ),
    printcolumn(
        name = "Desired",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Desired number of replicas"
    ),
    printcolumn(
        name = "Available",
        type_ = "integer",
        json_path = ".status.availableReplicas",
        description = "Replicas available to serve"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Whether every desired replica is available"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct FooSpec {
    /// Name of the Deployment to run. Defaults to the Foo's own name. Renaming it replaces
    /// the Deployment: the new one is created and the old one deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS1123_SUBDOMAIN))]
    pub deployment_name: Option<String>,

    /// Number of replicas of the Deployment, 0 to 1000. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    // No `minimum`: the API server's scale subresource refuses a negative count itself
    // (`.spec.replicas: Invalid value: -1: should be a non-negative integer`); a schema
    // bound would say it a second time.
    #[schemars(range(max = super::MAX_REPLICAS))]
    pub replicas: Option<i32>,
}

/// What the operator last observed of the Foo's Deployment.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FooStatus {
    /// Replicas of the Deployment that are available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,

    /// Replicas of the Deployment, as the scale subresource reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,

    /// Label selector of the Deployment's pods, serialized, for the scale subresource (HPA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,

    /// The `metadata.generation` this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Ready, Progressing and Degraded, with reasons and messages; and ManagedElsewhere, from
    /// another install of the operator that leaves the Deployment to the one it names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
