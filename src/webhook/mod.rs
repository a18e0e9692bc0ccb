//! The admission webhook server: AdmissionReview plumbing ([`review`]), the decisions
//! ([`handler`], pure), the HTTP routes ([`router`]) and TLS serving ([`server`]).

pub mod handler;
pub mod inject;
pub mod metrics;
pub mod review;
pub mod router;
pub mod serve;

use envoy_operator_core::inject::InjectConfig;

use self::inject::SharedEnvoys;
use self::metrics::WebhookMetrics;
use self::router::Endpoint;

/// Every admission endpoint the operator serves: Foo and Envoy defaults (`/mutate`) and rules
/// (`/validate`), the sidecar injector (`/inject`) and its warning to pods that opt in with an
/// annotation (`/inject_annotation`). `run` and `webhook` serve the same.
pub fn endpoints(inject: InjectConfig, envoys: SharedEnvoys, metrics: &WebhookMetrics) -> Vec<Endpoint> {
    let mut endpoints = router::standard_endpoints();
    endpoints.push(self::inject::endpoint(inject, envoys, metrics.clone()));
    endpoints.push(self::inject::annotation_endpoint());
    endpoints
}
