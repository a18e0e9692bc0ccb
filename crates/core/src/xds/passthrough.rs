//! TLS passthrough: the TLS inspector reads the name the client asks for (SNI), and a filter
//! chain per passthrough server, matched on its names, proxies the connection's bytes (TLS
//! untouched) to its backends, by weight; the share of backendRefs that do not resolve goes to
//! a cluster that does not exist, which Envoy's TCP proxy answers by closing the connection (as
//! the HTTP routes' share is answered with an error status). No connection manager, no route
//! configuration: the proxies never decrypt. A name no chain claims has no chain, and Envoy
//! closes the connection.
//!
//! As for HTTPS ([`super::tls`]), Envoy refuses a whole listener with two chains matching alike:
//! the IR promises distinct names, and a name repeated all the same is kept by its first server
//! only (a server left with none is dropped), so one broken promise costs one route, not the
//! fleet's updates.

use std::collections::BTreeSet;

use super::route::INVALID_BACKEND_CLUSTER;
use crate::envoy::{
    Address, Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter, TcpClusterWeight, TcpProxy,
    TcpProxyClusters, TcpWeightedClusters,
};
use crate::ir::{self, Domain};

pub fn listener(listener: &ir::Listener) -> Listener {
    let mut claimed: BTreeSet<&Domain> = BTreeSet::new();
    let filter_chains = listener
        .passthrough
        .iter()
        .filter_map(|server| {
            let names: Vec<&Domain> =
                server.server_names.iter().filter(|name| claimed.insert(*name)).collect();
            (!names.is_empty()).then(|| FilterChain {
                name: server.name.clone(),
                filter_chain_match: filter_chain_match(&names),
                filters: vec![Filter::tcp_proxy(tcp_proxy(&listener.name, server))],
                transport_socket: None,
            })
        })
        .collect();
    Listener {
        name: listener.name.clone(),
        address: Address::socket("0.0.0.0", u32::from(listener.port)),
        listener_filters: vec![ListenerFilter::tls_inspector()],
        filter_chains,
    }
}

/// The connections asking for `names`; with [`Domain::Any`] among them, every connection no
/// other chain takes (clients sending no name too): no criteria.
fn filter_chain_match(names: &[&Domain]) -> Option<FilterChainMatch> {
    if names.contains(&&Domain::Any) {
        return None;
    }
    Some(FilterChainMatch {
        server_names: names.iter().map(|name| name.to_string()).collect(),
        ..FilterChainMatch::default()
    })
}

/// One backend: its cluster; several, or a share that does not resolve: their weights (a
/// TLSRoute's weighted backendRefs).
fn tcp_proxy(stat_prefix: &str, server: &ir::PassthroughServer) -> TcpProxy {
    let cluster_specifier = match server.backends.as_slice() {
        [only] if server.unresolved_weight == 0 => TcpProxyClusters::Cluster(only.backend.clone()),
        [] => TcpProxyClusters::Cluster(INVALID_BACKEND_CLUSTER.to_owned()),
        backends => {
            let mut clusters: Vec<TcpClusterWeight> = backends
                .iter()
                .map(|backend| TcpClusterWeight { name: backend.backend.clone(), weight: backend.weight })
                .collect();
            if server.unresolved_weight > 0 {
                let name = INVALID_BACKEND_CLUSTER.to_owned();
                clusters.push(TcpClusterWeight { name, weight: server.unresolved_weight });
            }
            TcpProxyClusters::WeightedClusters(TcpWeightedClusters { clusters })
        }
    };
    TcpProxy { stat_prefix: stat_prefix.to_owned(), cluster_specifier }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::envoy::type_urls;

    fn server(name: &str, names: Vec<Domain>, backends: &[(&str, u32)]) -> ir::PassthroughServer {
        ir::PassthroughServer {
            name: name.into(),
            server_names: names,
            backends: backends
                .iter()
                .map(|(backend, weight)| ir::WeightedBackend::new(*backend, *weight))
                .collect(),
            unresolved_weight: 0,
        }
    }

    fn tls(servers: Vec<ir::PassthroughServer>) -> ir::Listener {
        ir::Listener {
            name: "tls-443".into(),
            port: 10443,
            access_log: true,
            virtual_hosts: Vec::new(),
            tls_servers: Vec::new(),
            passthrough: servers,
            outbound: None,
        }
    }

    #[test]
    fn each_server_is_a_tcp_proxy_chosen_by_sni_and_nothing_is_http() {
        let listener = tls(vec![
            server("shop/a", vec![Domain::Exact("a.example.com".into())], &[("shop/a/443/tcp", 1)]),
            server(
                "shop/b",
                vec![Domain::Exact("b.example.com".into()), Domain::Wildcard("b.example.com".into())],
                &[("shop/b/443/tcp", 3), ("shop/c/443/tcp", 1)],
            ),
        ]);
        let resources = crate::xds::resources(&ir::Fleet { listeners: vec![listener], ..Default::default() });
        assert!(resources.route_configurations.is_empty(), "passthrough is never routed as HTTP");
        let value = serde_json::to_value(&resources.listeners[0]).unwrap();
        assert_eq!(value["listener_filters"][0]["typed_config"]["@type"], type_urls::TLS_INSPECTOR);
        assert_eq!(value["address"]["socket_address"]["port_value"], 10443);
        let chains = value["filter_chains"].as_array().unwrap();
        assert_eq!(chains[0]["filter_chain_match"], json!({"server_names": ["a.example.com"]}));
        assert_eq!(chains[0].get("transport_socket"), None, "TLS is not terminated");
        assert_eq!(
            chains[0]["filters"][0],
            json!({"name": "envoy.filters.network.tcp_proxy", "typed_config": {
                "@type": type_urls::TCP_PROXY, "stat_prefix": "tls-443", "cluster": "shop/a/443/tcp"}})
        );
        assert_eq!(
            chains[1]["filter_chain_match"],
            json!({"server_names": ["b.example.com", "*.b.example.com"]})
        );
        assert_eq!(
            chains[1]["filters"][0]["typed_config"]["weighted_clusters"],
            json!({"clusters": [{"name": "shop/b/443/tcp", "weight": 3}, {"name": "shop/c/443/tcp", "weight": 1}]})
        );
        assert!(resources.listeners[0].ads_route_configurations().is_empty());
    }

    #[test]
    fn the_share_of_backends_that_do_not_resolve_goes_to_no_cluster_and_is_closed() {
        let mut partly =
            server("shop/a", vec![Domain::Exact("a.example.com".into())], &[("shop/a/443/tcp", 2)]);
        partly.unresolved_weight = 1;
        let mut none = server("shop/b", vec![Domain::Exact("b.example.com".into())], &[]);
        none.unresolved_weight = 1;
        let rendered = serde_json::to_value(super::listener(&tls(vec![partly, none]))).unwrap();
        let proxy = |i: usize| rendered["filter_chains"][i]["filters"][0]["typed_config"].clone();
        assert_eq!(
            proxy(0)["weighted_clusters"]["clusters"],
            json!([{"name": "shop/a/443/tcp", "weight": 2}, {"name": INVALID_BACKEND_CLUSTER, "weight": 1}])
        );
        assert_eq!(
            proxy(1)["cluster"],
            INVALID_BACKEND_CLUSTER,
            "the chain keeps its name: no wildcard takes it"
        );
    }

    #[test]
    fn a_name_claimed_twice_stays_with_its_first_server_and_any_matches_every_other() {
        let listener = tls(vec![
            server("shop/a", vec![Domain::Exact("a.example.com".into())], &[("shop/a/443/tcp", 1)]),
            server("shop/b", vec![Domain::Exact("a.example.com".into())], &[("shop/b/443/tcp", 1)]),
            server("shop/c", vec![Domain::Any], &[("shop/c/443/tcp", 1)]),
        ]);
        let rendered = super::listener(&listener);
        let names: Vec<&str> = rendered.filter_chains.iter().map(|chain| chain.name.as_str()).collect();
        assert_eq!(names, ["shop/a", "shop/c"]);
        assert_eq!(rendered.filter_chains[1].filter_chain_match, None);
    }
}
