//! The admission webhook's metrics: reviews answered (per endpoint and decision) and how long
//! they took, and the injector's sidecars, skips and denials.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AdmissionLabels {
    pub endpoint: &'static str,
    pub decision: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    pub endpoint: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

/// The label values the webhook's families start with, at zero.
pub mod series {
    use envoy_operator_core::inject::{InjectError, SkipReason};

    pub const ENDPOINTS: [&str; 4] = ["mutate", "validate", "inject", "inject_annotation"];
    /// Every decision an admission endpoint answers with ([`crate::webhook::review::Outcome`],
    /// and `malformed` for a request that is no review).
    pub const DECISIONS: [&str; 5] = ["allowed", "patched", "denied", "rejected", "malformed"];

    /// Every reason a pod is skipped for; an already-injected pod is no skip.
    pub fn skip_reasons() -> impl Iterator<Item = &'static str> {
        SkipReason::ALL.into_iter().filter(|reason| reason.is_skip()).map(SkipReason::as_str)
    }

    pub fn denial_reasons() -> impl Iterator<Item = &'static str> {
        InjectError::METRIC_LABELS.into_iter()
    }
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn admission_buckets() -> Histogram {
    // 10 µs to ~5.2 s: reviews are answered from memory, and the API server gives up after
    // the webhooks' 5 s timeout, so the slowest answer that still counts has a bucket.
    Histogram::new(exponential_buckets(0.00001, 2.0, 20))
}

/// The webhook's families in the operator's registry.
#[derive(Clone, Debug)]
pub struct WebhookMetrics {
    admission_requests: Family<AdmissionLabels, Counter>,
    admission_duration: HistogramFamily<EndpointLabels>,
    injections: Counter,
    injection_skips: Family<ReasonLabels, Counter>,
    injection_denials: Family<ReasonLabels, Counter>,
}

impl Default for WebhookMetrics {
    /// Families in no registry (tests, tools that expose no metrics).
    fn default() -> Self {
        Self::register(&mut Registry::default())
    }
}

impl WebhookMetrics {
    /// Registers the webhook's families in `registry`, every series at zero.
    pub fn register(registry: &mut Registry) -> Self {
        let admission_requests = Family::<AdmissionLabels, Counter>::default();
        registry.register(
            "admission_requests",
            "Admission reviews answered, per endpoint and decision",
            admission_requests.clone(),
        );
        let admission_duration: HistogramFamily<EndpointLabels> =
            Family::new_with_constructor(admission_buckets);
        registry.register(
            "admission_duration_seconds",
            "Time to answer one admission review",
            admission_duration.clone(),
        );
        let injections = Counter::default();
        registry.register("sidecar_injections", "Pods that received the Envoy sidecar", injections.clone());
        let injection_skips = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "sidecar_skips",
            "Pods admitted without a sidecar, per reason",
            injection_skips.clone(),
        );
        let injection_denials = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "sidecar_denials",
            "Pods refused because their sidecar cannot be injected as they ask, per reason",
            injection_denials.clone(),
        );
        for endpoint in series::ENDPOINTS {
            let _ = admission_duration.get_or_create(&EndpointLabels { endpoint });
            for decision in series::DECISIONS {
                let _ = admission_requests.get_or_create(&AdmissionLabels { endpoint, decision });
            }
        }
        for reason in series::skip_reasons() {
            let _ = injection_skips.get_or_create(&ReasonLabels { reason });
        }
        for reason in series::denial_reasons() {
            let _ = injection_denials.get_or_create(&ReasonLabels { reason });
        }
        Self { admission_requests, admission_duration, injections, injection_skips, injection_denials }
    }

    pub fn admitted(&self, endpoint: &'static str, decision: &'static str, took: Duration) {
        self.admission_requests.get_or_create(&AdmissionLabels { endpoint, decision }).inc();
        self.admission_duration.get_or_create(&EndpointLabels { endpoint }).observe(took.as_secs_f64());
    }

    pub fn injected(&self) {
        self.injections.inc();
    }

    /// A pod admitted without a sidecar.
    pub fn injection_skipped(&self, reason: &'static str) {
        self.injection_skips.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// A pod refused: what it asks of its sidecar cannot be done.
    pub fn injection_denied(&self, reason: &'static str) {
        self.injection_denials.get_or_create(&ReasonLabels { reason }).inc();
    }
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    use super::*;
    use crate::ops::health::{Health, router};
    use crate::ops::metrics::Metrics;

    async fn get(app: Router, path: &str) -> (StatusCode, String) {
        let response = app.oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn metrics_are_exposed_in_the_format_asked_for() {
        let mut builder = Metrics::builder();
        let webhook = builder.register(WebhookMetrics::register);
        let metrics = builder.build();
        webhook.admitted("validate", "denied", std::time::Duration::from_micros(30));
        let app = router(metrics, Health::default(), &crate::xds::debug::ProxyDebug::default());
        let (status, body) = get(app.clone(), "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("# TYPE envoy_operator_admission_requests_total counter"), "{body}");
        assert!(!body.contains("# EOF"));
        let request = Request::get("/metrics")
            .header("Accept", "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")
            .body(Body::empty())
            .unwrap();
        let response = app.oneshot(request).await.unwrap();
        let body =
            String::from_utf8(axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap().to_vec())
                .unwrap();
        let status = StatusCode::OK;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains(
            "envoy_operator_admission_requests_total{endpoint=\"validate\",decision=\"denied\"} 1"
        ));
        assert!(body.ends_with("# EOF\n"));
    }

    #[test]
    fn the_admission_histogram_reaches_the_webhook_timeout() {
        let mut builder = Metrics::builder();
        builder.register(WebhookMetrics::register);
        let text = builder.build().encode();
        let largest = text
            .lines()
            .filter(|l| {
                l.starts_with("envoy_operator_admission_duration_seconds_bucket{le=\"") && !l.contains("+Inf")
            })
            .filter_map(|l| l.split('"').nth(1)?.parse::<f64>().ok())
            .fold(0.0, f64::max);
        assert!(largest >= f64::from(envoy_operator_core::names::WEBHOOK_TIMEOUT_SECONDS), "{largest}");
    }
}
