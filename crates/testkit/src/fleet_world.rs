//! `envoy-operator run` as the control plane of one fleet, against the in-memory API server:
//! an Envoy `edge` (no `spec.xds`), Services with EndpointSlices for local backends, the
//! fleet's pod at the loopback address, and a real Envoy started from the bootstrap ConfigMap
//! the operator writes. The operator itself is the caller's ([`Launch`]: `operator::run` with
//! its configuration), for `tests/xds/run_xds.rs` and `examples/route_propagation.rs`.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use envoy_operator_core::children::envoy::CA_SDS_KEY;
use envoy_operator_core::names::FLEET_LABEL;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::backend::Backend;
use crate::envoy::Envoy;
use crate::fake_api::FakeApi;
use crate::fleet::runnable_bootstrap;
use base64::Engine;
use envoy_operator_core::identity;
use futures::FutureExt;
use futures::future::BoxFuture;

/// Guards against hangs; never part of an assertion about speed.
pub const HANG_GUARD: Duration = Duration::from_secs(60);
pub const NS: &str = "shop";
/// The fleet pod's name, which the Envoy started here uses as its node id.
pub const POD: &str = "edge-6c5d7-x2x9q";

/// The API path of a namespaced object of [`NS`].
pub fn at(group_version: &str, resource: &str, name: &str) -> String {
    at_in(NS, group_version, resource, name)
}

/// The API path of a namespaced object of `namespace`.
pub fn at_in(namespace: &str, group_version: &str, resource: &str, name: &str) -> String {
    let prefix = if group_version == "v1" { "/api/v1".to_owned() } else { format!("/apis/{group_version}") };
    format!("{prefix}/namespaces/{namespace}/{resource}/{name}")
}

/// A port for a server the test starts a moment later (an Envoy listener): [`crate::ports`].
pub fn free_port() -> SocketAddr {
    crate::ports::unclaimed_port()
}

/// An EnvoyRoute named `name` attached to `edge`, with `rules`.
pub fn route(name: &str, generation: i64, rules: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
           "metadata": {"name": name, "namespace": NS, "generation": generation},
           "spec": {"parentRefs": [{"name": "edge"}], "rules": rules}})
}

/// A rule sending a path prefix to a Service's port 80.
pub fn prefix_to(prefix: &str, service: &str) -> Value {
    json!({"matches": [{"path": {"type": "PathPrefix", "value": prefix}}],
           "backendRefs": [{"name": service, "port": 80}]})
}

/// A Service `name` of [`NS`] whose EndpointSlice lists `backend` as its one ready endpoint.
fn backend_objects(api: &FakeApi, name: &str, backend: &Backend) {
    service_with_endpoints(api, NS, name, backend);
}

/// A Service `name` of `namespace` (port 80, `http`) whose EndpointSlice lists `backend` as its
/// one ready endpoint.
pub fn service_with_endpoints(api: &FakeApi, namespace: &str, name: &str, backend: &Backend) {
    api.put(
        &at_in(namespace, "v1", "services", name),
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
               "spec": {"ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}),
    );
    api.put(
        &at_in(namespace, "discovery.k8s.io/v1", "endpointslices", &format!("{name}-1")),
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": format!("{name}-1"), "namespace": namespace,
                            "labels": {"kubernetes.io/service-name": name}},
               "addressType": "IPv4",
               "ports": [{"name": "http", "port": backend.address.port(), "protocol": "TCP"}],
               "endpoints": [{"addresses": [backend.address.ip().to_string()], "conditions": {"ready": true}}]}),
    );
}

/// What the operator is started with: a client of the in-memory API server, the port to serve
/// the control plane on (advertised as `localhost`, which the certificate `run` makes names), a
/// directory for its self-managed certificates, and when to stop.
pub struct Launch {
    pub client: kube::Client,
    pub xds: SocketAddr,
    pub cert_dir: std::path::PathBuf,
    pub shutdown: BoxFuture<'static, ()>,
}

/// The in-memory API server with the fleet, and `run` serving it.
pub struct FleetWorld<E> {
    pub api: FakeApi,
    /// The port of the Envoy's `http` listener (its `targetPort`).
    pub listener_port: u16,
    /// The control plane's port, which every replica started here serves (as a deployed
    /// operator's replicas sit behind one Service).
    xds: SocketAddr,
    stop: oneshot::Sender<()>,
    operator: JoinHandle<Result<(), E>>,
    _certs: TempDir,
    _files: Option<TempDir>,
}

impl<E: Send + 'static> FleetWorld<E> {
    /// Puts the Envoy `edge` and its pod, `backends` (Service name, backend) and `route` in the
    /// API server, then starts `operator` (`run`) on it with the control plane on a free port.
    pub async fn start<F>(
        backends: &[(&str, &Backend)],
        route: Value,
        operator: impl FnOnce(Launch) -> F,
    ) -> Self
    where
        F: Future<Output = Result<(), E>> + Send + 'static,
    {
        Self::start_on(FakeApi::new(), backends, route, operator).await
    }

    /// [`Self::start`] on `api`, which may hold more already (e.g. the Gateway API's CRDs).
    pub async fn start_on<F>(
        api: FakeApi,
        backends: &[(&str, &Backend)],
        route: Value,
        operator: impl FnOnce(Launch) -> F,
    ) -> Self
    where
        F: Future<Output = Result<(), E>> + Send + 'static,
    {
        let listener_port = free_port().port();
        api.put(
            &at("example.com/v1", "envoys", "edge"),
            json!({"apiVersion": "example.com/v1", "kind": "Envoy",
                   "metadata": {"name": "edge", "namespace": NS, "uid": "0d9f0f5e-1111-4000-8000-000000000001", "generation": 1},
                   "spec": {"ports": [{"name": "http", "port": 80, "targetPort": listener_port}]}}),
        );
        for (name, backend) in backends {
            backend_objects(&api, name, backend);
        }
        let route_name = route["metadata"]["name"].as_str().expect("a named route").to_owned();
        api.put(&at("example.com/v1", "envoyroutes", &route_name), route);
        // The fleet's pod, at the address the Envoy started here connects from.
        api.put(
            &at("v1", "pods", POD),
            json!({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": POD, "namespace": NS, "labels": {FLEET_LABEL: "edge"}},
                   "spec": {"containers": [{"name": "envoy", "image": "envoy"}]},
                   "status": {"podIP": "127.0.0.1"}}),
        );

        let xds = free_port();
        let certs = tempfile::tempdir().expect("a certificate directory");
        let (stop, stopped) = oneshot::channel::<()>();
        let operator = tokio::spawn(operator(Launch {
            client: api.client(),
            xds,
            cert_dir: certs.path().to_owned(),
            shutdown: stopped.map(|_| ()).boxed(),
        }));
        FleetWorld { api, listener_port, xds, stop, operator, _certs: certs, _files: None }
    }

    /// A rollout of the operator: this replica stops gracefully (and `between` runs while none
    /// serves), then a new one, `operator` (a new process: nothing in memory, certificates read
    /// afresh into a new directory), starts on the same API server and the same control-plane
    /// port, as a deployed operator's replicas sit behind one Service. How the old one ended.
    pub async fn next_replica<F>(
        &mut self,
        between: impl Future<Output = ()>,
        operator: impl FnOnce(Launch) -> F,
    ) -> Result<(), E>
    where
        F: Future<Output = Result<(), E>> + Send + 'static,
    {
        let (stop, shutdown) = oneshot::channel::<()>();
        let _ = std::mem::replace(&mut self.stop, stop).send(());
        let ended = stopped(&mut self.operator).await;
        between.await;
        let certs = tempfile::tempdir().expect("a certificate directory");
        self.operator = tokio::spawn(operator(Launch {
            client: self.api.client(),
            xds: self.xds,
            cert_dir: certs.path().to_owned(),
            shutdown: shutdown.map(|_| ()).boxed(),
        }));
        self._certs = certs;
        ended
    }

    /// A real Envoy started from the fleet's bootstrap ConfigMap, once the operator wrote it
    /// with the control plane's CA, and with the identity Secret the operator issued the fleet.
    pub async fn envoy(&mut self) -> Envoy {
        let config_map = at("v1", "configmaps", "edge-bootstrap");
        self.api
            .wait_for("the fleet's bootstrap ConfigMap with the control plane's CA", HANG_GUARD, |api| {
                api.get(&config_map).is_some_and(|c| c["data"].get(CA_SDS_KEY).is_some())
            })
            .await;
        let data: BTreeMap<String, String> =
            serde_json::from_value(self.api.get(&config_map).expect("the ConfigMap")["data"].clone())
                .expect("string data");
        let identity = self.identity_file().await;
        let files = tempfile::tempdir().expect("a directory for the ConfigMap's files");
        let envoy = Envoy::start(&runnable_bootstrap(&data, files.path(), POD, "edge", &identity)).await;
        self._files = Some(files);
        envoy
    }

    /// The SDS file of the fleet's identity Secret, once the operator issued it.
    pub async fn identity_file(&self) -> String {
        let secret = at("v1", "secrets", &identity::secret_name("edge"));
        self.api.wait_for("the fleet's identity Secret", HANG_GUARD, |api| api.get(&secret).is_some()).await;
        let encoded = self.api.get(&secret).expect("the Secret")["data"][identity::SDS_KEY]
            .as_str()
            .expect("the Secret carries the SDS file")
            .to_owned();
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded).expect("base64 data");
        String::from_utf8(decoded).expect("a UTF-8 file")
    }

    /// Stops `run` gracefully and returns how it ended.
    pub async fn stop(self) -> Result<(), E> {
        let _ = self.stop.send(());
        let mut operator = self.operator;
        stopped(&mut operator).await
    }
}

/// How an operator's task ended, once it did.
async fn stopped<E>(operator: &mut JoinHandle<Result<(), E>>) -> Result<(), E> {
    tokio::time::timeout(HANG_GUARD, operator)
        .await
        .expect("the operator stops")
        .expect("the operator task did not panic")
}
