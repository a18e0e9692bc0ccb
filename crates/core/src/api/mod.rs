//! The custom resource types. Pure data: doc comments here become `kubectl explain` text and
//! the schema attributes become the CRD's OpenAPI validation.

pub mod envoy;
pub mod foo;
pub mod gateway;
pub mod patterns;
pub mod route;

pub use envoy::{
    ChildMetadata, Envoy, EnvoySpec, EnvoyStatus, EnvoyXdsStatus, ServicePort, ServiceType, XdsServer,
};
pub use foo::{Foo, FooSpec, FooStatus};
pub use route::{EnvoyRoute, EnvoyRouteSpec, EnvoyRouteStatus};

/// The category every kind belongs to: `kubectl get envoy-operator` lists Foos, Envoys and
/// EnvoyRoutes. The
/// `#[kube(category)]` attributes need a literal; a test holds them to this.
pub const CATEGORY: &str = "envoy-operator";

/// Upper bound on `spec.replicas` for both kinds, in the rule engine and the CRD schema alike.
pub const MAX_REPLICAS: i32 = 1000;
