//! A route (HTTPRoute, GRPCRoute, TLSRoute) attached to Gateways of the operator's classes gets, in
//! `status.parents`, one entry per such parentRef, with the operator's `controllerName` and the
//! `Accepted` and `ResolvedRefs` the translation judged. Other controllers' entries are kept as
//! they are; the operator's entries for parents that are no longer its own are dropped. One
//! reconcile for every route kind ([`RouteKind`]): the kinds' statuses are the same shape.

use std::fmt::Debug;
use std::sync::Arc;

use envoy_operator_core::api::gateway::{
    GROUP, GRPCRoute, Gateway, GatewayRoute, HTTPRoute, ParentReference, TLSRoute,
};
use envoy_operator_core::children::status::now;
use envoy_operator_core::names::CONTROLLER_NAME;
use envoy_operator_core::translate::gateway::status::route_status;
use envoy_operator_core::translate::gateway::{GatewayTranslation, RouteOutcome};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::GatewayContext;
use super::status::{Guard, write};
use crate::controller::route_events::{self, Parents};
use crate::controller::sync::{backoff_key, error_policy as retry, observe};
use crate::controller::{Error, Result};

/// A Gateway API route kind whose status the operator writes.
pub(super) trait RouteKind:
    GatewayRoute
    + Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    const KIND: &'static str;
    /// The translation's outcomes of routes of this kind.
    fn outcomes(translation: &GatewayTranslation) -> &[RouteOutcome];
}

impl RouteKind for HTTPRoute {
    const KIND: &'static str = "HTTPRoute";
    fn outcomes(translation: &GatewayTranslation) -> &[RouteOutcome] {
        &translation.routes
    }
}

impl RouteKind for GRPCRoute {
    const KIND: &'static str = "GRPCRoute";
    fn outcomes(translation: &GatewayTranslation) -> &[RouteOutcome] {
        &translation.grpc_routes
    }
}

impl RouteKind for TLSRoute {
    const KIND: &'static str = "TLSRoute";
    fn outcomes(translation: &GatewayTranslation) -> &[RouteOutcome] {
        &translation.tls_routes
    }
}

pub(super) async fn reconcile<R: RouteKind>(route: Arc<R>, ctx: Arc<GatewayContext>) -> Result<Action> {
    let key = backoff_key(route.as_ref());
    observe(&ctx.shared, R::KIND, &key, sync(route, ctx.clone())).await
}

pub(super) fn error_policy<R: RouteKind>(route: Arc<R>, error: &Error, ctx: Arc<GatewayContext>) -> Action {
    retry(route, error, ctx.shared.clone())
}

async fn sync<R: RouteKind>(route: Arc<R>, ctx: Arc<GatewayContext>) -> Result<Action> {
    if route.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = route.namespace().ok_or(Error::MissingMetadata { kind: R::KIND, field: "namespace" })?;
    let name = route.name_any();
    let translation = ctx.outcomes.latest();
    let outcome = R::outcomes(&translation)
        .iter()
        .find(|outcome| outcome.namespace == namespace && outcome.name == name);
    let status = match outcome {
        // The outcome of this very route and generation.
        Some(outcome) if outcome.uid == route.meta().uid && outcome.generation == route.meta().generation => {
            route_status(route.as_ref(), outcome, CONTROLLER_NAME, &now())
        }
        // Judged from another version: the next translation triggers this again.
        Some(_) => return Ok(Action::await_change()),
        None => {
            // Not the operator's route (any more): its entries go, once the caches confirm that
            // no parentRef names a Gateway of the operator's classes (the translation may not
            // have seen the route yet).
            if !has_our_entries(route.as_ref()) {
                return Ok(Action::await_change());
            }
            ctx.listed().await?;
            if ctx.route_names_our_gateway(route.as_ref()) {
                return Ok(Action::await_change());
            }
            let none = RouteOutcome {
                namespace: namespace.clone(),
                name: name.clone(),
                uid: route.meta().uid.clone(),
                generation: route.meta().generation,
                parents: Vec::new(),
            };
            route_status(route.as_ref(), &none, CONTROLLER_NAME, &now())
        }
    };
    let current = route.route_status().cloned().unwrap_or_default();
    let api: Api<R> = Api::namespaced(ctx.shared.client.clone(), &namespace);
    if write(&ctx.shared, &api, R::KIND, route.as_ref(), &current, &status, Guard::ResourceVersion).await? {
        let parents = Parents {
            describe: |parent: &ParentReference| describe_parent(&namespace, parent),
            related: |parent: &ParentReference| gateway_ref(&namespace, parent),
        };
        route_events::publish(&ctx.shared, route.as_ref(), &current.parents, &status.parents, parents).await;
    }
    Ok(Action::requeue(ctx.shared.settings.resync))
}

/// A route's parent as its events name it: `Gateway "shop/edge"`, with its listener
/// (`sectionName`) and port when the parentRef names them.
fn describe_parent(namespace: &str, parent: &ParentReference) -> String {
    let kind = parent.kind.as_deref().unwrap_or("Gateway");
    let mut said = format!("{kind} \"{}/{}\"", parent.namespace.as_deref().unwrap_or(namespace), parent.name);
    if let Some(listener) = &parent.section_name {
        said.push_str(&format!(" listener {listener:?}"));
    }
    if let Some(port) = parent.port {
        said.push_str(&format!(" port {port}"));
    }
    said
}

/// The Gateway a parentRef names (defaults as the API says, from the route's `namespace`), as
/// an event's related object; `None` for a parent of another kind.
fn gateway_ref(namespace: &str, parent: &ParentReference) -> Option<ObjectReference> {
    let gateway = parent.group.as_deref().unwrap_or(GROUP) == GROUP
        && parent.kind.as_deref().unwrap_or("Gateway") == "Gateway";
    gateway.then(|| ObjectReference {
        api_version: Some(Gateway::api_version(&()).into_owned()),
        kind: Some(Gateway::kind(&()).into_owned()),
        namespace: Some(parent.namespace.clone().unwrap_or_else(|| namespace.to_owned())),
        name: Some(parent.name.clone()),
        ..ObjectReference::default()
    })
}

/// Whether `route`'s status holds an entry of the operator's.
fn has_our_entries(route: &impl GatewayRoute) -> bool {
    route
        .route_status()
        .is_some_and(|status| status.parents.iter().any(|parent| parent.controller_name == CONTROLLER_NAME))
}
