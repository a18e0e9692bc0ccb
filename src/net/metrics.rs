//! The connections of the HTTP servers ([`super::serve`]): open ones and why they closed, per
//! server (`webhook`, `operations`). One set of families, shared by both ports.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServerLabels {
    pub server: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConnectionCloseLabels {
    pub server: &'static str,
    pub reason: &'static str,
}

/// The connection families in the operator's registry.
#[derive(Clone, Debug)]
pub struct ConnectionMetrics {
    connections: Family<ServerLabels, Gauge>,
    connections_closed: Family<ConnectionCloseLabels, Counter>,
}

impl Default for ConnectionMetrics {
    /// Families in no registry (tests, tools that expose no metrics).
    fn default() -> Self {
        Self::register(&mut Registry::default())
    }
}

impl ConnectionMetrics {
    /// Registers the connection families in `registry` (their series appear with the servers).
    pub fn register(registry: &mut Registry) -> Self {
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
        Self { connections, connections_closed }
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
