//! What the control plane reads: the index's caches of Envoys, EnvoyRoutes, Services and
//! EndpointSlices (the translation's inputs) and of fleet-labelled Pods (the authorizer's), in
//! the watched namespace or all of them. Every replica keeps its own: each serves xDS.
//!
//! Their watch events are reduced to the namespaces they touch ([`Touched`]): the translation
//! of a fleet reads only its namespace, so a change elsewhere rebuilds nothing.

use envoy_operator_core::api::{Envoy, EnvoyRoute};
use futures::stream::{BoxStream, SelectAll};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

use crate::index::{Change, Index};

/// The caches of one replica's control plane.
#[derive(Clone)]
pub struct Caches {
    pub envoys: Store<Envoy>,
    pub routes: Store<EnvoyRoute>,
    pub services: Store<Service>,
    /// Only slices that name their Service (`kubernetes.io/service-name`).
    pub endpoint_slices: Store<EndpointSlice>,
    /// Only pods that carry [`FLEET_LABEL`], reduced to their labels and addresses.
    pub pods: Store<Pod>,
}

impl Caches {
    /// Resolves once every cache has been listed; `Err` when a cache's writer is gone first.
    pub async fn wait_until_ready(&self) -> Result<(), kube::runtime::reflector::store::WriterDropped> {
        self.envoys.wait_until_ready().await?;
        self.routes.wait_until_ready().await?;
        self.services.wait_until_ready().await?;
        self.endpoint_slices.wait_until_ready().await?;
        self.pods.wait_until_ready().await
    }
}

/// What a watch event means for the translation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Touched {
    /// An object of this namespace changed.
    Namespace(String),
    /// A watch relisted: objects deleted meanwhile left the cache without an event of their
    /// own, so every namespace is suspect.
    Everything,
}

/// The index's caches of what the control plane reads, and the namespaces the translation's
/// inputs' changes touch.
pub fn from_index(index: &Index) -> (Caches, impl Stream<Item = Touched> + Send + 'static) {
    let slices = index.endpoint_slices();
    let caches = Caches {
        envoys: index.envoys().store().clone(),
        routes: index.routes().store().clone(),
        services: index.services().store().clone(),
        endpoint_slices: slices.store().clone(),
        pods: index.fleet_pods().store().clone(),
    };
    let mut touched = route_inputs_touched(index);
    touched.push(touches(slices.changes()));
    // Pods matter to the authorizer only, which reads the cache as connections come.
    (caches, touched)
}

/// [`from_index`] for a process that translates only for the routes' outcomes and serves no
/// xDS (`envoy-operator controller`): the outcomes depend on Envoys, routes and Services alone,
/// so neither EndpointSlices nor pods are watched, and their caches are empty.
pub fn translation_from_index(index: &Index) -> (Caches, impl Stream<Item = Touched> + Send + 'static) {
    let caches = Caches {
        envoys: index.envoys().store().clone(),
        routes: index.routes().store().clone(),
        services: index.services().store().clone(),
        endpoint_slices: listed_empty(),
        pods: listed_empty(),
    };
    (caches, route_inputs_touched(index))
}

/// The namespaces the changes of Envoys, routes and Services touch.
fn route_inputs_touched(index: &Index) -> SelectAll<BoxStream<'static, Touched>> {
    let mut touched = SelectAll::<BoxStream<'static, Touched>>::new();
    touched.push(touches(index.envoys().changes()));
    touched.push(touches(index.routes().changes()));
    touched.push(touches(index.services().changes()));
    touched
}

/// A cache of nothing, listed.
pub(crate) fn listed_empty<K: Resource<DynamicType = ()> + Clone + 'static>() -> Store<K> {
    let (store, mut writer) = reflector::store();
    writer.apply_watcher_event(&watcher::Event::Init);
    writer.apply_watcher_event(&watcher::Event::InitDone);
    store
}

/// The namespaces a kind's changes touch.
fn touches<K>(changes: impl Stream<Item = Change<K>> + Send + 'static) -> BoxStream<'static, Touched>
where
    K: Resource + Send + Sync + 'static,
{
    changes
        .map(|change| match change {
            Change::Applied(object) | Change::Deleted(object) => {
                Touched::Namespace(object.namespace().unwrap_or_default())
            }
            Change::Relisted => Touched::Everything,
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::stream;
    use serde_json::json;

    use super::*;

    fn route(namespace: &str) -> EnvoyRoute {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
            "metadata": {"name": "shop", "namespace": namespace}, "spec": {"parentRefs": [{"name": "edge"}]}}))
        .unwrap()
    }

    #[tokio::test]
    async fn changes_become_the_namespaces_they_touch_and_a_relist_touches_everything() {
        let changes = stream::iter(vec![
            Change::Relisted,
            Change::Applied(Arc::new(route("b"))),
            Change::Deleted(Arc::new(route("c"))),
        ]);
        let touched: Vec<Touched> = touches(changes).collect().await;
        assert_eq!(
            touched,
            [Touched::Everything, Touched::Namespace("b".into()), Touched::Namespace("c".into())]
        );
    }
}
