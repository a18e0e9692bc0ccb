//! What the control plane reads: informer caches of Envoys, EnvoyRoutes, Services and
//! EndpointSlices (the translation's inputs) and of fleet-labelled Pods (the authorizer's), in
//! the watched namespace or all of them. Every replica keeps its own: each serves xDS.
//!
//! Their watch events are reduced to the namespaces they touch ([`Touched`]): the translation
//! of a fleet reads only its namespace, so a change elsewhere rebuilds nothing.

use std::fmt::Debug;

use envoy_operator_core::api::{Envoy, EnvoyRoute};
use envoy_operator_core::names::{FLEET_LABEL, SERVICE_NAME_LABEL};
use futures::stream::{BoxStream, SelectAll};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Pod, PodStatus, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::Store;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::controller::watch::{api, reflect};

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

/// Starts the watches. The caches fill as the returned stream is polled; it ends only when
/// every watch does (never, short of the client going away).
pub fn watch(
    client: &Client,
    namespace: Option<&str>,
) -> (Caches, impl Stream<Item = Touched> + Send + 'static) {
    let all = watcher::Config::default;
    let (envoys, envoy_events) = reflect(api::<Envoy>(client, namespace), all());
    let (routes, route_events) = reflect(api::<EnvoyRoute>(client, namespace), all());
    let (services, service_events) = reflect(api::<Service>(client, namespace), all());
    let (endpoint_slices, slice_events) =
        reflect(api::<EndpointSlice>(client, namespace), all().labels(SERVICE_NAME_LABEL));
    let (pods, pod_events) = reflect_pods(client, namespace);

    let mut touched = SelectAll::<BoxStream<'static, Touched>>::new();
    touched.push(touches(envoy_events));
    touched.push(touches(route_events));
    touched.push(touches(service_events));
    touched.push(touches(slice_events));
    // Pods matter to the authorizer only, which reads the cache as connections come.
    touched.push(pod_events.filter_map(|_| futures::future::ready(None)).boxed());
    (Caches { envoys, routes, services, endpoint_slices, pods }, touched)
}

/// Fleet pods, keeping only what the authorizer reads (labels and addresses): a fleet of
/// thousands of pods costs little memory.
fn reflect_pods(
    client: &Client,
    namespace: Option<&str>,
) -> (Store<Pod>, impl Stream<Item = Result<watcher::Event<Pod>, watcher::Error>> + Send + 'static) {
    let (reader, writer) = kube::runtime::reflector::store();
    let stream = watcher(api::<Pod>(client, namespace), watcher::Config::default().labels(FLEET_LABEL))
        .default_backoff()
        .modify(|pod: &mut Pod| {
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
        })
        .reflect(writer);
    (reader, stream)
}

/// The namespaces a watch's events touch. Watch errors are retried by the watcher (with
/// backoff) and say nothing about the objects.
fn touches<K>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
) -> BoxStream<'static, Touched>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
{
    events
        .filter_map(|event| {
            futures::future::ready(match event {
                Ok(watcher::Event::Apply(object) | watcher::Event::Delete(object)) => {
                    Some(Touched::Namespace(object.namespace().unwrap_or_default()))
                }
                Ok(watcher::Event::InitDone) => Some(Touched::Everything),
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) | Err(_) => None,
            })
        })
        .boxed()
}

#[cfg(test)]
mod tests {
    use futures::stream;
    use serde_json::json;

    use super::*;

    fn route(namespace: &str) -> EnvoyRoute {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
            "metadata": {"name": "shop", "namespace": namespace}, "spec": {"parentRefs": [{"name": "edge"}]}}))
        .unwrap()
    }

    #[tokio::test]
    async fn events_become_the_namespaces_they_touch_and_a_relist_touches_everything() {
        let events = stream::iter(vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(route("a"))),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(route("b"))),
            Err(watcher::Error::NoResourceVersion),
            Ok(watcher::Event::Delete(route("c"))),
        ]);
        let touched: Vec<Touched> = touches(events).collect().await;
        assert_eq!(
            touched,
            [Touched::Everything, Touched::Namespace("b".into()), Touched::Namespace("c".into())]
        );
    }
}
