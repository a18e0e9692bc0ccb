//! The names Envoy knows its extensions by: a filter's, logger's or transport socket's `name`
//! beside its typed config.

pub const HTTP_CONNECTION_MANAGER: &str = "envoy.filters.network.http_connection_manager";
pub const ROUTER: &str = "envoy.filters.http.router";
pub const STDOUT_ACCESS_LOG: &str = "envoy.access_loggers.stdout";
pub const TLS_TRANSPORT_SOCKET: &str = "envoy.transport_sockets.tls";
pub const TCP_PROXY: &str = "envoy.filters.network.tcp_proxy";
pub const TLS_INSPECTOR: &str = "envoy.filters.listener.tls_inspector";
pub const ORIGINAL_DST: &str = "envoy.filters.listener.original_dst";
