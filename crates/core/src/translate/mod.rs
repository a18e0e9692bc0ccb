//! The translation's doors: route objects and their parents in, each fleet's IR and every
//! status out (api → [`crate::route`] → [`crate::ir`] → [`crate::xds`]).
//!
//! - [`envoyroute`]: Envoys and EnvoyRoutes, a namespace at a time;
//! - [`gateway`]: the Gateway API, the cluster at a time;
//! - [`mesh`]: HTTPRoutes on Services (GAMMA), into every meshed namespace's sidecars;
//! - [`hosts`]: virtual hosts from the routes a listener serves, in Gateway API's precedence;
//! - [`endpoints`]: a backend per Service port used, with its ready endpoints.

pub mod endpoints;
pub mod envoyroute;
pub mod gateway;
pub mod hosts;
pub mod mesh;
