//! Envoy resources for tests and examples, built with envoy-types' prost structs: an HTTP
//! listener whose routes come over ADS (RDS), route configurations, EDS clusters and their
//! endpoints.

use std::net::SocketAddr;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{ClusterDiscoveryType, DiscoveryType, EdsClusterConfig};
use envoy_types::pb::envoy::config::core::v3::address::Address as AddressKind;
use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
use envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier;
use envoy_types::pb::envoy::config::core::v3::{
    Address, AggregatedConfigSource, ApiVersion, ConfigSource, SocketAddress,
};
use envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier;
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints,
};
use envoy_types::pb::envoy::config::listener::v3::filter::ConfigType;
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener};
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::ClusterSpecifier;
use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use envoy_types::pb::envoy::config::route::v3::weighted_cluster::ClusterWeight;
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost, WeightedCluster,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_filter::ConfigType as HttpFilterConfigType;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds,
};
use envoy_types::pb::envoy::r#type::matcher::v3::RegexMatcher;
use envoy_types::pb::google::protobuf::{Duration, UInt32Value};
use envoy_types::util::pack_any;

/// Resources delivered over the ADS stream itself.
pub fn ads() -> ConfigSource {
    ConfigSource {
        config_source_specifier: Some(ConfigSourceSpecifier::Ads(AggregatedConfigSource {})),
        resource_api_version: ApiVersion::V3 as i32,
        ..Default::default()
    }
}

pub fn socket_address(address: SocketAddr) -> Address {
    Address {
        address: Some(AddressKind::SocketAddress(SocketAddress {
            address: address.ip().to_string(),
            port_specifier: Some(PortSpecifier::PortValue(u32::from(address.port()))),
            ..Default::default()
        })),
    }
}

/// A cluster whose endpoints come over ADS (EDS), named like its endpoints.
pub fn eds_cluster(name: &str) -> Cluster {
    Cluster {
        name: name.into(),
        connect_timeout: Some(Duration { seconds: 1, nanos: 0 }),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig { eds_config: Some(ads()), service_name: String::new() }),
        ..Default::default()
    }
}

pub fn endpoints(cluster: &str, addresses: &[SocketAddr]) -> ClusterLoadAssignment {
    let lb_endpoints = addresses
        .iter()
        .map(|address| LbEndpoint {
            host_identifier: Some(HostIdentifier::Endpoint(Endpoint {
                address: Some(socket_address(*address)),
                ..Default::default()
            })),
            ..Default::default()
        })
        .collect();
    ClusterLoadAssignment {
        cluster_name: cluster.into(),
        endpoints: vec![LocalityLbEndpoints { lb_endpoints, ..Default::default() }],
        ..Default::default()
    }
}

/// An HTTP listener on `address` routing with the route configuration `routes` (over ADS).
pub fn http_listener(name: &str, address: SocketAddr, routes: &str) -> Listener {
    let manager = HttpConnectionManager {
        stat_prefix: name.into(),
        route_specifier: Some(RouteSpecifier::Rds(Rds {
            config_source: Some(ads()),
            route_config_name: routes.into(),
        })),
        http_filters: vec![HttpFilter {
            name: "envoy.filters.http.router".into(),
            config_type: Some(HttpFilterConfigType::TypedConfig(pack_any(Router::default()))),
            ..Default::default()
        }],
        ..Default::default()
    };
    Listener {
        name: name.into(),
        address: Some(socket_address(address)),
        filter_chains: vec![FilterChain {
            filters: vec![Filter {
                name: "envoy.filters.network.http_connection_manager".into(),
                config_type: Some(ConfigType::TypedConfig(pack_any(manager))),
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// A route configuration with one virtual host for every domain.
pub fn route_config(name: &str, routes: Vec<Route>) -> RouteConfiguration {
    RouteConfiguration {
        name: name.into(),
        virtual_hosts: vec![VirtualHost {
            name: "all".into(),
            domains: vec!["*".into()],
            routes,
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn route(path: PathSpecifier, cluster: ClusterSpecifier) -> Route {
    Route {
        r#match: Some(RouteMatch { path_specifier: Some(path), ..Default::default() }),
        action: Some(Action::Route(RouteAction { cluster_specifier: Some(cluster), ..Default::default() })),
        ..Default::default()
    }
}

/// Requests whose path starts with `prefix` go to `cluster`.
pub fn prefix_route(prefix: &str, cluster: &str) -> Route {
    route(PathSpecifier::Prefix(prefix.into()), ClusterSpecifier::Cluster(cluster.into()))
}

/// Requests whose path starts with `prefix` are split between clusters by weight.
pub fn weighted_route(prefix: &str, weights: &[(&str, u32)]) -> Route {
    let clusters = weights
        .iter()
        .map(|(cluster, weight)| ClusterWeight {
            name: (*cluster).into(),
            weight: Some(UInt32Value { value: *weight }),
            ..Default::default()
        })
        .collect();
    route(
        PathSpecifier::Prefix(prefix.into()),
        ClusterSpecifier::WeightedClusters(WeightedCluster { clusters, ..Default::default() }),
    )
}

/// Requests whose whole path matches `regex` (RE2) go to `cluster`.
pub fn regex_route(regex: &str, cluster: &str) -> Route {
    route(
        PathSpecifier::SafeRegex(RegexMatcher { regex: regex.into(), ..Default::default() }),
        ClusterSpecifier::Cluster(cluster.into()),
    )
}
