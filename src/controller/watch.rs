//! Wiring of the reconcilers into kube-runtime `Controller`s: one for Foos, one for Envoys,
//! each fed by the index's feed of its parents and of its children (whose caches the
//! reconcilers read); the Envoys' also by the xDS replicas' reports, when the operator serves
//! xDS; and the EnvoyRoute status writer ([`super::routes`]), fed by the translation's
//! outcomes; and, where the API server serves the Gateway API, the Gateway API controllers
//! ([`super::gateways`]). All stop gracefully, finishing running reconciles, when `shutdown`
//! completes.

use std::future::Future;
use std::sync::Arc;

use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use kube::runtime::controller::{self, Controller};
use kube::{Client, Resource};
use tracing::info;

use super::fleet_reports::watch_reports;
use super::sync::{error_policy, log_result, parents, reconcile_envoy, reconcile_foo};
use super::{Context, Result, Settings, Stores};
use super::{gateways, routes};
use crate::index::Index;
use crate::xds::publish::gateways::{self as gateway_publish, GatewayOutputs};
use crate::xds::publish::{self, GatewayOutcomes, Outputs, RouteOutcomes, inputs};

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

/// Runs the three controllers (Foos, Envoys, EnvoyRoutes' status) over an index of their own,
/// with a translation of their own for the routes' outcomes, until `shutdown` completes and their
/// running reconciles finish. `context` hooks let callers adjust the context (e.g. its
/// metrics); pass `|context| context` for the defaults.
pub async fn run(
    client: Client,
    config: ControllerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    context: impl FnOnce(Context) -> Context,
) -> Result<()> {
    let index = Arc::new(Index::new(client, config.namespace.clone()));
    run_with_index(index, None, None, config, shutdown, context).await
}

/// [`run`] over the process's `index`. The routes' statuses are the outcomes of the translation
/// that feeds `outcomes` (the xDS publisher's, where the process serves xDS); with `None`, the
/// controllers run a translation of their own for them. The same for the Gateway API's
/// objects and `gateway_outcomes`, where the API server serves the Gateway API
/// ([`Index::gateway_api`]; elsewhere none of its kinds is watched).
pub async fn run_with_index(
    index: Arc<Index>,
    outcomes: Option<RouteOutcomes>,
    gateway_outcomes: Option<GatewayOutcomes>,
    config: ControllerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    context: impl FnOnce(Context) -> Context,
) -> Result<()> {
    let client = index.client().clone();
    let shutdown = shutdown.boxed().shared();
    let gateway_api = index.gateway_api().await.is_on();
    // Every kind the controllers read, started before anything waits for the caches' listing.
    let (foos, envoys) = (index.foos(), index.envoys());
    index.routes();
    if gateway_api {
        index.gateway_classes();
        index.gateways();
        index.http_routes();
    }
    let stores = Stores::of_index(&index);
    let mut ctx = Context::new(client.clone(), config.settings.clone(), stores);
    // The reports live in the operator's namespace, which may not be the watched one.
    let report_triggers = config.xds_reports_namespace.as_deref().map(|reports_namespace| {
        let (reports, triggers) = watch_reports(&client, reports_namespace, config.namespace.clone());
        ctx.fleet_reports = Some(reports);
        triggers
    });
    let ctx = Arc::new(context(ctx));
    let outcomes = match outcomes {
        Some(outcomes) => outcomes,
        None => {
            let outcomes = RouteOutcomes::default();
            let (caches, touched) = inputs::translation_from_index(&index);
            let outputs = Outputs { snapshots: None, outcomes: outcomes.clone(), isolation: None };
            let translation = publish::run(caches, touched, outputs, || ());
            let stop = shutdown.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = translation => {},
                    () = stop => {},
                }
            });
            outcomes
        }
    };
    // `None` where the Gateway API is off: no Gateway controller runs then.
    let gateway_outcomes = match gateway_api {
        true => Some(gateway_outcomes.unwrap_or_else(|| translate_gateways(&index, shutdown.clone()))),
        false => None,
    };
    let controller_config = controller::Config::default().concurrency(config.concurrency);
    info!(
        namespace = index.namespace().unwrap_or("<all>"),
        concurrency = config.concurrency,
        "starting controllers"
    );

    let foo_controller = Controller::for_shared_stream(parents(foos, ctx.clone()), foos.store().clone())
        .owns_shared_stream(index.deployments().touched())
        .with_config(controller_config.clone())
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile_foo, error_policy, ctx.clone())
        .for_each(|result| async move { log_result("Foo", result) });
    let mut envoy_controller =
        Controller::for_shared_stream(parents(envoys, ctx.clone()), envoys.store().clone())
            .owns_shared_stream(index.config_maps().touched())
            .owns_shared_stream(index.deployments().touched())
            .owns_shared_stream(index.services().touched())
            .reconcile_all_on(trust_changes(&ctx));
    if let Some(triggers) = report_triggers {
        envoy_controller = envoy_controller.reconcile_on(triggers);
    }
    let envoy_controller = envoy_controller
        .with_config(controller_config.clone())
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile_envoy, error_policy, ctx.clone())
        .for_each(|result| async move { log_result("Envoy", result) });
    let route_controller =
        routes::controller(ctx.clone(), &index, outcomes, controller_config.clone(), shutdown.clone());
    let gateway_controllers = async {
        if let Some(outcomes) = gateway_outcomes {
            gateways::controllers(ctx, &index, outcomes, controller_config, shutdown).await;
        }
    };
    tokio::join!(foo_controller, envoy_controller, route_controller, gateway_controllers);
    info!("controllers stopped");
    Ok(())
}

/// The Gateway API translation of a process that serves no xDS, for the statuses (and fleets)
/// only, until `shutdown`.
fn translate_gateways(index: &Index, shutdown: impl Future<Output = ()> + Send + 'static) -> GatewayOutcomes {
    let outcomes = GatewayOutcomes::new();
    let (caches, changed) = gateway_publish::statuses_from_index(index);
    let outputs = GatewayOutputs { snapshots: None, outcomes: outcomes.clone(), isolation: None };
    let translation = gateway_publish::run(caches, changed, outputs, || ());
    tokio::spawn(async move {
        tokio::select! {
            () = translation => {},
            () = shutdown => {},
        }
    });
    outcomes
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
