//! A mesh sidecar's outbound capture ([`ir::Outbound`]): one listener on the port the pod's
//! outbound TCP is redirected to, whose `original_dst` listener filter gives each connection
//! back the destination the application opened it to. A filter chain per Service port a mesh
//! route takes, matched on that destination (the Service's cluster IPs and port), routes its
//! requests by that port's own route configuration; every other connection (the default
//! chain) is proxied unchanged to where it was headed ([`PASSTHROUGH_CLUSTER`], an
//! `ORIGINAL_DST` cluster), so a Service no route takes, or anything outside the cluster, is
//! reached as without the sidecar.

use super::cluster::CONNECT_TIMEOUT;
use super::listener::http_connection_manager;
use super::route::named_route_configuration;
use crate::envoy::{
    Address, CidrRange, Cluster, DiscoveryType, Filter, FilterChain, FilterChainMatch, LbPolicy, Listener,
    ListenerFilter, RouteConfiguration, TcpProxy, TcpProxyClusters,
};
use crate::ir;

/// The cluster of connections passed through to their original destination.
pub const PASSTHROUGH_CLUSTER: &str = "passthrough";
/// The default chain's name (and its TCP proxy's statistics prefix).
const PASSTHROUGH_CHAIN: &str = "passthrough";

pub fn listener(listener: &ir::Listener, outbound: &ir::Outbound) -> Listener {
    let mut filter_chains: Vec<FilterChain> = outbound
        .services
        .iter()
        .map(|service| FilterChain {
            name: service.name.clone(),
            filter_chain_match: Some(FilterChainMatch {
                destination_port: Some(u32::from(service.port)),
                prefix_ranges: service.addresses.iter().map(|ip| CidrRange::host(*ip)).collect(),
                ..FilterChainMatch::default()
            }),
            filters: vec![Filter::http_connection_manager(http_connection_manager(
                listener,
                route_configuration_name(&listener.name, &service.name),
            ))],
            transport_socket: None,
        })
        .collect();
    let passthrough = TcpProxy {
        stat_prefix: PASSTHROUGH_CHAIN.to_owned(),
        cluster_specifier: TcpProxyClusters::Cluster(PASSTHROUGH_CLUSTER.to_owned()),
    };
    filter_chains.push(FilterChain {
        name: PASSTHROUGH_CHAIN.to_owned(),
        ..FilterChain::of(vec![Filter::tcp_proxy(passthrough)])
    });
    Listener {
        name: listener.name.clone(),
        address: Address::socket("0.0.0.0", u32::from(listener.port)),
        listener_filters: vec![ListenerFilter::original_dst()],
        filter_chains,
    }
}

/// The route configuration of the Service port `service` on the listener `listener`.
pub fn route_configuration_name(listener: &str, service: &str) -> String {
    format!("{listener}/{service}")
}

/// One route configuration per Service port.
pub fn route_configurations(listener: &ir::Listener, outbound: &ir::Outbound) -> Vec<RouteConfiguration> {
    outbound
        .services
        .iter()
        .map(|service| {
            named_route_configuration(
                route_configuration_name(&listener.name, &service.name),
                &service.virtual_hosts,
            )
        })
        .collect()
}

/// [`passthrough_cluster`] for a fleet with an outbound capture.
pub fn passthrough_cluster_if(fleet: &ir::Fleet) -> Option<Cluster> {
    fleet.listeners.iter().any(|listener| listener.outbound.is_some()).then(passthrough_cluster)
}

/// Where a connection no chain routes goes: the destination it was opened to.
pub fn passthrough_cluster() -> Cluster {
    Cluster {
        name: PASSTHROUGH_CLUSTER.to_owned(),
        discovery_type: DiscoveryType::OriginalDst,
        connect_timeout: CONNECT_TIMEOUT,
        lb_policy: Some(LbPolicy::ClusterProvided),
        typed_extension_protocol_options: None,
        eds_cluster_config: None,
        load_assignment: None,
        transport_socket: None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::envoy::type_urls;
    use crate::ir::Domain;

    fn outbound_listener() -> ir::Listener {
        let service = |name: &str, ips: &[&str], port| ir::OutboundService {
            name: name.into(),
            addresses: ips.iter().map(|ip| ip.parse().unwrap()).collect(),
            port,
            virtual_hosts: vec![ir::VirtualHost { domain: Domain::Any, routes: Vec::new() }],
        };
        ir::Listener {
            name: "outbound".into(),
            port: 15001,
            access_log: false,
            virtual_hosts: Vec::new(),
            tls_servers: Vec::new(),
            passthrough: Vec::new(),
            outbound: Some(ir::Outbound {
                services: vec![
                    service("mesh/echo/80", &["10.96.0.20", "fd00::20"], 80),
                    service("mesh/echo/8080", &["10.96.0.20", "fd00::20"], 8080),
                ],
            }),
        }
    }

    #[test]
    fn a_chain_per_service_port_chosen_by_the_original_destination_and_the_rest_passes_through() {
        let fleet = ir::Fleet { listeners: vec![outbound_listener()], ..Default::default() };
        let resources = crate::xds::resources(&fleet);
        let listener = serde_json::to_value(&resources.listeners[0]).unwrap();
        assert_eq!(listener["address"]["socket_address"]["port_value"], 15001);
        assert_eq!(
            listener["listener_filters"],
            json!([{"name": "envoy.filters.listener.original_dst", "typed_config": {"@type": type_urls::ORIGINAL_DST}}])
        );
        let chains = listener["filter_chains"].as_array().unwrap();
        assert_eq!(chains.len(), 3);
        assert_eq!(
            chains[0]["filter_chain_match"],
            json!({"destination_port": 80, "prefix_ranges": [
                {"address_prefix": "10.96.0.20", "prefix_len": 32},
                {"address_prefix": "fd00::20", "prefix_len": 128}]})
        );
        let manager = &chains[1]["filters"][0]["typed_config"];
        assert_eq!(manager["rds"]["route_config_name"], "outbound/mesh/echo/8080");
        assert_eq!(chains[2]["name"], "passthrough");
        assert_eq!(chains[2].get("filter_chain_match"), None, "every other connection");
        assert_eq!(chains[2]["filters"][0]["typed_config"]["cluster"], PASSTHROUGH_CLUSTER);
        let routes: Vec<&str> = resources.route_configurations.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(routes, ["outbound/mesh/echo/80", "outbound/mesh/echo/8080"]);
        assert_eq!(resources.listeners[0].ads_route_configurations(), routes);
        let cluster = serde_json::to_value(&resources.clusters[0]).unwrap();
        assert_eq!(
            (cluster["name"].as_str(), cluster["type"].as_str(), cluster["lb_policy"].as_str()),
            (Some(PASSTHROUGH_CLUSTER), Some("ORIGINAL_DST"), Some("CLUSTER_PROVIDED"))
        );
    }

    #[test]
    fn with_no_route_every_connection_passes_through() {
        let mut listener = outbound_listener();
        listener.outbound = Some(ir::Outbound::default());
        let resources = crate::xds::resources(&ir::Fleet { listeners: vec![listener], ..Default::default() });
        let chains = &resources.listeners[0].filter_chains;
        assert_eq!(chains.len(), 1);
        assert_eq!(chains[0].name, "passthrough");
        assert!(resources.route_configurations.is_empty());
    }
}
