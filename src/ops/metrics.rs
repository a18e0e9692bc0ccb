//! The operator's one Prometheus registry (prometheus-client) and its `/metrics` exposition,
//! served on the plain-HTTP operations port, with the operations' own families: the leader
//! Lease and the serving certificate's expiry.
//!
//! Every subsystem owns its families and registers them here at start-up
//! ([`MetricsBuilder::register`]): the controllers (`controller::metrics`), the admission
//! webhook and the injector (`webhook::metrics`), the xDS server (`xds::metrics`) and the
//! connections of both HTTP ports (`net::metrics`). The composition root
//! (`operator::metrics`) registers them all, in the order of the exposition. Label values are
//! fixed strings so cardinality stays bounded, and each family starts its series at zero so a
//! dashboard or alert sees them before their first event.

use std::sync::Arc;

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The prefix of every metric name.
pub const PREFIX: &str = "envoy_operator";

/// The registry every subsystem's families go in, and the operations' own families.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    certificate_expiry: Gauge,
    leader: Gauge,
}

/// A registry being filled: each subsystem registers its families in turn, then
/// [`build`](Self::build) makes the exposition.
pub struct MetricsBuilder {
    registry: Registry,
    own: Option<Own>,
}

/// The operations' own families.
struct Own {
    certificate_expiry: Gauge,
    leader: Gauge,
}

impl Own {
    fn register(registry: &mut Registry) -> Self {
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
        Self { certificate_expiry, leader }
    }
}

impl MetricsBuilder {
    /// Registers one subsystem's families, e.g. `builder.register(WebhookMetrics::register)`,
    /// and returns its handle.
    pub fn register<M>(&mut self, subsystem: impl FnOnce(&mut Registry) -> M) -> M {
        subsystem(&mut self.registry)
    }

    /// The registry itself, for families registered by hand.
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// Registers the operations' own families (certificate expiry, leader) at this point of
    /// the exposition; [`build`](Self::build) adds them last unless this was called.
    pub fn register_operations(&mut self) {
        if self.own.is_none() {
            self.own = Some(Own::register(&mut self.registry));
        }
    }

    pub fn build(mut self) -> Metrics {
        let Own { certificate_expiry, leader } = match self.own.take() {
            Some(own) => own,
            None => Own::register(&mut self.registry),
        };
        Metrics { registry: Arc::new(self.registry), certificate_expiry, leader }
    }
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
    /// A registry being filled, with the operator's prefix.
    pub fn builder() -> MetricsBuilder {
        MetricsBuilder { registry: Registry::with_prefix(PREFIX), own: None }
    }

    /// The operations' own families alone (tests, and tools that expose nothing else).
    pub fn new() -> Self {
        Self::builder().build()
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

    pub fn set_certificate_expiry(&self, seconds_left: i64) {
        self.certificate_expiry.set(seconds_left);
    }

    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
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
    use prometheus_client::metrics::counter::Counter;

    use super::*;

    #[test]
    fn the_operations_families_are_registered_where_asked() {
        let mut builder = Metrics::builder();
        builder
            .register(|registry| registry.register("before", "Registered first", Counter::<u64>::default()));
        builder.register_operations();
        builder.registry_mut().register("after", "Registered last", Counter::<u64>::default());
        let metrics = builder.build();
        metrics.set_leader(true);
        metrics.set_certificate_expiry(86_400);
        let text = metrics.encode();
        let at = |name: &str| {
            text.find(&format!("# TYPE envoy_operator_{name} "))
                .unwrap_or_else(|| panic!("{name} in\n{text}"))
        };
        assert!(at("before") < at("certificate_expiry_seconds"));
        assert!(at("certificate_expiry_seconds") < at("leader"));
        assert!(at("leader") < at("after"));
        assert!(text.contains("envoy_operator_leader 1"), "{text}");
        assert!(text.contains("envoy_operator_certificate_expiry_seconds 86400"), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn the_prometheus_text_format_names_counters_by_their_samples() {
        let mut builder = Metrics::builder();
        let counter = builder.register(|registry| {
            let counter = Counter::<u64>::default();
            registry.register("things", "Things counted", counter.clone());
            counter
        });
        counter.inc();
        let text = builder.build().encode_prometheus_text();
        assert!(text.contains("# HELP envoy_operator_things_total Things counted.\n"), "{text}");
        assert!(
            text.contains("# TYPE envoy_operator_things_total counter\nenvoy_operator_things_total 1\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE envoy_operator_leader gauge"), "{text}");
        assert!(!text.contains("# EOF"));
    }
}
