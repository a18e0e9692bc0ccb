pub mod certs;
pub mod health;
pub mod leader;
pub mod logging;
pub mod metrics;
pub mod rbac;
pub mod signal;
