//! The EnvoyRoute status writer: a third controller, next to the Foo and Envoy ones, that keeps
//! every route's `status.parents` (Gateway API's `Accepted` and `ResolvedRefs` per parentRef)
//! current. It writes what the translation made of the route (the pass that also builds the
//! fleets' snapshots, [`crate::xds::publish`]): the outcome of each parentRef, made a status by
//! the core ([`route_status`]), written to the status subresource when it differs from the
//! cached one.
//!
//! A route's status depends on objects it does not own (the Envoys it names, the Services its
//! backendRefs name); the translation sees them change and tells which routes' outcomes did.
//!
//! Where several installs of the operator watch the route's namespace, the route's status is
//! written by one: the install that manages the first Envoy it names whose Service carries an
//! install's mark ([`envoy_operator_core::children::install`]); the others leave it alone. With
//! no such Envoy, every install writes, and all compute the same status from the same objects,
//! so the first write leaves the others nothing to do.

use std::future::Future;
use std::sync::Arc;

use envoy_operator_core::api::route::ParentReference;
use envoy_operator_core::api::{Envoy, EnvoyRoute};
use envoy_operator_core::children::install::{self, InstallId, Manager};
use envoy_operator_core::children::status::now;
use envoy_operator_core::names::CONTROLLER_NAME;
use envoy_operator_core::translate::envoyroute::status::route_status;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, Service};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

use super::route_events::{self, Parents};
use super::sync::{Parent, backoff_key, error_policy, log_result, observe, parents, write_status};
use super::{Context, Error, Result};
use crate::index::Index;
use crate::xds::publish::{OutcomeChange, RouteOutcomes};

/// The kind, as metrics and logs name it.
const KIND: &str = "EnvoyRoute";

/// What a route's status is made from: the translation's outcomes, and the caches that tell
/// which install writes it (the routes themselves come from the controller's own cache).
#[derive(Clone)]
pub struct RouteCaches {
    pub envoys: Store<Envoy>,
    pub services: Store<Service>,
    pub outcomes: RouteOutcomes,
}

impl RouteCaches {
    /// The install other than `this` that writes `route`'s status: the manager of the first
    /// Envoy (of `namespace`) it names whose Service, a child every Envoy has, carries a mark.
    fn status_writer_elsewhere(
        &self,
        namespace: &str,
        route: &EnvoyRoute,
        this: &InstallId,
    ) -> Option<String> {
        let envoys = self.envoys.state();
        let services = self.services.state();
        let manager_of = |envoy: &Envoy| {
            let uid = envoy.meta().uid.as_deref()?;
            services.iter().find_map(|service| {
                let controlled = service.namespace().as_deref() == Some(namespace)
                    && service
                        .owner_references()
                        .iter()
                        .any(|owner| owner.controller == Some(true) && owner.uid == uid);
                match install::manager(service.meta(), this) {
                    _ if !controlled => None,
                    Manager::Unmarked => None,
                    Manager::ThisInstall => Some(None),
                    Manager::Other(other) => Some(Some(other.to_owned())),
                }
            })
        };
        route
            .spec
            .parent_refs
            .iter()
            .filter_map(|parent| {
                envoys.iter().find(|envoy| {
                    envoy.namespace().as_deref() == Some(namespace) && envoy.name_any() == parent.name
                })
            })
            .find_map(|envoy| manager_of(envoy))
            .flatten()
    }
}

/// What a route reconcile needs: the shared context (client, metrics, backoff, settings) and
/// the route caches.
pub struct RouteContext {
    pub shared: Arc<Context>,
    pub caches: RouteCaches,
}

/// Reconciles one route: computes its status from the caches and writes it when it differs.
pub async fn reconcile_route(route: Arc<EnvoyRoute>, ctx: Arc<RouteContext>) -> Result<Action> {
    let key = backoff_key(route.as_ref());
    observe(&ctx.shared, KIND, &key, sync_route(route, ctx.clone())).await
}

/// Retries a failed route reconcile with the controllers' per-object backoff.
pub fn route_error_policy(route: Arc<EnvoyRoute>, error: &Error, ctx: Arc<RouteContext>) -> Action {
    error_policy(route, error, ctx.shared.clone())
}

async fn sync_route(route: Arc<EnvoyRoute>, ctx: Arc<RouteContext>) -> Result<Action> {
    if route.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let parent = Parent::of(route.as_ref())?;
    // The outcome of this very version of the route; else the translation has yet to judge it,
    // and its outcome, when it comes, triggers this reconcile again.
    let outcome = ctx.caches.outcomes.get(&ObjectRef::from_obj(route.as_ref()));
    let Some(outcome) = outcome.filter(|outcome| {
        outcome.uid == route.metadata.uid && outcome.generation == route.metadata.generation
    }) else {
        return Ok(Action::await_change());
    };
    let this = &ctx.shared.settings.install;
    if let Some(writer) = ctx.caches.status_writer_elsewhere(&parent.namespace, &route, this) {
        tracing::debug!(namespace = %parent.namespace, name = %route.name_any(), %writer, "route status written by the install managing its Envoy");
        return Ok(Action::requeue(ctx.shared.settings.resync));
    }
    let status = route_status(&route, &outcome.parents, CONTROLLER_NAME, &now());
    // A route without status and one with an empty status say the same: no write for that.
    let current = route.status.clone().unwrap_or_default();
    if write_status::<EnvoyRoute, _>(&ctx.shared, &parent, Some(&current), &status).await? {
        let namespace = parent.namespace.as_str();
        let parents = Parents {
            describe: describe_envoy,
            related: |parent: &ParentReference| Some(envoy_ref(namespace, parent)),
        };
        route_events::publish(&ctx.shared, route.as_ref(), &current.parents, &status.parents, parents).await;
    }
    Ok(Action::requeue(ctx.shared.settings.resync))
}

/// A route's parent as its events name it: `Envoy "edge"`, `Envoy "edge" listener "http"`.
fn describe_envoy(parent: &ParentReference) -> String {
    match &parent.section_name {
        Some(listener) => format!("Envoy {:?} listener {listener:?}", parent.name),
        None => format!("Envoy {:?}", parent.name),
    }
}

/// The Envoy a parentRef names (in the route's `namespace`), as an event's related object.
fn envoy_ref(namespace: &str, parent: &ParentReference) -> ObjectReference {
    ObjectReference {
        api_version: Some(Envoy::api_version(&()).into_owned()),
        kind: Some(Envoy::kind(&()).into_owned()),
        namespace: Some(namespace.to_owned()),
        name: Some(parent.name.clone()),
        ..ObjectReference::default()
    }
}

/// The EnvoyRoute status writer over the index's routes, each route reconciled when it changes
/// and when its outcome in `outcomes` does. Runs until `shutdown` completes and its running
/// reconciles finish.
pub fn controller(
    ctx: Arc<Context>,
    index: &Index,
    outcomes: RouteOutcomes,
    config: controller::Config,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> + Send + 'static {
    let routes = index.routes();
    let store = routes.store().clone();
    let outcome_changes = outcomes.changes().flat_map(move |change| {
        let changed = match change {
            OutcomeChange::Route(route) => vec![route],
            OutcomeChange::Every => {
                store.state().iter().map(|route| ObjectRef::from_obj(route.as_ref())).collect()
            }
        };
        futures::stream::iter(changed)
    });
    let caches = RouteCaches {
        envoys: index.envoys().store().clone(),
        services: index.services().store().clone(),
        outcomes,
    };
    let route_changes = parents(routes, ctx.clone());
    let route_ctx = Arc::new(RouteContext { shared: ctx, caches });
    Controller::for_shared_stream(route_changes, routes.store().clone())
        .reconcile_on(outcome_changes)
        .with_config(config)
        .graceful_shutdown_on(shutdown)
        .run(reconcile_route, route_error_policy, route_ctx)
        .for_each(|result| async move { log_result(KIND, result) })
}
