//! The Gateway API controllers: GatewayClasses, Gateways, HTTPRoutes, GRPCRoutes and TLSRoutes
//! get the status the translation judged ([`envoy_operator_core::translate::gateway`], run by
//! the publisher, [`crate::xds::publish::gateways`]); each Gateway gets its fleet, an `Envoy`
//! ([`fleets`]).
//!
//! Five kube-runtime controllers, one per kind (GRPCRoutes' and TLSRoutes' only where they are
//! served), over the index's caches. Each reconciles an
//! object when it changes and when its outcome in a new translation does ([`changes`]); the
//! Gateway's also when its fleet Envoy changes (drift is taken back). A status is written only
//! when it differs from the cached one ([`status`]), and only for the object's current
//! generation: an outcome judged from an older one waits for the translation that follows.
//!
//! Decisions that destroy something (a fleet deleted, the operator's entries dropped from a
//! route) are taken from the caches, never from the absence of an outcome alone, so a
//! translation that has not yet seen an object never costs it anything.
//!
//! Started by the leader only, and only where the API server serves the Gateway API
//! ([`crate::index::GatewayApi`]).

pub mod changes;
mod class;
pub mod fleets;
mod gateway;
mod route;
pub mod status;

use std::future::Future;
use std::sync::Arc;

use envoy_operator_core::api::Envoy;
use envoy_operator_core::api::gateway::{
    GROUP, GRPCRoute, Gateway, GatewayClass, GatewayRoute, HTTPRoute, TLSRoute,
};
use envoy_operator_core::names::CONTROLLER_NAME;
use futures::StreamExt;
use kube::ResourceExt;
use kube::runtime::controller::{self, Controller};
use kube::runtime::reflector::{ObjectRef, Store};

use super::sync::{log_result, parents};
use super::{Context, Error, Result};
use crate::index::{Index, Watched};
use crate::xds::publish::GatewayOutcomes;

/// What the Gateway API reconciles share: the controllers' context (client, metrics, backoff,
/// settings), the newest translation, and the caches their decisions read.
pub struct GatewayContext {
    pub shared: Arc<Context>,
    pub outcomes: GatewayOutcomes,
    pub classes: Watched<GatewayClass>,
    pub gateways: Watched<Gateway>,
    pub envoys: Watched<Envoy>,
}

impl GatewayContext {
    /// The caches' context over `index` (whose Gateway API kinds are served).
    pub fn of_index(shared: Arc<Context>, index: &Index, outcomes: GatewayOutcomes) -> Self {
        Self {
            shared,
            outcomes,
            classes: index.gateway_classes().clone(),
            gateways: index.gateways().clone(),
            envoys: index.envoys().clone(),
        }
    }

    /// Waits until the caches the decisions read have been listed, so a class not listed yet
    /// is never taken for one that is not the operator's.
    async fn listed(&self) -> Result<()> {
        let unavailable = |error: crate::index::CacheUnavailable| Error::CacheUnavailable(error.0);
        self.classes.listed().await.map_err(unavailable)?;
        self.gateways.listed().await.map_err(unavailable)?;
        self.envoys.listed().await.map_err(unavailable)
    }

    /// Whether the GatewayClass `name` exists and names the operator.
    fn class_is_ours(&self, name: &str) -> bool {
        class_is_ours(self.classes.store(), name)
    }

    /// Whether any parentRef of `route` names a Gateway of the operator's classes.
    fn route_names_our_gateway<R: GatewayRoute + ResourceExt>(&self, route: &R) -> bool {
        route_names_our_gateway(self.classes.store(), self.gateways.store(), route)
    }
}

/// Whether the GatewayClass `name` is in `classes` and names the operator.
fn class_is_ours(classes: &Store<GatewayClass>, name: &str) -> bool {
    classes.get(&ObjectRef::new(name)).is_some_and(|class| class.spec.controller_name == CONTROLLER_NAME)
}

/// Whether any parentRef of `route` names a Gateway (in `gateways`) of one of the operator's
/// classes (in `classes`); a parentRef's group, kind and namespace default as the API says.
fn route_names_our_gateway<R: GatewayRoute + ResourceExt>(
    classes: &Store<GatewayClass>,
    gateways: &Store<Gateway>,
    route: &R,
) -> bool {
    let namespace = route.namespace().unwrap_or_default();
    route.parent_refs().iter().any(|parent| {
        let gateway_group = parent.group.as_deref().unwrap_or(GROUP) == GROUP;
        let gateway_kind = parent.kind.as_deref().unwrap_or("Gateway") == "Gateway";
        let namespace = parent.namespace.as_deref().unwrap_or(&namespace);
        gateway_group
            && gateway_kind
            && gateways
                .get(&ObjectRef::new(&parent.name).within(namespace))
                .is_some_and(|gateway| class_is_ours(classes, &gateway.spec.gateway_class_name))
    })
}

/// The three Gateway API controllers over `index` (which must serve the Gateway API), with the
/// outcomes of the translation that feeds `outcomes`. Runs until `shutdown` completes and their
/// running reconciles finish.
pub fn controllers(
    shared: Arc<Context>,
    index: &Index,
    outcomes: GatewayOutcomes,
    config: controller::Config,
    shutdown: impl Future<Output = ()> + Clone + Send + Sync + 'static,
) -> impl Future<Output = ()> + Send + 'static {
    let ctx = Arc::new(GatewayContext::of_index(shared.clone(), index, outcomes.clone()));

    let classes = index.gateway_classes();
    let class_controller =
        Controller::for_shared_stream(parents(classes, shared.clone()), classes.store().clone())
            .reconcile_on(changes::changes(outcomes.subscribe(), changes::classes))
            .with_config(config.clone())
            .graceful_shutdown_on(shutdown.clone())
            .run(class::reconcile, class::error_policy, ctx.clone())
            .for_each(|result| async move { log_result(class::KIND, result) });

    let gateways = index.gateways();
    let gateway_controller =
        Controller::for_shared_stream(parents(gateways, shared.clone()), gateways.store().clone())
            .owns_shared_stream(index.envoys().touched())
            .reconcile_on(changes::changes(outcomes.subscribe(), changes::gateways))
            .with_config(config.clone())
            .graceful_shutdown_on(shutdown.clone())
            .run(gateway::reconcile, gateway::error_policy, ctx.clone())
            .for_each(|result| async move { log_result(gateway::KIND, result) });

    let routes = index.http_routes();
    let route_controller =
        Controller::for_shared_stream(parents(routes, shared.clone()), routes.store().clone())
            .reconcile_on(changes::changes(outcomes.subscribe(), changes::routes))
            .with_config(config.clone())
            .graceful_shutdown_on(shutdown.clone())
            .run(route::reconcile::<HTTPRoute>, route::error_policy::<HTTPRoute>, ctx.clone())
            .for_each(|result| async move { log_result("HTTPRoute", result) });

    // Only where the API server serves GRPCRoutes: elsewhere their watch would fail forever.
    let grpc_route_controller = index.grpc_routes_if_served().map(|grpc_routes| {
        Controller::for_shared_stream(parents(grpc_routes, shared.clone()), grpc_routes.store().clone())
            .reconcile_on(changes::changes(outcomes.subscribe(), changes::grpc_routes))
            .with_config(config.clone())
            .graceful_shutdown_on(shutdown.clone())
            .run(route::reconcile::<GRPCRoute>, route::error_policy::<GRPCRoute>, ctx.clone())
            .for_each(|result| async move { log_result("GRPCRoute", result) })
    });

    // Only where the API server serves TLSRoutes (the experimental channel's CRDs).
    let tls_route_controller = index.tls_routes_if_served().map(|tls_routes| {
        Controller::for_shared_stream(parents(tls_routes, shared), tls_routes.store().clone())
            .reconcile_on(changes::changes(outcomes.subscribe(), changes::tls_routes))
            .with_config(config)
            .graceful_shutdown_on(shutdown)
            .run(route::reconcile::<TLSRoute>, route::error_policy::<TLSRoute>, ctx)
            .for_each(|result| async move { log_result("TLSRoute", result) })
    });

    async move {
        let optional = |controller: Option<_>| async move {
            if let Some(controller) = controller {
                controller.await;
            }
        };
        tokio::join!(
            class_controller,
            gateway_controller,
            route_controller,
            optional(grpc_route_controller.map(futures::FutureExt::boxed)),
            optional(tls_route_controller.map(futures::FutureExt::boxed)),
        );
    }
}

#[cfg(test)]
mod tests {
    use envoy_operator_core::api::gateway::{GatewayClassSpec, GatewaySpec, HTTPRouteSpec, ParentReference};
    use kube::runtime::{reflector, watcher};

    use super::*;

    fn filled<K: kube::Resource<DynamicType = ()> + Clone>(objects: Vec<K>) -> Store<K> {
        let (store, mut writer) = reflector::store();
        writer.apply_watcher_event(&watcher::Event::Init);
        for object in objects {
            writer.apply_watcher_event(&watcher::Event::InitApply(object));
        }
        writer.apply_watcher_event(&watcher::Event::InitDone);
        store
    }

    fn class(name: &str, controller_name: &str) -> GatewayClass {
        GatewayClass::new(
            name,
            GatewayClassSpec { controller_name: controller_name.into(), ..Default::default() },
        )
    }

    fn gateway(namespace: &str, name: &str, class: &str) -> Gateway {
        let mut gateway =
            Gateway::new(name, GatewaySpec { gateway_class_name: class.into(), ..Default::default() });
        gateway.metadata.namespace = Some(namespace.into());
        gateway
    }

    fn route(parent: ParentReference) -> HTTPRoute {
        let mut route =
            HTTPRoute::new("shop", HTTPRouteSpec { parent_refs: vec![parent], ..Default::default() });
        route.metadata.namespace = Some("shop".into());
        route
    }

    fn parent(name: &str) -> ParentReference {
        ParentReference { name: name.into(), ..ParentReference::default() }
    }

    #[test]
    fn a_route_is_ours_only_through_a_gateway_of_our_class_its_parent_ref_names() {
        let classes = filled(vec![class("ours", CONTROLLER_NAME), class("theirs", "example.net/other")]);
        let gateways = filled(vec![
            gateway("shop", "edge", "ours"),
            gateway("infra", "shared", "ours"),
            gateway("shop", "foreign", "theirs"),
            gateway("shop", "orphan", "missing"),
        ]);
        let ours = |parent| route_names_our_gateway(&classes, &gateways, &route(parent));
        assert!(ours(parent("edge")), "group, kind and namespace default");
        assert!(ours(ParentReference { namespace: Some("infra".into()), ..parent("shared") }));
        assert!(!ours(parent("shared")), "another namespace's Gateway, named without its namespace");
        assert!(!ours(parent("foreign")), "a Gateway of another controller's class");
        assert!(!ours(parent("orphan")), "a Gateway of a class that does not exist");
        assert!(!ours(parent("gone")), "no such Gateway");
        assert!(!ours(ParentReference { kind: Some("Service".into()), ..parent("edge") }), "not a Gateway");
        let other_group = ParentReference { group: Some("example.net".into()), ..parent("edge") };
        assert!(!ours(other_group), "another API's Gateway");
    }
}
