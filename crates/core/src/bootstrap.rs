//! Envoy v3 bootstrap configuration, built from the Envoy model the xDS resources use too
//! ([`crate::envoy`]; never string templates). Used by the Envoy reconciler (the fleet's
//! ConfigMap) and by the sidecar injector (inline `--config-yaml`), so both run the same
//! configuration.
//!
//! Every bootstrap has the admin interface on 127.0.0.1 and a listener on [`READINESS_PORT`]
//! that forwards only `GET /ready` (the kubelet probes the pod IP, which the loopback-bound
//! admin interface cannot be reached on) and `GET /stats/prometheus` (for scraping) to the
//! admin interface, nothing else of it. Where the configuration comes from ([`Xds`]):
//! - an external xDS server (`spec.xds`): a static cluster for it (STRICT_DNS, HTTP/2,
//!   plaintext) carries state-of-the-world ADS, as before the operator had its own;
//! - the operator's own control plane: delta ADS over TLS, trusting the operator's CA from an
//!   SDS file Envoy watches ([`ca_sds_file`], kept next to the bootstrap), so a rotated CA
//!   reaches running proxies without a restart; the node names its fleet in its metadata. Its
//!   runtime lets routes carry regular expressions of any size ([`RE2_RUNTIME`]).

use crate::api::envoy::{ADMIN_PORT, READINESS_PORT};

use crate::envoy::{
    Action, Address, Admin, ApiConfigSource, ApiType, ApiVersion, Bootstrap, CertificateValidationContext,
    Cluster, ClusterLoadAssignment, CommonTlsContext, ConfigSource, DataSource, DiscoveryType, Duration,
    DynamicResources, EnvoyGrpc, Filter, FilterChain, GrpcService, HttpConnectionManager, HttpFilter,
    LayeredRuntime, Listener, Node, Packed, ProtocolOptions, Route, RouteAction, RouteConfiguration,
    RouteMatch, RouteSpecifier, RuntimeLayer, SanType, SdsSecretConfig, Secret, SecretKind, StaticResources,
    StringMatcher, SubjectAltNameMatcher, TlsCertificate, TransportSocket, UpstreamTlsContext, VirtualHost,
    extension_names,
};
use crate::identity;

/// The xDS server a bootstrap points at: an Envoy's defaulted `spec.xds` (see
/// [`crate::rules::envoy::EffectiveEnvoy`]), a pod annotation or the injector's default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdsTarget {
    pub cluster_name: String,
    pub host: String,
    pub port: u16,
}

/// The operator's own xDS server, as proxies reach it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlPlane {
    /// DNS name (or IP) and port proxies dial; the server's certificate names the host.
    pub host: String,
    pub port: u16,
}

/// Where a proxy takes its configuration from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Xds<'a> {
    /// Nowhere: the admin interface only.
    None,
    /// A user's xDS server (`spec.xds`, the `sidecar.example.com/xds` annotation, `--xds`).
    External(&'a XdsTarget),
    /// The operator's control plane, serving the fleet `fleet` (`<namespace>/<Envoy>`); the CA
    /// is read from the SDS file at `ca_sds_path`, the proxy's client certificate (the fleet's
    /// identity) from the one at `identity_sds_path`.
    Operator {
        control_plane: &'a ControlPlane,
        fleet: &'a str,
        ca_sds_path: &'a str,
        identity_sds_path: &'a str,
    },
    /// The operator's control plane, serving a mesh sidecar of `namespace` (its configuration
    /// is its namespace's, [`crate::identity::mesh_fleet_key`]); CA and client certificate (the
    /// ServiceAccount's mesh identity) from SDS files as for a fleet's proxy.
    Mesh {
        control_plane: &'a ControlPlane,
        namespace: &'a str,
        ca_sds_path: &'a str,
        identity_sds_path: &'a str,
    },
}

/// Name of the static cluster of the operator's control plane.
pub const OPERATOR_XDS_CLUSTER: &str = "envoy_operator_xds";
/// Node metadata key naming the fleet a proxy belongs to (`<namespace>/<Envoy>`).
pub const FLEET_METADATA_KEY: &str = "envoy-operator.example.com/fleet";
/// Node metadata key marking a mesh sidecar, naming its namespace. A node carries this key or
/// [`FLEET_METADATA_KEY`], never both.
pub const MESH_METADATA_KEY: &str = "envoy-operator.example.com/mesh";
/// Name of the SDS secret holding the control plane's CA.
pub const CA_SECRET_NAME: &str = "envoy_operator_xds_ca";

/// Builds the bootstrap for a proxy that takes its configuration from `xds`.
pub fn bootstrap(xds: Xds<'_>) -> Bootstrap {
    let mut clusters = vec![static_loopback_cluster(ADMIN_CLUSTER, ADMIN_PORT as u16)];
    let ads = |api_type, cluster_name: &str| DynamicResources {
        ads_config: ApiConfigSource {
            api_type,
            transport_api_version: ApiVersion::V3,
            set_node_on_first_message_only: true,
            grpc_services: vec![GrpcService {
                envoy_grpc: EnvoyGrpc { cluster_name: cluster_name.to_owned() },
            }],
        },
        lds_config: ads_waiting_forever(),
        cds_config: ads_waiting_forever(),
    };
    let (node, dynamic_resources, layered_runtime) = match xds {
        Xds::None => (None, None, None),
        Xds::External(target) => {
            clusters.push(xds_cluster(&target.cluster_name, &target.host, target.port, None));
            (None, Some(ads(ApiType::Grpc, &target.cluster_name)), None)
        }
        Xds::Operator { control_plane, fleet: name, ca_sds_path, identity_sds_path }
        | Xds::Mesh { control_plane, namespace: name, ca_sds_path, identity_sds_path } => {
            let tls = upstream_tls(&control_plane.host, ca_sds_path, identity_sds_path);
            clusters.push(xds_cluster(
                OPERATOR_XDS_CLUSTER,
                &control_plane.host,
                control_plane.port,
                Some(tls),
            ));
            let key = if matches!(xds, Xds::Mesh { .. }) { MESH_METADATA_KEY } else { FLEET_METADATA_KEY };
            let node = Node { metadata: [(key.to_owned(), name.to_owned())].into() };
            (Some(node), Some(ads(ApiType::DeltaGrpc, OPERATOR_XDS_CLUSTER)), Some(re2_limits()))
        }
    };
    Bootstrap {
        node,
        admin: Admin { address: Address::socket("127.0.0.1", ADMIN_PORT as u32) },
        static_resources: StaticResources { listeners: vec![readiness_listener()], clusters },
        dynamic_resources,
        layered_runtime,
    }
}

/// The runtime keys of the operator's control plane's proxies: Envoy refuses a regular
/// expression whose RE2 program is larger than `re2.max_program_size.error_level` (100 by
/// default, which a few dozen alternatives exceed), and with it the whole route configuration
/// of the listener. Routes are held to RE2's syntax and its own limits before they reach a proxy
/// ([`crate::rules::re2`]), not to that one: it is raised to 2^32 - 1, as Envoy Gateway's
/// bootstrap does, and programs over `warn_level` are only logged.
pub const RE2_RUNTIME: [(&str, u64); 2] =
    [("re2.max_program_size.error_level", u32::MAX as u64), ("re2.max_program_size.warn_level", 1000)];

fn re2_limits() -> LayeredRuntime {
    let keys = RE2_RUNTIME.iter().map(|(key, value)| ((*key).to_owned(), *value)).collect();
    LayeredRuntime { layers: vec![RuntimeLayer { name: "envoy-operator".to_owned(), static_layer: keys }] }
}

/// The SDS file that gives Envoy the control plane's CA (`ca_pem`, one or more PEM certificates)
/// and the name the server's certificate must carry. Envoy watches its directory, so a rotated CA
/// is picked up without a restart.
pub fn ca_sds_file(ca_pem: &str, server_name: &str) -> String {
    sds_file(&Secret {
        name: CA_SECRET_NAME.to_owned(),
        kind: SecretKind::ValidationContext(CertificateValidationContext {
            trusted_ca: DataSource { inline_string: ca_pem.to_owned() },
            match_typed_subject_alt_names: vec![SubjectAltNameMatcher {
                san_type: san_type(server_name),
                matcher: StringMatcher::Exact(server_name.to_owned()),
            }],
        }),
    })
}

/// The SDS file that gives Envoy its client certificate for the control plane (`cert_pem`, the
/// chain, and `key_pem`): the fleet's identity. Inline, so the file itself changes on renewal
/// and Envoy, watching its directory, reloads it without a restart.
pub fn identity_sds_file(cert_pem: &str, key_pem: &str) -> String {
    sds_file(&Secret {
        name: identity::SDS_SECRET_NAME.to_owned(),
        kind: SecretKind::TlsCertificate(TlsCertificate {
            certificate_chain: DataSource { inline_string: cert_pem.to_owned() },
            private_key: DataSource { inline_string: key_pem.to_owned() },
        }),
    })
}

/// An SDS file: a `DiscoveryResponse`-shaped list of one packed secret.
fn sds_file(secret: &Secret) -> String {
    #[derive(serde::Serialize)]
    struct SdsFile<'a> {
        resources: Vec<Packed<'a, Secret>>,
    }
    // Plain structs of strings always serialize.
    serde_saphyr::to_string(&SdsFile { resources: vec![Packed(secret)] }).unwrap_or_default()
}

/// The kind of subject alternative name that carries `server_name`: Envoy compares an
/// address only with IP SANs and a name only with DNS SANs, so a control plane advertised by
/// address must be matched as one (`certs --name 10.1.2.3` makes an IP SAN).
fn san_type(server_name: &str) -> SanType {
    if is_ip_address(server_name) { SanType::IpAddress } else { SanType::Dns }
}

/// `10.1.2.3`, `::1` or `[::1]`.
fn is_ip_address(host: &str) -> bool {
    host.trim_start_matches('[').trim_end_matches(']').parse::<std::net::IpAddr>().is_ok()
}

/// Name of the static cluster that points at the admin interface.
pub const ADMIN_CLUSTER: &str = "envoy_admin";

/// The admin paths the readiness listener exposes: readiness for the kubelet, statistics for
/// Prometheus. Nothing else of the admin interface is reachable from outside the pod.
pub const EXPOSED_ADMIN_PATHS: [&str; 2] = ["/ready", "/stats/prometheus"];

/// `0.0.0.0:9902`, routing exactly [`EXPOSED_ADMIN_PATHS`] to the admin interface.
fn readiness_listener() -> Listener {
    let routes = EXPOSED_ADMIN_PATHS
        .iter()
        .map(|path| {
            Route::new(
                String::new(),
                RouteMatch::path(*path),
                Action::Route(RouteAction::to_cluster(ADMIN_CLUSTER)),
            )
        })
        .collect();
    let manager = HttpConnectionManager {
        stat_prefix: "readiness".to_owned(),
        route_specifier: RouteSpecifier::RouteConfig(RouteConfiguration {
            most_specific_header_mutations_wins: false,
            name: String::new(),
            virtual_hosts: vec![VirtualHost {
                name: "readiness".to_owned(),
                domains: vec!["*".to_owned()],
                routes,
            }],
            ignore_port_in_host_matching: false,
            validate_clusters: None,
        }),
        http_filters: vec![HttpFilter::router()],
        access_log: Vec::new(),
        normalize_path: None,
        merge_slashes: false,
        upgrade_configs: Vec::new(),
    };
    Listener {
        name: "readiness".to_owned(),
        address: Address::socket("0.0.0.0", READINESS_PORT as u32),
        listener_filters: Vec::new(),
        filter_chains: vec![FilterChain::of(vec![Filter::http_connection_manager(manager)])],
    }
}

fn static_loopback_cluster(name: &str, port: u16) -> Cluster {
    Cluster {
        name: name.to_owned(),
        discovery_type: DiscoveryType::Static,
        connect_timeout: Duration::from_secs(1),
        lb_policy: None,
        typed_extension_protocol_options: None,
        eds_cluster_config: None,
        load_assignment: Some(single_endpoint(name, "127.0.0.1", port)),
        transport_socket: None,
    }
}

/// An xDS server's cluster: resolved by DNS (STRICT_DNS), spoken to over HTTP/2 (gRPC),
/// over `tls` when given.
fn xds_cluster(name: &str, host: &str, port: u16, tls: Option<TransportSocket>) -> Cluster {
    Cluster {
        name: name.to_owned(),
        discovery_type: DiscoveryType::StrictDns,
        connect_timeout: Duration::from_secs(5),
        lb_policy: None,
        typed_extension_protocol_options: Some(ProtocolOptions::http2()),
        eds_cluster_config: None,
        load_assignment: Some(single_endpoint(name, host, port)),
        transport_socket: tls,
    }
}

fn single_endpoint(cluster_name: &str, host: &str, port: u16) -> ClusterLoadAssignment {
    ClusterLoadAssignment::of(cluster_name, [Address::socket(host, u32::from(port))])
}

/// TLS to `server_name` (SNI, and the name its certificate must carry), h2 by ALPN, the CA
/// from the SDS file at `ca_sds_path` and the client certificate from the one at
/// `identity_sds_path` (their directories watched).
fn upstream_tls(server_name: &str, ca_sds_path: &str, identity_sds_path: &str) -> TransportSocket {
    let from_file = |name: &str, path: &str| SdsSecretConfig {
        name: name.to_owned(),
        sds_config: ConfigSource::watched_file(path),
    };
    TransportSocket {
        name: extension_names::TLS_TRANSPORT_SOCKET.to_owned(),
        typed_config: UpstreamTlsContext {
            // RFC 6066 allows only host names in SNI, not addresses.
            sni: (!is_ip_address(server_name)).then(|| server_name.to_owned()),
            common_tls_context: CommonTlsContext {
                alpn_protocols: vec!["h2".to_owned()],
                tls_certificate_sds_secret_configs: vec![from_file(
                    identity::SDS_SECRET_NAME,
                    identity_sds_path,
                )],
                validation_context_sds_secret_config: Some(from_file(CA_SECRET_NAME, ca_sds_path)),
            },
        },
    }
}

/// How long Envoy waits for its first listeners and clusters before it finishes initializing
/// without them: forever. Envoy's default (15 s for clusters, then 15 s for listeners) turns a
/// proxy that started while its xDS server was unreachable `LIVE` with no listener, so `/ready` (its readiness probe) said yes
/// and the Service sent it traffic it refused. Unbounded, a proxy is ready only once configured.
pub const INITIAL_FETCH_TIMEOUT: Duration = Duration::ZERO;

fn ads_waiting_forever() -> ConfigSource {
    ConfigSource { initial_fetch_timeout: Some(INITIAL_FETCH_TIMEOUT), ..ConfigSource::ads() }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::manifest::parse_documents;

    fn xds() -> XdsTarget {
        XdsTarget { cluster_name: "xds_cluster".into(), host: "xds-service.default".into(), port: 19000 }
    }

    /// Parses the YAML form back, as Envoy would read it.
    fn parsed(bootstrap: &Bootstrap) -> Value {
        let documents = parse_documents(&bootstrap.to_yaml());
        assert_eq!(documents.len(), 1);
        documents.into_iter().next().unwrap().content.unwrap()
    }

    fn cluster<'a>(config: &'a Value, name: &str) -> &'a Value {
        let clusters = config["static_resources"]["clusters"].as_array().unwrap();
        clusters.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("no cluster {name}"))
    }

    #[test]
    fn xds_bootstrap_structure() {
        let config = parsed(&bootstrap(Xds::External(&xds())));
        assert_eq!(
            config["admin"]["address"]["socket_address"],
            json!({"address": "127.0.0.1", "port_value": 9901})
        );

        let xds_cluster = cluster(&config, "xds_cluster");
        assert_eq!(xds_cluster["type"], "STRICT_DNS");
        assert_eq!(
            xds_cluster["typed_extension_protocol_options"]["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
                ["explicit_http_config"]["http2_protocol_options"],
            json!({})
        );
        let endpoint = &xds_cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"];
        assert_eq!(
            endpoint["address"]["socket_address"],
            json!({"address": "xds-service.default", "port_value": 19000})
        );

        let dynamic = &config["dynamic_resources"];
        assert_eq!(dynamic["ads_config"]["api_type"], "GRPC");
        assert_eq!(dynamic["ads_config"]["transport_api_version"], "V3");
        assert_eq!(dynamic["ads_config"]["grpc_services"][0]["envoy_grpc"]["cluster_name"], "xds_cluster");
        // No initial-fetch deadline: without its first listeners and clusters, Envoy stays
        // initializing, and `/ready` says no.
        for source in ["lds_config", "cds_config"] {
            assert_eq!(
                dynamic[source],
                json!({"ads": {}, "resource_api_version": "V3", "initial_fetch_timeout": "0s"})
            );
        }
    }

    #[test]
    fn the_readiness_listener_exposes_only_readiness_and_statistics() {
        let config = parsed(&bootstrap(Xds::None));
        let listener = &config["static_resources"]["listeners"][0];
        assert_eq!(listener["address"]["socket_address"]["port_value"], 9902);
        let manager = &listener["filter_chains"][0]["filters"][0]["typed_config"];
        let routes = manager["route_config"]["virtual_hosts"][0]["routes"].as_array().unwrap();
        assert_eq!(routes.len(), 2);
        assert_eq!(routes[0]["match"], json!({"path": "/ready"}));
        assert_eq!(routes[1]["match"], json!({"path": "/stats/prometheus"}));
        assert!(routes.iter().all(|route| route["route"]["cluster"] == ADMIN_CLUSTER));
        let admin = cluster(&config, ADMIN_CLUSTER);
        assert_eq!(
            admin["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]
                ["address"],
            "127.0.0.1"
        );
    }

    #[test]
    fn admin_only_without_xds() {
        let config = parsed(&bootstrap(Xds::None));
        assert!(config.get("dynamic_resources").is_none());
        assert_eq!(config["static_resources"]["clusters"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn the_operators_control_plane_is_delta_ads_over_tls_naming_the_fleet() {
        let control_plane = ControlPlane { host: "envoy-operator-xds.ops.svc".into(), port: 18000 };
        let xds = Xds::Operator {
            control_plane: &control_plane,
            fleet: "shop/edge",
            ca_sds_path: "/etc/envoy/xds-ca.yaml",
            identity_sds_path: "/etc/envoy-xds-identity/xds-identity.yaml",
        };
        let config = parsed(&bootstrap(xds));
        assert_eq!(config["node"]["metadata"][FLEET_METADATA_KEY], "shop/edge");
        assert_eq!(config["dynamic_resources"]["ads_config"]["api_type"], "DELTA_GRPC");
        let cluster = cluster(&config, OPERATOR_XDS_CLUSTER);
        let tls = &cluster["transport_socket"]["typed_config"];
        assert_eq!(tls["sni"], "envoy-operator-xds.ops.svc");
        assert_eq!(tls["common_tls_context"]["alpn_protocols"], json!(["h2"]));
        let sds = &tls["common_tls_context"]["validation_context_sds_secret_config"];
        assert_eq!(sds["name"], CA_SECRET_NAME);
        assert_eq!(sds["sds_config"]["path_config_source"]["watched_directory"]["path"], "/etc/envoy");
        // The client certificate: the fleet's identity, from its own watched directory.
        let identity = &tls["common_tls_context"]["tls_certificate_sds_secret_configs"][0];
        assert_eq!(identity["name"], identity::SDS_SECRET_NAME);
        let source = &identity["sds_config"]["path_config_source"];
        assert_eq!(source["path"], "/etc/envoy-xds-identity/xds-identity.yaml");
        assert_eq!(source["watched_directory"]["path"], "/etc/envoy-xds-identity");
        let file: Value = serde_saphyr::from_str(&identity_sds_file("CERT", "KEY")).unwrap();
        let secret = &file["resources"][0];
        assert_eq!(secret["name"], identity::SDS_SECRET_NAME);
        assert_eq!(secret["tls_certificate"]["certificate_chain"]["inline_string"], "CERT");
        assert_eq!(secret["tls_certificate"]["private_key"]["inline_string"], "KEY");
        assert!(secret.get("validation_context").is_none());
        let file: Value = serde_saphyr::from_str(&ca_sds_file("PEM", "envoy-operator-xds.ops.svc")).unwrap();
        let secret = &file["resources"][0];
        assert_eq!(secret["name"], CA_SECRET_NAME);
        assert_eq!(secret["validation_context"]["trusted_ca"]["inline_string"], "PEM");
        assert_eq!(
            secret["validation_context"]["match_typed_subject_alt_names"][0]["matcher"]["exact"],
            "envoy-operator-xds.ops.svc"
        );
    }

    /// A mesh sidecar's bootstrap is a fleet proxy's, but for its node, which names its
    /// namespace as a mesh sidecar's and claims no fleet.
    #[test]
    fn a_mesh_sidecar_names_its_namespace_and_no_fleet() {
        let control_plane = ControlPlane { host: "envoy-operator-xds.ops.svc".into(), port: 18000 };
        let (ca_sds_path, identity_sds_path) =
            ("/etc/envoy/xds-ca.yaml", "/etc/envoy-xds-identity/xds-identity.yaml");
        let mesh = parsed(&bootstrap(Xds::Mesh {
            control_plane: &control_plane,
            namespace: "shop",
            ca_sds_path,
            identity_sds_path,
        }));
        assert_eq!(mesh["node"]["metadata"], json!({MESH_METADATA_KEY: "shop"}));
        let fleet = parsed(&bootstrap(Xds::Operator {
            control_plane: &control_plane,
            fleet: "shop/edge",
            ca_sds_path,
            identity_sds_path,
        }));
        for key in ["dynamic_resources", "static_resources", "layered_runtime", "admin"] {
            assert_eq!(mesh[key], fleet[key], "{key}");
        }
    }

    #[test]
    fn a_control_plane_advertised_by_address_is_matched_as_an_ip_san_without_sni() {
        for (host, san_type) in
            [("10.1.2.3", "IP_ADDRESS"), ("fd00::1", "IP_ADDRESS"), ("xds.ops.svc", "DNS")]
        {
            let file: Value = serde_saphyr::from_str(&ca_sds_file("PEM", host)).unwrap();
            let matcher = &file["resources"][0]["validation_context"]["match_typed_subject_alt_names"][0];
            assert_eq!(matcher["san_type"], san_type, "{host}");
            assert_eq!(matcher["matcher"]["exact"], host);

            let control_plane = ControlPlane { host: host.into(), port: 18000 };
            let xds = Xds::Operator {
                control_plane: &control_plane,
                fleet: "shop/edge",
                ca_sds_path: "/etc/envoy/x",
                identity_sds_path: "/etc/envoy-xds-identity/x",
            };
            let config = parsed(&bootstrap(xds));
            let sni = &cluster(&config, OPERATOR_XDS_CLUSTER)["transport_socket"]["typed_config"]["sni"];
            assert_eq!(sni.as_str(), (san_type == "DNS").then_some(host), "{host}");
        }
    }

    #[test]
    fn only_the_operators_proxies_get_the_raised_regex_limit() {
        let control_plane = ControlPlane { host: "envoy-operator-xds.ops.svc".into(), port: 18000 };
        let operator = Xds::Operator {
            control_plane: &control_plane,
            fleet: "shop/edge",
            ca_sds_path: "/etc/envoy/x",
            identity_sds_path: "/etc/envoy-xds-identity/x",
        };
        let config = parsed(&bootstrap(operator));
        assert_eq!(
            config["layered_runtime"],
            json!({"layers": [{"name": "envoy-operator", "static_layer": {
                "re2.max_program_size.error_level": 4_294_967_295u64,
                "re2.max_program_size.warn_level": 1000
            }}]})
        );
        // A user's xDS server decides for itself; an admin-only proxy has no routes.
        for other in [Xds::External(&xds()), Xds::None] {
            assert!(parsed(&bootstrap(other)).get("layered_runtime").is_none());
        }
    }

    #[test]
    fn json_and_yaml_forms_agree() {
        let config = bootstrap(Xds::External(&xds()));
        let from_json: Value = serde_json::from_str(&config.to_json()).unwrap();
        assert_eq!(from_json, parsed(&config));
    }

    #[test]
    fn hash_follows_the_configuration() {
        let one = bootstrap(Xds::External(&xds()));
        assert_eq!(one.hash(), bootstrap(Xds::External(&xds())).hash());
        assert_eq!(one.hash().len(), 16);
        let moved = XdsTarget { port: 19001, ..xds() };
        assert_ne!(one.hash(), bootstrap(Xds::External(&moved)).hash());
        assert_ne!(one.hash(), bootstrap(Xds::None).hash());
    }
}
