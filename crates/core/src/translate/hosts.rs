//! Virtual hosts: each listener gets one per hostname of the routes attached to it, and in
//! each every rule × match of every route that serves the host, in Gateway API's order of
//! precedence.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use crate::ir::{self, Domain};
use crate::route::{Match, Route};

/// A route as a listener serves it: with the hostnames it serves there (its own, or their
/// intersection with a Gateway listener's).
#[derive(Clone, Copy, Debug)]
pub struct Served<'a> {
    pub route: &'a Route,
    pub hostnames: &'a [String],
}

/// How the routes serving one host are ordered by their matching hostnames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostnameOrder {
    /// Routes with a more specific matching hostname first, before any other criterion: an
    /// EnvoyRoute's documented order.
    MostSpecificFirst,
    /// The hostname picks the virtual host only; in it, every route that serves the host is
    /// ordered by its matches alone, as Gateway API's conformance suite checks for HTTPRoutes
    /// (`HTTPRouteMatchingAcrossRoutes`: `/v2` of a `*.com` route before `/` of an
    /// `example.com` route), and as Envoy Gateway does.
    Ignored,
}

/// One virtual host per domain of the routes, sorted, each with the routes that serve it.
pub fn virtual_hosts(routes: &[Served<'_>]) -> Vec<ir::VirtualHost> {
    ordered_virtual_hosts(routes, HostnameOrder::MostSpecificFirst)
}

/// [`virtual_hosts`], with routes ordered by `order`.
pub fn ordered_virtual_hosts(routes: &[Served<'_>], order: HostnameOrder) -> Vec<ir::VirtualHost> {
    let hosts = RouteHosts::new(routes);
    hosts.domains().map(|domain| hosts.virtual_host(domain.clone(), order)).collect()
}

/// Routes indexed by the domains of their hostnames. The routes serving a domain are found by
/// one lookup per hostname that could cover it (the domain, its wildcard parents, every host),
/// not by a pass over every route: with a hostname per route, building a listener's hosts
/// would otherwise take routes² steps.
pub struct RouteHosts<'a> {
    routes: Vec<&'a Route>,
    by_hostname: BTreeMap<Domain, Vec<usize>>,
}

impl<'a> RouteHosts<'a> {
    pub fn new(routes: &[Served<'a>]) -> Self {
        let mut by_hostname: BTreeMap<Domain, Vec<usize>> = BTreeMap::new();
        for (i, served) in routes.iter().enumerate() {
            for hostname in Domain::of_route(served.hostnames) {
                by_hostname.entry(hostname).or_default().push(i);
            }
        }
        Self { routes: routes.iter().map(|served| served.route).collect(), by_hostname }
    }

    /// The domains of the routes' hostnames, sorted, each once.
    pub fn domains(&self) -> impl Iterator<Item = &Domain> {
        self.by_hostname.keys()
    }

    /// The virtual host of `domain`: every rule × match of the routes whose hostnames cover
    /// it, in precedence order (none: every request for it is answered 404).
    pub fn virtual_host(&self, domain: Domain, order: HostnameOrder) -> ir::VirtualHost {
        let mut entries: Vec<(Precedence, ir::Route)> = Vec::new();
        for (route, hostname) in self.serving(&domain) {
            let hostname = match order {
                HostnameOrder::MostSpecificFirst => hostname,
                HostnameOrder::Ignored => Domain::Any,
            };
            for (i, rule) in route.rules.iter().enumerate() {
                for (j, route_match) in rule.matches.iter().enumerate() {
                    if let Some(ir_route) = route.ir_route(i, j) {
                        entries.push((Precedence::of(&hostname, route_match, route, i, j), ir_route));
                    }
                }
            }
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        ir::VirtualHost { domain, routes: entries.into_iter().map(|(_, route)| route).collect() }
    }

    /// Each route whose hostnames cover `domain`, once, with the most specific of them.
    fn serving(&self, domain: &Domain) -> Vec<(&'a Route, Domain)> {
        let mut serving: BTreeMap<usize, Domain> = BTreeMap::new();
        // Most specific first: a route's first hostname found is its most specific.
        for hostname in domain.covering() {
            for &i in self.by_hostname.get(&hostname).into_iter().flatten() {
                serving.entry(i).or_insert_with(|| hostname.clone());
            }
        }
        serving.into_iter().map(|(i, hostname)| (self.routes[i], hostname)).collect()
    }
}

/// Gateway API's precedence of a rule's match, most precedent first: the route's matching
/// hostname (non-wildcard characters, then characters); an `Exact` path, then a
/// `RegularExpression` path (Gateway API leaves its place to implementations; Envoy Gateway
/// puts it here too), then a `PathPrefix` path, longer paths first; a method; more header
/// matches; more query parameter matches; then the oldest route, the route first by
/// `<namespace>/<name>`, and the rule and match first in the route. Fields compare in this order.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Precedence {
    hostname: Reverse<(usize, usize)>,
    path_type: PathRank,
    path_length: Reverse<usize>,
    without_method: bool,
    headers: Reverse<usize>,
    query_params: Reverse<usize>,
    /// Routes without a creation time (not stored yet) come after every stored one.
    created: (bool, Option<Timestamp>),
    /// Namespace and name (HTTPRoutes of several namespaces may share a host).
    route: (String, String),
    rule: usize,
    route_match: usize,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum PathRank {
    Exact,
    RegularExpression,
    PathPrefix,
}

impl Precedence {
    /// `route_match` holds one header match per (lowercase) name and one query parameter match
    /// per name ([`Match`]), so their counts are those of distinct names.
    fn of(hostname: &Domain, route_match: &Match, route: &Route, rule: usize, index: usize) -> Self {
        let (path_type, path_length) = match &route_match.path {
            ir::PathMatch::Exact(path) => (PathRank::Exact, path.len()),
            ir::PathMatch::RegularExpression(path) => (PathRank::RegularExpression, path.len()),
            // `/foo/` and `/foo` match the same requests.
            ir::PathMatch::Prefix(path) => (PathRank::PathPrefix, path.trim_end_matches('/').len()),
        };
        Self {
            hostname: Reverse(hostname.specificity()),
            path_type,
            path_length: Reverse(path_length),
            without_method: route_match.method.is_none(),
            headers: Reverse(route_match.headers.len()),
            query_params: Reverse(route_match.query_params.len()),
            created: (route.created.is_none(), route.created),
            route: (route.namespace.clone(), route.name.clone()),
            rule,
            route_match: index,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::api::EnvoyRoute;
    use crate::envoy::RouteConfiguration;
    use crate::fleet::isolate::Rejections;
    use crate::translate::envoyroute::read::ReadEnvoyRoute;
    use crate::xds::route::route_configuration;

    /// The listeners' route configurations, as Envoy gets them.
    /// `attached` serve on the listeners named in `on`; the others answer 404.
    fn route_configurations(
        listeners: &[String],
        attached: (&[Served<'_>], &[&str]),
    ) -> Vec<RouteConfiguration> {
        let (routes, on) = attached;
        let listeners: Vec<ir::Listener> = listeners
            .iter()
            .map(|name| ir::Listener {
                name: name.clone(),
                port: 8080,
                access_log: false,
                virtual_hosts: if on.contains(&name.as_str()) { virtual_hosts(routes) } else { Vec::new() },
                tls_servers: Vec::new(),
                passthrough: Vec::new(),
                outbound: None,
            })
            .collect();
        listeners.iter().map(route_configuration).collect()
    }

    fn checked(name: &str, created: &str, spec: Value) -> Route {
        let route: EnvoyRoute =
            serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
            "metadata": {"name": name, "namespace": "shop", "creationTimestamp": created}, "spec": spec}))
            .unwrap();
        ReadEnvoyRoute::read(&route, &[], &Rejections::default()).route
    }

    fn names(configuration: &RouteConfiguration, host: usize) -> Vec<String> {
        configuration.virtual_hosts[host].routes.iter().map(|r| r.name.clone()).collect()
    }

    fn served(routes: &[Route]) -> Vec<Served<'_>> {
        routes.iter().map(|route| Served { route, hostnames: &route.hostnames }).collect()
    }

    #[test]
    fn matches_are_ordered_as_gateway_api_says() {
        let routes = [
            checked(
                "b-newer",
                "2024-01-02T00:00:00Z",
                json!({"rules": [
                    {"matches": [{"path": {"value": "/"}}]},
                    {"matches": [{"path": {"value": "/api"}, "headers": [{"name": "x-a", "value": "1"}]}]},
                ]}),
            ),
            checked(
                "a-older",
                "2024-01-01T00:00:00Z",
                json!({"rules": [
                    {"matches": [{"path": {"value": "/api"}}, {"path": {"value": "/api/v1/"}},
                                 {"path": {"type": "Exact", "value": "/"}}, {"path": {"type": "RegularExpression", "value": "/r.*"}},
                                 {"path": {"value": "/api"}, "method": "GET"}, {"path": {"value": "/api"}, "queryParams": [{"name": "q", "value": "1"}]}]},
                    {"matches": [{"path": {"value": "/"}}]},
                ]}),
            ),
        ];
        let configurations = route_configurations(&["http".to_owned()], (&served(&routes), &["http"]));
        assert_eq!(configurations.len(), 1);
        assert_eq!(configurations[0].virtual_hosts.len(), 1);
        assert_eq!(configurations[0].virtual_hosts[0].domains, ["*"]);
        assert_eq!(
            names(&configurations[0], 0),
            [
                "shop/a-older/rule/0/match/2", // Exact
                "shop/a-older/rule/0/match/3", // RegularExpression
                "shop/a-older/rule/0/match/1", // the longest prefix
                "shop/a-older/rule/0/match/4", // a method
                "shop/b-newer/rule/1/match/0", // a header match
                "shop/a-older/rule/0/match/5", // a query match
                "shop/a-older/rule/0/match/0", // /api, the older route
                "shop/a-older/rule/1/match/0", // `/`: the older route, then its rule order
                "shop/b-newer/rule/0/match/0",
            ]
        );
    }

    #[test]
    fn hosts_hold_every_route_that_serves_them_most_specific_first() {
        let routes = [
            checked(
                "exact",
                "2024-01-03T00:00:00Z",
                json!({"hostnames": ["shop.example.com"], "rules": [{"matches": [{"path": {"value": "/a"}}]}]}),
            ),
            checked(
                "wildcard",
                "2024-01-02T00:00:00Z",
                json!({"hostnames": ["*.example.com"], "rules": [{"matches": [{"path": {"type": "Exact", "value": "/b"}}]}]}),
            ),
            checked("any", "2024-01-01T00:00:00Z", json!({"rules": [{}]})),
            checked("elsewhere", "2024-01-01T00:00:00Z", json!({"hostnames": ["other.org"], "rules": [{}]})),
        ];
        let configurations = route_configurations(&["http".to_owned()], (&served(&routes), &["http"]));
        let hosts: Vec<(&str, &[String])> = configurations[0]
            .virtual_hosts
            .iter()
            .map(|host| (host.name.as_str(), host.domains.as_slice()))
            .collect();
        assert_eq!(
            hosts,
            [
                ("http/other.org", &["other.org".to_owned()][..]),
                ("http/shop.example.com", &["shop.example.com".to_owned()][..]),
                ("http/*.example.com", &["*.example.com".to_owned()][..]),
                ("http/*", &["*".to_owned()][..]),
            ]
        );
        assert_eq!(
            names(&configurations[0], 1),
            ["shop/exact/rule/0/match/0", "shop/wildcard/rule/0/match/0", "shop/any/rule/0/match/0"],
            "the exact hostname first, even before an Exact path of a wildcard hostname"
        );
        assert_eq!(names(&configurations[0], 2), ["shop/wildcard/rule/0/match/0", "shop/any/rule/0/match/0"]);
        assert_eq!(names(&configurations[0], 3), ["shop/any/rule/0/match/0"]);
        assert!(configurations[0].ignore_port_in_host_matching);
    }

    #[test]
    fn every_listener_has_its_configuration() {
        let routes = [checked("web", "2024-01-01T00:00:00Z", json!({"rules": [{}]}))];
        let listeners = ["admin".to_owned(), "http".to_owned()];
        let configurations = route_configurations(&listeners, (&served(&routes), &["http"]));
        assert_eq!(configurations.len(), 2);
        assert_eq!(configurations[0].name, "admin");
        assert!(configurations[0].virtual_hosts.is_empty(), "nothing attached: Envoy answers 404");
        assert_eq!(names(&configurations[1], 0), ["shop/web/rule/0/match/0"]);
    }
}
