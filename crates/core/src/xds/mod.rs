//! The control plane's translation: an Envoy fleet, the EnvoyRoutes attached to it and the
//! Services and EndpointSlices they send traffic to, in; Envoy's listeners, route
//! configurations, clusters and endpoints out, with what each route's parents make of it.
//! Pure and deterministic: the same inputs give the same resources, in the same order, so the
//! xDS server can hash them into versions.
//!
//! - [`listener`]: a listener per port of the fleet, routed by RDS;
//! - [`routes`] and [`rule`]: a route configuration per listener, Gateway API's precedence;
//! - [`clusters`] and [`endpoints`]: an EDS cluster and its assignment per Service port used;
//! - [`attach`], [`backends`] and [`status`]: what attaches where, what resolves, and the
//!   routes' `Accepted` and `ResolvedRefs` conditions;
//! - [`model`]: the Envoy messages, serializing to Envoy's JSON;
//! - [`render`]: the translations of a set of manifests, for `render --xds`.

pub mod attach;
pub mod backends;
pub mod clusters;
pub mod endpoints;
pub mod hosts;
pub mod listener;
pub mod model;
pub mod render;
pub mod routes;
pub mod rule;
pub mod status;

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::Serialize;

use self::attach::CheckedRoute;
use self::model::{
    Cluster, ClusterLoadAssignment, DiscoveryType, Listener, NetworkFilterConfig, RouteConfiguration,
    RouteSpecifier,
};
use self::routes::AttachedRoute;
pub use self::status::RouteStatus;
use crate::api::{Envoy, EnvoyRoute};
use crate::rules::Defaulted;

/// What one Envoy fleet's configuration is made from: the fleet, and the objects of its
/// namespace (objects of other namespaces are ignored).
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    pub envoy: &'a Defaulted<Envoy>,
    /// Every EnvoyRoute of the namespace: those whose parentRefs name this Envoy are translated.
    pub routes: &'a [EnvoyRoute],
    pub services: &'a [Service],
    /// Every EndpointSlice of the namespace (found per Service by `kubernetes.io/service-name`).
    pub endpoint_slices: &'a [EndpointSlice],
}

/// The fleet's configuration, and what it makes of each route that names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Translation {
    pub resources: Resources,
    /// One per (route, parentRef naming this Envoy), sorted by route name then parentRef.
    pub route_statuses: Vec<RouteStatus>,
}

/// The four xDS resource types, each sorted by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Resources {
    pub listeners: Vec<Listener>,
    pub route_configurations: Vec<RouteConfiguration>,
    pub clusters: Vec<Cluster>,
    pub cluster_load_assignments: Vec<ClusterLoadAssignment>,
}

/// Translates one Envoy fleet and the routes attached to it.
pub fn translate(inputs: &Inputs) -> Translation {
    let envoy = inputs.envoy;
    let namespace = envoy.metadata.namespace.as_deref().unwrap_or_default();
    let envoy_name = envoy.metadata.name.as_deref().unwrap_or_default();
    let listeners = listener::listeners(envoy);
    let listener_names: Vec<String> = listeners.iter().map(|l| l.name.clone()).collect();

    let names_this_envoy = |route: &&EnvoyRoute| {
        route.metadata.namespace.as_deref().is_none_or(|ns| ns == namespace)
            && route.spec.parent_refs.iter().any(|parent| parent.name == envoy_name)
    };
    let checked: Vec<CheckedRoute> = inputs
        .routes
        .iter()
        .filter(names_this_envoy)
        .map(|route| CheckedRoute::new(route, inputs.services))
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

    let used: Vec<_> = attached.iter().flat_map(|a| rule::used_clusters(a.checked)).collect();
    Translation {
        resources: Resources {
            route_configurations: routes::route_configurations(&listener_names, &attached),
            listeners,
            clusters: clusters::clusters(&used),
            cluster_load_assignments: endpoints::cluster_load_assignments(
                &used,
                inputs.services,
                inputs.endpoint_slices,
            ),
        },
        route_statuses,
    }
}

/// The resources as a static configuration (a bootstrap's `static_resources`): each listener
/// with its route configuration inline instead of RDS, each cluster `STATIC` with its
/// assignment inline instead of EDS. For `envoy --mode validate` and for a look at a
/// fleet's configuration without an xDS server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StaticResources {
    pub listeners: Vec<Listener>,
    pub clusters: Vec<Cluster>,
}

impl Resources {
    pub fn to_static(&self) -> StaticResources {
        let listeners = self
            .listeners
            .iter()
            .map(|listener| {
                let mut listener = listener.clone();
                for filter in listener.filter_chains.iter_mut().flat_map(|chain| chain.filters.iter_mut()) {
                    let NetworkFilterConfig::HttpConnectionManager(manager) = &mut filter.typed_config;
                    if let RouteSpecifier::Rds(rds) = &manager.route_specifier
                        && let Some(routes) =
                            self.route_configurations.iter().find(|r| r.name == rds.route_config_name)
                    {
                        // A backend that does not resolve names a cluster that is not there.
                        let routes = RouteConfiguration { validate_clusters: Some(false), ..routes.clone() };
                        manager.route_specifier = RouteSpecifier::RouteConfig(routes);
                    }
                }
                listener
            })
            .collect();
        let clusters = self
            .clusters
            .iter()
            .map(|cluster| {
                let assignment =
                    self.cluster_load_assignments.iter().find(|a| a.cluster_name == cluster.name);
                Cluster {
                    discovery_type: DiscoveryType::Static,
                    eds_cluster_config: None,
                    load_assignment: Some(assignment.cloned().unwrap_or_else(|| ClusterLoadAssignment {
                        cluster_name: cluster.name.clone(),
                        endpoints: Vec::new(),
                    })),
                    ..cluster.clone()
                }
            })
            .collect();
        StaticResources { listeners, clusters }
    }
}
