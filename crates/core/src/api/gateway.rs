//! The Gateway API kinds the operator reads and whose status it writes: `GatewayClass`,
//! `Gateway`, `HTTPRoute`, `GRPCRoute` (`gateway.networking.k8s.io/v1`), `ReferenceGrant`
//! (`v1beta1`) and `TLSRoute` (`v1alpha2`, experimental channel).
//!
//! Written here rather than taken from the `gateway-api` crate: its releases are built on
//! another major version of kube and k8s-openapi than ours (0.22: kube 4, k8s-openapi 0.28),
//! so its types would not be `kube::Resource`s for our client. Only the fields the operator
//! reads are declared; the rest are ignored when read, and never written (the operator writes
//! the status subresource only). The user installs the Gateway API's CRDs from its release,
//! which hold the schema and its validation: nothing here is a CRD the operator ships.
//!
//! Reading is lenient where the API is open-ended (filter types, kinds, protocols are strings),
//! so an object using a feature the operator does not implement is still read, and reported
//! as such in its status, rather than failing the watch.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use serde::{Deserialize, Serialize};

use crate::api::route::{
    HeaderMatch, HeaderModifier, RequestRedirect, RouteMatch, RouteTimeouts, UrlRewrite,
};

/// The API group of every kind here.
pub const GROUP: &str = "gateway.networking.k8s.io";

/// A class of Gateways, and the controller that implements them.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "GatewayClass",
    status = "GatewayClassStatus",
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct GatewayClassSpec {
    pub controller_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters_ref: Option<ParametersReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Where a GatewayClass's settings for its Gateways' fleets are.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ParametersReference {
    pub group: String,
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayClassStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The Gateway API features the class's implementation supports (GEP-2162), sorted by
    /// name: what the conformance suite runs when it is given no features of its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supported_features: Vec<SupportedFeature>,
}

/// One feature of [`GatewayClassStatus::supported_features`], by its conformance name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct SupportedFeature {
    pub name: String,
}

/// Where traffic enters: listeners on ports, served by a fleet of the operator's proxies.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "Gateway",
    namespaced,
    status = "GatewayStatus",
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpec {
    pub gateway_class_name: String,
    #[serde(default)]
    pub listeners: Vec<Listener>,
    /// Addresses the user asks for; the operator assigns none of its own choosing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<GatewaySpecAddress>,
    /// Labels and annotations for the objects that run the Gateway (its fleet's pods, Service,
    /// Deployment and ConfigMaps), and a reference to settings of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure: Option<GatewayInfrastructure>,
}

/// A Gateway's `spec.infrastructure`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayInfrastructure {
    /// At most 8, by the API's schema.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// At most 8, by the API's schema.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters_ref: Option<LocalObjectReference>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Listener {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    pub port: i32,
    /// `HTTP`, `HTTPS`, `TLS`, `TCP`, `UDP` or an implementation's own.
    pub protocol: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ListenerTls>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_routes: Option<AllowedRoutes>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ListenerTls {
    /// `Terminate` (the default) or `Passthrough`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub certificate_refs: Vec<SecretObjectReference>,
}

/// A reference to a Secret (by default), possibly in another namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct SecretObjectReference {
    /// Defaults to `""` (the core group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Defaults to `Secret`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AllowedRoutes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<RouteNamespaces>,
    /// Empty: the kinds the listener's protocol supports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<RouteGroupKind>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouteNamespaces {
    /// `Same` (the default), `All` or `Selector`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct RouteGroupKind {
    /// Defaults to `gateway.networking.k8s.io`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    pub kind: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GatewaySpecAddress {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub address_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<GatewayStatusAddress>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<ListenerStatus>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatusAddress {
    /// `IPAddress` or `Hostname`.
    #[serde(rename = "type")]
    pub address_type: String,
    pub value: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ListenerStatus {
    pub name: String,
    pub supported_kinds: Vec<RouteGroupKind>,
    pub attached_routes: i32,
    pub conditions: Vec<Condition>,
}

/// HTTP routing from Gateways' listeners to Services: Gateway API's `HTTPRoute`. Its matches,
/// header modifiers, redirects, rewrites and timeouts are EnvoyRoute's own types: EnvoyRoute is
/// shaped after it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "HTTPRoute",
    namespaced,
    status = "HTTPRouteStatus",
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct HTTPRouteSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hostnames: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<HTTPRouteRule>,
}

/// A parent of a route: a Gateway by default, optionally one listener of it (`sectionName`,
/// `port`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "camelCase")]
pub struct ParentReference {
    /// Defaults to `gateway.networking.k8s.io`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Defaults to `Gateway`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Defaults to the route's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HTTPRouteRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Empty: one match on the path prefix `/`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<RouteMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<HTTPRouteFilter>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backend_refs: Vec<HTTPBackendRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<RouteTimeouts>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HTTPRouteFilter {
    /// `RequestHeaderModifier`, `ResponseHeaderModifier`, `RequestMirror`, `RequestRedirect`,
    /// `URLRewrite`, `ExtensionRef`, or one a later release adds.
    #[serde(rename = "type")]
    pub filter_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_header_modifier: Option<HeaderModifier>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_header_modifier: Option<HeaderModifier>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_mirror: Option<RequestMirror>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_redirect: Option<RequestRedirect>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_rewrite: Option<UrlRewrite>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension_ref: Option<LocalObjectReference>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RequestMirror {
    pub backend_ref: BackendObjectReference,
    /// The share of the requests mirrored, 0 to 100 (or `fraction`, not both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction: Option<Fraction>,
}

/// A share: `numerator` of every `denominator` (which defaults to 100).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Fraction {
    pub numerator: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denominator: Option<i32>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct LocalObjectReference {
    pub group: String,
    pub kind: String,
    pub name: String,
}

/// A backend: a Service port by default, possibly in another namespace (where a
/// ReferenceGrant there allows it).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "camelCase")]
pub struct BackendObjectReference {
    /// Defaults to `""` (the core group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Defaults to `Service`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub name: String,
    /// Defaults to the route's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HTTPBackendRef {
    #[serde(flatten)]
    pub backend: BackendObjectReference,
    /// Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Filters for the requests sent to this backend only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<HTTPRouteFilter>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HTTPRouteStatus {
    /// One entry per parentRef a controller implements; the operator writes only those with its
    /// own `controllerName` and keeps the others'.
    #[serde(default)]
    pub parents: Vec<RouteParentStatus>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RouteParentStatus {
    pub parent_ref: ParentReference,
    pub controller_name: String,
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// gRPC routing from Gateways' HTTP and HTTPS listeners to Services: Gateway API's
/// `GRPCRoute` (standard channel, `v1`). Its header matches and header modifiers are
/// HTTPRoute's; its status is HTTPRoute's.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1",
    kind = "GRPCRoute",
    namespaced,
    status = "HTTPRouteStatus",
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct GRPCRouteSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hostnames: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<GRPCRouteRule>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GRPCRouteRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Empty: every gRPC request.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<GRPCRouteMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<GRPCRouteFilter>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backend_refs: Vec<GRPCBackendRef>,
}

/// A request matches when its method and every header match.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GRPCRouteMatch {
    /// None: every service and method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<GRPCMethodMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<HeaderMatch>,
}

/// The gRPC service and method (the request path `/<service>/<method>`); at least one given.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GRPCMethodMatch {
    /// `Exact` (the default) or `RegularExpression`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub match_type: Option<String>,
    /// None: any service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// None: any method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GRPCRouteFilter {
    /// `RequestHeaderModifier`, `ResponseHeaderModifier`, `RequestMirror`, `ExtensionRef`, or
    /// one a later release adds.
    #[serde(rename = "type")]
    pub filter_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_header_modifier: Option<HeaderModifier>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_header_modifier: Option<HeaderModifier>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_mirror: Option<RequestMirror>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension_ref: Option<LocalObjectReference>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GRPCBackendRef {
    #[serde(flatten)]
    pub backend: BackendObjectReference,
    /// Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Filters for the requests sent to this backend only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<GRPCRouteFilter>,
}

/// TLS connections passed through, chosen by SNI, from Gateways' TLS listeners (`tls.mode:
/// Passthrough`) to Services: Gateway API's `TLSRoute` (experimental channel, `v1alpha2`). Its
/// status is HTTPRoute's.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1alpha2",
    kind = "TLSRoute",
    namespaced,
    status = "HTTPRouteStatus",
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct TLSRouteSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parent_refs: Vec<ParentReference>,
    /// The SNI names it serves; empty: every name its listener serves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hostnames: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<TLSRouteRule>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TLSRouteRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Gateway API's `BackendRef`: a backend and its weight, no filters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backend_refs: Vec<WeightedBackendRef>,
}

/// Gateway API's `BackendRef`: a backend and its share of the connections.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WeightedBackendRef {
    #[serde(flatten)]
    pub backend: BackendObjectReference,
    /// Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

/// What the operator reads alike of every route kind of Gateway API it serves (HTTPRoute,
/// GRPCRoute, TLSRoute): its parents, its status, the backends it names.
pub trait GatewayRoute {
    fn parent_refs(&self) -> &[ParentReference];
    /// `status`; every kind's is HTTPRoute's shape (Gateway API's `RouteStatus`).
    fn route_status(&self) -> Option<&HTTPRouteStatus>;
    /// Every backend its rules send requests to or mirror them to.
    fn backend_references(&self) -> Vec<&BackendObjectReference>;
}

fn mirrored(request_mirror: Option<&RequestMirror>) -> Option<&BackendObjectReference> {
    request_mirror.map(|mirror| &mirror.backend_ref)
}

/// HTTPRoute and GRPCRoute: the same fields under their own filter and backendRef types (a
/// macro, as the two have no trait in common to be generic over).
macro_rules! route_with_filters {
    ($kind:ty) => {
        impl GatewayRoute for $kind {
            fn parent_refs(&self) -> &[ParentReference] {
                &self.spec.parent_refs
            }
            fn route_status(&self) -> Option<&HTTPRouteStatus> {
                self.status.as_ref()
            }
            fn backend_references(&self) -> Vec<&BackendObjectReference> {
                let mut references = Vec::new();
                for rule in &self.spec.rules {
                    references
                        .extend(rule.filters.iter().filter_map(|f| mirrored(f.request_mirror.as_ref())));
                    for backend in &rule.backend_refs {
                        references.push(&backend.backend);
                        references.extend(
                            backend.filters.iter().filter_map(|f| mirrored(f.request_mirror.as_ref())),
                        );
                    }
                }
                references
            }
        }
    };
}

route_with_filters!(HTTPRoute);
route_with_filters!(GRPCRoute);

impl GatewayRoute for TLSRoute {
    fn parent_refs(&self) -> &[ParentReference] {
        &self.spec.parent_refs
    }
    fn route_status(&self) -> Option<&HTTPRouteStatus> {
        self.status.as_ref()
    }
    fn backend_references(&self) -> Vec<&BackendObjectReference> {
        self.spec.rules.iter().flat_map(|rule| &rule.backend_refs).map(|backend| &backend.backend).collect()
    }
}

/// Allows references from objects of other namespaces to objects of this one (Gateway API's
/// `ReferenceGrant`, `v1beta1`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "gateway.networking.k8s.io",
    version = "v1beta1",
    kind = "ReferenceGrant",
    namespaced,
    schema = "disabled",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceGrantSpec {
    #[serde(default)]
    pub from: Vec<ReferenceGrantFrom>,
    #[serde(default)]
    pub to: Vec<ReferenceGrantTo>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceGrantFrom {
    /// `""` for the core group.
    #[serde(default)]
    pub group: String,
    pub kind: String,
    pub namespace: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceGrantTo {
    /// `""` for the core group.
    #[serde(default)]
    pub group: String,
    pub kind: String,
    /// Absent: every object of the kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A route using a filter the operator does not know is still read: its status says so.
    #[test]
    fn routes_with_unknown_filters_and_fields_are_read() {
        let route: HTTPRoute = serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "ns"},
            "spec": {"parentRefs": [{"name": "gw", "sectionName": "http", "port": 80}],
                "rules": [{"filters": [{"type": "CORS", "cors": {"allowOrigins": ["*"]}}],
                    "sessionPersistence": {"sessionName": "s"},
                    "backendRefs": [{"name": "web", "namespace": "other", "port": 8080, "weight": 2}]}]}
        }))
        .unwrap();
        let rule = &route.spec.rules[0];
        assert_eq!(rule.filters[0].filter_type, "CORS");
        assert_eq!(rule.backend_refs[0].backend.namespace.as_deref(), Some("other"));
        assert_eq!(rule.backend_refs[0].weight, Some(2));
        assert_eq!(route.spec.parent_refs[0].port, Some(80));
    }

    #[test]
    fn the_kinds_are_gateway_apis() {
        use kube::Resource;
        assert_eq!(Gateway::api_version(&()), "gateway.networking.k8s.io/v1");
        assert_eq!(HTTPRoute::plural(&()), "httproutes");
        assert_eq!(GatewayClass::plural(&()), "gatewayclasses");
        assert_eq!(ReferenceGrant::api_version(&()), "gateway.networking.k8s.io/v1beta1");
        assert_eq!(GRPCRoute::api_version(&()), "gateway.networking.k8s.io/v1");
        assert_eq!(GRPCRoute::plural(&()), "grpcroutes");
    }

    #[test]
    fn grpc_routes_are_read_with_their_method_matches() {
        let route: GRPCRoute = serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
            "metadata": {"name": "r", "namespace": "ns"},
            "spec": {"parentRefs": [{"name": "gw"}],
                "rules": [{"matches": [{"method": {"service": "echo.Echo", "method": "Echo"},
                        "headers": [{"name": "version", "value": "one"}]}],
                    "backendRefs": [{"name": "grpc", "port": 8080, "weight": 3}]}]}
        }))
        .unwrap();
        let rule = &route.spec.rules[0];
        let method = rule.matches[0].method.as_ref().unwrap();
        assert_eq!((method.service.as_deref(), method.method.as_deref()), (Some("echo.Echo"), Some("Echo")));
        assert_eq!(rule.matches[0].headers[0].name, "version");
        assert_eq!(rule.backend_refs[0].weight, Some(3));
    }
}
