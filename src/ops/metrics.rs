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
pub struct XdsTypeLabels {
    /// `listener`, `route`, `cluster` or `endpoint`.
    pub r#type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabels {
    pub code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub kind: &'static str,
    pub verb: &'static str,
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

/// The label values every family starts with, at zero, so a dashboard or alert sees each
/// series before its first event.
pub mod series {
    use envoy_operator_core::inject::{InjectError, SkipReason};

    pub const KINDS: [&str; 3] = ["Foo", "Envoy", "EnvoyRoute"];
    pub const ENDPOINTS: [&str; 3] = ["mutate", "validate", "inject"];
    /// Every decision an admission endpoint answers with ([`crate::webhook::review::Outcome`],
    /// and `malformed` for a request that is no review).
    pub const DECISIONS: [&str; 5] = ["allowed", "patched", "denied", "rejected", "malformed"];
    /// Objects the reconcilers write, and how.
    pub const WRITES: [(&str, &str); 11] = [
        ("Deployment", "apply"),
        ("Deployment", "delete"),
        ("ConfigMap", "apply"),
        ("ConfigMap", "patch"),
        ("ConfigMap", "delete"),
        ("Service", "apply"),
        ("Service", "delete"),
        ("Foo", "apply_status"),
        ("Envoy", "apply_status"),
        ("EnvoyRoute", "apply_status"),
        ("Event", "publish"),
    ];

    pub fn skip_reasons() -> impl Iterator<Item = &'static str> {
        SkipReason::ALL.into_iter().map(SkipReason::as_str)
    }

    pub fn denial_reasons() -> impl Iterator<Item = &'static str> {
        InjectError::METRIC_LABELS.into_iter()
    }

    pub fn reconcile_errors() -> impl Iterator<Item = &'static str> {
        crate::controller::Error::METRIC_LABELS.into_iter()
    }

    /// The xDS resource types the control plane serves, as their labels.
    pub const XDS_TYPES: [&str; 4] = ["listener", "route", "cluster", "endpoint"];
    /// Why the xDS server closed a connection before it carried a stream.
    pub const XDS_CONNECTION_REFUSALS: [&str; 4] =
        ["handshake", "handshake_timeout", "no_fleet", "at_capacity"];
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

/// Every metric the operator exports.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    reconciliations: Family<KindLabels, Counter>,
    reconcile_errors: Family<ReconcileErrorLabels, Counter>,
    reconcile_duration: HistogramFamily<KindLabels>,
    api_writes: Family<WriteLabels, Counter>,
    admission_requests: Family<AdmissionLabels, Counter>,
    admission_duration: HistogramFamily<EndpointLabels>,
    injections: Counter,
    injection_skips: Family<ReasonLabels, Counter>,
    injection_denials: Family<ReasonLabels, Counter>,
    certificate_expiry: Gauge,
    leader: Gauge,
    xds_connected_proxies: Gauge,
    xds_pushes: Family<XdsTypeLabels, Counter>,
    xds_push_duration: HistogramFamily<XdsTypeLabels>,
    xds_nacks: Family<XdsTypeLabels, Counter>,
    xds_refused: Family<CodeLabels, Counter>,
    xds_connections_refused: Family<ReasonLabels, Counter>,
    connections: Family<ServerLabels, Gauge>,
    connections_closed: Family<ConnectionCloseLabels, Counter>,
}

fn reconcile_buckets() -> Histogram {
    // 1 ms to ~16 s: a reconcile is a few API round trips.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

fn push_buckets() -> Histogram {
    // 100 µs to ~6.5 s: a push is a snapshot set, sent, and acknowledged by Envoy.
    Histogram::new(exponential_buckets(0.0001, 2.0, 17))
}

fn admission_buckets() -> Histogram {
    // 10 µs to ~5.2 s: reviews are answered from memory, and the API server gives up after
    // the webhooks' 5 s timeout, so the slowest answer that still counts has a bucket.
    Histogram::new(exponential_buckets(0.00001, 2.0, 20))
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
        let api_writes = Family::<WriteLabels, Counter>::default();
        registry.register(
            "api_writes",
            "Write requests the reconcilers sent to the API server, per kind of object and verb",
            api_writes.clone(),
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
            "Pods admitted without a sidecar, per reason",
            injection_skips.clone(),
        );
        let injection_denials = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "sidecar_denials",
            "Pods refused because their sidecar cannot be injected as they ask, per reason",
            injection_denials.clone(),
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
        let xds_connected_proxies = Gauge::default();
        registry.register(
            "xds_connected_proxies",
            "Envoy proxies connected to this replica's xDS server",
            xds_connected_proxies.clone(),
        );
        let xds_pushes = Family::<XdsTypeLabels, Counter>::default();
        registry.register(
            "xds_pushes",
            "xDS responses sent to proxies, per resource type",
            xds_pushes.clone(),
        );
        let xds_push_duration: HistogramFamily<XdsTypeLabels> = Family::new_with_constructor(push_buckets);
        registry.register(
            "xds_push_duration_seconds",
            "Time from a configuration change until a proxy acknowledged it, per resource type",
            xds_push_duration.clone(),
        );
        let xds_nacks = Family::<XdsTypeLabels, Counter>::default();
        registry.register(
            "xds_nacks",
            "xDS responses proxies rejected (NACK), per resource type",
            xds_nacks.clone(),
        );
        let xds_refused = Family::<CodeLabels, Counter>::default();
        registry.register(
            "xds_streams_refused",
            "xDS streams refused or ended for a request, per gRPC code (permission_denied: not served the fleet it asks for; resource_exhausted: over a limit; deadline_exceeded: no first request in time; out_of_range, internal: a request over the size limit or undecodable)",
            xds_refused.clone(),
        );
        let xds_connections_refused = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "xds_connections_refused",
            "xDS connections closed before they could carry a stream, per reason (handshake: no valid client certificate of the identity CA, or a failed TLS handshake; handshake_timeout; no_fleet: a certificate naming no fleet; at_capacity: over the connection cap)",
            xds_connections_refused.clone(),
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
        let metrics = Self {
            registry: Arc::new(registry),
            xds_connected_proxies,
            xds_pushes,
            xds_push_duration,
            xds_nacks,
            xds_refused,
            xds_connections_refused,
            reconciliations,
            reconcile_errors,
            reconcile_duration,
            api_writes,
            admission_requests,
            admission_duration,
            injections,
            injection_skips,
            injection_denials,
            certificate_expiry,
            leader,
            connections,
            connections_closed,
        };
        metrics.start_every_series_at_zero();
        metrics
    }

    fn start_every_series_at_zero(&self) {
        for kind in series::KINDS {
            let _ = self.reconciliations.get_or_create(&KindLabels { kind });
            let _ = self.reconcile_duration.get_or_create(&KindLabels { kind });
            for error in series::reconcile_errors() {
                let _ = self.reconcile_errors.get_or_create(&ReconcileErrorLabels { kind, error });
            }
        }
        for (kind, verb) in series::WRITES {
            let _ = self.api_writes.get_or_create(&WriteLabels { kind, verb });
        }
        for endpoint in series::ENDPOINTS {
            let _ = self.admission_duration.get_or_create(&EndpointLabels { endpoint });
            for decision in series::DECISIONS {
                let _ = self.admission_requests.get_or_create(&AdmissionLabels { endpoint, decision });
            }
        }
        for reason in series::skip_reasons() {
            let _ = self.injection_skips.get_or_create(&ReasonLabels { reason });
        }
        for reason in series::denial_reasons() {
            let _ = self.injection_denials.get_or_create(&ReasonLabels { reason });
        }
        for r#type in series::XDS_TYPES {
            let _ = self.xds_pushes.get_or_create(&XdsTypeLabels { r#type });
            let _ = self.xds_push_duration.get_or_create(&XdsTypeLabels { r#type });
            let _ = self.xds_nacks.get_or_create(&XdsTypeLabels { r#type });
        }
        for code in series::XDS_REFUSALS {
            let _ = self.xds_refused.get_or_create(&CodeLabels { code });
        }
        for reason in series::XDS_CONNECTION_REFUSALS {
            let _ = self.xds_connections_refused.get_or_create(&ReasonLabels { reason });
        }
    }

    /// The OpenMetrics text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// The Prometheus text format (0.0.4) of every metric, for scrapers that do not ask for
    /// OpenMetrics (and `promtool check metrics`).
    pub fn encode_prometheus_text(&self) -> String {
        openmetrics_to_prometheus_text(&self.encode())
    }

    pub fn reconciled(&self, kind: &'static str, took: Duration, error: Option<&'static str>) {
        self.reconciliations.get_or_create(&KindLabels { kind }).inc();
        self.reconcile_duration.get_or_create(&KindLabels { kind }).observe(took.as_secs_f64());
        if let Some(error) = error {
            self.reconcile_errors.get_or_create(&ReconcileErrorLabels { kind, error }).inc();
        }
    }

    /// The reconcilers sent one write (`apply`, `apply_status`, `delete`, `publish`) for `kind`.
    pub fn wrote(&self, kind: &'static str, verb: &'static str) {
        self.api_writes.get_or_create(&WriteLabels { kind, verb }).inc();
    }

    /// Writes the reconcilers have sent, in all.
    pub fn writes(&self) -> u64 {
        series::WRITES
            .iter()
            .map(|&(kind, verb)| self.api_writes.get_or_create(&WriteLabels { kind, verb }).get())
            .sum()
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

    pub fn xds_proxy_connected(&self, connected: bool) {
        if connected {
            self.xds_connected_proxies.inc();
        } else {
            self.xds_connected_proxies.dec();
        }
    }

    pub fn xds_pushed(&self, r#type: &'static str) {
        self.xds_pushes.get_or_create(&XdsTypeLabels { r#type }).inc();
    }

    pub fn xds_acknowledged(&self, r#type: &'static str, since_change: Duration) {
        self.xds_push_duration.get_or_create(&XdsTypeLabels { r#type }).observe(since_change.as_secs_f64());
    }

    pub fn xds_rejected(&self, r#type: &'static str) {
        self.xds_nacks.get_or_create(&XdsTypeLabels { r#type }).inc();
    }

    pub fn xds_refused(&self, code: &'static str) {
        self.xds_refused.get_or_create(&CodeLabels { code }).inc();
    }

    pub fn xds_connection_refused(&self, reason: &'static str) {
        self.xds_connections_refused.get_or_create(&ReasonLabels { reason }).inc();
    }
}

/// OpenMetrics text turned into the Prometheus text format: counters are declared under their
/// `_total` name, `# UNIT` and `# EOF` go. Everything else is the same in both.
fn openmetrics_to_prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let declared =
            ["# HELP ", "# TYPE "].into_iter().find_map(|prefix| Some((prefix, line.strip_prefix(prefix)?)));
        match declared {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let suffix = if counters.contains(name) { "_total" } else { "" };
                out.push_str(&format!("{prefix}{name}{suffix} {tail}\n"));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
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
        metrics.injection_skipped("host_network");
        metrics.injection_denied("unknown_envoy");
        metrics.wrote("Deployment", "apply");
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
            "envoy_operator_sidecar_skips_total{reason=\"host_network\"} 1",
            "envoy_operator_sidecar_denials_total{reason=\"unknown_envoy\"} 1",
            "envoy_operator_api_writes_total{kind=\"Deployment\",verb=\"apply\"} 1",
            "envoy_operator_certificate_expiry_seconds 86400",
            "envoy_operator_leader 1",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
    }
}

#[cfg(test)]
mod exposition {
    use super::*;

    #[test]
    fn every_series_is_there_at_zero_before_its_first_event() {
        let text = Metrics::new().encode();
        for expected in [
            "envoy_operator_reconciliations_total{kind=\"Envoy\"} 0",
            "envoy_operator_reconcile_errors_total{kind=\"Foo\",error=\"conflict\"} 0",
            "envoy_operator_admission_requests_total{endpoint=\"inject\",decision=\"denied\"} 0",
            "envoy_operator_admission_duration_seconds_count{endpoint=\"validate\"} 0",
            "envoy_operator_sidecar_skips_total{reason=\"run_to_completion\"} 0",
            "envoy_operator_sidecar_denials_total{reason=\"invalid_annotation\"} 0",
            "envoy_operator_api_writes_total{kind=\"Event\",verb=\"publish\"} 0",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let value = line.rsplit_once(' ').map(|(_, v)| v);
            assert!(matches!(value, Some("0" | "0.0")), "not zero: {line}");
        }
    }

    #[test]
    fn the_admission_histogram_reaches_the_webhook_timeout() {
        let text = Metrics::new().encode();
        let largest = text
            .lines()
            .filter(|l| {
                l.starts_with("envoy_operator_admission_duration_seconds_bucket{le=\"") && !l.contains("+Inf")
            })
            .filter_map(|l| l.split('"').nth(1)?.parse::<f64>().ok())
            .fold(0.0, f64::max);
        assert!(largest >= f64::from(envoy_operator_core::names::WEBHOOK_TIMEOUT_SECONDS), "{largest}");
    }

    #[test]
    fn label_values_are_snake_case() {
        let text = Metrics::new().encode();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            for value in line.split('"').skip(1).step_by(2) {
                let upper_kind = value.chars().next().is_some_and(char::is_uppercase);
                assert!(upper_kind || !value.contains('-'), "{value} in {line}");
            }
        }
    }

    #[test]
    fn the_prometheus_text_format_declares_counters_by_their_sample_names() {
        let metrics = Metrics::new();
        metrics.injected();
        let text = metrics.encode_prometheus_text();
        assert!(
            text.contains(
                "# HELP envoy_operator_sidecar_injections_total Pods that received the Envoy sidecar."
            ),
            "{text}"
        );
        assert!(text.contains("# TYPE envoy_operator_sidecar_injections_total counter\nenvoy_operator_sidecar_injections_total 1\n"), "{text}");
        assert!(text.contains("# TYPE envoy_operator_leader gauge"), "{text}");
        assert!(!text.contains("# EOF"));
        // Every sample belongs to a family declared with HELP and TYPE.
        let declared: Vec<&str> =
            text.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next()).collect();
        let helped: Vec<&str> =
            text.lines().filter_map(|l| l.strip_prefix("# HELP ")?.split(' ').next()).collect();
        assert_eq!(declared, helped);
        for sample in text.lines().filter(|l| !l.starts_with('#')) {
            let name = sample.split(['{', ' ']).next().unwrap_or_default();
            assert!(
                declared.iter().any(|family| name == *family
                    || ["_bucket", "_sum", "_count"].iter().any(|s| name.strip_suffix(s) == Some(family))),
                "{name} has no TYPE"
            );
        }
    }

    /// `promtool check metrics`, the linter Prometheus ships, on the text format. It comes with
    /// Debian's `prometheus` package, which the test script installs.
    #[test]
    fn promtool_accepts_the_exposition() {
        let Some(promtool) = envoy_operator_testkit::tool("PROMTOOL", "promtool") else { return };
        let metrics = Metrics::new();
        metrics.reconciled("Foo", Duration::from_millis(2), Some("api"));
        metrics.admitted("inject", "patched", Duration::from_micros(80));
        let mut child = std::process::Command::new(promtool)
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("promtool starts");
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(metrics.encode_prometheus_text().as_bytes())
            .expect("written");
        let output = child.wait_with_output().expect("promtool ends");
        let said =
            format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success() && said.trim().is_empty(), "promtool check metrics: {said}");
    }
}
