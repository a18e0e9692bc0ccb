//! The second half of the translation: a fleet's IR as Envoy's resources. Every decision on
//! what the proxies do is the IR's; here only how Envoy is told to do it.
//!
//! - [`listener`]: a listener per IR listener, routed by RDS;
//! - [`route`]: its route configuration, virtual hosts and routes;
//! - [`cluster`]: an EDS cluster and its assignment per backend.

pub mod cluster;
pub mod listener;
pub mod route;

use serde::Serialize;

use crate::envoy::{Cluster, ClusterLoadAssignment, Listener, RouteConfiguration};
use crate::ir;

/// A fleet's xDS resources, the four types each sorted by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Resources {
    pub listeners: Vec<Listener>,
    pub route_configurations: Vec<RouteConfiguration>,
    pub clusters: Vec<Cluster>,
    pub cluster_load_assignments: Vec<ClusterLoadAssignment>,
}

/// The fleet's resources: per listener, a listener and its route configuration; per backend,
/// a cluster and its endpoints.
pub fn resources(fleet: &ir::Fleet) -> Resources {
    Resources {
        listeners: fleet.listeners.iter().map(listener::listener).collect(),
        route_configurations: fleet.listeners.iter().map(route::route_configuration).collect(),
        clusters: fleet.backends.iter().map(cluster::cluster).collect(),
        cluster_load_assignments: fleet.backends.iter().map(cluster::cluster_load_assignment).collect(),
    }
}
