pub mod leader;
pub mod metrics;
