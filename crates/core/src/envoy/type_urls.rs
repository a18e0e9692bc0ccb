//! The type URLs of the Envoy messages the operator writes or serves, each written once: the
//! xDS resource types (what a `DiscoveryRequest` asks for, and the push order's keys) and the
//! messages packed in a `google.protobuf.Any` (`"@type"` of a typed config).

/// `envoy.config.listener.v3.Listener` (LDS).
pub const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
/// `envoy.config.route.v3.RouteConfiguration` (RDS).
pub const ROUTE_CONFIGURATION: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
/// `envoy.config.route.v3.ScopedRouteConfiguration` (SRDS; not served, but ordered).
pub const SCOPED_ROUTE_CONFIGURATION: &str =
    "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration";
/// `envoy.config.route.v3.VirtualHost` (VHDS; not served, but ordered).
pub const VIRTUAL_HOST: &str = "type.googleapis.com/envoy.config.route.v3.VirtualHost";
/// `envoy.config.cluster.v3.Cluster` (CDS).
pub const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// `envoy.config.endpoint.v3.ClusterLoadAssignment` (EDS).
pub const CLUSTER_LOAD_ASSIGNMENT: &str =
    "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
/// `envoy.extensions.transport_sockets.tls.v3.Secret` (SDS, and the SDS files of a bootstrap).
pub const SECRET: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

/// `envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager`.
pub const HTTP_CONNECTION_MANAGER: &str =
    "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
/// `envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy`.
pub const TCP_PROXY: &str = "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy";
/// `envoy.extensions.filters.http.router.v3.Router`.
pub const ROUTER: &str = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";
/// `envoy.extensions.access_loggers.stream.v3.StdoutAccessLog`.
pub const STDOUT_ACCESS_LOG: &str =
    "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog";
/// `envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext`.
pub const UPSTREAM_TLS_CONTEXT: &str =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext";
/// `envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext`.
pub const DOWNSTREAM_TLS_CONTEXT: &str =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext";
/// `envoy.extensions.filters.listener.original_dst.v3.OriginalDst`.
pub const ORIGINAL_DST: &str =
    "type.googleapis.com/envoy.extensions.filters.listener.original_dst.v3.OriginalDst";
/// `envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector`.
pub const TLS_INSPECTOR: &str =
    "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector";
/// `envoy.extensions.upstreams.http.v3.HttpProtocolOptions`.
pub const HTTP_PROTOCOL_OPTIONS: &str =
    "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions";
