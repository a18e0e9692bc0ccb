//! The last step of the translation: a fleet's IR as Envoy's resources. Every decision on
//! what the proxies do is the IR's; here only how Envoy is told to do it. Knows no route kind.
//!
//! - [`listener`]: a listener per IR listener, routed by RDS (per TLS server, for HTTPS);
//! - [`route`]: its route configurations, virtual hosts and routes;
//! - [`tls`]: the TLS servers' filter chains, certificates (SDS) and secrets;
//! - [`passthrough`]: a TLS passthrough listener, a TCP proxy per server name chosen by SNI;
//! - [`outbound`]: a mesh sidecar's capture of its pod's outbound connections;
//! - [`cluster`]: an EDS cluster and its assignment per backend.

pub mod cluster;
pub mod listener;
pub mod outbound;
pub mod passthrough;
pub mod route;
pub mod tls;

use std::collections::BTreeSet;

use serde::{Serialize, Serializer};

use crate::envoy::{
    Cluster, ClusterLoadAssignment, DataSource, Listener, RouteConfiguration, Secret, SecretKind,
    TlsCertificate,
};
use crate::ir;

/// A fleet's xDS resources, the five types each sorted by name.
///
/// Its JSON form (golden files, `render`) shows each secret's certificate chain but never its
/// private key: the key reaches Envoy only in the encoded SDS resource.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Resources {
    pub listeners: Vec<Listener>,
    pub route_configurations: Vec<RouteConfiguration>,
    pub clusters: Vec<Cluster>,
    pub cluster_load_assignments: Vec<ClusterLoadAssignment>,
    /// The certificates of the HTTPS listeners' TLS servers (SDS).
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "without_private_keys")]
    pub secrets: Vec<Secret>,
}

/// The fleet's resources: per listener, a listener and its route configurations; per backend,
/// a cluster and its endpoints; per certificate, a secret. A TLS server naming a certificate
/// the fleet lacks presents only those it has, or is left out with none ([`tls`]).
pub fn resources(fleet: &ir::Fleet) -> Resources {
    let secrets: BTreeSet<&str> = fleet.secrets.iter().map(|secret| secret.name.as_str()).collect();
    let listeners: Vec<_> =
        fleet.listeners.iter().filter_map(|listener| tls::servable(listener, &secrets)).collect();
    let mut route_configurations: Vec<RouteConfiguration> =
        listeners.iter().flat_map(|listener| route::route_configurations(listener)).collect();
    route_configurations.sort_by(|a, b| a.name.cmp(&b.name));
    let mut clusters: Vec<Cluster> = fleet.backends.iter().map(cluster::cluster).collect();
    // A backend is `<namespace>/<service>/<port>`: never the pass-through's name.
    clusters.extend(outbound::passthrough_cluster_if(fleet));
    clusters.sort_by(|a, b| a.name.cmp(&b.name));
    Resources {
        listeners: listeners.iter().map(|listener| listener::listener(listener)).collect(),
        route_configurations,
        clusters,
        cluster_load_assignments: fleet.backends.iter().map(cluster::cluster_load_assignment).collect(),
        secrets: fleet.secrets.iter().map(tls::secret).collect(),
    }
}

/// What a private key shows in the resources' JSON form.
pub const REDACTED: &str = "<redacted>";

fn without_private_keys<S: Serializer>(secrets: &[Secret], serializer: S) -> Result<S::Ok, S::Error> {
    let redacted: Vec<Secret> = secrets
        .iter()
        .map(|secret| match &secret.kind {
            SecretKind::TlsCertificate(certificate) => Secret {
                name: secret.name.clone(),
                kind: SecretKind::TlsCertificate(TlsCertificate {
                    certificate_chain: certificate.certificate_chain.clone(),
                    private_key: DataSource { inline_string: REDACTED.to_owned() },
                }),
            },
            SecretKind::ValidationContext(_) => secret.clone(),
        })
        .collect();
    redacted.serialize(serializer)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::envoy::type_urls;
    use crate::ir::Domain;

    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleQ==\n-----END PRIVATE KEY-----\n";

    fn secret(name: &str) -> ir::TlsSecret {
        ir::TlsSecret {
            name: name.into(),
            certificate_chain: format!("-----BEGIN CERTIFICATE-----\n{name}\n-----END CERTIFICATE-----\n"),
            private_key: KEY.into(),
        }
    }

    fn server(name: &str, server_name: Domain, certificates: &[&str]) -> ir::TlsServer {
        ir::TlsServer {
            name: name.into(),
            server_name,
            certificates: certificates.iter().map(|c| (*c).to_owned()).collect(),
            virtual_hosts: vec![ir::VirtualHost { domain: Domain::Any, routes: Vec::new() }],
        }
    }

    fn https(servers: Vec<ir::TlsServer>) -> ir::Listener {
        ir::Listener {
            name: "https".into(),
            port: 8443,
            access_log: false,
            virtual_hosts: Vec::new(),
            tls_servers: servers,
            passthrough: Vec::new(),
            outbound: None,
        }
    }

    fn fleet(listeners: Vec<ir::Listener>, secrets: &[&str]) -> ir::Fleet {
        ir::Fleet { listeners, backends: Vec::new(), secrets: secrets.iter().map(|s| secret(s)).collect() }
    }

    fn shop() -> ir::Fleet {
        let plain = ir::Listener {
            name: "http".into(),
            port: 8080,
            access_log: true,
            virtual_hosts: Vec::new(),
            tls_servers: Vec::new(),
            passthrough: Vec::new(),
            outbound: None,
        };
        let servers = vec![
            server("any", Domain::Any, &["shop/fallback"]),
            server("shop", Domain::Exact("shop.example.com".into()), &["shop/shop", "shop/shop-ec"]),
            server("wild", Domain::Wildcard("example.com".into()), &["shop/wild"]),
        ];
        fleet(vec![plain, https(servers)], &["shop/fallback", "shop/shop", "shop/shop-ec", "shop/wild"])
    }

    fn route_names(resources: &Resources) -> Vec<&str> {
        resources.route_configurations.iter().map(|r| r.name.as_str()).collect()
    }

    #[test]
    fn an_https_listener_has_a_chain_per_tls_server_chosen_by_sni() {
        let resources = resources(&shop());
        let https = serde_json::to_value(&resources.listeners[1]).unwrap();
        assert_eq!(
            https["listener_filters"],
            json!([{"name": "envoy.filters.listener.tls_inspector",
                    "typed_config": {"@type": type_urls::TLS_INSPECTOR}}])
        );
        let chains = https["filter_chains"].as_array().unwrap();
        let names: Vec<&str> = chains.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["any", "shop", "wild"]);
        assert_eq!(chains[0].get("filter_chain_match"), None, "Any: the chain for every other name");
        assert_eq!(chains[1]["filter_chain_match"], json!({"server_names": ["shop.example.com"]}));
        assert_eq!(chains[2]["filter_chain_match"], json!({"server_names": ["*.example.com"]}));

        let ads = json!({"ads": {}, "resource_api_version": "V3"});
        assert_eq!(
            chains[1]["transport_socket"],
            json!({"name": "envoy.transport_sockets.tls", "typed_config": {
                "@type": type_urls::DOWNSTREAM_TLS_CONTEXT,
                "common_tls_context": {
                    "alpn_protocols": ["h2", "http/1.1"],
                    "tls_certificate_sds_secret_configs": [
                        {"name": "shop/shop", "sds_config": ads}, {"name": "shop/shop-ec", "sds_config": ads}
                    ]
                }
            }})
        );
        let manager = &chains[1]["filters"][0]["typed_config"];
        assert_eq!(manager["rds"], json!({"config_source": ads, "route_config_name": "https/shop"}));
        assert_eq!(manager["stat_prefix"], "https");
    }

    #[test]
    fn each_tls_server_routes_by_its_own_route_configuration_which_the_listener_references() {
        let resources = resources(&shop());
        assert_eq!(route_names(&resources), ["http", "https/any", "https/shop", "https/wild"]);
        assert_eq!(resources.route_configurations[2].virtual_hosts[0].name, "https/shop/*");
        let [http, https] = &resources.listeners[..] else { panic!("two listeners") };
        assert_eq!(http.ads_route_configurations(), ["http"]);
        assert_eq!(https.ads_route_configurations(), ["https/any", "https/shop", "https/wild"]);
        assert_eq!(https.ads_secrets(), ["shop/fallback", "shop/shop", "shop/shop-ec", "shop/wild"]);
        assert!(http.ads_secrets().is_empty());
    }

    #[test]
    fn a_plain_listener_is_rendered_as_before() {
        let resources = resources(&shop());
        let http = serde_json::to_value(&resources.listeners[0]).unwrap();
        assert_eq!(http.get("listener_filters"), None);
        let chain = http["filter_chains"][0].as_object().unwrap();
        assert_eq!(chain.keys().collect::<Vec<_>>(), ["filters"], "no name, match or TLS: {chain:?}");
        assert_eq!(chain["filters"][0]["typed_config"]["rds"]["route_config_name"], "http");
    }

    #[test]
    fn the_fleets_certificates_are_its_secrets_and_no_debug_or_json_shows_a_key() {
        let resources = resources(&shop());
        let names: Vec<&str> = resources.secrets.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["shop/fallback", "shop/shop", "shop/shop-ec", "shop/wild"]);
        let SecretKind::TlsCertificate(certificate) = &resources.secrets[1].kind else {
            panic!("a certificate");
        };
        assert_eq!(certificate.certificate_chain.inline_string, secret("shop/shop").certificate_chain);
        assert_eq!(certificate.private_key.inline_string, KEY, "Envoy gets the key");

        let debug = format!("{resources:?} {:?}", resources.secrets[1]);
        assert!(!debug.contains("c2VjcmV0LWtleQ"), "{debug}");
        assert!(debug.contains("<redacted>"));
        let json = serde_json::to_value(&resources).unwrap();
        assert!(!json.to_string().contains("c2VjcmV0LWtleQ"), "{json}");
        assert_eq!(
            json["secrets"][1],
            json!({"name": "shop/shop", "tls_certificate": {
                "certificate_chain": {"inline_string": secret("shop/shop").certificate_chain},
                "private_key": {"inline_string": REDACTED}
            }})
        );
        let mut plain = shop();
        plain.listeners.truncate(1);
        plain.secrets.clear();
        let without = serde_json::to_value(super::resources(&plain)).unwrap();
        assert_eq!(without.get("secrets"), None, "a fleet without HTTPS: no secrets in its JSON");
    }

    /// Envoy refuses a listener whose chains match alike, and the snapshot two route
    /// configurations of the same name: one chain per name to serve and per server name.
    #[test]
    fn servers_of_the_same_name_get_one_chain_the_first() {
        let servers = vec![
            server("a", Domain::Any, &["ns/a"]),
            server("b", Domain::Any, &["ns/b"]),
            server("c", Domain::Exact("x.test".into()), &["ns/a"]),
            server("d", Domain::Exact("x.test".into()), &["ns/b"]),
            server("c", Domain::Exact("y.test".into()), &["ns/b"]),
        ];
        let resources = resources(&fleet(vec![https(servers)], &["ns/a", "ns/b"]));
        let chains: Vec<&str> =
            resources.listeners[0].filter_chains.iter().map(|chain| chain.name.as_str()).collect();
        assert_eq!(chains, ["a", "c"]);
        assert_eq!(route_names(&resources), ["https/a", "https/c"]);
    }

    /// A certificate the fleet lacks would keep the listener warming forever, and the
    /// snapshot refuses it: left out, with the server if it has no other.
    #[test]
    fn certificates_the_fleet_lacks_are_left_out_and_servers_without_any_too() {
        let servers = vec![
            server("a", Domain::Exact("a.test".into()), &["ns/a", "ns/gone"]),
            server("b", Domain::Exact("b.test".into()), &["ns/gone"]),
        ];
        let resources = resources(&fleet(vec![https(servers.clone())], &["ns/a"]));
        let listener = &resources.listeners[0];
        assert_eq!(listener.filter_chains.len(), 1);
        assert_eq!(listener.ads_secrets(), ["ns/a"]);
        assert_eq!(route_names(&resources), ["https/a"]);

        let nothing_servable = super::resources(&fleet(vec![https(servers)], &[]));
        assert!(nothing_servable.listeners.is_empty(), "not served as plain HTTP: {nothing_servable:?}");
        assert!(nothing_servable.route_configurations.is_empty());
    }

    #[test]
    fn the_listener_is_borrowed_when_every_certificate_is_there() {
        let listener = https(vec![server("a", Domain::Any, &["ns/a"])]);
        let known = BTreeSet::from(["ns/a"]);
        assert!(matches!(tls::servable(&listener, &known), Some(std::borrow::Cow::Borrowed(_))));
        let value: Value = serde_json::to_value(listener::listener(&listener)).unwrap();
        assert_eq!(value["filter_chains"][0]["transport_socket"]["name"], "envoy.transport_sockets.tls");
    }
}
