//! Listeners: each on all addresses of its port. Plain HTTP: one HTTP connection manager
//! taking its routes by RDS over the ADS stream (the route configuration of the listener's
//! name). HTTPS: the TLS inspector reads the name the client asks for (SNI), and each TLS
//! server has its own filter chain for that name, terminating TLS with its certificates and
//! routing by its own route configuration ([`tls::route_configuration_name`]). TLS passthrough:
//! [`passthrough`]. A mesh sidecar's outbound capture: [`outbound`]. Unless the fleet turns it off, every connection manager writes a JSON
//! access log.

use std::collections::BTreeMap;

use super::{outbound, passthrough, tls};
use crate::envoy::{
    AccessLog, AccessLogConfig, Address, ConfigSource, Filter, FilterChain, HttpConnectionManager,
    HttpFilter, Listener, ListenerFilter, Rds, RouteSpecifier, StdoutAccessLog, SubstitutionFormatString,
    UpgradeConfig, extension_names,
};
use crate::ir;

/// Fields of each access log line, as commonly logged by Envoy-based gateways: one JSON
/// object per request on the proxy's standard output.
pub const ACCESS_LOG_FIELDS: [(&str, &str); 18] = [
    ("start_time", "%START_TIME%"),
    ("method", "%REQ(:METHOD)%"),
    ("path", "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%"),
    ("protocol", "%PROTOCOL%"),
    ("response_code", "%RESPONSE_CODE%"),
    ("response_flags", "%RESPONSE_FLAGS%"),
    ("response_code_details", "%RESPONSE_CODE_DETAILS%"),
    ("bytes_received", "%BYTES_RECEIVED%"),
    ("bytes_sent", "%BYTES_SENT%"),
    ("duration", "%DURATION%"),
    ("upstream_service_time", "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%"),
    ("upstream_host", "%UPSTREAM_HOST%"),
    ("upstream_cluster", "%UPSTREAM_CLUSTER%"),
    ("x_forwarded_for", "%REQ(X-FORWARDED-FOR)%"),
    ("user_agent", "%REQ(USER-AGENT)%"),
    ("request_id", "%REQ(X-REQUEST-ID)%"),
    ("authority", "%REQ(:AUTHORITY)%"),
    ("route_name", "%ROUTE_NAME%"),
];

pub fn listener(listener: &ir::Listener) -> Listener {
    if let Some(outbound) = &listener.outbound {
        return outbound::listener(listener, outbound);
    }
    if !listener.passthrough.is_empty() {
        return passthrough::listener(listener);
    }
    let address = Address::socket("0.0.0.0", u32::from(listener.port));
    if listener.tls_servers.is_empty() {
        let manager = http_connection_manager(listener, listener.name.clone());
        return Listener {
            name: listener.name.clone(),
            address,
            listener_filters: Vec::new(),
            filter_chains: vec![FilterChain::of(vec![Filter::http_connection_manager(manager)])],
        };
    }
    let filter_chains = tls::distinct_servers(listener)
        .map(|server| {
            let routes = tls::route_configuration_name(&listener.name, &server.name);
            FilterChain {
                name: server.name.clone(),
                filter_chain_match: tls::filter_chain_match(server),
                filters: vec![Filter::http_connection_manager(http_connection_manager(listener, routes))],
                transport_socket: Some(tls::downstream_tls(server)),
            }
        })
        .collect();
    Listener {
        name: listener.name.clone(),
        address,
        listener_filters: vec![ListenerFilter::tls_inspector()],
        filter_chains,
    }
}

/// The connection manager of the listener's requests routed by the route configuration
/// `route_config_name`.
pub(super) fn http_connection_manager(
    listener: &ir::Listener,
    route_config_name: String,
) -> HttpConnectionManager {
    HttpConnectionManager {
        stat_prefix: listener.name.clone(),
        route_specifier: RouteSpecifier::Rds(Rds { config_source: ConfigSource::ads(), route_config_name }),
        http_filters: vec![HttpFilter::router()],
        access_log: if listener.access_log { vec![json_access_log()] } else { Vec::new() },
        // Route on the normalized path, as Gateway API implementations do: `/a/../admin` and
        // `//admin` must not slip past a match on `/admin`.
        normalize_path: Some(true),
        merge_slashes: true,
        // WebSocket upgrades pass to every backend, as Envoy Gateway lets them (Gateway API's
        // `kubernetes.io/ws` backends, `HTTPRouteBackendProtocolWebSocket`); a backend that
        // speaks no WebSocket answers the upgrade request itself.
        upgrade_configs: vec![UpgradeConfig::websocket()],
    }
}

fn json_access_log() -> AccessLog {
    let json_format: BTreeMap<String, String> =
        ACCESS_LOG_FIELDS.iter().map(|(key, value)| ((*key).to_owned(), (*value).to_owned())).collect();
    AccessLog {
        name: extension_names::STDOUT_ACCESS_LOG.to_owned(),
        typed_config: AccessLogConfig::Stdout(StdoutAccessLog {
            log_format: SubstitutionFormatString { json_format },
        }),
    }
}
