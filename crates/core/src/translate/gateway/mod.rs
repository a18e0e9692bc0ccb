//! The Gateway API door: GatewayClasses naming the operator, their Gateways, the HTTPRoutes,
//! GRPCRoutes and TLSRoutes attached to them and the ReferenceGrants that allow references across namespaces,
//! translated into the same IR as Envoys and EnvoyRoutes ([`crate::ir`]) through the same route
//! model ([`crate::route`]), with every object's status, in one pass over the whole cluster
//! (Gateways take routes, backends and certificates from other namespaces).
//!
//! A Gateway's fleet is an `Envoy` the operator applies ([`fleet`]), named `<gateway>-<class>`
//! and labelled with the Gateway, so its Deployment, Service, bootstrap and xDS identity come
//! from the same builders as any Envoy's; its configuration comes from this translation
//! instead of from EnvoyRoutes.
//!
//! - [`class`]: the classes naming the operator, and their fleets' template (`parametersRef`);
//!   [`features`]: the features it supports, in every class's status;
//! - [`listeners`]: each listener judged (protocol, port, route kinds, certificates, conflicts);
//! - [`httproute`]: an HTTPRoute read once into the route model, and [`filters`]: its filters
//!   the rule engine does not know (response headers, mirrors); [`grpcroute`]: a GRPCRoute,
//!   said in HTTPRoute's shape and read by the same reader; [`tlsroute`]: a TLSRoute, its
//!   backendRefs read alike, served as TLS passthrough by SNI;
//! - [`kinds`]: an HTTPRoute and a GRPCRoute sharing a hostname on a listener, the older kept;
//! - [`attach`] and [`hostnames`]: which listeners a route's parentRef attaches it to, and the
//!   hostnames it serves on each; [`selector`] and [`grants`] for namespaces and references;
//! - [`merge`]: a Gateway's listeners merged by port into the IR;
//! - [`fleet`]: the Envoy that serves a Gateway, its readiness and addresses;
//! - [`pass`]: the pass; [`status`]: the statuses written from its outcomes.

pub mod addresses;
pub mod attach;
pub mod class;
pub mod conditions;
pub mod features;
pub mod filters;
pub mod fleet;
pub mod grants;
pub mod grpcroute;
pub mod hostnames;
pub mod httproute;
pub mod kinds;
pub mod listeners;
pub mod merge;
pub mod named;
pub mod pass;
pub mod selector;
pub mod status;
pub mod tlsroute;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use serde::Serialize;

use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::api::Envoy;
use crate::api::gateway::{
    self as api, GRPCRoute, Gateway, GatewayClass, HTTPRoute, ParentReference, ReferenceGrant, TLSRoute,
};
use crate::ir;
use crate::route::conditions::ConditionState;
use crate::xds::Resources;

/// Everything the Gateway API translation reads, from every namespace.
#[derive(Clone, Copy, Debug, Default)]
pub struct GatewayInputs<'a> {
    pub classes: &'a [Arc<GatewayClass>],
    pub gateways: &'a [Arc<Gateway>],
    pub routes: &'a [Arc<HTTPRoute>],
    /// Empty where the API server does not serve GRPCRoutes.
    pub grpc_routes: &'a [Arc<GRPCRoute>],
    /// Empty where the API server does not serve TLSRoutes (experimental channel).
    pub tls_routes: &'a [Arc<TLSRoute>],
    pub grants: &'a [Arc<ReferenceGrant>],
    /// For `allowedRoutes.namespaces.from: Selector`.
    pub namespaces: &'a [Arc<Namespace>],
    pub services: &'a [Arc<Service>],
    pub endpoint_slices: &'a [Arc<EndpointSlice>],
    /// `kubernetes.io/tls` Secrets only.
    pub secrets: &'a [Arc<Secret>],
    /// The Envoys that are Gateways' fleets ([`fleet`]), as stored (their status tells whether
    /// the fleet is ready). Any other Envoy may be among them: one that has a Gateway's fleet's
    /// name without being its fleet keeps the Gateway from having one.
    pub fleets: &'a [Arc<Envoy>],
    /// The Envoys GatewayClasses' `parametersRef`s may name (`group: example.com, kind: Envoy`,
    /// with a namespace): every Envoy the caller knows will do; each is picked by namespace and
    /// name. Its spec is the template of the class's fleets: `replicas`, `image`,
    /// `resources`, `serviceType` and `accessLog` are taken from it, the rest ignored.
    pub parameters: &'a [Arc<Envoy>],
    /// Routes the fleets' proxies refused ([`crate::fleet::isolate`]): left out, with the reason.
    pub rejected: &'a crate::fleet::isolate::Rejections,
    /// The pods with a mesh sidecar: their namespaces are meshed, labelled or not.
    pub mesh_pods: &'a [Arc<k8s_openapi::api::core::v1::Pod>],
}

/// What the translation makes of every object naming the operator.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GatewayTranslation {
    /// Every GatewayClass whose `controllerName` is the operator's, sorted by name.
    pub classes: Vec<ClassOutcome>,
    /// Every Gateway of those classes, sorted by namespace and name.
    pub gateways: Vec<GatewayOutcome>,
    /// Every HTTPRoute with a parentRef to one of those Gateways, sorted by namespace and name.
    pub routes: Vec<RouteOutcome>,
    /// Every GRPCRoute with a parentRef to one of those Gateways, sorted by namespace and name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub grpc_routes: Vec<RouteOutcome>,
    /// Every TLSRoute with a parentRef to one of those Gateways, sorted by namespace and name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tls_routes: Vec<RouteOutcome>,
    /// The mesh's sidecars, per meshed namespace ([`crate::translate::mesh`]); their routes'
    /// Service parents are in [`GatewayTranslation::routes`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub meshes: Vec<crate::translate::mesh::MeshOutcome>,
}

/// A GatewayClass's conditions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ClassOutcome {
    pub name: String,
    pub generation: Option<i64>,
    /// `Accepted`, then `SupportedVersion`.
    pub conditions: Vec<Judged>,
}

/// One condition's target state: its type, and [`ConditionState`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Judged {
    pub type_: &'static str,
    pub state: ConditionState,
}

/// A Gateway: the fleet that serves it, its configuration, and its status.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GatewayOutcome {
    pub namespace: String,
    pub name: String,
    pub uid: Option<String>,
    pub generation: Option<i64>,
    /// The Envoy to apply for the Gateway's fleet; `None` when the Gateway has nothing to serve
    /// (not accepted: no valid listener, a name that cannot label a fleet, `spec.addresses`) or
    /// cannot have one (an Envoy of the fleet's name is not the Gateway's).
    pub fleet: Option<Envoy>,
    /// What the fleet's proxies serve.
    pub ir: ir::Fleet,
    /// The IR as Envoy's resources: printed by `render --xds`, not with the IR.
    #[serde(skip)]
    pub resources: Resources,
    /// `status.addresses`: the load-balancer ingress, else the cluster IP, of the Service the
    /// fleet controls; none without a fleet.
    pub addresses: Vec<api::GatewayStatusAddress>,
    /// `Accepted`, then `Programmed`.
    pub conditions: Vec<Judged>,
    /// One per listener of the spec, in its order.
    pub listeners: Vec<ListenerOutcome>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ListenerOutcome {
    pub name: String,
    pub supported_kinds: Vec<api::RouteGroupKind>,
    pub attached_routes: i32,
    /// `Accepted`, `Programmed`, `ResolvedRefs`, `Conflicted`.
    pub conditions: Vec<Judged>,
}

/// What the Gateways a route names make of it: one parent per distinct parentRef naming a
/// Gateway of the operator's classes.
pub type RouteOutcome = crate::route::status::RouteOutcome<ParentOutcome>;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ParentOutcome {
    pub parent_ref: ParentReference,
    pub accepted: ConditionState,
    pub resolved_refs: ConditionState,
}

/// Translates every Gateway API object naming the operator: its GatewayClasses, their
/// Gateways (each a fleet, its IR and resources, and its status), and every HTTPRoute attached
/// to one of them, in one pass.
pub fn translate(inputs: &GatewayInputs) -> GatewayTranslation {
    pass::translate(inputs)
}
