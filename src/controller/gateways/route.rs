//! An HTTPRoute attached to Gateways of the operator's classes gets, in `status.parents`, one
//! entry per such parentRef, with the operator's `controllerName` and the `Accepted` and
//! `ResolvedRefs` the translation judged. Other controllers' entries are kept as they are; the
//! operator's entries for parents that are no longer its own are dropped.

use std::sync::Arc;

use envoy_operator_core::api::gateway::{GROUP, Gateway, HTTPRoute, ParentReference};
use envoy_operator_core::children::status::now;
use envoy_operator_core::names::CONTROLLER_NAME;
use envoy_operator_core::translate::gateway::RouteOutcome;
use envoy_operator_core::translate::gateway::status::route_status;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::GatewayContext;
use super::status::{Guard, write};
use crate::controller::route_events::{self, Parents};
use crate::controller::sync::{backoff_key, error_policy as retry, observe};
use crate::controller::{Error, Result};

pub(super) const KIND: &str = "HTTPRoute";

pub(super) async fn reconcile(route: Arc<HTTPRoute>, ctx: Arc<GatewayContext>) -> Result<Action> {
    let key = backoff_key(route.as_ref());
    observe(&ctx.shared, KIND, &key, sync(route, ctx.clone())).await
}

pub(super) fn error_policy(route: Arc<HTTPRoute>, error: &Error, ctx: Arc<GatewayContext>) -> Action {
    retry(route, error, ctx.shared.clone())
}

async fn sync(route: Arc<HTTPRoute>, ctx: Arc<GatewayContext>) -> Result<Action> {
    if route.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = route.namespace().ok_or(Error::MissingMetadata { kind: KIND, field: "namespace" })?;
    let name = route.name_any();
    let translation = ctx.outcomes.latest();
    let outcome =
        translation.routes.iter().find(|outcome| outcome.namespace == namespace && outcome.name == name);
    let status = match outcome {
        // The outcome of this very route and generation.
        Some(outcome)
            if outcome.uid == route.metadata.uid && outcome.generation == route.metadata.generation =>
        {
            route_status(&route, outcome, CONTROLLER_NAME, &now())
        }
        // Judged from another version: the next translation triggers this again.
        Some(_) => return Ok(Action::await_change()),
        None => {
            // Not the operator's route (any more): its entries go, once the caches confirm that
            // no parentRef names a Gateway of the operator's classes (the translation may not
            // have seen the route yet).
            if !has_our_entries(&route) {
                return Ok(Action::await_change());
            }
            ctx.listed().await?;
            if ctx.route_names_our_gateway(&route) {
                return Ok(Action::await_change());
            }
            let none = RouteOutcome {
                namespace: namespace.clone(),
                name: name.clone(),
                uid: route.metadata.uid.clone(),
                generation: route.metadata.generation,
                parents: Vec::new(),
            };
            route_status(&route, &none, CONTROLLER_NAME, &now())
        }
    };
    let current = route.status.clone().unwrap_or_default();
    let api: Api<HTTPRoute> = Api::namespaced(ctx.shared.client.clone(), &namespace);
    if write(&ctx.shared, &api, KIND, route.as_ref(), &current, &status, Guard::ResourceVersion).await? {
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
fn has_our_entries(route: &HTTPRoute) -> bool {
    route
        .status
        .as_ref()
        .is_some_and(|status| status.parents.iter().any(|parent| parent.controller_name == CONTROLLER_NAME))
}
