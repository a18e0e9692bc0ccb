//! The xDS server's metrics: connected proxies, responses pushed, ACKed (how long after the
//! change) and NACKed, and the streams and connections refused. [`ControlPlaneMetrics`] owns
//! these families in the operator's registry and implements the server's [`XdsMetrics`] hooks.
//! Labels are resource types, gRPC codes and reasons only: per-fleet figures are in each
//! Envoy's status.

use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::xds::server::{FleetKey, Protocol, XdsMetrics};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct XdsTypeLabels {
    /// `listener`, `route`, `cluster` or `endpoint`.
    pub r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabels {
    pub code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabels {
    pub event: &'static str,
}

/// The label values the xDS families start with, at zero.
pub mod series {
    /// The xDS resource types the control plane serves, as their labels.
    pub const XDS_TYPES: [&str; 4] = ["listener", "route", "cluster", "endpoint"];
    /// Why the xDS server closed a connection before it carried a stream.
    pub const XDS_CONNECTION_REFUSALS: [&str; 4] =
        ["handshake", "handshake_timeout", "no_fleet", "at_capacity"];
    /// What the xDS server's reading budget counts: a connection that waited for its turn to
    /// read, one closed for holding its reservation too long.
    pub const XDS_READING_EVENTS: [&str; 2] = ["waited", "held_too_long"];
    /// Why the xDS server refused a stream or ended one for a request: the gRPC codes it uses.
    pub const XDS_REFUSALS: [&str; 8] = [
        "permission_denied",
        "invalid_argument",
        "resource_exhausted",
        "deadline_exceeded",
        "out_of_range",
        "internal",
        "unavailable",
        "other",
    ];
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn push_buckets() -> Histogram {
    // 100 µs to ~6.5 s: a push is a snapshot set, sent, and acknowledged by Envoy.
    Histogram::new(exponential_buckets(0.0001, 2.0, 17))
}

/// The xDS server's families in the operator's registry; its [`XdsMetrics`] hooks record them.
#[derive(Clone, Debug)]
pub struct ControlPlaneMetrics {
    connected_proxies: Gauge,
    pushes: Family<XdsTypeLabels, Counter>,
    push_duration: HistogramFamily<XdsTypeLabels>,
    nacks: Family<XdsTypeLabels, Counter>,
    streams_refused: Family<CodeLabels, Counter>,
    connections_refused: Family<ReasonLabels, Counter>,
    reading: Family<EventLabels, Counter>,
}

impl Default for ControlPlaneMetrics {
    /// Families in no registry (tests).
    fn default() -> Self {
        Self::register(&mut Registry::default())
    }
}

impl ControlPlaneMetrics {
    /// Registers the xDS server's families in `registry`, every series at zero.
    pub fn register(registry: &mut Registry) -> Self {
        let connected_proxies = Gauge::default();
        registry.register(
            "xds_connected_proxies",
            "Envoy proxies connected to this replica's xDS server",
            connected_proxies.clone(),
        );
        let pushes = Family::<XdsTypeLabels, Counter>::default();
        registry.register("xds_pushes", "xDS responses sent to proxies, per resource type", pushes.clone());
        let push_duration: HistogramFamily<XdsTypeLabels> = Family::new_with_constructor(push_buckets);
        registry.register(
            "xds_push_duration_seconds",
            "Time from a configuration change until a proxy acknowledged it, per resource type",
            push_duration.clone(),
        );
        let nacks = Family::<XdsTypeLabels, Counter>::default();
        registry.register(
            "xds_nacks",
            "xDS responses proxies rejected (NACK), per resource type",
            nacks.clone(),
        );
        let streams_refused = Family::<CodeLabels, Counter>::default();
        registry.register(
            "xds_streams_refused",
            "xDS streams refused or ended for a request, per gRPC code (permission_denied: not served the fleet it asks for; resource_exhausted: over a limit; deadline_exceeded: no first request in time; out_of_range, internal: a request over the size limit or undecodable)",
            streams_refused.clone(),
        );
        let connections_refused = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "xds_connections_refused",
            "xDS connections closed before they could carry a stream, per reason (handshake: no valid client certificate of the identity CA, or a failed TLS handshake; handshake_timeout; no_fleet: a certificate naming no fleet; at_capacity: over the connection cap)",
            connections_refused.clone(),
        );
        let reading = Family::<EventLabels, Counter>::default();
        registry.register(
            "xds_reading_budget_events",
            "xDS connections that waited for their turn to read (waited: the reading budget was taken) or were closed for holding it (held_too_long: their reads did not come to rest within the hold timeout)",
            reading.clone(),
        );
        registry.register_collector(Box::new(OverWindowBudget));
        for event in series::XDS_READING_EVENTS {
            let _ = reading.get_or_create(&EventLabels { event });
        }
        for r#type in series::XDS_TYPES {
            let _ = pushes.get_or_create(&XdsTypeLabels { r#type });
            let _ = push_duration.get_or_create(&XdsTypeLabels { r#type });
            let _ = nacks.get_or_create(&XdsTypeLabels { r#type });
        }
        for code in series::XDS_REFUSALS {
            let _ = streams_refused.get_or_create(&CodeLabels { code });
        }
        for reason in series::XDS_CONNECTION_REFUSALS {
            let _ = connections_refused.get_or_create(&ReasonLabels { reason });
        }
        Self {
            connected_proxies,
            pushes,
            push_duration,
            nacks,
            streams_refused,
            connections_refused,
            reading,
        }
    }

    fn refused(&self, code: tonic::Code) {
        self.streams_refused.get_or_create(&CodeLabels { code: code_label(code) }).inc();
    }
}

/// h2's budget, for the process, of what streams hold of requests not taken (the xDS port's,
/// which advertises a window under HTTP/2's default, all of it), and what connections hold of
/// the writing budget (`vendor/h2`; the xDS server sets both: "The xDS port's memory budget"),
/// read on each scrape: its figures are h2's, not hooks'.
#[derive(Debug)]
struct OverWindowBudget;

impl Collector for OverWindowBudget {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let held = ConstGauge::new(i64::try_from(h2::server::over_window_held()).unwrap_or(i64::MAX));
        let resets = ConstCounter::new(u64::try_from(h2::server::over_window_refused()).unwrap_or(u64::MAX));
        encode_one(
            &mut encoder,
            "xds_over_window_bytes",
            "Bytes xDS streams hold of requests they have not taken (a shared budget)",
            &held,
        )?;
        encode_one(
            &mut encoder,
            "xds_over_window_resets",
            "xDS streams reset (ENHANCE_YOUR_CALM) for request data not taken that the shared budget could not hold",
            &resets,
        )?;
        let writing = ConstGauge::new(i64::try_from(h2::server::write_budget_held()).unwrap_or(i64::MAX));
        let waits = ConstCounter::new(u64::try_from(h2::server::write_budget_waited()).unwrap_or(u64::MAX));
        encode_one(
            &mut encoder,
            "xds_writing_bytes",
            "Bytes xDS connections hold of the shared writing budget while they write",
            &writing,
        )?;
        encode_one(
            &mut encoder,
            "xds_writing_waits",
            "Times an xDS connection found the shared writing budget taken and waited for its turn to write",
            &waits,
        )
    }
}

/// One unlabelled metric a collector reads, with its name and help.
fn encode_one(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric: &impl EncodeMetric,
) -> Result<(), std::fmt::Error> {
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// The label of a type URL: `listener`, `route`, `cluster`, `endpoint`, else `other`.
pub fn type_label(type_url: &str) -> &'static str {
    match type_url.rsplit('.').next() {
        Some("Listener") => "listener",
        Some("RouteConfiguration") => "route",
        Some("Cluster") => "cluster",
        Some("ClusterLoadAssignment") => "endpoint",
        _ => "other",
    }
}

/// The label of a refused stream's or request's status: the codes the server refuses with.
fn code_label(code: tonic::Code) -> &'static str {
    match code {
        tonic::Code::PermissionDenied => "permission_denied",
        tonic::Code::InvalidArgument => "invalid_argument",
        tonic::Code::ResourceExhausted => "resource_exhausted",
        tonic::Code::DeadlineExceeded => "deadline_exceeded",
        tonic::Code::OutOfRange => "out_of_range",
        tonic::Code::Internal => "internal",
        tonic::Code::Unavailable => "unavailable",
        _ => "other",
    }
}

impl XdsMetrics for ControlPlaneMetrics {
    fn stream_opened(&self, _fleet: &FleetKey, _protocol: Protocol) {
        self.connected_proxies.inc();
    }

    fn stream_closed(&self, _fleet: &FleetKey, _protocol: Protocol) {
        self.connected_proxies.dec();
    }

    fn connection_refused(&self, reason: &'static str) {
        self.connections_refused.get_or_create(&ReasonLabels { reason }).inc();
    }

    fn reading_waited(&self) {
        self.reading.get_or_create(&EventLabels { event: "waited" }).inc();
    }

    fn reading_held_too_long(&self) {
        self.reading.get_or_create(&EventLabels { event: "held_too_long" }).inc();
    }

    fn stream_refused(&self, code: tonic::Code) {
        self.refused(code);
    }

    fn request_refused(&self, _fleet: &FleetKey, code: tonic::Code) {
        self.refused(code);
    }

    fn response_sent(&self, _fleet: &FleetKey, type_url: &str, _since_snapshot: Duration) {
        self.pushes.get_or_create(&XdsTypeLabels { r#type: type_label(type_url) }).inc();
    }

    fn response_acked(&self, _fleet: &FleetKey, type_url: &str, since_snapshot: Duration) {
        self.push_duration
            .get_or_create(&XdsTypeLabels { r#type: type_label(type_url) })
            .observe(since_snapshot.as_secs_f64());
    }

    fn response_nacked(&self, _fleet: &FleetKey, type_url: &str) {
        self.nacks.get_or_create(&XdsTypeLabels { r#type: type_label(type_url) }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::metrics::Metrics;

    /// The hooks, and the exposition of the registry they are in.
    struct Registered {
        hooks: ControlPlaneMetrics,
        exposition: Metrics,
    }

    impl std::ops::Deref for Registered {
        type Target = ControlPlaneMetrics;
        fn deref(&self) -> &ControlPlaneMetrics {
            &self.hooks
        }
    }

    impl Registered {
        fn new() -> Self {
            let mut builder = Metrics::builder();
            let hooks = builder.register(ControlPlaneMetrics::register);
            Self { hooks, exposition: builder.build() }
        }

        fn encode(&self) -> String {
            self.exposition.encode()
        }
    }

    #[test]
    fn the_hooks_reach_the_registry() {
        let metrics = Registered::new();
        let fleet = FleetKey::from("shop/edge");
        metrics.stream_opened(&fleet, Protocol::Delta);
        metrics.response_sent(
            &fleet,
            "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
            Duration::ZERO,
        );
        metrics.response_acked(
            &fleet,
            "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
            Duration::from_millis(3),
        );
        metrics.response_nacked(&fleet, "type.googleapis.com/envoy.config.listener.v3.Listener");
        metrics.stream_refused(tonic::Code::PermissionDenied);
        metrics.stream_refused(tonic::Code::DeadlineExceeded);
        metrics.connection_refused("handshake");
        metrics.reading_waited();
        metrics.reading_waited();
        metrics.reading_held_too_long();
        metrics.request_refused(&fleet, tonic::Code::ResourceExhausted);
        metrics.request_refused(&fleet, tonic::Code::ResourceExhausted);
        let text = metrics.encode();
        for expected in [
            "envoy_operator_xds_connected_proxies 1",
            "envoy_operator_xds_pushes_total{type=\"route\"} 1",
            "envoy_operator_xds_push_duration_seconds_count{type=\"route\"} 1",
            "envoy_operator_xds_nacks_total{type=\"listener\"} 1",
            "envoy_operator_xds_streams_refused_total{code=\"permission_denied\"} 1",
            "envoy_operator_xds_streams_refused_total{code=\"deadline_exceeded\"} 1",
            "envoy_operator_xds_connections_refused_total{reason=\"handshake\"} 1",
            "envoy_operator_xds_reading_budget_events_total{event=\"waited\"} 2",
            "envoy_operator_xds_reading_budget_events_total{event=\"held_too_long\"} 1",
            "envoy_operator_xds_streams_refused_total{code=\"resource_exhausted\"} 2",
            // h2's figures for the process, whatever other tests hold of the budget.
            "# TYPE envoy_operator_xds_over_window_bytes gauge",
            "# TYPE envoy_operator_xds_over_window_resets counter",
            "# TYPE envoy_operator_xds_writing_bytes gauge",
            "# TYPE envoy_operator_xds_writing_waits counter",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
        metrics.stream_closed(&fleet, Protocol::Delta);
        assert!(metrics.encode().contains("envoy_operator_xds_connected_proxies 0"));
    }
}
