//! Certificates over SDS on the ADS stream: Envoy requests a listener's secrets by name once it
//! has the listener; they are pushed as soon as asked (upstream, before route configurations
//! wait on them), the proxy is synced only once it has them, a rotated certificate is pushed
//! alone, and removals of clusters wait for a new listener's secrets.

use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{Secret, TlsCertificate, secret};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};

use super::cache::FleetKey;
use super::resource::Reference;
use super::resource::type_url::{CLUSTER, ENDPOINT, LISTENER, ROUTE, SECRET};
use super::{Client, FLEET, Fixture, Snapshot, address, decode, fixture, node};
use envoy_operator_testkit::xds::resources::{
    eds_cluster, endpoints, http_listener, prefix_route, route_config,
};

fn certificate(name: &str, chain: &str) -> Secret {
    let inline = |text: &str| DataSource {
        specifier: Some(data_source::Specifier::InlineString(text.to_owned())),
        ..Default::default()
    };
    Secret {
        name: name.to_owned(),
        r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: Some(inline(chain)),
            private_key: Some(inline("key")),
            ..Default::default()
        })),
    }
}

/// A listener `https` using route configuration `routes` and presenting the certificate `cert`
/// (its chain `chain`), routing `/` to `cluster` (port 1).
fn https(chain: &str, cluster: &str) -> Snapshot {
    let references = [
        Reference { type_url: ROUTE, name: "routes".into() },
        Reference { type_url: SECRET, name: "cert".into() },
    ];
    let mut builder = Snapshot::builder();
    builder
        .add_listener_referencing(&http_listener("https", address(10443), "routes"), references)
        .add(&route_config("routes", vec![prefix_route("/", cluster)]))
        .add(&certificate("cert", chain))
        .add(&eds_cluster(cluster))
        .add(&endpoints(cluster, &[address(1)]));
    builder.build().expect("a consistent snapshot")
}

fn acked(fixture: &Fixture) -> Option<String> {
    fixture.tracker.fleet_status(&FleetKey::from(FLEET)).acked_version
}

fn chain_of(any: &envoy_types::pb::google::protobuf::Any) -> String {
    let secret: Secret = decode(any);
    let Some(secret::Type::TlsCertificate(certificate)) = secret.r#type else { panic!("a certificate") };
    match certificate.certificate_chain.and_then(|chain| chain.specifier) {
        Some(data_source::Specifier::InlineString(chain)) => chain,
        other => panic!("an inline chain, not {other:?}"),
    }
}

#[test]
fn a_listener_whose_certificate_the_snapshot_lacks_is_refused() {
    let mut builder = Snapshot::builder();
    let references = [Reference { type_url: SECRET, name: "cert".into() }];
    builder.add_listener_referencing(&http_listener("https", address(10443), "routes"), references);
    let error = builder.build().unwrap_err().to_string();
    assert!(error.contains(SECRET) && error.contains("\"cert\""), "{error}");
}

mod delta {
    use super::*;

    type Envoy = Client<DeltaDiscoveryRequest, DeltaDiscoveryResponse>;

    fn request(type_url: &str) -> DeltaDiscoveryRequest {
        DeltaDiscoveryRequest { type_url: type_url.into(), ..Default::default() }
    }

    fn subscribe(type_url: &str, names: &[&str]) -> DeltaDiscoveryRequest {
        DeltaDiscoveryRequest {
            resource_names_subscribe: names.iter().map(|name| name.to_string()).collect(),
            ..request(type_url)
        }
    }

    fn ack(response: &DeltaDiscoveryResponse) -> DeltaDiscoveryRequest {
        DeltaDiscoveryRequest { response_nonce: response.nonce.clone(), ..request(&response.type_url) }
    }

    fn names(response: &DeltaDiscoveryResponse) -> Vec<&str> {
        let mut names: Vec<&str> = response.resources.iter().map(|r| r.name.as_str()).collect();
        names.sort();
        names
    }

    /// Clusters, endpoints and the listener, ACKed; returns the listener response.
    async fn up_to_the_listener(fixture: &Fixture, envoy: &mut Envoy) -> DeltaDiscoveryResponse {
        envoy.send(DeltaDiscoveryRequest { node: node("pod-0", FLEET), ..request(CLUSTER) });
        let clusters = envoy.next().await;
        envoy.send(subscribe(ENDPOINT, &names(&clusters)));
        envoy.send(ack(&clusters));
        let endpoints = envoy.next().await;
        envoy.send(ack(&endpoints));
        envoy.send(request(LISTENER));
        let listeners = envoy.next().await;
        assert_eq!((listeners.type_url.as_str(), names(&listeners)), (LISTENER, vec!["https"]));
        assert_eq!(acked(fixture), None);
        listeners
    }

    #[tokio::test(start_paused = true)]
    async fn the_listeners_certificate_is_served_by_name_and_the_proxy_is_synced_once_it_has_it() {
        let fixture = fixture();
        let version = fixture.cache.set(FLEET, https("chain-1", "a"));
        let mut envoy = Client::open(|requests| fixture.service.open_delta(requests, None));
        let listeners = up_to_the_listener(&fixture, &mut envoy).await;

        // Envoy warms the listener: it asks for its certificate and its routes at once.
        envoy.send(subscribe(SECRET, &["cert"]));
        envoy.send(subscribe(ROUTE, &["routes"]));
        envoy.send(ack(&listeners));
        let secrets = envoy.next().await;
        assert_eq!((secrets.type_url.as_str(), names(&secrets)), (SECRET, vec!["cert"]));
        assert_eq!(chain_of(secrets.resources[0].resource.as_ref().unwrap()), "chain-1");
        envoy.send(ack(&secrets));
        let routes = envoy.next().await;
        assert_eq!((routes.type_url.as_str(), names(&routes)), (ROUTE, vec!["routes"]));
        envoy.send(ack(&routes));
        envoy.assert_silent().await;
        assert_eq!(acked(&fixture), Some(version));

        // Rotation: the same name, a new certificate; nothing else moves.
        let rotated = fixture.cache.set(FLEET, https("chain-2", "a"));
        let secrets = envoy.next().await;
        assert_eq!((secrets.type_url.as_str(), names(&secrets)), (SECRET, vec!["cert"]));
        assert_eq!(chain_of(secrets.resources[0].resource.as_ref().unwrap()), "chain-2");
        envoy.assert_silent().await;
        assert_ne!(acked(&fixture).as_deref(), Some(rotated.as_str()), "not ACKed yet");
        envoy.send(ack(&secrets));
        envoy.assert_silent().await;
        assert_eq!(acked(&fixture), Some(rotated));
    }

    /// Until the listener's certificate is delivered, the listener is warming and the one it
    /// replaces may still route to the old cluster: the old cluster is removed only after.
    #[tokio::test(start_paused = true)]
    async fn clusters_are_removed_only_once_the_listeners_certificate_is_delivered() {
        let fixture = fixture();
        fixture.cache.set(FLEET, https("chain-1", "a"));
        let mut envoy = Client::open(|requests| fixture.service.open_delta(requests, None));
        let listeners = up_to_the_listener(&fixture, &mut envoy).await;
        // The routes come first this time; the certificate is not asked for yet.
        envoy.send(subscribe(ROUTE, &["routes"]));
        envoy.send(ack(&listeners));
        let routes = envoy.next().await;
        envoy.send(ack(&routes));
        envoy.assert_silent().await;
        assert_eq!(acked(&fixture), None, "the certificate is missing");

        // Meanwhile the route moves from cluster a to b: a stays while the certificate is due.
        let version = fixture.cache.set(FLEET, https("chain-1", "b"));
        let clusters = envoy.next().await;
        assert_eq!((names(&clusters), clusters.removed_resources.len()), (vec!["b"], 0));
        envoy.send(subscribe(ENDPOINT, &["b"]));
        envoy.send(ack(&clusters));
        let endpoints = envoy.next().await;
        envoy.send(ack(&endpoints));
        let routes = envoy.next().await;
        assert_eq!(routes.type_url, ROUTE);
        envoy.send(ack(&routes));
        envoy.assert_silent().await;

        envoy.send(subscribe(SECRET, &["cert"]));
        let secrets = envoy.next().await;
        assert_eq!(names(&secrets), ["cert"]);
        envoy.send(ack(&secrets));
        let removal = envoy.next().await;
        assert_eq!(
            (removal.type_url.as_str(), removal.removed_resources.as_slice()),
            (CLUSTER, &["a".to_owned()][..])
        );
        envoy.send(ack(&removal));
        envoy.assert_silent().await;
        assert_eq!(acked(&fixture), Some(version));
    }
}

mod sotw {
    use super::*;

    type Envoy = Client<DiscoveryRequest, DiscoveryResponse>;

    fn request(type_url: &str, names: &[&str]) -> DiscoveryRequest {
        DiscoveryRequest {
            type_url: type_url.into(),
            resource_names: names.iter().map(|name| name.to_string()).collect(),
            ..Default::default()
        }
    }

    fn ack(response: &DiscoveryResponse, names: &[&str]) -> DiscoveryRequest {
        DiscoveryRequest {
            version_info: response.version_info.clone(),
            response_nonce: response.nonce.clone(),
            ..request(&response.type_url, names)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_certificate_is_served_by_name_and_rotated_in_place() {
        let fixture = fixture();
        let version = fixture.cache.set(FLEET, https("chain-1", "a"));
        let mut envoy: Envoy = Client::open(|requests| fixture.service.open_sotw(requests, None));
        envoy.send(DiscoveryRequest { node: node("pod-0", FLEET), ..request(CLUSTER, &[]) });
        let clusters = envoy.next().await;
        envoy.send(request(ENDPOINT, &["a"]));
        envoy.send(ack(&clusters, &[]));
        let endpoints = envoy.next().await;
        envoy.send(ack(&endpoints, &["a"]));
        envoy.send(request(LISTENER, &[]));
        let listeners = envoy.next().await;
        assert_eq!(listeners.type_url, LISTENER);

        envoy.send(request(SECRET, &["cert"]));
        envoy.send(request(ROUTE, &["routes"]));
        envoy.send(ack(&listeners, &[]));
        let secrets = envoy.next().await;
        assert_eq!((secrets.type_url.as_str(), secrets.resources.len()), (SECRET, 1));
        assert_eq!(chain_of(&secrets.resources[0]), "chain-1");
        envoy.send(ack(&secrets, &["cert"]));
        let routes = envoy.next().await;
        assert_eq!(routes.type_url, ROUTE);
        envoy.send(ack(&routes, &["routes"]));
        envoy.assert_silent().await;
        assert_eq!(acked(&fixture), Some(version));

        let rotated = fixture.cache.set(FLEET, https("chain-2", "a"));
        let secrets = envoy.next().await;
        assert_eq!((secrets.type_url.as_str(), secrets.resources.len()), (SECRET, 1));
        assert_eq!(chain_of(&secrets.resources[0]), "chain-2");
        envoy.send(ack(&secrets, &["cert"]));
        envoy.assert_silent().await;
        assert_eq!(acked(&fixture), Some(rotated));
    }
}
