//! One index per process: one watch and one cache per kind, shared by every consumer (the
//! reconcilers, the route status writer, the xDS publisher and its authorizer, the injector),
//! as linkerd2's policy controller keeps one index fed by its watches.
//!
//! A kind's watch starts the first time a consumer asks for it ([`Index::envoys`] and the
//! like) and runs while the index lives, so a replica that never leads never watches what only
//! the leader reads. Each kind keeps its objects in a cache ([`Watched::store`], objects shared
//! as `Arc`, stripped of what nobody reads) and tells its changes to every subscriber
//! ([`Watched::changes`]); [`Index::listed`] is the one "every cache is listed" signal.
//!
//! The Gateway API kinds are watched only where the API server serves them: ask
//! [`Index::gateway_api`] first (one discovery per process, logged once).

mod gateway_api;
mod watched;

use std::fmt::Debug;
use std::sync::OnceLock;

use envoy_operator_core::api::gateway::{
    GRPCRoute, Gateway, GatewayClass, HTTPRoute, ReferenceGrant, TLSRoute,
};
use envoy_operator_core::api::{Envoy, EnvoyRoute, Foo};
use envoy_operator_core::children::apply::strip_metadata;
use envoy_operator_core::children::labels;
use envoy_operator_core::names::{
    CERT_KEY, FLEET_LABEL, KEY_KEY, MANAGED_BY, MANAGED_BY_KEY, MESH_CA_LABEL, MESH_SIDECAR_LABEL,
    SERVICE_NAME_LABEL, TLS_SECRET_TYPE, XDS_IDENTITY_SECRET_LABEL,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, PodSpec, PodStatus, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::api::Api;
use kube::runtime::watcher;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

pub use self::gateway_api::{Discovery, GatewayApi};
pub use self::watched::{CacheUnavailable, Change, Watched};

/// The watches and caches of one process, over one namespace or all of them.
pub struct Index {
    client: Client,
    namespace: Option<String>,
    /// Ends every watch when the index is dropped.
    stop: CancellationToken,
    foos: OnceLock<Watched<Foo>>,
    envoys: OnceLock<Watched<Envoy>>,
    routes: OnceLock<Watched<EnvoyRoute>>,
    deployments: OnceLock<Watched<Deployment>>,
    config_maps: OnceLock<Watched<ConfigMap>>,
    services: OnceLock<Watched<Service>>,
    endpoint_slices: OnceLock<Watched<EndpointSlice>>,
    pods: OnceLock<Watched<Pod>>,
    mesh_pods: OnceLock<Watched<Pod>>,
    mesh_config_maps: OnceLock<Watched<ConfigMap>>,
    gateway_api: tokio::sync::OnceCell<Discovery>,
    gateway_classes: OnceLock<Watched<GatewayClass>>,
    gateways: OnceLock<Watched<Gateway>>,
    http_routes: OnceLock<Watched<HTTPRoute>>,
    grpc_routes: OnceLock<Watched<GRPCRoute>>,
    tls_routes: OnceLock<Watched<TLSRoute>>,
    reference_grants: OnceLock<Watched<ReferenceGrant>>,
    namespaces: OnceLock<Watched<Namespace>>,
    tls_secrets: OnceLock<Watched<Secret>>,
}

impl Index {
    /// An index of `namespace` (every namespace when `None`). Watches start as consumers ask
    /// for their kinds, on the current Tokio runtime.
    pub fn new(client: Client, namespace: Option<String>) -> Self {
        Self {
            client,
            namespace,
            stop: CancellationToken::new(),
            foos: OnceLock::new(),
            envoys: OnceLock::new(),
            routes: OnceLock::new(),
            deployments: OnceLock::new(),
            config_maps: OnceLock::new(),
            services: OnceLock::new(),
            endpoint_slices: OnceLock::new(),
            pods: OnceLock::new(),
            mesh_pods: OnceLock::new(),
            mesh_config_maps: OnceLock::new(),
            gateway_api: tokio::sync::OnceCell::new(),
            gateway_classes: OnceLock::new(),
            gateways: OnceLock::new(),
            http_routes: OnceLock::new(),
            grpc_routes: OnceLock::new(),
            tls_routes: OnceLock::new(),
            reference_grants: OnceLock::new(),
            namespaces: OnceLock::new(),
            tls_secrets: OnceLock::new(),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The watched namespace; `None` for all of them.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    pub fn foos(&self) -> &Watched<Foo> {
        self.foos.get_or_init(|| self.watch(watcher::Config::default(), strip_metadata_of))
    }

    pub fn envoys(&self) -> &Watched<Envoy> {
        self.envoys.get_or_init(|| self.watch(watcher::Config::default(), strip_metadata_of))
    }

    pub fn routes(&self) -> &Watched<EnvoyRoute> {
        self.routes.get_or_init(|| self.watch(watcher::Config::default(), strip_metadata_of))
    }

    /// The Deployments the operator manages (Foos' and Envoys' alike).
    pub fn deployments(&self) -> &Watched<Deployment> {
        self.deployments.get_or_init(|| {
            self.watch(
                watcher::Config::default().labels_from(&labels::managed_children_selector()),
                strip_metadata_of,
            )
        })
    }

    /// The fleets' bootstrap ConfigMaps (not the replicas' reports, which the Envoy controller
    /// reads from the operator's namespace on its own).
    pub fn config_maps(&self) -> &Watched<ConfigMap> {
        self.config_maps.get_or_init(|| {
            self.watch(
                watcher::Config::default().labels_from(&labels::envoy_children_selector()),
                strip_metadata_of,
            )
        })
    }

    /// Every Service: the fleets' own, and the backends routes name.
    pub fn services(&self) -> &Watched<Service> {
        self.services.get_or_init(|| self.watch(watcher::Config::default(), strip_metadata_of))
    }

    /// Only slices that name their Service (`kubernetes.io/service-name`).
    pub fn endpoint_slices(&self) -> &Watched<EndpointSlice> {
        self.endpoint_slices.get_or_init(|| {
            self.watch(watcher::Config::default().labels(SERVICE_NAME_LABEL), strip_metadata_of)
        })
    }

    /// Only pods that carry [`FLEET_LABEL`], reduced to their labels and addresses: a fleet of
    /// thousands of pods costs little memory.
    pub fn fleet_pods(&self) -> &Watched<Pod> {
        self.pods.get_or_init(|| self.watch(watcher::Config::default().labels(FLEET_LABEL), reduce_pod))
    }

    /// Only pods with a mesh sidecar (they carry [`MESH_SIDECAR_LABEL`]), reduced to their
    /// namespace and ServiceAccount: whose mesh identities to issue.
    pub fn mesh_pods(&self) -> &Watched<Pod> {
        self.mesh_pods.get_or_init(|| {
            self.watch(watcher::Config::default().labels(MESH_SIDECAR_LABEL), reduce_mesh_pod)
        })
    }

    /// The namespaces' mesh CA ConfigMaps (they carry [`MESH_CA_LABEL`]).
    pub fn mesh_config_maps(&self) -> &Watched<ConfigMap> {
        self.mesh_config_maps
            .get_or_init(|| self.watch(watcher::Config::default().labels(MESH_CA_LABEL), strip_metadata_of))
    }

    /// Whether the API server serves the Gateway API kinds the operator reads: asked once (the
    /// first caller waits for the answer; every later one gets the same), and logged once when
    /// it does not. The Gateway API accessors below are for an index where this is
    /// [`GatewayApi::On`]: elsewhere their watches would fail and retry forever.
    pub async fn gateway_api(&self) -> &GatewayApi {
        &self.discovery().await.api
    }

    async fn discovery(&self) -> &Discovery {
        self.gateway_api.get_or_init(|| gateway_api::discover(&self.client)).await
    }

    /// The GRPCRoutes, where the API server serves them (asked with [`Self::gateway_api`]);
    /// `None` where it does not, or before it was asked: a watch of them would fail forever.
    pub fn grpc_routes_if_served(&self) -> Option<&Watched<GRPCRoute>> {
        let served = self.gateway_api.get().is_some_and(|discovery| discovery.grpc_routes);
        served.then(|| {
            self.grpc_routes.get_or_init(|| self.watch(watcher::Config::default(), strip_metadata_of))
        })
    }

    /// The TLSRoutes, where the API server serves them (the experimental channel), as
    /// [`Self::grpc_routes_if_served`].
    pub fn tls_routes_if_served(&self) -> Option<&Watched<TLSRoute>> {
        let served = self.gateway_api.get().is_some_and(|discovery| discovery.tls_routes);
        served.then(|| {
            self.tls_routes.get_or_init(|| self.watch(watcher::Config::default(), strip_metadata_of))
        })
    }

    /// Every GatewayClass (cluster-scoped: watched in every install).
    pub fn gateway_classes(&self) -> &Watched<GatewayClass> {
        self.gateway_classes.get_or_init(|| self.watch_cluster(watcher::Config::default(), strip_metadata_of))
    }

    /// The Gateways of the watched namespace (all of them when the index has none).
    pub fn gateways(&self) -> &Watched<Gateway> {
        self.gateways.get_or_init(|| self.watch(watcher::Config::default(), strip_metadata_of))
    }

    /// The HTTPRoutes of the watched namespace (all of them when the index has none).
    pub fn http_routes(&self) -> &Watched<HTTPRoute> {
        self.http_routes.get_or_init(|| self.watch(watcher::Config::default(), strip_metadata_of))
    }

    /// The ReferenceGrants of the watched namespace (all of them when the index has none).
    pub fn reference_grants(&self) -> &Watched<ReferenceGrant> {
        self.reference_grants.get_or_init(|| self.watch(watcher::Config::default(), strip_metadata_of))
    }

    /// Namespaces, reduced to their metadata and labels (what `allowedRoutes` selects by): every
    /// one, or only the watched one (by name) when the index has a namespace.
    pub fn namespaces(&self) -> &Watched<Namespace> {
        self.namespaces.get_or_init(|| {
            let config = match &self.namespace {
                Some(namespace) => watcher::Config::default().fields(&format!("metadata.name={namespace}")),
                None => watcher::Config::default(),
            };
            self.watch_cluster(config, reduce_namespace)
        })
    }

    /// The `kubernetes.io/tls` Secrets Gateways' listeners may name, reduced to their metadata
    /// and `tls.crt`/`tls.key`. Never a Secret of the operator's own: the fleets' xDS
    /// identities (labelled [`XDS_IDENTITY_SECRET_LABEL`]), the webhook's certificate and the
    /// identity CA (labelled [`MANAGED_BY_KEY`]`=`[`MANAGED_BY`]), so no Gateway can name
    /// their keys to have them served; nor any other type of Secret. The API server leaves
    /// them out, by selector.
    pub fn tls_secrets(&self) -> &Watched<Secret> {
        self.tls_secrets.get_or_init(|| {
            let config = watcher::Config::default()
                .fields(&format!("type={TLS_SECRET_TYPE}"))
                .labels(&format!("!{XDS_IDENTITY_SECRET_LABEL},{MANAGED_BY_KEY}!={MANAGED_BY}"));
            self.watch(config, reduce_tls_secret)
        })
    }

    /// Resolves once every cache asked for so far has been listed; an error names a cache whose
    /// watch ended first (the index was dropped).
    pub async fn listed(&self) -> Result<(), CacheUnavailable> {
        // A kind asked for while waiting is waited for by whoever asked for it.
        if let Some(kind) = self.foos.get() {
            kind.listed().await?;
        }
        if let Some(kind) = self.envoys.get() {
            kind.listed().await?;
        }
        if let Some(kind) = self.routes.get() {
            kind.listed().await?;
        }
        if let Some(kind) = self.deployments.get() {
            kind.listed().await?;
        }
        if let Some(kind) = self.config_maps.get() {
            kind.listed().await?;
        }
        if let Some(kind) = self.services.get() {
            kind.listed().await?;
        }
        if let Some(kind) = self.endpoint_slices.get() {
            kind.listed().await?;
        }
        if let Some(kind) = self.pods.get() {
            kind.listed().await?;
        }
        if let Some(kind) = self.gateway_classes.get() {
            kind.listed().await?;
        }
        if let Some(kind) = self.gateways.get() {
            kind.listed().await?;
        }
        if let Some(kind) = self.http_routes.get() {
            kind.listed().await?;
        }
        if let Some(kind) = self.grpc_routes.get() {
            kind.listed().await?;
        }
        if let Some(kind) = self.tls_routes.get() {
            kind.listed().await?;
        }
        if let Some(kind) = self.reference_grants.get() {
            kind.listed().await?;
        }
        if let Some(kind) = self.namespaces.get() {
            kind.listed().await?;
        }
        if let Some(kind) = self.tls_secrets.get() {
            kind.listed().await?;
        }
        if let Some(kind) = self.mesh_pods.get() {
            kind.listed().await?;
        }
        if let Some(kind) = self.mesh_config_maps.get() {
            kind.listed().await?;
        }
        Ok(())
    }

    fn watch<K>(&self, config: watcher::Config, reduce: fn(&mut K)) -> Watched<K>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + Debug
            + DeserializeOwned
            + Send
            + Sync
            + 'static,
    {
        let api = match &self.namespace {
            Some(namespace) => Api::namespaced(self.client.clone(), namespace),
            None => Api::all(self.client.clone()),
        };
        Watched::start(api, config, reduce, self.stop.child_token())
    }

    /// [`Self::watch`] of a cluster-scoped kind.
    fn watch_cluster<K>(&self, config: watcher::Config, reduce: fn(&mut K)) -> Watched<K>
    where
        K: Resource<DynamicType = (), Scope = ClusterResourceScope>
            + Clone
            + Debug
            + DeserializeOwned
            + Send
            + Sync
            + 'static,
    {
        Watched::start(Api::all(self.client.clone()), config, reduce, self.stop.child_token())
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn strip_metadata_of<K: Resource>(object: &mut K) {
    strip_metadata(object.meta_mut());
}

fn reduce_namespace(namespace: &mut Namespace) {
    let meta = namespace.meta_mut();
    meta.managed_fields = None;
    meta.annotations = None;
    meta.owner_references = None;
    namespace.spec = None;
    namespace.status = None;
}

/// A certificate Secret as the translation reads it: its certificate chain and key, nothing
/// else (no annotations, which may hold a last-applied copy of the whole Secret).
fn reduce_tls_secret(secret: &mut Secret) {
    let meta = secret.meta_mut();
    meta.managed_fields = None;
    meta.annotations = None;
    secret.string_data = None;
    if let Some(data) = &mut secret.data {
        data.retain(|key, _| key == CERT_KEY || key == KEY_KEY);
    }
}

/// A mesh pod: its namespace and ServiceAccount, nothing else.
fn reduce_mesh_pod(pod: &mut Pod) {
    let meta = pod.meta_mut();
    meta.managed_fields = None;
    meta.annotations = None;
    meta.owner_references = None;
    meta.labels = None;
    let account = pod
        .spec
        .as_ref()
        .and_then(|spec| spec.service_account_name.clone().or_else(|| spec.service_account.clone()));
    pod.spec = Some(PodSpec { service_account_name: account, ..PodSpec::default() });
    pod.status = None;
}

fn reduce_pod(pod: &mut Pod) {
    let meta = pod.meta_mut();
    meta.managed_fields = None;
    meta.annotations = None;
    meta.owner_references = None;
    pod.spec = None;
    pod.status = pod.status.take().map(|status| PodStatus {
        pod_ip: status.pod_ip,
        pod_ips: status.pod_ips,
        ..PodStatus::default()
    });
}
