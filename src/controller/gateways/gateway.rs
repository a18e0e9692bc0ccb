//! A Gateway of one of the operator's classes gets its fleet ([`super::fleets`]) and the status
//! the translation judged (`addresses`, `conditions`, `listeners`). A Gateway whose class is
//! not (or no longer) the operator's gets nothing, and loses the fleet the operator applied for
//! it.

use std::sync::Arc;

use envoy_operator_core::children::status::now;
use envoy_operator_core::gateway::api::{GROUP, Gateway};
use envoy_operator_core::gateway::status::gateway_status;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::status::{Guard, write};
use super::{GatewayContext, fleets};
use crate::controller::sync::{backoff_key, error_policy as retry, observe};
use crate::controller::{Error, Result};

pub(super) const KIND: &str = "Gateway";

pub(super) async fn reconcile(gateway: Arc<Gateway>, ctx: Arc<GatewayContext>) -> Result<Action> {
    let key = backoff_key(gateway.as_ref());
    observe(&ctx.shared, KIND, &key, sync(gateway, ctx.clone())).await
}

pub(super) fn error_policy(gateway: Arc<Gateway>, error: &Error, ctx: Arc<GatewayContext>) -> Action {
    retry(gateway, error, ctx.shared.clone())
}

async fn sync(gateway: Arc<Gateway>, ctx: Arc<GatewayContext>) -> Result<Action> {
    if gateway.meta().deletion_timestamp.is_some() {
        // The fleet's ownerReference and the garbage collector remove it.
        return Ok(Action::await_change());
    }
    let missing = |field| Error::MissingMetadata { kind: KIND, field };
    let namespace = gateway.namespace().ok_or_else(|| missing("namespace"))?;
    let uid = gateway.uid().ok_or_else(|| missing("uid"))?;
    let name = gateway.name_any();
    ctx.listed().await?;
    let envoys = ctx.envoys.store();

    if !ctx.class_is_ours(&gateway.spec.gateway_class_name) {
        fleets::remove(&ctx.shared, envoys, &gateway).await?;
        return Ok(Action::await_change());
    }
    let translation = ctx.outcomes.latest();
    // The outcome of this very Gateway (uid) and generation; else the translation has yet to
    // judge it, and its outcome, when it comes, triggers this reconcile again.
    let outcome = translation.gateways.iter().find(|outcome| {
        outcome.namespace == namespace
            && outcome.name == name
            && outcome.uid.as_deref() == Some(uid.as_str())
            && outcome.generation == gateway.metadata.generation
    });
    let Some(outcome) = outcome else { return Ok(Action::await_change()) };
    if let Some(fleet) = &outcome.fleet {
        let owner = fleets::Owner { namespace: &namespace, name: &name, uid: &uid };
        fleets::apply(&ctx.shared, envoys, &owner, fleet).await?;
    }
    let mut status = gateway_status(&gateway, outcome, &now());
    // The API server defaults a route kind's group: written out, the status it stores is the one
    // computed, and the next reconcile finds nothing to write.
    let kinds = status.listeners.iter_mut().flat_map(|listener| listener.supported_kinds.iter_mut());
    for kind in kinds {
        kind.group.get_or_insert_with(|| GROUP.to_owned());
    }
    let current = gateway.status.clone().unwrap_or_default();
    let api: Api<Gateway> = Api::namespaced(ctx.shared.client.clone(), &namespace);
    write(&ctx.shared, &api, KIND, gateway.as_ref(), &current, &status, Guard::None).await?;
    Ok(Action::requeue(ctx.shared.settings.resync))
}
