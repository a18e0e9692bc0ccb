//! envoy-operator's shells around the pure core ([`envoy_operator_core`]): the composition
//! root ([`operator`]), the webhook server, the controllers, the xDS control plane, the
//! hardened accept loop every port uses ([`net`]), certificates, the operations parts (leader
//! election, metrics, health) and the command line.

pub mod certs;
pub mod cli;
pub mod controller;
pub mod index;
pub mod net;
pub mod operator;
pub mod ops;
pub mod webhook;
pub mod xds;
