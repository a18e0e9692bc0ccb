pub mod certs;
pub mod leader;
pub mod metrics;
pub mod rbac;
