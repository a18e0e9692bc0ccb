//! Every subsystem's metrics in the operator's one registry, registered in the order of the
//! `/metrics` exposition (the composition root's part: `ops` knows no subsystem).
//!
//! | families | registered by |
//! |---|---|
//! | `reconciliations`, `reconcile_errors`, `reconcile_duration_seconds`, `api_writes` | [`ControllerMetrics`] |
//! | `admission_requests`, `admission_duration_seconds`, `sidecar_injections`, `sidecar_skips`, `sidecar_denials` | [`WebhookMetrics`] |
//! | `certificate_expiry_seconds`, `leader` | [`Metrics`] (operations) |
//! | `xds_connected_proxies`, `xds_pushes`, `xds_push_duration_seconds`, `xds_nacks`, `xds_streams_refused`, `xds_connections_refused` | [`ControlPlaneMetrics`] |
//! | `http_connections`, `http_connections_closed` | [`ConnectionMetrics`] |

use crate::controller::ControllerMetrics;
use crate::net::ConnectionMetrics;
use crate::ops::metrics::Metrics;
use crate::webhook::metrics::WebhookMetrics;
use crate::xds::metrics::ControlPlaneMetrics;

/// Each subsystem's handle on its families, and the exposition of them all.
#[derive(Clone, Debug)]
pub struct OperatorMetrics {
    /// The registry's exposition, and the operations' own families (leader, certificate expiry).
    pub ops: Metrics,
    pub controllers: ControllerMetrics,
    pub webhook: WebhookMetrics,
    pub xds: ControlPlaneMetrics,
    /// The connections of the webhook and operations ports.
    pub connections: ConnectionMetrics,
}

impl Default for OperatorMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl OperatorMetrics {
    /// Every family, each series at zero.
    pub fn new() -> Self {
        let mut builder = Metrics::builder();
        let controllers = builder.register(ControllerMetrics::register);
        let webhook = builder.register(WebhookMetrics::register);
        builder.register_operations();
        let xds = builder.register(ControlPlaneMetrics::register);
        let connections = builder.register(ConnectionMetrics::register);
        Self { ops: builder.build(), controllers, webhook, xds, connections }
    }

    /// The OpenMetrics text exposition of every metric.
    pub fn encode(&self) -> String {
        self.ops.encode()
    }

    /// The Prometheus text format (0.0.4) of every metric.
    pub fn encode_prometheus_text(&self) -> String {
        self.ops.encode_prometheus_text()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::controller::ReconcileMetrics;

    #[test]
    fn every_series_is_exposed_with_its_labels() {
        let metrics = OperatorMetrics::new();
        metrics.controllers.reconciled("Foo", None, Duration::from_millis(3));
        metrics.controllers.reconciled("Envoy", Some("conflict"), Duration::from_millis(5));
        metrics.webhook.admitted("validate", "denied", Duration::from_micros(40));
        metrics.webhook.injected();
        metrics.webhook.injection_skipped("host_network");
        metrics.webhook.injection_denied("unknown_envoy");
        metrics.controllers.wrote("Deployment", "apply");
        metrics.ops.set_certificate_expiry(86_400);
        metrics.ops.set_leader(true);
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
    use std::time::Duration;

    use super::*;
    use crate::controller::ReconcileMetrics;

    #[test]
    fn every_series_is_there_at_zero_before_its_first_event() {
        let text = OperatorMetrics::new().encode();
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
    fn label_values_are_snake_case() {
        let text = OperatorMetrics::new().encode();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            for value in line.split('"').skip(1).step_by(2) {
                let upper_kind = value.chars().next().is_some_and(char::is_uppercase);
                assert!(upper_kind || !value.contains('-'), "{value} in {line}");
            }
        }
    }

    #[test]
    fn the_prometheus_text_format_declares_counters_by_their_sample_names() {
        let metrics = OperatorMetrics::new();
        metrics.webhook.injected();
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
        let metrics = OperatorMetrics::new();
        metrics.controllers.reconciled("Foo", Some("api"), Duration::from_millis(2));
        metrics.webhook.admitted("inject", "patched", Duration::from_micros(80));
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

#[cfg(test)]
mod layout {
    use super::*;

    /// Dashboards and alerts name these families: their names, types and order stay.
    #[test]
    fn the_families_keep_their_names_types_and_order() {
        let metrics = OperatorMetrics::new();
        metrics.connections.connection_opened("webhook", 1);
        metrics.connections.connection_closed("webhook", "idle");
        let declared: Vec<String> = metrics
            .encode()
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE envoy_operator_").map(str::to_owned))
            .collect();
        assert_eq!(
            declared,
            [
                "reconciliations counter",
                "reconcile_errors counter",
                "reconcile_duration_seconds histogram",
                "api_writes counter",
                "admission_requests counter",
                "admission_duration_seconds histogram",
                "sidecar_injections counter",
                "sidecar_skips counter",
                "sidecar_denials counter",
                "certificate_expiry_seconds gauge",
                "leader gauge",
                "xds_connected_proxies gauge",
                "xds_pushes counter",
                "xds_push_duration_seconds histogram",
                "xds_nacks counter",
                "xds_streams_refused counter",
                "xds_connections_refused counter",
                "xds_reading_budget_events counter",
                "http_connections gauge",
                "http_connections_closed counter",
                // Read from h2 on each scrape, so encoded after the families.
                "xds_over_window_bytes gauge",
                "xds_over_window_resets counter",
                "xds_writing_bytes gauge",
                "xds_writing_waits counter",
            ]
        );
    }
}
