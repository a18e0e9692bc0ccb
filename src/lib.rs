//! envoy-operator: CRDs, admission rules, sidecar injection and reconcilers for the `Foo`
//! (`samplecontroller.k8s.io/v1alpha1`) and `Envoy` (`example.com/v1`) kinds.

pub mod admission;
pub mod api;
pub mod bootstrap;
pub mod check;
pub mod crd;
mod error;
pub mod inject;
pub mod install;
pub mod manifest;
pub mod ops;
pub mod proxy;
pub mod reconcile;
pub mod rules;
pub mod run;
#[cfg(test)]
mod testing;
pub mod tls;
pub mod webhook;
pub mod webhook_config;

pub use error::{Error, Result};
