//! The EnvoyRoute door: an Envoy fleet, the EnvoyRoutes naming it and the Services and
//! EndpointSlices they send traffic to, in; the fleet's IR ([`crate::ir`]) out, with what each
//! route's parents make of it, in one pass, and the IR as Envoy's resources ([`crate::xds`]).
//! Pure and deterministic: the same inputs give the same resources, in the same order, so the
//! xDS server can hash them into versions.
//!
//! - [`read`]: an EnvoyRoute read once into the route model ([`crate::route`]);
//! - [`listener`]: a listener per port of the fleet;
//! - [`attach`] and [`status`]: which listeners a parentRef attaches a route to, its
//!   `Accepted`, and the EnvoyRoute's `status.parents`;
//! - [`namespace`]: every fleet and route of a namespace in one pass, each route read once.

use std::sync::Arc;

pub mod attach;
pub mod listener;
pub mod namespace;
pub mod read;
pub mod status;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use self::read::ReadEnvoyRoute;
pub use self::status::RouteStatus;
use super::endpoints;
use super::hosts::{self, Served};
use crate::api::{Envoy, EnvoyRoute};
use crate::fleet::isolate::Rejections;
use crate::ir;
use crate::route::ClusterKey;
use crate::rules::Defaulted;
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
    let envoy = inputs.envoy;
    let namespace = envoy.metadata.namespace.as_deref().unwrap_or_default();
    let envoy_name = envoy.metadata.name.as_deref().unwrap_or_default();
    let names_this_envoy = |route: &&Arc<EnvoyRoute>| {
        route.metadata.namespace.as_deref().is_none_or(|ns| ns == namespace)
            && route.spec.parent_refs.iter().any(|parent| parent.name == envoy_name)
    };
    let routes: Vec<ReadEnvoyRoute> = inputs
        .routes
        .iter()
        .filter(names_this_envoy)
        .map(|route| ReadEnvoyRoute::read(route, inputs.services, inputs.rejected))
        .collect();
    translate_read(envoy, &routes, inputs.services, inputs.endpoint_slices)
}

/// [`translate`], of routes already read (those naming other Envoys are ignored).
pub fn translate_read(
    envoy: &Defaulted<Envoy>,
    routes: &[ReadEnvoyRoute],
    services: &[Arc<Service>],
    endpoint_slices: &[Arc<EndpointSlice>],
) -> Translation {
    let (ir, route_statuses) = fleet(envoy, routes, services, endpoint_slices);
    Translation { resources: crate::xds::resources(&ir), ir, route_statuses }
}

/// The fleet's IR, and the status of every (route, parentRef naming this Envoy), sorted by
/// route name then parentRef.
fn fleet(
    envoy: &Defaulted<Envoy>,
    routes: &[ReadEnvoyRoute],
    services: &[Arc<Service>],
    endpoint_slices: &[Arc<EndpointSlice>],
) -> (ir::Fleet, Vec<RouteStatus>) {
    let envoy_name = envoy.metadata.name.as_deref().unwrap_or_default();
    let mut listeners = listener::listeners(envoy);
    let listener_names: Vec<String> = listeners.iter().map(|l| l.name.clone()).collect();

    let mut route_statuses = Vec::new();
    // Per listener, the routes attached there.
    let mut attached: BTreeMap<String, Vec<Served>> = BTreeMap::new();
    let mut used: Vec<ClusterKey> = Vec::new();
    for read in routes {
        let route = &read.route;
        let mut on = BTreeSet::new();
        for parent_ref in read.parent_refs().into_iter().filter(|parent| parent.name == envoy_name) {
            let (accepted, listeners) = attach::attach(route, parent_ref, Some(envoy), &listener_names);
            on.extend(listeners);
            route_statuses.push(RouteStatus {
                route: route.name.clone(),
                parent_ref: parent_ref.clone(),
                accepted,
                resolved_refs: route.resolved_refs.clone(),
            });
        }
        if !on.is_empty() {
            used.extend(route.used_clusters().into_iter().cloned());
        }
        for listener in on {
            attached.entry(listener).or_default().push(Served { route, hostnames: &route.hostnames });
        }
    }
    route_statuses.sort_by(|a, b| (&a.route, &a.parent_ref).cmp(&(&b.route, &b.parent_ref)));

    for listener in &mut listeners {
        let served = attached.get(listener.name.as_str()).map(Vec::as_slice).unwrap_or_default();
        listener.virtual_hosts = hosts::virtual_hosts(served);
    }
    let backends = endpoints::backends(&used, services, endpoint_slices);
    (ir::Fleet { listeners, backends, secrets: Vec::new() }, route_statuses)
}
