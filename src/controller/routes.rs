//! The EnvoyRoute status writer: a third controller, next to the Foo and Envoy ones, that keeps
//! every route's `status.parents` (Gateway API's `Accepted` and `ResolvedRefs` per parentRef)
//! current. The outcome is computed by the core ([`route_parents`], [`route_status`]) from the
//! route, the Envoys it names and the Services its backendRefs name; this module only feeds it
//! from caches and writes the status subresource when the result differs from the cached one.
//!
//! A route's status depends on objects it does not own, so besides its own changes a route is
//! reconciled when an Envoy it names changes (or appears, or goes) and when a Service one of its
//! backendRefs names does.
//!
//! Where several installs of the operator watch the route's namespace, the route's status is
//! written by one: the install that manages the first Envoy it names whose Service carries an
//! install's mark ([`envoy_operator_core::children::install`]); the others leave it alone. With
//! no such Envoy, every install writes, and all compute the same status from the same objects,
//! so the first write leaves the others nothing to do.

use std::future::Future;
use std::sync::Arc;

use envoy_operator_core::api::route::BackendRef;
use envoy_operator_core::api::{Envoy, EnvoyRoute};
use envoy_operator_core::children::install::{self, InstallId, Manager};
use envoy_operator_core::children::status::now;
use envoy_operator_core::names::CONTROLLER_NAME;
use envoy_operator_core::rules::{Defaulted, defaulted};
use envoy_operator_core::xds::status::{route_parents, route_status};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use tokio::sync::OnceCell;

use super::sync::{Parent, backoff_key, error_policy, observe, write_status};
use super::watch::{api, forgetting_deleted, log_result, reflect};
use super::{Context, Error, Result};

/// The kind, as metrics and logs name it.
const KIND: &str = "EnvoyRoute";

/// The caches a route's status is computed from (the routes themselves come from the
/// controller's own cache).
#[derive(Clone)]
pub struct RouteCaches {
    pub envoys: Store<Envoy>,
    pub services: Store<Service>,
    // One waiter on the stores, the others woken by the cell (see `Stores`).
    ready: Arc<OnceCell<()>>,
}

impl RouteCaches {
    pub fn new(envoys: Store<Envoy>, services: Store<Service>) -> Self {
        Self { envoys, services, ready: Arc::default() }
    }

    /// Waits until the Envoy and Service caches have been filled once, so a route is never
    /// told its Envoy or backend is missing because it was not listed yet.
    pub async fn ready(&self) -> Result<()> {
        let unavailable = |what| move |_| Error::CacheUnavailable(what);
        self.ready
            .get_or_try_init(|| async {
                self.envoys.wait_until_ready().await.map_err(unavailable("Envoys"))?;
                self.services.wait_until_ready().await.map_err(unavailable("Services"))
            })
            .await?;
        Ok(())
    }

    /// The Envoys of `namespace` that `route` names, with their defaults (listeners come from
    /// the defaulted ports).
    fn named_envoys(&self, namespace: &str, route: &EnvoyRoute) -> Vec<Defaulted<Envoy>> {
        self.envoys
            .state()
            .into_iter()
            .filter(|envoy| {
                envoy.namespace().as_deref() == Some(namespace) && names_envoy(route, &envoy.name_any())
            })
            .map(|envoy| defaulted(envoy.as_ref().clone()))
            .collect()
    }

    /// The Services of `namespace` that `route`'s backendRefs name.
    fn named_services(&self, namespace: &str, route: &EnvoyRoute) -> Vec<Service> {
        self.services
            .state()
            .into_iter()
            .filter(|service| {
                service.namespace().as_deref() == Some(namespace) && names_service(route, &service.name_any())
            })
            .map(|service| service.as_ref().clone())
            .collect()
    }

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

/// Whether one of `route`'s parentRefs names the Envoy `name` (of the route's namespace).
pub fn names_envoy(route: &EnvoyRoute, name: &str) -> bool {
    route.spec.parent_refs.iter().any(|parent| parent.name == name)
}

/// Whether one of `route`'s backendRefs names the Service `name` (of the route's namespace).
pub fn names_service(route: &EnvoyRoute, name: &str) -> bool {
    route.spec.rules.iter().flat_map(|rule| &rule.backend_refs).any(|backend| is_service(backend, name))
}

/// A backendRef to the Service `name`: the core group (`""`, the default) and kind `Service`
/// (the default).
fn is_service(backend: &BackendRef, name: &str) -> bool {
    backend.name == name
        && backend.group.as_deref().unwrap_or_default().is_empty()
        && backend.kind.as_deref().unwrap_or("Service") == "Service"
}

/// The routes of `namespace` in `routes` that `names` picks: which routes an Envoy or Service
/// event concerns.
fn routes_in(
    routes: &Store<EnvoyRoute>,
    namespace: Option<&str>,
    names: impl Fn(&EnvoyRoute) -> bool,
) -> Vec<ObjectRef<EnvoyRoute>> {
    routes
        .state()
        .iter()
        .filter(|route| route.namespace().as_deref() == namespace && names(route))
        .map(|route| ObjectRef::from_obj(route.as_ref()))
        .collect()
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
    ctx.caches.ready().await?;
    let this = &ctx.shared.settings.install;
    if let Some(writer) = ctx.caches.status_writer_elsewhere(&parent.namespace, &route, this) {
        tracing::debug!(namespace = %parent.namespace, name = %route.name_any(), %writer, "route status written by the install managing its Envoy");
        return Ok(Action::requeue(ctx.shared.settings.resync));
    }
    let envoys = ctx.caches.named_envoys(&parent.namespace, &route);
    let services = ctx.caches.named_services(&parent.namespace, &route);
    let outcomes = route_parents(&route, &envoys, &services);
    let status = route_status(&route, &outcomes, CONTROLLER_NAME, &now());
    // A route without status and one with an empty status say the same: no write for that.
    let current = route.status.clone().unwrap_or_default();
    write_status::<EnvoyRoute, _>(&ctx.shared, &parent, Some(&current), &status).await?;
    Ok(Action::requeue(ctx.shared.settings.resync))
}

/// The EnvoyRoute controller: reflectors of the routes, the Envoys and all Services (of
/// `namespace`, or of every namespace), each route reconciled when it, an Envoy it names or a
/// Service it names changes. Runs until `shutdown` completes and its running reconciles finish.
pub fn controller(
    ctx: Arc<Context>,
    namespace: Option<&str>,
    config: controller::Config,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) -> impl Future<Output = ()> + Send + 'static {
    let client = &ctx.client;
    let (routes, route_events) = reflect(api::<EnvoyRoute>(client, namespace), watcher::Config::default());
    let (envoys, envoy_events) = reflect(api::<Envoy>(client, namespace), watcher::Config::default());
    let (services, service_events) = reflect(api::<Service>(client, namespace), watcher::Config::default());

    let routes_of_envoy = routes.clone();
    let routes_of_service = routes.clone();
    // Deleted Envoys and Services matter too (the route loses its parent or backend): every
    // touched object, not only applied ones.
    let envoy_changes = envoy_events.touched_objects();
    let service_changes = service_events.touched_objects();
    let route_changes = forgetting_deleted(route_events, ctx.clone()).applied_objects();
    let caches = RouteCaches::new(envoys, services);
    let route_ctx = Arc::new(RouteContext { shared: ctx, caches });

    Controller::for_stream(route_changes, routes)
        .watches_stream(envoy_changes, move |envoy: Envoy| {
            let name = envoy.name_any();
            routes_in(&routes_of_envoy, envoy.namespace().as_deref(), |route| names_envoy(route, &name))
        })
        .watches_stream(service_changes, move |service: Service| {
            let name = service.name_any();
            routes_in(&routes_of_service, service.namespace().as_deref(), |route| names_service(route, &name))
        })
        .with_config(config)
        .graceful_shutdown_on(shutdown)
        .run(reconcile_route, route_error_policy, route_ctx)
        .for_each(|result| async move { log_result(KIND, result) })
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector;
    use serde_json::json;

    use super::*;

    fn route(namespace: &str, name: &str, spec: serde_json::Value) -> EnvoyRoute {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}))
        .unwrap()
    }

    fn store(routes: Vec<EnvoyRoute>) -> Store<EnvoyRoute> {
        let (reader, mut writer) = reflector::store();
        writer.apply_watcher_event(&watcher::Event::Init);
        for route in routes {
            writer.apply_watcher_event(&watcher::Event::InitApply(route));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        reader
    }

    #[test]
    fn a_route_names_the_envoys_of_its_parent_refs() {
        let shop = route(
            "shop",
            "shop",
            json!({"parentRefs": [{"name": "edge"}, {"name": "inner", "sectionName": "http"}]}),
        );
        assert!(names_envoy(&shop, "edge"));
        assert!(names_envoy(&shop, "inner"));
        assert!(!names_envoy(&shop, "web"));
    }

    #[test]
    fn a_route_names_the_services_of_its_backend_refs_only() {
        let shop = route(
            "shop",
            "shop",
            json!({"rules": [
                {"backendRefs": [{"name": "web", "port": 80}]},
                {"backendRefs": [{"name": "api", "kind": "Service", "group": "", "port": 80},
                                 {"name": "bucket", "kind": "Bucket", "group": "storage.example.com"}]}
            ]}),
        );
        assert!(names_service(&shop, "web"));
        assert!(names_service(&shop, "api"));
        assert!(!names_service(&shop, "bucket"), "a backend of another kind is no Service");
        assert!(!names_service(&shop, "edge"));
    }

    #[test]
    fn an_event_concerns_the_routes_of_its_namespace_that_name_it() {
        let routes = store(vec![
            route("shop", "a", json!({"parentRefs": [{"name": "edge"}]})),
            route("shop", "b", json!({"parentRefs": [{"name": "inner"}]})),
            route("blog", "c", json!({"parentRefs": [{"name": "edge"}]})),
        ]);
        let concerned = routes_in(&routes, Some("shop"), |route| names_envoy(route, "edge"));
        assert_eq!(concerned, [ObjectRef::new("a").within("shop")]);
    }
}
