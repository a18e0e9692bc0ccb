//! One index per process: one watch and one cache per kind, shared by every consumer (the
//! reconcilers, the route status writer, the xDS publisher and its authorizer, the injector),
//! as linkerd2's policy controller keeps one index fed by its watches.
//!
//! A kind's watch starts the first time a consumer asks for it ([`Index::envoys`] and the
//! like) and runs while the index lives, so a replica that never leads never watches what only
//! the leader reads. Each kind keeps its objects in a cache ([`Watched::store`], objects shared
//! as `Arc`, stripped of what nobody reads) and tells its changes to every subscriber
//! ([`Watched::changes`]); [`Index::listed`] is the one "every cache is listed" signal.

mod watched;

use std::fmt::Debug;
use std::sync::OnceLock;

use envoy_operator_core::api::{Envoy, EnvoyRoute, Foo};
use envoy_operator_core::children::apply::strip_metadata;
use envoy_operator_core::children::labels;
use envoy_operator_core::names::{FLEET_LABEL, SERVICE_NAME_LABEL};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodStatus, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::runtime::watcher;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

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
}

impl Drop for Index {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn strip_metadata_of<K: Resource>(object: &mut K) {
    strip_metadata(object.meta_mut());
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
