//! The control plane's translation, in two steps. First an Envoy fleet, the EnvoyRoutes
//! attached to it and the Services and EndpointSlices they send traffic to, in; the fleet's
//! IR ([`crate::ir`]) out, with what each route's parents make of it, in one pass. Then the IR
//! as Envoy's listeners, route configurations, clusters and endpoints ([`to_envoy`]). Pure and
//! deterministic: the same inputs give the same resources, in the same order, so the xDS
//! server can hash them into versions.
//!
//! - [`listener`]: a listener per port of the fleet;
//! - [`routes`] and [`rule`]: its virtual hosts and routes, in Gateway API's precedence;
//! - [`endpoints`]: a backend per Service port used, with its ready endpoints;
//! - [`attach`], [`backends`], [`conditions`] and [`status`]: what attaches where, what
//!   resolves, and the routes' `Accepted` and `ResolvedRefs` conditions;
//! - [`route_events`]: which changes of those conditions are told as Events on the route;
//! - [`to_envoy`]: the IR as Envoy's resources ([`crate::envoy`]);
//! - [`namespace`]: every fleet and route of a namespace in one pass;
//! - [`render`]: the translations of a set of manifests, for `render --xds`.

use std::sync::Arc;

pub mod attach;
pub mod listener;
pub mod namespace;
pub mod rule;
pub mod status;

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use self::attach::CheckedRoute;
pub use self::status::RouteStatus;
use super::endpoints;
use super::hosts::{self as routes, AttachedRoute};
use crate::api::{Envoy, EnvoyRoute};
use crate::fleet::isolate::Rejections;
use crate::ir;
use crate::rules::Defaulted;
use crate::xds as to_envoy;
pub use crate::xds::Resources;

/// What one Envoy fleet's configuration is made from: the fleet, and the objects of its
/// namespace (objects of other namespaces are ignored).
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    pub envoy: &'a Defaulted<Envoy>,
    /// Every EnvoyRoute of the namespace: those whose parentRefs name this Envoy are translated.
    pub routes: &'a [Arc<EnvoyRoute>],
    pub services: &'a [Arc<Service>],
    /// Every EndpointSlice of the namespace (found per Service by `kubernetes.io/service-name`).
    pub endpoint_slices: &'a [Arc<EndpointSlice>],
    /// Routes the fleet's proxies refused ([`crate::fleet::isolate`]): left out, with the reason.
    pub rejected: &'a Rejections,
}

/// The fleet's configuration, and what it makes of each route that names it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Translation {
    /// What the fleet's proxies should do.
    pub ir: ir::Fleet,
    /// The same, as Envoy's resources.
    #[serde(skip)]
    pub resources: Resources,
    /// One per (route, parentRef naming this Envoy), sorted by route name then parentRef.
    pub route_statuses: Vec<RouteStatus>,
}

/// Translates one Envoy fleet and the routes attached to it.
pub fn translate(inputs: &Inputs) -> Translation {
    let (ir, route_statuses) = fleet(inputs);
    Translation { resources: to_envoy::resources(&ir), ir, route_statuses }
}

/// The fleet's IR, and the status of every (route, parentRef naming this Envoy), sorted by
/// route name then parentRef.
fn fleet(inputs: &Inputs) -> (ir::Fleet, Vec<RouteStatus>) {
    let envoy = inputs.envoy;
    let namespace = envoy.metadata.namespace.as_deref().unwrap_or_default();
    let envoy_name = envoy.metadata.name.as_deref().unwrap_or_default();
    let mut listeners = listener::listeners(envoy);
    let listener_names: Vec<String> = listeners.iter().map(|l| l.name.clone()).collect();

    let names_this_envoy = |route: &&Arc<EnvoyRoute>| {
        route.metadata.namespace.as_deref().is_none_or(|ns| ns == namespace)
            && route.spec.parent_refs.iter().any(|parent| parent.name == envoy_name)
    };
    let checked: Vec<CheckedRoute> = inputs
        .routes
        .iter()
        .filter(names_this_envoy)
        .map(|route| {
            let mut checked = CheckedRoute::new(route, inputs.services);
            checked.rejected =
                inputs.rejected.of("EnvoyRoute", &route.metadata).map(|r| r.condition_message());
            checked
        })
        .collect();

    let mut route_statuses = Vec::new();
    let mut attached = Vec::new();
    for route in &checked {
        let resolved_refs = status::resolved_refs(route);
        let mut parent_refs: Vec<_> =
            route.route.spec.parent_refs.iter().filter(|parent| parent.name == envoy_name).collect();
        parent_refs.sort();
        parent_refs.dedup();
        let mut on = BTreeSet::new();
        for parent_ref in parent_refs {
            let (accepted, listeners) = attach::attach(route, parent_ref, Some(envoy), &listener_names);
            on.extend(listeners);
            route_statuses.push(RouteStatus {
                route: route.name().to_owned(),
                parent_ref: parent_ref.clone(),
                accepted,
                resolved_refs: resolved_refs.clone(),
            });
        }
        if !on.is_empty() {
            attached.push(AttachedRoute { checked: route, listeners: on });
        }
    }
    route_statuses.sort_by(|a, b| (&a.route, &a.parent_ref).cmp(&(&b.route, &b.parent_ref)));

    routes::add_virtual_hosts(&mut listeners, &attached);
    let used: Vec<_> = attached.iter().flat_map(|a| rule::used_clusters(a.checked)).collect();
    let backends = endpoints::backends(&used, inputs.services, inputs.endpoint_slices);
    (ir::Fleet { listeners, backends, secrets: Vec::new() }, route_statuses)
}
