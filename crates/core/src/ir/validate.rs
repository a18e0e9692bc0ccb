//! The IR's own checks: what every fleet the translation builds holds to, whichever route kind
//! it came from. A fleet that fails them is a translation bug, not a user's error: the
//! translators' tests and the golden files run every fleet they build through [`Fleet::validate`].

use std::collections::BTreeSet;

use super::{Action, BackendProtocol, Fleet, Listener, PathModifier, Redirect, VirtualHost};

impl Fleet {
    /// Every broken invariant, in words naming where: names unique where the rendering keys by
    /// them, every backend and certificate a route or server names present, lists sorted as
    /// documented, weights and shares in range.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        let backends: BTreeSet<&str> = self.backends.iter().map(|b| b.name.as_str()).collect();
        let tcp_backends: BTreeSet<&str> = self
            .backends
            .iter()
            .filter(|b| b.protocol == BackendProtocol::Tcp)
            .map(|b| b.name.as_str())
            .collect();
        let secrets: BTreeSet<&str> = self.secrets.iter().map(|s| s.name.as_str()).collect();
        sorted_unique("listeners", self.listeners.iter().map(|l| l.name.as_str()), &mut problems);
        sorted_unique("backends", self.backends.iter().map(|b| b.name.as_str()), &mut problems);
        sorted_unique("secrets", self.secrets.iter().map(|s| s.name.as_str()), &mut problems);
        let mut ports = BTreeSet::new();
        for listener in &self.listeners {
            if !ports.insert(listener.port) {
                problems.push(format!(
                    "listener {}: port {} is another listener's",
                    listener.name, listener.port
                ));
            }
            check_listener(listener, &backends, &secrets, &mut problems);
            check_passthrough(listener, &tcp_backends, &mut problems);
        }
        for backend in &self.backends {
            let endpoints = backend.endpoints.iter();
            if !endpoints.clone().zip(endpoints.skip(1)).all(|(a, b)| a < b) {
                problems.push(format!("backend {}: endpoints not sorted or repeated", backend.name));
            }
        }
        if problems.is_empty() { Ok(()) } else { Err(problems) }
    }
}

fn check_listener(
    listener: &Listener,
    backends: &BTreeSet<&str>,
    secrets: &BTreeSet<&str>,
    problems: &mut Vec<String>,
) {
    let at = format!("listener {}", listener.name);
    if !listener.tls_servers.is_empty() && !listener.virtual_hosts.is_empty() {
        problems.push(format!("{at}: both plain virtual hosts and TLS servers"));
    }
    if let Some(outbound) = &listener.outbound {
        let others = [
            !listener.virtual_hosts.is_empty(),
            !listener.tls_servers.is_empty(),
            !listener.passthrough.is_empty(),
        ];
        if others.contains(&true) {
            problems.push(format!("{at}: an outbound capture with other servers"));
        }
        sorted_unique(
            &format!("{at}: outbound services"),
            outbound.services.iter().map(|s| s.name.as_str()),
            problems,
        );
        let mut destinations = BTreeSet::new();
        for service in &outbound.services {
            let at = format!("{at}, outbound service {}", service.name);
            let addresses = service.addresses.iter();
            if service.addresses.is_empty() || !addresses.clone().zip(addresses.skip(1)).all(|(a, b)| a < b) {
                problems.push(format!("{at}: addresses empty, not sorted or repeated"));
            }
            for address in &service.addresses {
                if !destinations.insert((*address, service.port)) {
                    problems.push(format!("{at}: {address}:{} is another service's", service.port));
                }
            }
            check_virtual_hosts(&at, &service.virtual_hosts, backends, problems);
        }
    }
    check_virtual_hosts(&at, &listener.virtual_hosts, backends, problems);
    sorted_unique(
        &format!("{at}: TLS servers"),
        listener.tls_servers.iter().map(|s| s.name.as_str()),
        problems,
    );
    let mut server_names = BTreeSet::new();
    for server in &listener.tls_servers {
        let at = format!("{at}, TLS server {}", server.name);
        if !server_names.insert(&server.server_name) {
            problems.push(format!("{at}: server name {} is another server's", server.server_name));
        }
        if server.certificates.is_empty() {
            problems.push(format!("{at}: no certificate"));
        }
        for certificate in server.certificates.iter().filter(|c| !secrets.contains(c.as_str())) {
            problems.push(format!("{at}: certificate {certificate} is not among the fleet's secrets"));
        }
        check_virtual_hosts(&at, &server.virtual_hosts, backends, problems);
    }
}

/// A passthrough listener: nothing HTTP on it, its servers' names disjoint (Envoy refuses
/// alike filter chains), every backend a TCP one of the fleet.
fn check_passthrough(listener: &Listener, tcp_backends: &BTreeSet<&str>, problems: &mut Vec<String>) {
    if listener.passthrough.is_empty() {
        return;
    }
    let at = format!("listener {}", listener.name);
    if !listener.virtual_hosts.is_empty() || !listener.tls_servers.is_empty() {
        problems.push(format!("{at}: TLS passthrough beside HTTP virtual hosts or TLS servers"));
    }
    sorted_unique(
        &format!("{at}: passthrough servers"),
        listener.passthrough.iter().map(|s| s.name.as_str()),
        problems,
    );
    let mut claimed = BTreeSet::new();
    for server in &listener.passthrough {
        let at = format!("{at}, passthrough server {}", server.name);
        if server.server_names.is_empty() {
            problems.push(format!("{at}: no server name"));
        }
        if !server.server_names.windows(2).all(|pair| pair[0] < pair[1]) {
            problems.push(format!("{at}: server names not sorted or repeated"));
        }
        for name in &server.server_names {
            if !claimed.insert(name) {
                problems.push(format!("{at}: server name {name} is another server's"));
            }
        }
        if server.backends.is_empty() && server.unresolved_weight == 0 {
            problems.push(format!("{at}: no backend, and no share to close"));
        }
        for backend in &server.backends {
            if backend.weight == 0 {
                problems.push(format!("{at}: backend {} has weight 0", backend.backend));
            }
            if !tcp_backends.contains(backend.backend.as_str()) {
                problems
                    .push(format!("{at}: backend {} is not among the fleet's TCP backends", backend.backend));
            }
        }
    }
}

fn check_virtual_hosts(
    at: &str,
    hosts: &[VirtualHost],
    backends: &BTreeSet<&str>,
    problems: &mut Vec<String>,
) {
    if !hosts.windows(2).all(|pair| pair[0].domain < pair[1].domain) {
        problems.push(format!("{at}: virtual hosts not sorted by domain or repeated"));
    }
    for host in hosts {
        let at = format!("{at}, virtual host {}", host.domain);
        let mut names = BTreeSet::new();
        for route in &host.routes {
            let at = format!("{at}, route {}", route.name);
            if !names.insert(&route.name) {
                problems.push(format!("{at}: the name is another route's"));
            }
            match &route.action {
                Action::Forward(forward) => {
                    for backend in &forward.backends {
                        if backend.weight == 0 {
                            problems.push(format!("{at}: backend {} has weight 0", backend.backend));
                        }
                        if !backends.contains(backend.backend.as_str()) {
                            problems
                                .push(format!("{at}: backend {} is not among the fleet's", backend.backend));
                        }
                    }
                    for mirror in &forward.mirrors {
                        if !backends.contains(mirror.backend.as_str()) {
                            problems.push(format!(
                                "{at}: mirror {} is not among the fleet's backends",
                                mirror.backend
                            ));
                        }
                        if mirror.share.is_some_and(|share| {
                            share.denominator == 0 || share.numerator > share.denominator
                        }) {
                            problems.push(format!(
                                "{at}: mirror {} copies no share of 0 to 100%",
                                mirror.backend
                            ));
                        }
                    }
                    if let Some(PathModifier::ReplaceFullPath(path) | PathModifier::ReplacePrefixMatch(path)) =
                        &forward.path_rewrite
                        && !path.is_empty()
                        && !path.starts_with('/')
                    {
                        problems.push(format!("{at}: path rewrite {path:?} does not start with /"));
                    }
                }
                Action::Redirect(Redirect { status_code, .. }) => {
                    if !matches!(status_code, 301 | 302) {
                        problems.push(format!("{at}: redirect status {status_code} is neither 301 nor 302"));
                    }
                }
            }
        }
    }
}

fn sorted_unique<'a>(what: &str, names: impl Iterator<Item = &'a str> + Clone, problems: &mut Vec<String>) {
    if !names.clone().zip(names.skip(1)).all(|(a, b)| a < b) {
        problems.push(format!("{what}: not sorted by name, or a name repeats"));
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;

    fn fleet() -> Fleet {
        let route = |backend: &str| Route {
            name: "shop/web/rule/0/match/0".into(),
            path: PathMatch::Prefix("/".into()),
            method: None,
            headers: vec![],
            query_params: vec![],
            request_headers: HeaderChanges::default(),
            response_headers: HeaderChanges::default(),
            action: Action::Forward(Forward {
                backends: vec![WeightedBackend::new(backend, 1)],
                unresolved_weight: 0,
                unresolved_answer: Default::default(),
                timeout: None,
                backend_timeout: None,
                host_rewrite: None,
                path_rewrite: None,
                mirrors: vec![],
            }),
        };
        Fleet {
            listeners: vec![Listener {
                name: "http".into(),
                port: 8080,
                access_log: true,
                virtual_hosts: vec![VirtualHost { domain: Domain::Any, routes: vec![route("shop/web/80")] }],
                tls_servers: vec![],
                passthrough: vec![],
                outbound: None,
            }],
            backends: vec![Backend {
                name: "shop/web/80".into(),
                protocol: Default::default(),
                endpoints: vec![],
            }],
            secrets: vec![],
        }
    }

    #[test]
    fn a_translated_fleet_holds_together_and_a_dangling_backend_is_named() {
        assert_eq!(fleet().validate(), Ok(()));
        let mut broken = fleet();
        broken.backends.clear();
        broken.listeners.push(broken.listeners[0].clone());
        assert_eq!(
            broken.validate(),
            Err(vec![
                "listeners: not sorted by name, or a name repeats".to_owned(),
                "listener http, virtual host *, route shop/web/rule/0/match/0: backend shop/web/80 is not among the fleet's".to_owned(),
                "listener http: port 8080 is another listener's".to_owned(),
                "listener http, virtual host *, route shop/web/rule/0/match/0: backend shop/web/80 is not among the fleet's".to_owned(),
            ])
        );
    }

    #[test]
    fn passthrough_servers_take_disjoint_names_to_tcp_backends_only() {
        let server = |name: &str, names: &[&str], backend: &str| PassthroughServer {
            name: name.into(),
            server_names: names.iter().map(|n| Domain::Exact((*n).into())).collect(),
            backends: vec![WeightedBackend::new(backend, 1)],
            unresolved_weight: 0,
        };
        let mut fleet = fleet();
        let tcp =
            Backend { name: "shop/tls/443/tcp".into(), protocol: BackendProtocol::Tcp, endpoints: vec![] };
        fleet.backends.insert(0, tcp);
        fleet.listeners.push(Listener {
            name: "tls-443".into(),
            port: 8443,
            access_log: true,
            virtual_hosts: vec![],
            tls_servers: vec![],
            passthrough: vec![
                server("shop/a", &["a.example.com"], "shop/tls/443/tcp"),
                server("shop/b", &["b.example.com"], "shop/tls/443/tcp"),
            ],
            outbound: None,
        });
        assert_eq!(fleet.validate(), Ok(()));
        let passthrough = &mut fleet.listeners[1].passthrough;
        passthrough[1] = server("shop/b", &["a.example.com"], "shop/web/80");
        assert_eq!(
            fleet.validate(),
            Err(vec![
                "listener tls-443, passthrough server shop/b: server name a.example.com is another server's".to_owned(),
                "listener tls-443, passthrough server shop/b: backend shop/web/80 is not among the fleet's TCP backends".to_owned(),
            ])
        );
    }

    #[test]
    fn the_printed_form_redacts_keys() {
        let mut fleet = fleet();
        fleet.secrets.push(TlsSecret {
            name: "shop/cert".into(),
            certificate_chain: "-----BEGIN CERTIFICATE-----".into(),
            private_key: "-----BEGIN PRIVATE KEY-----secret".into(),
        });
        let printed = fleet.to_yaml();
        assert!(!printed.contains("PRIVATE KEY"), "{printed}");
        assert!(printed.contains("private_key: <redacted>"), "{printed}");
        assert!(printed.contains("certificate_chain: <27 bytes>"), "{printed}");
        assert!(printed.contains("domain: '*'") || printed.contains("domain: \"*\""), "{printed}");
    }
}
