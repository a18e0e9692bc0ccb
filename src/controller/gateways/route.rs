//! An HTTPRoute attached to Gateways of the operator's classes gets, in `status.parents`, one
//! entry per such parentRef, with the operator's `controllerName` and the `Accepted` and
//! `ResolvedRefs` the translation judged. Other controllers' entries are kept as they are; the
//! operator's entries for parents that are no longer its own are dropped.

use std::sync::Arc;

use envoy_operator_core::children::status::now;
use envoy_operator_core::gateway::RouteOutcome;
use envoy_operator_core::gateway::api::HTTPRoute;
use envoy_operator_core::gateway::status::route_status;
use envoy_operator_core::names::CONTROLLER_NAME;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::GatewayContext;
use super::status::{Guard, write};
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
    write(&ctx.shared, &api, KIND, route.as_ref(), &current, &status, Guard::ResourceVersion).await?;
    Ok(Action::requeue(ctx.shared.settings.resync))
}

/// Whether `route`'s status holds an entry of the operator's.
fn has_our_entries(route: &HTTPRoute) -> bool {
    route
        .status
        .as_ref()
        .is_some_and(|status| status.parents.iter().any(|parent| parent.controller_name == CONTROLLER_NAME))
}
