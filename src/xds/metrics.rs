//! The xDS server's metrics hooks, recorded in the operator's Prometheus registry. Labels are
//! resource types and gRPC codes only: per-fleet figures are in each Envoy's status.

use std::time::Duration;

use crate::ops::metrics::Metrics;
use crate::xds::server::{FleetKey, Protocol, XdsMetrics};

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

impl XdsMetrics for Metrics {
    fn stream_opened(&self, _fleet: &FleetKey, _protocol: Protocol) {
        self.xds_proxy_connected(true);
    }

    fn stream_closed(&self, _fleet: &FleetKey, _protocol: Protocol) {
        self.xds_proxy_connected(false);
    }

    fn connection_refused(&self, reason: &'static str) {
        self.xds_connection_refused(reason);
    }

    fn stream_refused(&self, code: tonic::Code) {
        self.xds_refused(code_label(code));
    }

    fn request_refused(&self, _fleet: &FleetKey, code: tonic::Code) {
        self.xds_refused(code_label(code));
    }

    fn response_sent(&self, _fleet: &FleetKey, type_url: &str, _since_snapshot: Duration) {
        self.xds_pushed(type_label(type_url));
    }

    fn response_acked(&self, _fleet: &FleetKey, type_url: &str, since_snapshot: Duration) {
        self.xds_acknowledged(type_label(type_url), since_snapshot);
    }

    fn response_nacked(&self, _fleet: &FleetKey, type_url: &str) {
        self.xds_rejected(type_label(type_url));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hooks_reach_the_registry() {
        let metrics = Metrics::new();
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
            "envoy_operator_xds_streams_refused_total{code=\"resource_exhausted\"} 2",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
        metrics.stream_closed(&fleet, Protocol::Delta);
        assert!(metrics.encode().contains("envoy_operator_xds_connected_proxies 0"));
    }
}
