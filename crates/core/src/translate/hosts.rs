//! Virtual hosts: each listener gets one per hostname of the routes attached to it, and in
//! each every rule × match of every route that serves the host, in Gateway API's order of
//! precedence.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;

use super::envoyroute::attach::CheckedRoute;
use super::envoyroute::rule;
use crate::api::route::PathMatchType;
use crate::ir::{self, Domain};
use crate::rules::route::EffectiveMatch;

/// A valid route and the listeners it is attached to.
#[derive(Clone, Debug)]
pub struct AttachedRoute<'a> {
    pub checked: &'a CheckedRoute,
    pub listeners: BTreeSet<String>,
}

/// Gives each listener the virtual hosts of the routes attached to it (none without routes:
/// the listener answers 404).
pub fn add_virtual_hosts(listeners: &mut [ir::Listener], attached: &[AttachedRoute<'_>]) {
    for listener in listeners {
        let routes: Vec<&CheckedRoute> =
            attached.iter().filter(|a| a.listeners.contains(&listener.name)).map(|a| a.checked).collect();
        listener.virtual_hosts = virtual_hosts(&routes);
    }
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
pub fn virtual_hosts(routes: &[&CheckedRoute]) -> Vec<ir::VirtualHost> {
    ordered_virtual_hosts(routes, HostnameOrder::MostSpecificFirst)
}

/// [`virtual_hosts`], with routes ordered by `order`.
pub fn ordered_virtual_hosts(routes: &[&CheckedRoute], order: HostnameOrder) -> Vec<ir::VirtualHost> {
    let hosts = RouteHosts::new(routes);
    hosts.domains().map(|domain| hosts.virtual_host(domain.clone(), order)).collect()
}

/// Routes indexed by the domains of their hostnames. The routes serving a domain are found by
/// one lookup per hostname that could cover it (the domain, its wildcard parents, every host),
/// not by a pass over every route: with a hostname per route, building a listener's hosts
/// would otherwise take routes² steps.
pub struct RouteHosts<'a> {
    routes: Vec<&'a CheckedRoute>,
    by_hostname: BTreeMap<Domain, Vec<usize>>,
}

impl<'a> RouteHosts<'a> {
    pub fn new(routes: &[&'a CheckedRoute]) -> Self {
        let mut by_hostname: BTreeMap<Domain, Vec<usize>> = BTreeMap::new();
        for (i, checked) in routes.iter().enumerate() {
            for hostname in Domain::of_route(&checked.route.effective().hostnames) {
                by_hostname.entry(hostname).or_default().push(i);
            }
        }
        Self { routes: routes.to_vec(), by_hostname }
    }

    /// The domains of the routes' hostnames, sorted, each once.
    pub fn domains(&self) -> impl Iterator<Item = &Domain> {
        self.by_hostname.keys()
    }

    /// The virtual host of `domain`: every rule × match of the routes whose hostnames cover
    /// it, in precedence order (none: every request for it is answered 404).
    pub fn virtual_host(&self, domain: Domain, order: HostnameOrder) -> ir::VirtualHost {
        let mut entries: Vec<(Precedence, ir::Route)> = Vec::new();
        for (checked, hostname) in self.serving(&domain) {
            let hostname = match order {
                HostnameOrder::MostSpecificFirst => hostname,
                HostnameOrder::Ignored => Domain::Any,
            };
            for (i, rule) in checked.route.effective().rules.iter().enumerate() {
                for (j, route_match) in rule.matches.iter().enumerate() {
                    if let Some(route) = rule::route(checked, i, j) {
                        entries.push((Precedence::of(&hostname, route_match, checked, i, j), route));
                    }
                }
            }
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        ir::VirtualHost { domain, routes: entries.into_iter().map(|(_, route)| route).collect() }
    }

    /// Each route whose hostnames cover `domain`, once, with the most specific of them.
    fn serving(&self, domain: &Domain) -> Vec<(&'a CheckedRoute, Domain)> {
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
    fn of(
        hostname: &Domain,
        route_match: &EffectiveMatch,
        checked: &CheckedRoute,
        rule: usize,
        index: usize,
    ) -> Self {
        let (path_type, path_length) = match route_match.path_type {
            PathMatchType::Exact => (PathRank::Exact, route_match.path.len()),
            PathMatchType::RegularExpression => (PathRank::RegularExpression, route_match.path.len()),
            // `/foo/` and `/foo` match the same requests.
            PathMatchType::PathPrefix => (PathRank::PathPrefix, route_match.path.trim_end_matches('/').len()),
        };
        let mut header_names: Vec<String> =
            route_match.headers.iter().map(|h| h.name.to_ascii_lowercase()).collect();
        header_names.sort();
        header_names.dedup();
        let mut query_names: Vec<&str> = route_match.query_params.iter().map(|q| q.name.as_str()).collect();
        query_names.sort_unstable();
        query_names.dedup();
        let created = checked.route.metadata.creation_timestamp.as_ref().map(|time| time.0);
        Self {
            hostname: Reverse(hostname.specificity()),
            path_type,
            path_length: Reverse(path_length),
            without_method: route_match.method.is_none(),
            headers: Reverse(header_names.len()),
            query_params: Reverse(query_names.len()),
            created: (created.is_none(), created),
            route: (checked.namespace().to_owned(), checked.name().to_owned()),
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
    use crate::xds::route::route_configuration;

    /// The listeners' route configurations, as Envoy gets them.
    fn route_configurations(listeners: &[String], attached: &[AttachedRoute<'_>]) -> Vec<RouteConfiguration> {
        let mut listeners: Vec<ir::Listener> = listeners
            .iter()
            .map(|name| ir::Listener {
                name: name.clone(),
                port: 8080,
                access_log: false,
                virtual_hosts: Vec::new(),
                tls_servers: Vec::new(),
            })
            .collect();
        add_virtual_hosts(&mut listeners, attached);
        listeners.iter().map(route_configuration).collect()
    }

    fn checked(name: &str, created: &str, spec: Value) -> CheckedRoute {
        let route: EnvoyRoute =
            serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
            "metadata": {"name": name, "namespace": "shop", "creationTimestamp": created}, "spec": spec}))
            .unwrap();
        CheckedRoute::new(&route, &[])
    }

    fn names(configuration: &RouteConfiguration, host: usize) -> Vec<String> {
        configuration.virtual_hosts[host].routes.iter().map(|r| r.name.clone()).collect()
    }

    fn attached<'a>(routes: &'a [CheckedRoute], listeners: &[&str]) -> Vec<AttachedRoute<'a>> {
        routes
            .iter()
            .map(|checked| AttachedRoute {
                checked,
                listeners: listeners.iter().map(|l| (*l).to_owned()).collect(),
            })
            .collect()
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
        let configurations = route_configurations(&["http".to_owned()], &attached(&routes, &["http"]));
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
        let configurations = route_configurations(&["http".to_owned()], &attached(&routes, &["http"]));
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
        let configurations = route_configurations(&listeners, &attached(&routes, &["http"]));
        assert_eq!(configurations.len(), 2);
        assert_eq!(configurations[0].name, "admin");
        assert!(configurations[0].virtual_hosts.is_empty(), "nothing attached: Envoy answers 404");
        assert_eq!(names(&configurations[1], 0), ["shop/web/rule/0/match/0"]);
    }
}
