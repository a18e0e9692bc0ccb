//! Prometheus metrics (prometheus-client), served on the plain-HTTP metrics port. One
//! [`Metrics`] is shared by the webhook server, the injector, the controllers and the
//! certificate manager; label values are fixed strings so cardinality stays bounded.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileErrorLabels {
    pub kind: &'static str,
    pub error: &'static str,
}

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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServerLabels {
    pub server: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConnectionCloseLabels {
    pub server: &'static str,
    pub reason: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Every metric the operator exports.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    reconciliations: Family<KindLabels, Counter>,
    reconcile_errors: Family<ReconcileErrorLabels, Counter>,
    reconcile_duration: HistogramFamily<KindLabels>,
    admission_requests: Family<AdmissionLabels, Counter>,
    admission_duration: HistogramFamily<EndpointLabels>,
    injections: Counter,
    injection_skips: Family<ReasonLabels, Counter>,
    certificate_expiry: Gauge,
    leader: Gauge,
    connections: Family<ServerLabels, Gauge>,
    connections_closed: Family<ConnectionCloseLabels, Counter>,
}

fn reconcile_buckets() -> Histogram {
    // 1 ms to ~16 s: a reconcile is a few API round trips.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

fn admission_buckets() -> Histogram {
    // 10 µs to ~80 ms: reviews are answered from memory.
    Histogram::new(exponential_buckets(0.00001, 2.0, 14))
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("envoy_operator");
        let reconciliations = Family::<KindLabels, Counter>::default();
        registry.register("reconciliations", "Reconciliations run, per kind", reconciliations.clone());
        let reconcile_errors = Family::<ReconcileErrorLabels, Counter>::default();
        registry.register(
            "reconcile_errors",
            "Reconciliations that failed, per kind and error",
            reconcile_errors.clone(),
        );
        let reconcile_duration: HistogramFamily<KindLabels> = Family::new_with_constructor(reconcile_buckets);
        registry.register(
            "reconcile_duration_seconds",
            "Time spent in one reconciliation",
            reconcile_duration.clone(),
        );
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
            "Pods left without a sidecar, per reason",
            injection_skips.clone(),
        );
        let certificate_expiry = Gauge::default();
        registry.register(
            "certificate_expiry_seconds",
            "Seconds until the serving certificate expires",
            certificate_expiry.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the leader lease and runs the controllers",
            leader.clone(),
        );
        let connections = Family::<ServerLabels, Gauge>::default();
        registry.register(
            "http_connections",
            "Open connections, per server (webhook, operations)",
            connections.clone(),
        );
        let connections_closed = Family::<ConnectionCloseLabels, Counter>::default();
        registry.register(
            "http_connections_closed",
            "Connections the server closed, per server and reason (idle, header_timeout, write_timeout, handshake, shutdown, peer)",
            connections_closed.clone(),
        );
        Self {
            registry: Arc::new(registry),
            reconciliations,
            reconcile_errors,
            reconcile_duration,
            admission_requests,
            admission_duration,
            injections,
            injection_skips,
            certificate_expiry,
            leader,
            connections,
            connections_closed,
        }
    }

    /// The OpenMetrics text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    pub fn reconciled(&self, kind: &'static str, took: Duration, error: Option<&'static str>) {
        self.reconciliations.get_or_create(&KindLabels { kind }).inc();
        self.reconcile_duration.get_or_create(&KindLabels { kind }).observe(took.as_secs_f64());
        if let Some(error) = error {
            self.reconcile_errors.get_or_create(&ReconcileErrorLabels { kind, error }).inc();
        }
    }

    pub fn admitted(&self, endpoint: &'static str, decision: &'static str, took: Duration) {
        self.admission_requests.get_or_create(&AdmissionLabels { endpoint, decision }).inc();
        self.admission_duration.get_or_create(&EndpointLabels { endpoint }).observe(took.as_secs_f64());
    }

    pub fn injected(&self) {
        self.injections.inc();
    }

    pub fn injection_skipped(&self, reason: &'static str) {
        self.injection_skips.get_or_create(&ReasonLabels { reason }).inc();
    }

    pub fn set_certificate_expiry(&self, seconds_left: i64) {
        self.certificate_expiry.set(seconds_left);
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// A connection to `server` opened (`+1`) or ended (`-1`).
    pub fn connection_opened(&self, server: &'static str, delta: i64) {
        self.connections.get_or_create(&ServerLabels { server }).inc_by(delta);
    }

    /// A connection to `server` ended, for `reason`.
    pub fn connection_closed(&self, server: &'static str, reason: &'static str) {
        self.connections_closed.get_or_create(&ConnectionCloseLabels { server, reason }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_series_is_exposed_with_its_labels() {
        let metrics = Metrics::new();
        metrics.reconciled("Foo", Duration::from_millis(3), None);
        metrics.reconciled("Envoy", Duration::from_millis(5), Some("conflict"));
        metrics.admitted("validate", "denied", Duration::from_micros(40));
        metrics.injected();
        metrics.injection_skipped("host-network");
        metrics.set_certificate_expiry(86_400);
        metrics.set_leader(true);
        let text = metrics.encode();
        for expected in [
            "envoy_operator_reconciliations_total{kind=\"Foo\"} 1",
            "envoy_operator_reconcile_errors_total{kind=\"Envoy\",error=\"conflict\"} 1",
            "envoy_operator_reconcile_duration_seconds_count{kind=\"Envoy\"} 1",
            "envoy_operator_admission_requests_total{endpoint=\"validate\",decision=\"denied\"} 1",
            "envoy_operator_admission_duration_seconds_bucket{le=\"0.00004\",endpoint=\"validate\"} 1",
            "envoy_operator_sidecar_injections_total 1",
            "envoy_operator_sidecar_skips_total{reason=\"host-network\"} 1",
            "envoy_operator_certificate_expiry_seconds 86400",
            "envoy_operator_leader 1",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
    }
}
