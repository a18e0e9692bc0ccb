//! envoy-operator's shells around the pure core ([`envoy_operator_core`]): the webhook
//! server, the controllers, the operations parts (certificates, leader election, metrics,
//! health) and the command line.

pub mod certs;
pub mod cli;
pub mod control_plane;
pub mod controller;
pub mod ops;
pub mod run;
pub mod serve;
#[cfg(test)]
mod testing;
pub mod tls;
pub mod webhook;
pub mod xds_server;
