pub mod certs;
pub mod leader;
pub mod logging;
pub mod metrics;
pub mod rbac;
