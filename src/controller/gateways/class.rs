//! A GatewayClass naming the operator gets the conditions the translation judged
//! (`Accepted`, `SupportedVersion`), and a Warning event when one turns False; other classes are
//! other controllers' and left alone.

use std::sync::Arc;

use envoy_operator_core::api::gateway::GatewayClass;
use envoy_operator_core::children::status::now;
use envoy_operator_core::names::CONTROLLER_NAME;
use envoy_operator_core::translate::gateway::conditions::{ACCEPTED, SUPPORTED_VERSION};
use envoy_operator_core::translate::gateway::status::class_status;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::GatewayContext;
use super::status::{Guard, write};
use crate::controller::sync::{backoff_key, error_policy as retry, observe};
use crate::controller::transitions::{Tell, publish, transitions};
use crate::controller::{Error, Result};

pub(super) const KIND: &str = "GatewayClass";

/// A class refused (its parameters), or of a version the operator does not support: a Warning.
const TELLS: [Tell; 2] = [Tell::warning(ACCEPTED, "False"), Tell::warning(SUPPORTED_VERSION, "False")];

pub(super) async fn reconcile(class: Arc<GatewayClass>, ctx: Arc<GatewayContext>) -> Result<Action> {
    let key = backoff_key(class.as_ref());
    observe(&ctx.shared, KIND, &key, sync(class, ctx.clone())).await
}

pub(super) fn error_policy(class: Arc<GatewayClass>, error: &Error, ctx: Arc<GatewayContext>) -> Action {
    retry(class, error, ctx.shared.clone())
}

async fn sync(class: Arc<GatewayClass>, ctx: Arc<GatewayContext>) -> Result<Action> {
    if class.spec.controller_name != CONTROLLER_NAME || class.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = class.name_any();
    let translation = ctx.outcomes.latest();
    // The outcome of this very generation; else the next translation triggers this again.
    let outcome = translation
        .classes
        .iter()
        .find(|outcome| outcome.name == name && outcome.generation == class.metadata.generation);
    let Some(outcome) = outcome else { return Ok(Action::await_change()) };
    let status = class_status(&class, outcome, &now());
    let current = class.status.clone().unwrap_or_default();
    let events = transitions(&current.conditions, &status.conditions, &TELLS, None);
    let api: Api<GatewayClass> = Api::all(ctx.shared.client.clone());
    write(&ctx.shared, &api, KIND, class.as_ref(), &current, &status, Guard::None).await?;
    publish(&ctx.shared, class.as_ref(), events).await;
    Ok(Action::requeue(ctx.shared.settings.resync))
}
