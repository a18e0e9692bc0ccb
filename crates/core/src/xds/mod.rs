//! The control plane's translation: an Envoy fleet, the EnvoyRoutes attached to it and the
//! Services and EndpointSlices they send traffic to, in; Envoy's listeners, route
//! configurations, clusters and endpoints out. Pure: the xDS server serves what this computes.

pub mod model;
