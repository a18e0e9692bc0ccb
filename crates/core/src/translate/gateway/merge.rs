//! A Gateway's IR: its served listeners merged by port, one IR listener per port, as Envoy
//! Gateway merges them. A plain-HTTP port serves the virtual hosts of every listener on it,
//! each host with the routes of the listener a request for it belongs to (the one with the
//! most specific matching hostname), so routes of a less specific listener never answer for a
//! more specific one's hostname. An HTTPS port has one TLS server per listener, chosen by SNI,
//! each with its own listener's routes. A TLS (passthrough) port has a TCP proxy per TLSRoute,
//! chosen by the names it serves ([`passthrough_servers`]). In a host, routes are ordered by their matches alone
//! ([`HostnameOrder::Ignored`]), as Gateway API orders matches across HTTPRoutes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::listeners::{JudgedListener, Protocol};
use crate::ir::{self, Domain};
use crate::route::ClusterKey;
use crate::translate::endpoints;
use crate::translate::hosts::{self as routes, Served};
use crate::translate::hosts::{HostnameOrder, RouteHosts};

/// The fleet's IR: `attached` holds, per listener (by index), the routes attached to it as they
/// serve there.
pub fn fleet(
    listeners: &[JudgedListener],
    attached: &BTreeMap<usize, Vec<Served>>,
    access_log: bool,
    services: &[Arc<Service>],
    slices: &[Arc<EndpointSlice>],
) -> ir::Fleet {
    let mut by_port: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    for (i, listener) in listeners.iter().enumerate().filter(|(_, l)| l.served()) {
        by_port.entry(listener.port).or_default().push(i);
    }
    let routes_of = |i: usize| -> &[Served] { attached.get(&i).map(Vec::as_slice).unwrap_or_default() };

    let mut ir_listeners = Vec::new();
    let mut secrets: Vec<ir::TlsSecret> = Vec::new();
    for indices in by_port.values() {
        let first = &listeners[indices[0]];
        let Ok(port) = u16::try_from(first.container_port) else { continue };
        let mut listener = ir::Listener {
            name: first.port_name(),
            port,
            access_log,
            virtual_hosts: Vec::new(),
            tls_servers: Vec::new(),
            passthrough: Vec::new(),
            outbound: None,
        };
        match first.protocol {
            Some(Protocol::Tls) => {
                let served: Vec<&Served> = indices.iter().flat_map(|&i| routes_of(i)).collect();
                listener.passthrough = passthrough_servers(&served);
            }
            Some(Protocol::Https) => {
                for &i in indices {
                    let served = &listeners[i];
                    secrets.extend(served.certificates.iter().cloned());
                    listener.tls_servers.push(ir::TlsServer {
                        name: served.name.clone(),
                        server_name: served.domain(),
                        certificates: served.certificates.iter().map(|c| c.name.clone()).collect(),
                        virtual_hosts: routes::ordered_virtual_hosts(routes_of(i), HostnameOrder::Ignored),
                    });
                }
                listener.tls_servers.sort_by(|a, b| a.name.cmp(&b.name));
            }
            _ => {
                let on_port: Vec<(Domain, &[Served])> =
                    indices.iter().map(|&i| (listeners[i].domain(), routes_of(i))).collect();
                listener.virtual_hosts = http_virtual_hosts(&on_port);
            }
        }
        keep_listener_port_in_redirects(&mut listener, first);
        ir_listeners.push(listener);
    }
    ir_listeners.sort_by(|a, b| a.name.cmp(&b.name));
    secrets.sort_by(|a, b| a.name.cmp(&b.name));
    secrets.dedup_by(|a, b| a.name == b.name);

    let used: Vec<ClusterKey> = by_port
        .values()
        .flatten()
        .flat_map(|&i| routes_of(i))
        .flat_map(|served| served.route.used_clusters().into_iter().cloned())
        .collect();
    ir::Fleet { listeners: ir_listeners, backends: endpoints::backends(&used, services, slices), secrets }
}

/// The passthrough servers of a TLS port: one per TLSRoute attached to a listener on it, taking
/// the names it serves there (on every such listener), to the backends of its rules. A name two
/// routes serve goes to the older (Gateway API's order between routes), as Envoy takes a name
/// to one chain only; a route left with no name has no server. A route whose backends all
/// weigh 0 has none either: no chain takes its names, and their connections are closed.
fn passthrough_servers(served: &[&Served]) -> Vec<ir::PassthroughServer> {
    let mut by_route: BTreeMap<(bool, Option<k8s_openapi::jiff::Timestamp>, String), BTreeSet<Domain>> =
        BTreeMap::new();
    let mut routes: BTreeMap<String, &Served> = BTreeMap::new();
    for route in served {
        let name = format!("{}/{}", route.route.namespace, route.route.name);
        let age = (route.route.created.is_none(), route.route.created, name.clone());
        let names = by_route.entry(age).or_default();
        if route.hostnames.is_empty() {
            names.insert(Domain::Any);
        }
        names.extend(route.hostnames.iter().map(|hostname| Domain::of_hostname(hostname)));
        routes.insert(name, route);
    }
    let mut claimed: BTreeSet<Domain> = BTreeSet::new();
    let mut servers: Vec<ir::PassthroughServer> = by_route
        .into_iter()
        .filter_map(|((_, _, name), names)| {
            let server_names: Vec<Domain> = names.into_iter().filter(|n| claimed.insert(n.clone())).collect();
            let (backends, unresolved_weight) = routes[&name].route.passthrough_backends();
            (!server_names.is_empty() && (!backends.is_empty() || unresolved_weight > 0))
                .then_some(ir::PassthroughServer { name, server_names, backends, unresolved_weight })
        })
        .collect();
    servers.sort_by(|a, b| a.name.cmp(&b.name));
    servers
}

/// The virtual hosts of a plain-HTTP port shared by listeners (their domain, and the routes
/// attached to each). Every domain of a route gets a host, with the routes of the listener
/// owning that domain: the most specific listener covering it. A listener's own hostname gets
/// a host too where a less specific domain would otherwise take its requests (answered 404
/// when none of its routes serves it).
fn http_virtual_hosts(on_port: &[(Domain, &[Served])]) -> Vec<ir::VirtualHost> {
    let listeners: Vec<(&Domain, RouteHosts)> =
        on_port.iter().map(|(domain, routes)| (domain, RouteHosts::new(routes))).collect();
    let mut domains: BTreeSet<Domain> =
        listeners.iter().flat_map(|(_, hosts)| hosts.domains()).cloned().collect();
    let shadowed: Vec<Domain> = on_port
        .iter()
        .map(|(domain, _)| domain)
        .filter(|domain| **domain != Domain::Any && !domains.contains(domain))
        .filter(|domain| domains.iter().any(|other| other.covers(domain)))
        .cloned()
        .collect();
    domains.extend(shadowed);
    domains
        .into_iter()
        .map(|domain| {
            let owner = listeners
                .iter()
                .filter(|(listener, _)| listener.covers(&domain))
                .max_by_key(|(listener, _)| listener.specificity());
            match owner {
                Some((_, hosts)) => hosts.virtual_host(domain, HostnameOrder::Ignored),
                None => ir::VirtualHost { domain, routes: Vec::new() },
            }
        })
        .collect()
}

/// Gateway API's rule for a redirect's port when the filter names neither port nor scheme: the
/// Gateway listener's port. Envoy keeps the request's `Host`, port and all, unless the redirect
/// names a hostname: then it drops the port, so the listener's is written into those redirects,
/// except where it is the well-known port of the listener's scheme (80, 443), which a location
/// leaves out (`http://example.org/`, not `http://example.org:80/`).
fn keep_listener_port_in_redirects(listener: &mut ir::Listener, on: &JudgedListener) {
    let well_known = match on.protocol {
        Some(Protocol::Https) => 443,
        _ => 80,
    };
    let Ok(port) = u32::try_from(on.port) else { return };
    if port == well_known {
        return;
    }
    let hosts = listener
        .virtual_hosts
        .iter_mut()
        .chain(listener.tls_servers.iter_mut().flat_map(|s| &mut s.virtual_hosts));
    for route in hosts.flat_map(|host| &mut host.routes) {
        if let ir::Action::Redirect(redirect) = &mut route.action
            && redirect.hostname.is_some()
            && redirect.scheme.is_none()
            && redirect.port.is_none()
        {
            redirect.port = Some(port);
        }
    }
}
