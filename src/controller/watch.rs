//! Wiring of the reconcilers into kube-runtime `Controller`s: one for Foos, one for Envoys,
//! each fed by a reflector of its parents and label-selected reflectors of its children
//! (whose caches the reconcilers read); the Envoys' also by the xDS replicas' reports, when
//! the operator serves xDS; and the EnvoyRoute status writer ([`super::routes`]). Everything
//! cached is stripped of `managedFields` first. All stop gracefully, finishing running
//! reconciles, when `shutdown` completes.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use envoy_operator_core::api::{Envoy, Foo};
use envoy_operator_core::children::apply::strip_metadata;
use envoy_operator_core::children::labels;
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::Api;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tracing::{debug, info, warn};

use super::fleet_reports::watch_reports;
use super::routes;
use super::sync::{backoff_key, error_policy, reconcile_envoy, reconcile_foo};
use super::{Context, Result, Settings, Stores};

/// What `envoy-operator controller` is asked to do.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControllerConfig {
    /// Watch only this namespace; all namespaces when `None`.
    pub namespace: Option<String>,
    /// Reconciles running at once per kind; 0 means unbounded.
    pub concurrency: u16,
    pub settings: Settings,
    /// The operator's namespace, where the xDS server's replicas report their proxies: with
    /// it, Envoys without `spec.xds` get `status.xds` and `ConfigAccepted` from the reports.
    /// `None` where the operator serves no xDS.
    pub xds_reports_namespace: Option<String>,
}

/// An `Api` over one namespace, or all of them.
pub fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
{
    match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

/// A watch of `K` (with backoff on errors) that keeps a copy of every object, stripped of what
/// nobody reads, in a cache: the one reflector pipeline of the operator. The stream must be
/// polled for the cache to fill.
pub fn reflect<K>(
    api: Api<K>,
    config: watcher::Config,
) -> (Store<K>, impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static)
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(|object: &mut K| strip_metadata(object.meta_mut()))
        .reflect(writer);
    (reader, stream)
}

/// Runs the three controllers (Foos, Envoys, EnvoyRoutes' status) until `shutdown` completes
/// and their running reconciles finish.
/// `context` hooks let the `run` command embed this (metrics, backoff policy); pass
/// `|context| context` for the defaults.
pub async fn run(
    client: Client,
    config: ControllerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    context: impl FnOnce(Context) -> Context,
) -> Result<()> {
    let namespace = config.namespace.as_deref();
    let shutdown = shutdown.boxed().shared();
    let foo_children = watcher::Config::default().labels_from(&labels::foo_children_selector());
    let envoy_children = watcher::Config::default().labels_from(&labels::envoy_children_selector());

    let (foo_deployments, foo_deployment_events) =
        reflect(api::<Deployment>(&client, namespace), foo_children);
    let (envoy_deployments, envoy_deployment_events) =
        reflect(api::<Deployment>(&client, namespace), envoy_children.clone());
    let (config_maps, config_map_events) =
        reflect(api::<ConfigMap>(&client, namespace), envoy_children.clone());
    let (services, service_events) = reflect(api::<Service>(&client, namespace), envoy_children);

    let stores = Stores::new(foo_deployments, envoy_deployments, config_maps, services);
    let mut ctx = Context::new(client.clone(), config.settings.clone(), stores);
    // The reports live in the operator's namespace, which may not be the watched one.
    let report_triggers = config.xds_reports_namespace.as_deref().map(|reports_namespace| {
        let (reports, triggers) = watch_reports(&client, reports_namespace, config.namespace.clone());
        ctx.fleet_reports = Some(reports);
        triggers
    });
    let ctx = Arc::new(context(ctx));
    let (foos, foo_events) = reflect(api::<Foo>(&client, namespace), watcher::Config::default());
    let (envoys, envoy_events) = reflect(api::<Envoy>(&client, namespace), watcher::Config::default());
    let controller_config = controller::Config::default().concurrency(config.concurrency);
    info!(namespace = namespace.unwrap_or("<all>"), concurrency = config.concurrency, "starting controllers");

    let foo_controller =
        Controller::for_stream(forgetting_deleted(foo_events, ctx.clone()).applied_objects(), foos)
            .owns_stream(foo_deployment_events.touched_objects())
            .with_config(controller_config.clone())
            .graceful_shutdown_on(shutdown.clone())
            .run(reconcile_foo, error_policy, ctx.clone())
            .for_each(|result| async move { log_result("Foo", result) });
    let mut envoy_controller =
        Controller::for_stream(forgetting_deleted(envoy_events, ctx.clone()).applied_objects(), envoys)
            .owns_stream(config_map_events.touched_objects())
            .owns_stream(envoy_deployment_events.touched_objects())
            .owns_stream(service_events.touched_objects())
            .reconcile_all_on(trust_changes(&ctx));
    if let Some(triggers) = report_triggers {
        envoy_controller = envoy_controller.reconcile_on(triggers);
    }
    let envoy_controller = envoy_controller
        .with_config(controller_config.clone())
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile_envoy, error_policy, ctx.clone())
        .for_each(|result| async move { log_result("Envoy", result) });
    let route_controller = routes::controller(ctx, namespace, controller_config, shutdown);
    tokio::join!(foo_controller, envoy_controller, route_controller);
    info!("controllers stopped");
    Ok(())
}

/// A tick whenever the control plane's trust (its CA bundle) changes: every fleet's bootstrap
/// ConfigMap carries it; and whenever the identity CA changes: every fleet gets a certificate
/// of the new one. Never ticks without a control plane.
fn trust_changes(ctx: &Context) -> impl Stream<Item = ()> + Send + 'static {
    let trust = futures::stream::unfold(ctx.control_plane.clone(), |trust| async move {
        let mut trust = trust?;
        trust.changed().await.ok()?;
        Some(((), Some(trust)))
    });
    let issuer = futures::stream::unfold(ctx.identity_issuer.clone(), |issuer| async move {
        let mut issuer = issuer?;
        issuer.changed().await.ok()?;
        Some(((), Some(issuer)))
    });
    futures::stream::select(trust, issuer)
}

/// Parent events that also drop a deleted parent's backoff record (and an Envoy's record of
/// rejection events), so the records never outlive the object.
pub(super) fn forgetting_deleted<K: Resource<DynamicType = ()>>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    ctx: Arc<Context>,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> {
    events.inspect(move |event| {
        if let Ok(watcher::Event::Delete(object)) = event {
            ctx.backoff.forget(&backoff_key(object));
            ctx.rejection_events.forget(&backoff_key(object));
        }
    })
}

pub(super) fn log_result<K: Resource, E: std::error::Error, Q: std::error::Error>(
    kind: &'static str,
    result: Result<(reflector::ObjectRef<K>, controller::Action), controller::Error<E, Q>>,
) {
    match result {
        Ok((object, action)) => debug!(kind, object = %object, ?action, "reconciled"),
        // Failed reconciles are logged by the error policy, with their backoff.
        Err(controller::Error::ReconcilerFailed(..)) => {}
        Err(controller::Error::QueueError(error)) => {
            warn!(kind, %error, "watch failed; retrying with backoff")
        }
        Err(error) => debug!(kind, %error, "controller event"),
    }
}
