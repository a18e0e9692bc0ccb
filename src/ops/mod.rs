//! Operating the operator in a cluster: certificates, leader election, install, metrics,
//! health, logging, signals and the RBAC the code needs.

pub mod health;
pub mod install;
pub mod leader;
pub mod logging;
pub mod metrics;
pub mod rbac;
pub mod signal;
