//! The translation's Envoy resources ([`envoy_operator_core::envoy`], Envoy's JSON form, the
//! model the bootstrap uses too) as the protobuf messages the xDS server sends: a field-by-field
//! copy, one function per message, no decisions. Hand-written rather than a JSON-to-protobuf
//! transcoder: envoy-types carries no descriptors or serde support, and the model is small and
//! typed, so the compiler checks every field here. A real Envoy is the test (`tests/xds_envoy.rs`).

use envoy_operator_core::envoy as m;
use envoy_operator_core::envoy::type_urls;
use envoy_types::pb::envoy::config::accesslog::v3::{AccessLog, access_log};
use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{
    Address, AggregatedConfigSource, ApiVersion, CidrRange, ConfigSource, DataSource, HeaderValue,
    HeaderValueOption, Http2ProtocolOptions, PathConfigSource, RuntimeFractionalPercent, SocketAddress,
    TransportSocket, WatchedDirectory, address, config_source, data_source, header_value_option,
    socket_address, transport_socket,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::config::listener::v3::{
    Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter, filter, listener_filter,
};
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, HeaderMatcher, QueryParameterMatcher, RedirectAction, RetryPolicy, Route,
    RouteAction, RouteConfiguration, RouteMatch, VirtualHost, WeightedCluster, header_matcher,
    query_parameter_matcher, redirect_action, route, route_action, route_match, weighted_cluster,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::listener::original_dst::v3::OriginalDst;
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds, http_connection_manager, http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, DownstreamTlsContext, SdsSecretConfig, Secret,
    SubjectAltNameMatcher, TlsCertificate, UpstreamTlsContext, common_tls_context, secret,
    subject_alt_name_matcher,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{HttpProtocolOptions, http_protocol_options};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    RegexMatchAndSubstitute, RegexMatcher, StringMatcher, string_matcher,
};
use envoy_types::pb::envoy::r#type::v3::{FractionalPercent, fractional_percent};
use std::collections::BTreeMap;

use envoy_types::pb::google::protobuf::{self, Any, BoolValue, Struct, UInt32Value, value};
use envoy_types::util::pack_any;
use prost::{Message, Name};

pub fn listener(from: &m::Listener) -> Listener {
    Listener {
        name: from.name.clone(),
        address: Some(address_of(&from.address)),
        listener_filters: from.listener_filters.iter().map(listener_filter).collect(),
        filter_chains: from.filter_chains.iter().map(filter_chain).collect(),
        ..Default::default()
    }
}

/// A secret as SDS serves it. The private key is copied into the message, which is encoded
/// once into the snapshot and never printed (prost's `Debug` would show it).
pub fn secret(from: &m::Secret) -> Secret {
    let kind = match &from.kind {
        m::SecretKind::TlsCertificate(certificate) => secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: Some(data_source(&certificate.certificate_chain)),
            private_key: Some(data_source(&certificate.private_key)),
            ..Default::default()
        }),
        m::SecretKind::ValidationContext(context) => {
            secret::Type::ValidationContext(certificate_validation_context(context))
        }
    };
    Secret { name: from.name.clone(), r#type: Some(kind) }
}

fn certificate_validation_context(from: &m::CertificateValidationContext) -> CertificateValidationContext {
    CertificateValidationContext {
        trusted_ca: Some(data_source(&from.trusted_ca)),
        match_typed_subject_alt_names: from
            .match_typed_subject_alt_names
            .iter()
            .map(|matcher| SubjectAltNameMatcher {
                san_type: match matcher.san_type {
                    m::SanType::Dns => subject_alt_name_matcher::SanType::Dns,
                    m::SanType::IpAddress => subject_alt_name_matcher::SanType::IpAddress,
                } as i32,
                matcher: Some(string_matcher_of(&matcher.matcher)),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn data_source(from: &m::DataSource) -> DataSource {
    DataSource {
        specifier: Some(data_source::Specifier::InlineString(from.inline_string.clone())),
        ..Default::default()
    }
}

fn listener_filter(from: &m::ListenerFilter) -> ListenerFilter {
    let config = match &from.typed_config {
        m::ListenerFilterConfig::TlsInspector(m::TlsInspector {}) => pack_any(TlsInspector::default()),
        m::ListenerFilterConfig::OriginalDst(m::OriginalDst {}) => pack_any(OriginalDst::default()),
    };
    ListenerFilter {
        name: from.name.clone(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(config)),
        ..Default::default()
    }
}

pub fn route_configuration(from: &m::RouteConfiguration) -> RouteConfiguration {
    RouteConfiguration {
        name: from.name.clone(),
        virtual_hosts: from.virtual_hosts.iter().map(virtual_host).collect(),
        ignore_port_in_host_matching: from.ignore_port_in_host_matching,
        validate_clusters: from.validate_clusters.map(|value| BoolValue { value }),
        most_specific_header_mutations_wins: from.most_specific_header_mutations_wins,
        ..Default::default()
    }
}

pub fn cluster(from: &m::Cluster) -> Cluster {
    let discovery_type = match from.discovery_type {
        m::DiscoveryType::Static => cluster::DiscoveryType::Static,
        m::DiscoveryType::StrictDns => cluster::DiscoveryType::StrictDns,
        m::DiscoveryType::Eds => cluster::DiscoveryType::Eds,
        m::DiscoveryType::OriginalDst => cluster::DiscoveryType::OriginalDst,
    };
    let lb_policy = from.lb_policy.map(|policy| match policy {
        m::LbPolicy::RoundRobin => cluster::LbPolicy::RoundRobin,
        m::LbPolicy::ClusterProvided => cluster::LbPolicy::ClusterProvided,
    });
    Cluster {
        name: from.name.clone(),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(discovery_type as i32)),
        connect_timeout: Some(duration(from.connect_timeout)),
        lb_policy: lb_policy.map_or(0, |policy| policy as i32),
        typed_extension_protocol_options: from
            .typed_extension_protocol_options
            .iter()
            .map(|options| {
                let options = http_protocol_options_of(&options.http);
                (HttpProtocolOptions::full_name(), pack_any(options))
            })
            .collect(),
        eds_cluster_config: from.eds_cluster_config.as_ref().map(|eds| cluster::EdsClusterConfig {
            eds_config: Some(config_source_of(&eds.eds_config)),
            service_name: eds.service_name.clone(),
        }),
        load_assignment: from.load_assignment.as_ref().map(cluster_load_assignment),
        transport_socket: from.transport_socket.as_ref().map(transport_socket_of),
        ..Default::default()
    }
}

fn http_protocol_options_of(from: &m::HttpProtocolOptions) -> HttpProtocolOptions {
    let m::ExplicitHttpConfig { http2_protocol_options: m::Empty {} } = from.explicit_http_config;
    let http2 = http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
        Http2ProtocolOptions::default(),
    );
    HttpProtocolOptions {
        upstream_protocol_options: Some(http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
            http_protocol_options::ExplicitHttpConfig { protocol_config: Some(http2) },
        )),
        ..Default::default()
    }
}

fn transport_socket_of(from: &m::TransportSocket) -> TransportSocket {
    let tls = &from.typed_config;
    let upstream = UpstreamTlsContext {
        sni: tls.sni.clone().unwrap_or_default(),
        common_tls_context: Some(common_tls_context_of(&tls.common_tls_context)),
        ..Default::default()
    };
    TransportSocket {
        name: from.name.clone(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(pack_any(upstream))),
    }
}

fn downstream_transport_socket(from: &m::TransportSocket<m::DownstreamTlsContext>) -> TransportSocket {
    let downstream = DownstreamTlsContext {
        common_tls_context: Some(common_tls_context_of(&from.typed_config.common_tls_context)),
        ..Default::default()
    };
    TransportSocket {
        name: from.name.clone(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(pack_any(downstream))),
    }
}

fn common_tls_context_of(from: &m::CommonTlsContext) -> CommonTlsContext {
    CommonTlsContext {
        alpn_protocols: from.alpn_protocols.clone(),
        tls_certificate_sds_secret_configs: from
            .tls_certificate_sds_secret_configs
            .iter()
            .map(sds_secret_config)
            .collect(),
        validation_context_type: from.validation_context_sds_secret_config.as_ref().map(|validation| {
            common_tls_context::ValidationContextType::ValidationContextSdsSecretConfig(sds_secret_config(
                validation,
            ))
        }),
        ..Default::default()
    }
}

fn sds_secret_config(from: &m::SdsSecretConfig) -> SdsSecretConfig {
    SdsSecretConfig { name: from.name.clone(), sds_config: Some(config_source_of(&from.sds_config)) }
}

pub fn cluster_load_assignment(from: &m::ClusterLoadAssignment) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name: from.cluster_name.clone(),
        endpoints: from
            .endpoints
            .iter()
            .map(|locality| LocalityLbEndpoints {
                lb_endpoints: locality
                    .lb_endpoints
                    .iter()
                    .map(|lb| LbEndpoint {
                        host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                            address: Some(address_of(&lb.endpoint.address)),
                            ..Default::default()
                        })),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn duration(from: m::Duration) -> protobuf::Duration {
    protobuf::Duration { seconds: from.seconds, nanos: from.nanos }
}

fn address_of(from: &m::Address) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: from.socket_address.address.clone(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(from.socket_address.port_value)),
            ..Default::default()
        })),
    }
}

fn config_source_of(from: &m::ConfigSource) -> ConfigSource {
    let m::ApiVersion::V3 = from.resource_api_version;
    let specifier = match &from.specifier {
        m::ConfigSourceSpecifier::Ads(m::Empty {}) => {
            config_source::ConfigSourceSpecifier::Ads(AggregatedConfigSource {})
        }
        m::ConfigSourceSpecifier::PathConfigSource(path) => {
            config_source::ConfigSourceSpecifier::PathConfigSource(PathConfigSource {
                path: path.path.clone(),
                watched_directory: Some(WatchedDirectory {
                    path: path.watched_directory.path.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            })
        }
    };
    ConfigSource {
        config_source_specifier: Some(specifier),
        resource_api_version: ApiVersion::V3 as i32,
        initial_fetch_timeout: from.initial_fetch_timeout.map(duration),
        ..Default::default()
    }
}

fn filter_chain(from: &m::FilterChain) -> FilterChain {
    FilterChain {
        name: from.name.clone(),
        filter_chain_match: from.filter_chain_match.as_ref().map(|matching| FilterChainMatch {
            destination_port: matching.destination_port.map(|value| UInt32Value { value }),
            prefix_ranges: matching
                .prefix_ranges
                .iter()
                .map(|range| CidrRange {
                    address_prefix: range.address_prefix.clone(),
                    prefix_len: Some(UInt32Value { value: range.prefix_len }),
                })
                .collect(),
            server_names: matching.server_names.clone(),
            ..Default::default()
        }),
        transport_socket: from.transport_socket.as_ref().map(downstream_transport_socket),
        filters: from
            .filters
            .iter()
            .map(|network| Filter {
                name: network.name.clone(),
                config_type: Some(filter::ConfigType::TypedConfig(match &network.typed_config {
                    m::NetworkFilterConfig::HttpConnectionManager(manager) => {
                        pack_any(http_connection_manager(manager))
                    }
                    m::NetworkFilterConfig::TcpProxy(proxy) => pack_any(tcp_proxy(proxy)),
                })),
            })
            .collect(),
        ..Default::default()
    }
}

fn tcp_proxy(from: &m::TcpProxy) -> TcpProxy {
    let cluster_specifier = match &from.cluster_specifier {
        m::TcpProxyClusters::Cluster(name) => tcp_proxy::ClusterSpecifier::Cluster(name.clone()),
        m::TcpProxyClusters::WeightedClusters(weighted) => {
            tcp_proxy::ClusterSpecifier::WeightedClusters(tcp_proxy::WeightedCluster {
                clusters: weighted
                    .clusters
                    .iter()
                    .map(|cluster| tcp_proxy::weighted_cluster::ClusterWeight {
                        name: cluster.name.clone(),
                        weight: cluster.weight,
                        ..Default::default()
                    })
                    .collect(),
            })
        }
    };
    TcpProxy {
        stat_prefix: from.stat_prefix.clone(),
        cluster_specifier: Some(cluster_specifier),
        ..Default::default()
    }
}

fn http_connection_manager(from: &m::HttpConnectionManager) -> HttpConnectionManager {
    let route_specifier = match &from.route_specifier {
        m::RouteSpecifier::Rds(rds) => http_connection_manager::RouteSpecifier::Rds(Rds {
            config_source: Some(config_source_of(&rds.config_source)),
            route_config_name: rds.route_config_name.clone(),
        }),
        m::RouteSpecifier::RouteConfig(config) => {
            http_connection_manager::RouteSpecifier::RouteConfig(route_configuration(config))
        }
    };
    HttpConnectionManager {
        stat_prefix: from.stat_prefix.clone(),
        route_specifier: Some(route_specifier),
        http_filters: from
            .http_filters
            .iter()
            .map(|http| HttpFilter {
                name: http.name.clone(),
                config_type: Some(http_filter::ConfigType::TypedConfig(match &http.typed_config {
                    m::HttpFilterConfig::Router(m::Router {}) => pack_any(Router::default()),
                })),
                ..Default::default()
            })
            .collect(),
        access_log: from.access_log.iter().map(access_log_of).collect(),
        normalize_path: from.normalize_path.map(|value| BoolValue { value }),
        merge_slashes: from.merge_slashes,
        upgrade_configs: from
            .upgrade_configs
            .iter()
            .map(|upgrade| http_connection_manager::UpgradeConfig {
                upgrade_type: upgrade.upgrade_type.clone(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn access_log_of(from: &m::AccessLog) -> AccessLog {
    let config = match &from.typed_config {
        m::AccessLogConfig::Stdout(stdout) => stdout_json_log(&stdout.log_format.json_format),
    };
    AccessLog {
        name: from.name.clone(),
        config_type: Some(access_log::ConfigType::TypedConfig(config)),
        ..Default::default()
    }
}

/// A `StdoutAccessLog` writing `json_format`, packed with its keys in order. prost keeps a
/// `google.protobuf.Struct` in a `HashMap` and encodes it in the map's (per-process random)
/// order, so the plain encoding would differ between replicas and restarts, and with it the
/// listener's version: proxies would be pushed an unchanged listener after every reconnect,
/// and replicas would disagree on what version a fleet runs. A Struct of one field has one
/// encoding, and repeated map entries concatenate, so the keys are encoded one by one.
fn stdout_json_log(json_format: &BTreeMap<String, String>) -> Any {
    use prost::encoding::{WireType, encode_key, encode_varint};
    fn length_delimited(tag: u32, body: &[u8], out: &mut Vec<u8>) {
        encode_key(tag, WireType::LengthDelimited, out);
        encode_varint(body.len() as u64, out);
        out.extend_from_slice(body);
    }
    let mut fields = Vec::new();
    for (key, format) in json_format {
        let value = protobuf::Value { kind: Some(value::Kind::StringValue(format.clone())) };
        Struct { fields: [(key.clone(), value)].into() }.encode(&mut fields).expect("a Vec grows");
    }
    // SubstitutionFormatString.json_format is field 2; StdoutAccessLog.log_format field 1.
    let mut format_string = Vec::new();
    length_delimited(2, &fields, &mut format_string);
    let mut log = Vec::new();
    length_delimited(1, &format_string, &mut log);
    Any { type_url: type_urls::STDOUT_ACCESS_LOG.to_owned(), value: log }
}

fn virtual_host(from: &m::VirtualHost) -> VirtualHost {
    VirtualHost {
        name: from.name.clone(),
        domains: from.domains.clone(),
        routes: from.routes.iter().map(route_of).collect(),
        ..Default::default()
    }
}

fn route_of(from: &m::Route) -> Route {
    let action = match &from.action {
        m::Action::Route(action) => route::Action::Route(route_action(action)),
        m::Action::Redirect(redirect) => route::Action::Redirect(redirect_action(redirect)),
        m::Action::DirectResponse(direct) => route::Action::DirectResponse(DirectResponseAction {
            status: direct.status,
            ..Default::default()
        }),
    };
    Route {
        name: from.name.clone(),
        r#match: Some(route_match_of(&from.route_match)),
        action: Some(action),
        request_headers_to_add: from.request_headers_to_add.iter().map(header_value_option).collect(),
        request_headers_to_remove: from.request_headers_to_remove.clone(),
        response_headers_to_add: from.response_headers_to_add.iter().map(header_value_option).collect(),
        response_headers_to_remove: from.response_headers_to_remove.clone(),
        ..Default::default()
    }
}

fn route_match_of(from: &m::RouteMatch) -> RouteMatch {
    let path = match &from.path_specifier {
        m::PathSpecifier::Prefix(prefix) => route_match::PathSpecifier::Prefix(prefix.clone()),
        m::PathSpecifier::Path(path) => route_match::PathSpecifier::Path(path.clone()),
        m::PathSpecifier::SafeRegex(regex) => route_match::PathSpecifier::SafeRegex(regex_matcher(regex)),
        m::PathSpecifier::PathSeparatedPrefix(prefix) => {
            route_match::PathSpecifier::PathSeparatedPrefix(prefix.clone())
        }
    };
    RouteMatch {
        path_specifier: Some(path),
        headers: from
            .headers
            .iter()
            .map(|header| HeaderMatcher {
                name: header.name.clone(),
                header_match_specifier: Some(header_matcher::HeaderMatchSpecifier::StringMatch(
                    string_matcher_of(&header.string_match),
                )),
                ..Default::default()
            })
            .collect(),
        query_parameters: from
            .query_parameters
            .iter()
            .map(|query| QueryParameterMatcher {
                name: query.name.clone(),
                query_parameter_match_specifier: Some(
                    query_parameter_matcher::QueryParameterMatchSpecifier::StringMatch(string_matcher_of(
                        &query.string_match,
                    )),
                ),
            })
            .collect(),
        ..Default::default()
    }
}

fn route_action(from: &m::RouteAction) -> RouteAction {
    let cluster_specifier = match &from.cluster_specifier {
        m::ClusterSpecifier::Cluster(name) => route_action::ClusterSpecifier::Cluster(name.clone()),
        m::ClusterSpecifier::WeightedClusters(weighted) => {
            route_action::ClusterSpecifier::WeightedClusters(WeightedCluster {
                clusters: weighted
                    .clusters
                    .iter()
                    .map(|cluster| weighted_cluster::ClusterWeight {
                        name: cluster.name.clone(),
                        weight: Some(UInt32Value { value: cluster.weight }),
                        request_headers_to_add: cluster
                            .request_headers_to_add
                            .iter()
                            .map(header_value_option)
                            .collect(),
                        request_headers_to_remove: cluster.request_headers_to_remove.clone(),
                        response_headers_to_add: cluster
                            .response_headers_to_add
                            .iter()
                            .map(header_value_option)
                            .collect(),
                        response_headers_to_remove: cluster.response_headers_to_remove.clone(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
        }
    };
    let cluster_not_found = from.cluster_not_found_response_code.map(|code| match code {
        m::ClusterNotFoundResponseCode::InternalServerError => {
            route_action::ClusterNotFoundResponseCode::InternalServerError
        }
        m::ClusterNotFoundResponseCode::ServiceUnavailable => {
            route_action::ClusterNotFoundResponseCode::ServiceUnavailable
        }
    });
    RouteAction {
        cluster_specifier: Some(cluster_specifier),
        cluster_not_found_response_code: cluster_not_found.map_or(0, |code| code as i32),
        timeout: from.timeout.map(duration),
        prefix_rewrite: from.prefix_rewrite.clone().unwrap_or_default(),
        regex_rewrite: from.regex_rewrite.as_ref().map(regex_match_and_substitute),
        host_rewrite_specifier: from
            .host_rewrite_literal
            .clone()
            .map(route_action::HostRewriteSpecifier::HostRewriteLiteral),
        request_mirror_policies: from.request_mirror_policies.iter().map(request_mirror_policy).collect(),
        retry_policy: from.retry_policy.as_ref().map(|retry| RetryPolicy {
            num_retries: Some(UInt32Value { value: retry.num_retries }),
            per_try_timeout: Some(duration(retry.per_try_timeout)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn request_mirror_policy(from: &m::RequestMirrorPolicy) -> route_action::RequestMirrorPolicy {
    route_action::RequestMirrorPolicy {
        cluster: from.cluster.clone(),
        runtime_fraction: from.runtime_fraction.as_ref().map(|fraction| RuntimeFractionalPercent {
            default_value: Some(FractionalPercent {
                numerator: fraction.default_value.numerator,
                denominator: match fraction.default_value.denominator {
                    m::FractionalPercentDenominator::Hundred => fractional_percent::DenominatorType::Hundred,
                    m::FractionalPercentDenominator::TenThousand => {
                        fractional_percent::DenominatorType::TenThousand
                    }
                    m::FractionalPercentDenominator::Million => fractional_percent::DenominatorType::Million,
                } as i32,
            }),
            runtime_key: String::new(),
        }),
        ..Default::default()
    }
}

fn redirect_action(from: &m::RedirectAction) -> RedirectAction {
    let response_code = match from.response_code {
        m::RedirectResponseCode::MovedPermanently => redirect_action::RedirectResponseCode::MovedPermanently,
        m::RedirectResponseCode::Found => redirect_action::RedirectResponseCode::Found,
    };
    let path_rewrite = from.path_rewrite_specifier.as_ref().map(|rewrite| match rewrite {
        m::RedirectPathRewrite::PathRedirect(path) => {
            redirect_action::PathRewriteSpecifier::PathRedirect(path.clone())
        }
        m::RedirectPathRewrite::PrefixRewrite(prefix) => {
            redirect_action::PathRewriteSpecifier::PrefixRewrite(prefix.clone())
        }
        m::RedirectPathRewrite::RegexRewrite(regex) => {
            redirect_action::PathRewriteSpecifier::RegexRewrite(regex_match_and_substitute(regex))
        }
    });
    RedirectAction {
        scheme_rewrite_specifier: from
            .scheme_redirect
            .clone()
            .map(redirect_action::SchemeRewriteSpecifier::SchemeRedirect),
        host_redirect: from.host_redirect.clone().unwrap_or_default(),
        port_redirect: from.port_redirect.unwrap_or_default(),
        path_rewrite_specifier: path_rewrite,
        response_code: response_code as i32,
        ..Default::default()
    }
}

fn header_value_option(from: &m::HeaderValueOption) -> HeaderValueOption {
    let append_action = match from.append_action {
        m::HeaderAppendAction::AppendIfExistsOrAdd => {
            header_value_option::HeaderAppendAction::AppendIfExistsOrAdd
        }
        m::HeaderAppendAction::OverwriteIfExistsOrAdd => {
            header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd
        }
    };
    HeaderValueOption {
        header: Some(HeaderValue {
            key: from.header.key.clone(),
            value: from.header.value.clone(),
            ..Default::default()
        }),
        append_action: append_action as i32,
        ..Default::default()
    }
}

fn regex_matcher(from: &m::RegexMatcher) -> RegexMatcher {
    RegexMatcher { regex: from.regex.clone(), ..Default::default() }
}

fn regex_match_and_substitute(from: &m::RegexMatchAndSubstitute) -> RegexMatchAndSubstitute {
    RegexMatchAndSubstitute {
        pattern: Some(regex_matcher(&from.pattern)),
        substitution: from.substitution.clone(),
    }
}

fn string_matcher_of(from: &m::StringMatcher) -> StringMatcher {
    let pattern = match from {
        m::StringMatcher::Exact(exact) => string_matcher::MatchPattern::Exact(exact.clone()),
        m::StringMatcher::SafeRegex(regex) => string_matcher::MatchPattern::SafeRegex(regex_matcher(regex)),
    };
    StringMatcher { match_pattern: Some(pattern), ..Default::default() }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::core::v3::{SubstitutionFormatString, substitution_format_string};
    use envoy_types::pb::envoy::extensions::access_loggers::stream::v3::{
        StdoutAccessLog, stdout_access_log,
    };

    use super::*;

    #[test]
    fn the_json_access_log_is_the_message_prost_would_encode_with_its_keys_in_order() {
        let json_format: BTreeMap<String, String> =
            [("start_time", "%START_TIME%"), ("method", "%REQ(:METHOD)%"), ("code", "%RESPONSE_CODE%")]
                .into_iter()
                .map(|(key, format)| (key.to_owned(), format.to_owned()))
                .collect();
        let fields = json_format
            .iter()
            .map(|(key, format)| {
                (key.clone(), protobuf::Value { kind: Some(value::Kind::StringValue(format.clone())) })
            })
            .collect();
        let expected = StdoutAccessLog {
            access_log_format: Some(stdout_access_log::AccessLogFormat::LogFormat(
                SubstitutionFormatString {
                    format: Some(substitution_format_string::Format::JsonFormat(Struct { fields })),
                    ..Default::default()
                },
            )),
        };

        let packed = stdout_json_log(&json_format);
        assert_eq!(
            packed.type_url,
            "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog"
        );
        assert_eq!(StdoutAccessLog::decode(packed.value.as_slice()).unwrap(), expected);
        let keys_at = |key: &str| packed.value.windows(key.len()).position(|w| w == key.as_bytes()).unwrap();
        assert!(keys_at("code") < keys_at("method") && keys_at("method") < keys_at("start_time"));
    }

    /// A TLS passthrough listener of the core's rendering, as the server encodes it: the TLS
    /// inspector, and a TCP proxy per chain, to one cluster or several by weight.
    #[test]
    fn a_passthrough_listener_survives_the_copy() {
        use envoy_operator_core::ir;
        use envoy_operator_core::xds::resources;

        let weighted = |backend: &str, weight| ir::WeightedBackend::new(backend, weight);
        let fleet = ir::Fleet {
            listeners: vec![ir::Listener {
                name: "tls-443".into(),
                port: 10443,
                access_log: true,
                virtual_hosts: Vec::new(),
                tls_servers: Vec::new(),
                passthrough: vec![
                    ir::PassthroughServer {
                        name: "ns/a".into(),
                        server_names: vec![ir::Domain::Exact("a.example.test".into())],
                        backends: vec![weighted("ns/a/443/tcp", 1)],
                        unresolved_weight: 0,
                    },
                    ir::PassthroughServer {
                        name: "ns/b".into(),
                        server_names: vec![ir::Domain::Exact("b.example.test".into())],
                        backends: vec![weighted("ns/a/443/tcp", 1), weighted("ns/b/443/tcp", 9)],
                        unresolved_weight: 0,
                    },
                ],
                outbound: None,
            }],
            ..Default::default()
        };
        let converted = listener(&resources(&fleet).listeners[0]);
        let Some(listener_filter::ConfigType::TypedConfig(inspector)) =
            &converted.listener_filters[0].config_type
        else {
            panic!("a typed config");
        };
        assert_eq!(inspector.type_url, type_urls::TLS_INSPECTOR);
        let proxy_of = |chain: &FilterChain| {
            assert_eq!(chain.filters[0].name, "envoy.filters.network.tcp_proxy");
            assert_eq!(chain.transport_socket, None, "TLS passes through");
            let Some(filter::ConfigType::TypedConfig(any)) = &chain.filters[0].config_type else {
                panic!("a typed config");
            };
            assert_eq!(any.type_url, type_urls::TCP_PROXY);
            TcpProxy::decode(any.value.as_slice()).unwrap()
        };
        let [a, b] = &converted.filter_chains[..] else { panic!("two chains") };
        assert_eq!(b.filter_chain_match.as_ref().unwrap().server_names, ["b.example.test"]);
        let a = proxy_of(a);
        assert_eq!(a.stat_prefix, "tls-443");
        assert_eq!(a.cluster_specifier, Some(tcp_proxy::ClusterSpecifier::Cluster("ns/a/443/tcp".into())));
        let Some(tcp_proxy::ClusterSpecifier::WeightedClusters(weighted)) = proxy_of(b).cluster_specifier
        else {
            panic!("weighted clusters");
        };
        let weights: Vec<(&str, u32)> =
            weighted.clusters.iter().map(|c| (c.name.as_str(), c.weight)).collect();
        assert_eq!(weights, [("ns/a/443/tcp", 1), ("ns/b/443/tcp", 9)]);
    }

    /// An HTTPS listener of the core's rendering, as the server encodes it: the TLS inspector,
    /// a chain per server name with its SDS certificates over ADS, and the secrets with their
    /// keys inline; the snapshot knows the listener's route configurations and certificates.
    #[test]
    fn an_https_listener_and_its_secrets_survive_the_copy() {
        use envoy_operator_core::ir;
        use envoy_operator_core::xds::resources;

        let server = |name: &str, server_name, certificate: &str| ir::TlsServer {
            name: name.into(),
            server_name,
            certificates: vec![certificate.into()],
            virtual_hosts: Vec::new(),
        };
        let tls_secret = |name: &str| ir::TlsSecret {
            name: name.into(),
            certificate_chain: format!("chain of {name}"),
            private_key: format!("key of {name}"),
        };
        let fleet = ir::Fleet {
            listeners: vec![ir::Listener {
                name: "https".into(),
                port: 8443,
                access_log: false,
                virtual_hosts: Vec::new(),
                tls_servers: vec![
                    server("a", ir::Domain::Exact("a.example.test".into()), "ns/a"),
                    server("other", ir::Domain::Any, "ns/b"),
                ],
                passthrough: Vec::new(),
                outbound: None,
            }],
            backends: Vec::new(),
            secrets: vec![tls_secret("ns/a"), tls_secret("ns/b")],
        };
        let model = resources(&fleet);
        let converted = listener(&model.listeners[0]);

        let inspector = &converted.listener_filters[0];
        assert_eq!(inspector.name, "envoy.filters.listener.tls_inspector");
        let Some(listener_filter::ConfigType::TypedConfig(config)) = &inspector.config_type else {
            panic!("a typed config");
        };
        assert_eq!(config.type_url, type_urls::TLS_INSPECTOR);

        let [a, other] = &converted.filter_chains[..] else { panic!("two chains") };
        assert_eq!(a.filter_chain_match.as_ref().unwrap().server_names, ["a.example.test"]);
        assert_eq!(other.filter_chain_match, None, "the chain for any other name");
        let socket = a.transport_socket.as_ref().unwrap();
        assert_eq!(socket.name, "envoy.transport_sockets.tls");
        let Some(transport_socket::ConfigType::TypedConfig(tls)) = &socket.config_type else {
            panic!("a typed TLS context");
        };
        assert_eq!(tls.type_url, type_urls::DOWNSTREAM_TLS_CONTEXT);
        let context = DownstreamTlsContext::decode(tls.value.as_slice()).unwrap().common_tls_context.unwrap();
        assert_eq!(context.alpn_protocols, ["h2", "http/1.1"]);
        assert_eq!(context.validation_context_type, None, "no client certificate asked for");
        let [certificate] = &context.tls_certificate_sds_secret_configs[..] else { panic!("one") };
        assert_eq!(certificate.name, "ns/a");
        assert!(matches!(
            certificate.sds_config.as_ref().and_then(|source| source.config_source_specifier.as_ref()),
            Some(config_source::ConfigSourceSpecifier::Ads(_))
        ));
        let Some(filter::ConfigType::TypedConfig(manager)) = &a.filters[0].config_type else {
            panic!("a connection manager");
        };
        let manager = HttpConnectionManager::decode(manager.value.as_slice()).unwrap();
        let Some(http_connection_manager::RouteSpecifier::Rds(rds)) = manager.route_specifier else {
            panic!("RDS");
        };
        assert_eq!(rds.route_config_name, "https/a");

        let converted = secret(&model.secrets[0]);
        assert_eq!(converted.name, "ns/a");
        let Some(secret::Type::TlsCertificate(certificate)) = converted.r#type else {
            panic!("a certificate")
        };
        let inline = |source: Option<DataSource>| match source.and_then(|source| source.specifier) {
            Some(data_source::Specifier::InlineString(text)) => text,
            other => panic!("inline, not {other:?}"),
        };
        assert_eq!(inline(certificate.certificate_chain), "chain of ns/a");
        assert_eq!(inline(certificate.private_key), "key of ns/a");

        let snapshot = crate::xds::publish::snapshot(&model).expect("a consistent snapshot");
        let listener = snapshot.resources(type_urls::LISTENER).get("https").unwrap();
        let mut references: Vec<(&str, &str)> =
            listener.references().iter().map(|r| (r.type_url, r.name.as_str())).collect();
        references.sort();
        assert_eq!(
            references,
            [
                (type_urls::ROUTE_CONFIGURATION, "https/a"),
                (type_urls::ROUTE_CONFIGURATION, "https/other"),
                (type_urls::SECRET, "ns/a"),
                (type_urls::SECRET, "ns/b"),
            ]
        );
        assert_eq!(snapshot.resources(type_urls::SECRET).len(), 2);
        assert!(!format!("{snapshot:?}").contains("key of"), "the snapshot's Debug shows no key");
    }

    /// The bootstrap's clusters are the same model: their TLS and HTTP/2 survive the copy, and
    /// the core's type URLs are envoy-types' own.
    #[test]
    fn a_bootstrap_cluster_keeps_its_tls_and_protocol_options() {
        use envoy_operator_core::bootstrap::{ControlPlane, OPERATOR_XDS_CLUSTER, Xds, bootstrap};

        let control_plane = ControlPlane { host: "xds.ops.svc".into(), port: 18000 };
        let bootstrap = bootstrap(Xds::Operator {
            control_plane: &control_plane,
            fleet: "shop/edge",
            ca_sds_path: "/etc/envoy/xds-ca.yaml",
            identity_sds_path: "/etc/identity/xds-identity.yaml",
        });
        let xds =
            bootstrap.static_resources.clusters.iter().find(|c| c.name == OPERATOR_XDS_CLUSTER).unwrap();
        let converted = cluster(xds);
        assert_eq!(
            converted.cluster_discovery_type,
            Some(cluster::ClusterDiscoveryType::Type(cluster::DiscoveryType::StrictDns as i32))
        );
        let options = &converted.typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
        assert_eq!(options.type_url, type_urls::HTTP_PROTOCOL_OPTIONS);
        let Some(transport_socket::ConfigType::TypedConfig(tls)) =
            converted.transport_socket.unwrap().config_type
        else {
            panic!("a typed TLS context");
        };
        assert_eq!(tls.type_url, type_urls::UPSTREAM_TLS_CONTEXT);
        let tls = UpstreamTlsContext::decode(tls.value.as_slice()).unwrap();
        assert_eq!(tls.sni, "xds.ops.svc");
        let context = tls.common_tls_context.unwrap();
        let Some(common_tls_context::ValidationContextType::ValidationContextSdsSecretConfig(ca)) =
            context.validation_context_type
        else {
            panic!("the CA from SDS");
        };
        let Some(config_source::ConfigSourceSpecifier::PathConfigSource(path)) =
            ca.sds_config.unwrap().config_source_specifier
        else {
            panic!("an SDS file");
        };
        assert_eq!(path.path, "/etc/envoy/xds-ca.yaml");
        assert_eq!(path.watched_directory.unwrap().path, "/etc/envoy");
    }

    #[test]
    fn an_outbound_capture_restores_destinations_matches_on_them_and_passes_the_rest_through() {
        use envoy_operator_core::ir;
        use envoy_operator_core::xds::resources;

        let fleet = ir::Fleet {
            listeners: vec![ir::Listener {
                name: "outbound".into(),
                port: 15001,
                access_log: false,
                virtual_hosts: Vec::new(),
                tls_servers: Vec::new(),
                passthrough: Vec::new(),
                outbound: Some(ir::Outbound {
                    services: vec![ir::OutboundService {
                        name: "ns/web/80".into(),
                        addresses: vec!["10.96.0.40".parse().unwrap(), "fd00::40".parse().unwrap()],
                        port: 80,
                        virtual_hosts: Vec::new(),
                    }],
                }),
            }],
            ..Default::default()
        };
        let resources = resources(&fleet);
        let converted = listener(&resources.listeners[0]);
        let Some(listener_filter::ConfigType::TypedConfig(original)) =
            &converted.listener_filters[0].config_type
        else {
            panic!("a typed config");
        };
        assert_eq!(original.type_url, type_urls::ORIGINAL_DST);
        let matching = converted.filter_chains[0].filter_chain_match.clone().expect("a match");
        assert_eq!(matching.destination_port, Some(UInt32Value { value: 80 }));
        let ranges: Vec<(String, u32)> = matching
            .prefix_ranges
            .iter()
            .map(|range| (range.address_prefix.clone(), range.prefix_len.unwrap_or_default().value))
            .collect();
        assert_eq!(ranges, [("10.96.0.40".to_owned(), 32), ("fd00::40".to_owned(), 128)]);
        assert_eq!(converted.filter_chains[1].filter_chain_match, None, "the pass-through takes the rest");
        let passthrough = cluster(&resources.clusters[0]);
        assert_eq!(
            passthrough.cluster_discovery_type,
            Some(cluster::ClusterDiscoveryType::Type(cluster::DiscoveryType::OriginalDst as i32))
        );
        assert_eq!(passthrough.lb_policy, cluster::LbPolicy::ClusterProvided as i32);
    }
}
