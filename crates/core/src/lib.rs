//! The pure core of envoy-operator: every decision as a function over data. The CRD types,
//! defaulting and validation, admission over raw JSON, the sidecar injector, the Envoy
//! bootstrap and the children the reconcilers apply, with their status; and the control
//! plane's translation: route objects to a fleet's IR, the IR to Envoy's model.
//!
//! Nothing here performs I/O or depends on an async runtime, an HTTP stack or a Kubernetes
//! client: the crate's dependency tree makes sure of it. The `envoy-operator` binary wraps these
//! functions in thin shells (the webhook server, the controllers, the CLI).

pub mod admission;
pub mod api;
pub mod bootstrap;
pub mod bounded;
pub mod capture;
pub mod check;
pub mod children;
pub mod crd;
pub mod envoy;
pub mod fleet;
pub mod identity;
pub mod inject;
pub mod ir;
pub mod kind;
pub mod kube_version;
pub mod manifest;
pub mod names;
pub mod pem;
pub mod proxy;
pub mod render;
pub mod route;
pub mod rules;
pub mod strict;
pub mod structural;
pub mod translate;
pub mod webhook_config;
pub mod xds;
