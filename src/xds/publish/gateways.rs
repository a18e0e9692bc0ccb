//! The Gateway API's side of the publisher: every GatewayClass, Gateway, HTTPRoute and
//! ReferenceGrant, with the Namespaces, Services, EndpointSlices and TLS Secrets they name and
//! the Envoys that are Gateways' fleets, translated in one pass over the whole cluster
//! ([`gateway::translate`]: a Gateway takes routes, backends and certificates from other
//! namespaces). Each Gateway's configuration is published under its fleet's key (the fleet is
//! an Envoy, so the authorizer serves its proxies as it serves any Envoy's), and the whole
//! translation is kept in [`GatewayOutcomes`] for the leader's status writers and fleet applier.
//! Changes to Services, EndpointSlices, Secrets and Envoys that no Gateway API object names do
//! not re-run it (`Named`).
//!
//! The mesh's sidecars ([`mesh`]: HTTPRoutes on Services) come from the same translation, one
//! snapshot per meshed namespace under [`mesh::fleet_key`].
//!
//! The snapshot cache is shared with the EnvoyRoute publisher ([`super::publish`]); a key
//! belongs to this one when its Envoy carries [`GATEWAY_LABEL`] or it is a mesh's, to that one
//! otherwise, and each removes only its own.
//!
//! Only started where the API server serves the Gateway API ([`crate::index::GatewayApi`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use envoy_operator_core::api::Envoy;
use envoy_operator_core::api::gateway::{
    GRPCRoute, GRPCRouteSpec, Gateway, GatewayClass, HTTPRoute, HTTPRouteSpec, ReferenceGrant, TLSRoute,
    TLSRouteSpec,
};
use envoy_operator_core::fleet::isolate::RouteId;
use envoy_operator_core::names::{CONTROLLER_NAME, GATEWAY_LABEL, SERVICE_NAME_LABEL};
use envoy_operator_core::translate::gateway::fleet::is_fleet_of;
use envoy_operator_core::translate::gateway::{
    self, GatewayInputs, GatewayOutcome, GatewayTranslation, RouteOutcome, named,
};
use envoy_operator_core::translate::mesh;
use futures::stream::{BoxStream, SelectAll};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::runtime::reflector::store::WriterDropped;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::watch;
use tracing::info;

use super::{Published, Said, publish_logged, snapshot};
use crate::index::{Change, Index, Watched};
use crate::xds::isolate::Isolation;
use crate::xds::server::{FleetKey, SnapshotCache, Tracker};

/// The newest Gateway API translation. Cheap to clone; every clone shares it.
#[derive(Clone)]
pub struct GatewayOutcomes {
    latest: watch::Sender<Arc<GatewayTranslation>>,
}

impl Default for GatewayOutcomes {
    fn default() -> Self {
        Self::new()
    }
}

impl GatewayOutcomes {
    /// Outcomes of nothing, until the first translation.
    pub fn new() -> Self {
        Self { latest: watch::Sender::new(Arc::default()) }
    }

    pub fn latest(&self) -> Arc<GatewayTranslation> {
        self.latest.borrow().clone()
    }

    /// The newest translation from now on: `changed()` wakes the receiver when a translation
    /// differs from the one before (an equal one wakes nobody).
    pub fn subscribe(&self) -> watch::Receiver<Arc<GatewayTranslation>> {
        self.latest.subscribe()
    }

    /// Makes `translation` the newest; says whether it differs from the one before.
    pub(crate) fn replace(&self, translation: GatewayTranslation) -> bool {
        self.latest.send_if_modified(|latest| {
            if **latest == translation {
                return false;
            }
            *latest = Arc::new(translation);
            true
        })
    }
}

/// The caches the Gateway API translation reads.
#[derive(Clone)]
pub struct GatewayCaches {
    pub classes: Store<GatewayClass>,
    pub gateways: Store<Gateway>,
    pub routes: Store<HTTPRoute>,
    /// Listed and empty where the API server does not serve GRPCRoutes.
    pub grpc_routes: Store<GRPCRoute>,
    /// Listed and empty where the API server does not serve TLSRoutes.
    pub tls_routes: Store<TLSRoute>,
    pub grants: Store<ReferenceGrant>,
    pub namespaces: Store<Namespace>,
    pub services: Store<Service>,
    /// Empty where the process serves no xDS (statuses need no endpoints).
    pub endpoint_slices: Store<EndpointSlice>,
    /// `kubernetes.io/tls` Secrets only.
    pub secrets: Store<Secret>,
    /// Every Envoy: the Gateways' fleets (labelled [`GATEWAY_LABEL`]), those whose names
    /// Gateways would take, and the GatewayClasses' parameters.
    pub envoys: Store<Envoy>,
    /// The pods with a mesh sidecar: their namespaces are meshed, labelled or not.
    pub mesh_pods: Store<Pod>,
}

impl GatewayCaches {
    /// Resolves once every cache has been listed; `Err` when a cache's writer is gone first.
    pub async fn wait_until_ready(&self) -> Result<(), WriterDropped> {
        self.classes.wait_until_ready().await?;
        self.gateways.wait_until_ready().await?;
        self.routes.wait_until_ready().await?;
        self.grpc_routes.wait_until_ready().await?;
        self.tls_routes.wait_until_ready().await?;
        self.grants.wait_until_ready().await?;
        self.namespaces.wait_until_ready().await?;
        self.services.wait_until_ready().await?;
        self.endpoint_slices.wait_until_ready().await?;
        self.secrets.wait_until_ready().await?;
        self.mesh_pods.wait_until_ready().await?;
        self.envoys.wait_until_ready().await
    }
}

/// The index's caches of the translation's inputs, and a tick whenever one of them changes in
/// a way the translation could read (`Named`). Call only where [`Index::gateway_api`] is on.
pub fn from_index(index: &Index) -> (GatewayCaches, impl Stream<Item = ()> + Send + 'static) {
    let slices = index.endpoint_slices();
    let (caches, mut changed) =
        statuses_from_index_with(index, slices.store().clone(), index.mesh_pods().store().clone());
    changed.push(namespace_ticks(index.mesh_pods()));
    let named = Named::from(&caches);
    changed.push(named_ticks(slices.changes(), move |slice: &EndpointSlice| {
        let service = slice.labels().get(SERVICE_NAME_LABEL);
        service.is_some_and(|service| named.service(&slice.namespace().unwrap_or_default(), service))
    }));
    (caches, changed)
}

/// [`from_index`] for a process that translates only for the statuses and serves no xDS (the
/// `controller` command): no EndpointSlice is watched, and their cache is empty.
pub fn statuses_from_index(index: &Index) -> (GatewayCaches, impl Stream<Item = ()> + Send + 'static) {
    // Nor the mesh's pods: which namespaces are meshed decides snapshots, not statuses.
    statuses_from_index_with(index, super::inputs::listed_empty(), super::inputs::listed_empty())
}

/// The caches where the API server serves no Gateway API: no routes of any kind (listed and
/// empty), only the Namespaces, so every namespace labelled for injection still gets its mesh
/// sidecars' configuration, pass-through only: a mesh sidecar is Ready only once configured, and
/// its pod must start and reach everything as without a mesh. Ticks on Namespace changes.
pub fn mesh_only_from_index(index: &Index) -> (GatewayCaches, impl Stream<Item = ()> + Send + 'static) {
    use super::inputs::listed_empty as empty;
    let caches = GatewayCaches {
        classes: empty(),
        gateways: empty(),
        routes: empty(),
        grpc_routes: empty(),
        tls_routes: empty(),
        grants: empty(),
        namespaces: index.namespaces().store().clone(),
        services: empty(),
        endpoint_slices: empty(),
        secrets: empty(),
        envoys: empty(),
        mesh_pods: index.mesh_pods().store().clone(),
    };
    let mut changed = SelectAll::<BoxStream<'static, ()>>::new();
    changed.push(ticks(index.namespaces().changes()));
    changed.push(namespace_ticks(index.mesh_pods()));
    (caches, changed)
}

fn statuses_from_index_with(
    index: &Index,
    endpoint_slices: Store<EndpointSlice>,
    mesh_pods: Store<Pod>,
) -> (GatewayCaches, SelectAll<BoxStream<'static, ()>>) {
    let grpc_routes = index.grpc_routes_if_served();
    let tls_routes = index.tls_routes_if_served();
    let caches = GatewayCaches {
        classes: index.gateway_classes().store().clone(),
        gateways: index.gateways().store().clone(),
        routes: index.http_routes().store().clone(),
        grpc_routes: grpc_routes.map_or_else(super::inputs::listed_empty, |watched| watched.store().clone()),
        tls_routes: tls_routes.map_or_else(super::inputs::listed_empty, |watched| watched.store().clone()),
        grants: index.reference_grants().store().clone(),
        namespaces: index.namespaces().store().clone(),
        services: index.services().store().clone(),
        endpoint_slices,
        secrets: index.tls_secrets().store().clone(),
        envoys: index.envoys().store().clone(),
        mesh_pods,
    };
    let named = Named::from(&caches);
    let mut changed = SelectAll::<BoxStream<'static, ()>>::new();
    changed.push(ticks(index.gateway_classes().changes()));
    changed.push(ticks(index.gateways().changes()));
    changed.push(ticks(index.http_routes().changes()));
    if let Some(grpc_routes) = grpc_routes {
        changed.push(ticks(grpc_routes.changes()));
    }
    if let Some(tls_routes) = tls_routes {
        changed.push(ticks(tls_routes.changes()));
    }
    changed.push(ticks(index.reference_grants().changes()));
    changed.push(ticks(index.namespaces().changes()));
    let services = named.clone();
    changed.push(named_ticks(index.services().changes(), move |service: &Service| {
        services.service(&service.namespace().unwrap_or_default(), &service.name_any())
    }));
    let secrets = named.clone();
    changed.push(named_ticks(index.tls_secrets().changes(), move |secret: &Secret| {
        secrets.secret(&secret.namespace().unwrap_or_default(), &secret.name_any())
    }));
    changed.push(named_ticks(index.envoys().changes(), move |envoy: &Envoy| named.envoy(envoy)));
    (caches, changed)
}

fn ticks<K: Send + 'static>(
    changes: impl Stream<Item = Change<K>> + Send + 'static,
) -> BoxStream<'static, ()> {
    changes.map(|_| ()).boxed()
}

/// A tick for each mesh pod that is the first, or the last, of its namespace (a namespace
/// meshed or no longer, by its pods), and for each relist: a pod's other changes change nothing
/// the translation reads. The pods per namespace are counted from the changes, and counted
/// again from the cache at each relist (a subscriber that fell behind missed some).
fn namespace_ticks(pods: &Watched<Pod>) -> BoxStream<'static, ()> {
    let store = pods.store().clone();
    let mut by_namespace: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    pods.changes()
        .filter_map(move |change| {
            let tick = match &change {
                Change::Relisted => {
                    by_namespace.clear();
                    for pod in store.state() {
                        by_namespace
                            .entry(pod.namespace().unwrap_or_default())
                            .or_default()
                            .insert(pod.name_any());
                    }
                    true
                }
                Change::Applied(pod) | Change::Deleted(pod) => {
                    let names = by_namespace.entry(pod.namespace().unwrap_or_default()).or_default();
                    let before = names.is_empty();
                    match change {
                        Change::Applied(_) => names.insert(pod.name_any()),
                        _ => names.remove(&pod.name_any()),
                    };
                    before != names.is_empty()
                }
            };
            std::future::ready(tick.then_some(()))
        })
        .boxed()
}

/// A tick for each change of `changes` to an object the Gateway API objects name (`named`),
/// and for each relist (anything may have changed then).
fn named_ticks<K: Send + Sync + 'static>(
    changes: impl Stream<Item = Change<K>> + Send + 'static,
    named: impl Fn(&K) -> bool + Send + 'static,
) -> BoxStream<'static, ()> {
    changes
        .filter(move |change| {
            let read = match change {
                Change::Applied(object) | Change::Deleted(object) => named(object),
                Change::Relisted => true,
            };
            std::future::ready(read)
        })
        .map(|_| ())
        .boxed()
}

/// Which Services, Secrets and Envoys the Gateway API objects in the caches name, for
/// skipping the changes of the others: in a busy cluster, most changes are other workloads'
/// endpoints, and each would re-run the whole cluster's translation. Read when the change
/// comes, so an object named by a route not yet cached is caught by the route's own change.
#[derive(Clone)]
struct Named {
    classes: Store<GatewayClass>,
    gateways: Store<Gateway>,
    routes: Store<HTTPRoute>,
    grpc_routes: Store<GRPCRoute>,
    tls_routes: Store<TLSRoute>,
}

impl From<&GatewayCaches> for Named {
    fn from(caches: &GatewayCaches) -> Self {
        Self {
            classes: caches.classes.clone(),
            gateways: caches.gateways.clone(),
            routes: caches.routes.clone(),
            grpc_routes: caches.grpc_routes.clone(),
            tls_routes: caches.tls_routes.clone(),
        }
    }
}

impl Named {
    /// A route's backend, mirror or Service parent (the mesh's), or a Gateway's fleet's
    /// Service (its addresses).
    fn service(&self, namespace: &str, name: &str) -> bool {
        self.routes.find(|route| named::route_names_service(route, namespace, name)).is_some()
            || self.routes.find(|route| mesh::route_names_parent(route, namespace, name)).is_some()
            || self.grpc_routes.find(|route| named::route_names_service(route, namespace, name)).is_some()
            || self.tls_routes.find(|route| named::route_names_service(route, namespace, name)).is_some()
            || self.gateways.find(|gateway| named::names_fleet(gateway, namespace, name)).is_some()
    }

    /// A listener's certificate.
    fn secret(&self, namespace: &str, name: &str) -> bool {
        self.gateways.find(|gateway| named::gateway_names_secret(gateway, namespace, name)).is_some()
    }

    /// A Gateway's fleet, an Envoy taking a Gateway's fleet's name, or a class's parameters.
    fn envoy(&self, envoy: &Envoy) -> bool {
        let (namespace, name) = (envoy.namespace().unwrap_or_default(), envoy.name_any());
        is_gateway_fleet(envoy)
            || self.gateways.find(|gateway| named::names_fleet(gateway, &namespace, &name)).is_some()
            || self.classes.find(|class| named::class_names_envoy(class, &namespace, &name)).is_some()
    }
}

/// An Envoy whose configuration the Gateway API translation makes.
pub fn is_gateway_fleet(envoy: &Envoy) -> bool {
    envoy.labels().contains_key(GATEWAY_LABEL)
}

/// Where a translation's results go.
#[derive(Clone, Default)]
pub struct GatewayOutputs {
    /// The snapshots served and the tracker of their proxies; `None` where this process serves
    /// no xDS.
    pub snapshots: Option<(SnapshotCache, Tracker)>,
    pub outcomes: GatewayOutcomes,
    /// Which routes each published version carries, and those the proxies rejected, left out.
    pub isolation: Option<Isolation>,
}

/// Translates every Gateway from the caches, publishes each one's fleet, removes the snapshots
/// of Gateway fleets no Gateway has any more, and makes the translation the newest outcome.
pub fn publish(caches: &GatewayCaches, outputs: &GatewayOutputs) -> Published {
    let envoys = caches.envoys.state();
    let classes = caches.classes.state();
    let routes = caches.routes.state();
    let grpc_routes = caches.grpc_routes.state();
    let tls_routes = caches.tls_routes.state();
    let rejected = outputs.isolation.as_ref().map(Isolation::rejections).unwrap_or_default();
    // No class names the operator (a cluster whose Gateways are another controller's) and no
    // namespace is meshed: nothing to translate, whatever else changed, so the other caches are
    // not even read.
    let namespaces = caches.namespaces.state();
    let mesh_pods = caches.mesh_pods.state();
    let ours = classes.iter().any(|class| class.spec.controller_name == CONTROLLER_NAME)
        || namespaces.iter().any(|namespace| mesh::is_meshed(namespace))
        || !mesh_pods.is_empty();
    let translation = match ours {
        true => gateway::translate(&GatewayInputs {
            classes: &classes,
            gateways: &caches.gateways.state(),
            routes: &routes,
            grpc_routes: &grpc_routes,
            tls_routes: &tls_routes,
            grants: &caches.grants.state(),
            namespaces: &namespaces,
            services: &caches.services.state(),
            endpoint_slices: &caches.endpoint_slices.state(),
            secrets: &caches.secrets.state(),
            fleets: &envoys,
            parameters: &envoys,
            rejected: &rejected,
            mesh_pods: &mesh_pods,
        }),
        false => GatewayTranslation::default(),
    };
    let mut published = Published::default();
    if let Some((cache, tracker)) = &outputs.snapshots {
        let mut served = BTreeSet::new();
        for outcome in &translation.gateways {
            // No fleet: nothing to serve, or the fleet's name is another Envoy's, whose snapshot
            // is not ours.
            let Some(fleet) = &outcome.fleet else { continue };
            // The Gateway's fleet under its name, and until it is deleted, any earlier fleet of
            // the Gateway under another (moved to the current name) keeps its proxies current.
            let earlier = envoys.iter().filter(|envoy| {
                envoy.namespace().as_deref() == Some(outcome.namespace.as_str())
                    && envoy.name_any() != fleet.name_any()
                    && is_fleet_of(envoy, &outcome.name, outcome.uid.as_deref())
            });
            let names = std::iter::once(fleet.name_any()).chain(earlier.map(|envoy| envoy.name_any()));
            for name in names {
                let key = FleetKey::from(format!("{}/{name}", outcome.namespace));
                served.insert(key.clone());
                match snapshot(&outcome.resources) {
                    Ok(snapshot) => {
                        let version = cache.set(key.clone(), snapshot);
                        if let Some(isolation) = &outputs.isolation {
                            let kinds = Kinds { http: &routes, grpc: &grpc_routes, tls: &tls_routes };
                            let carried = carried(outcome, &translation, &kinds);
                            isolation.record(
                                &key,
                                &version,
                                carried.iter().map(|(id, generation, spec)| (id.clone(), *generation, spec)),
                            );
                        }
                        published.fleets.push((key, version));
                    }
                    Err(error) => published.failed.push((key, error.to_string())),
                }
            }
        }
        // Each meshed namespace's sidecars, under the mesh's key of the namespace.
        for outcome in &translation.meshes {
            let key = FleetKey::from(mesh::fleet_key(&outcome.namespace));
            served.insert(key.clone());
            match snapshot(&outcome.resources) {
                Ok(snapshot) => {
                    let version = cache.set(key.clone(), snapshot);
                    if let Some(isolation) = &outputs.isolation {
                        let carried = mesh::served_routes(outcome);
                        let carried = routes.iter().filter(|route| {
                            carried.contains(&(route.namespace().unwrap_or_default(), route.name_any()))
                        });
                        isolation.record(
                            &key,
                            &version,
                            carried.filter_map(|route| {
                                Some((
                                    RouteId::of("HTTPRoute", &route.metadata)?,
                                    route.metadata.generation,
                                    &route.spec,
                                ))
                            }),
                        );
                    }
                    published.fleets.push((key, version));
                }
                Err(error) => published.failed.push((key, error.to_string())),
            }
        }
        // A fleet no Gateway serves any more (its Gateway is gone, or no longer of our class),
        // or a namespace no longer meshed. A key whose Envoy is gone the EnvoyRoute publisher
        // removes; one of an Envoy without the label is that publisher's own.
        for key in cache.keys() {
            let ours = is_fleet_key(&envoys, &key) || mesh::is_fleet_key(key.as_str());
            if served.contains(&key) || !ours {
                continue;
            }
            cache.remove(&key);
            tracker.forget(&key);
            if let Some(isolation) = &outputs.isolation {
                isolation.forget(&key);
            }
            published.removed.push(key);
        }
    }
    outputs.outcomes.replace(translation);
    published
}

/// A route's spec as a version of a fleet carries it, whatever its kind.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum CarriedSpec<'a> {
    Http(&'a HTTPRouteSpec),
    Grpc(&'a GRPCRouteSpec),
    Tls(&'a TLSRouteSpec),
}

/// The route objects of every kind, as the caches hold them now.
struct Kinds<'a> {
    http: &'a [Arc<HTTPRoute>],
    grpc: &'a [Arc<GRPCRoute>],
    tls: &'a [Arc<TLSRoute>],
}

/// The routes (HTTPRoutes, GRPCRoutes, TLSRoutes) a version of `gateway`'s fleet carries:
/// those a parent of the Gateway accepted, as they are now.
fn carried<'a>(
    gateway: &GatewayOutcome,
    translation: &GatewayTranslation,
    kinds: &Kinds<'a>,
) -> Vec<(RouteId, Option<i64>, CarriedSpec<'a>)> {
    let on_gateway = |outcome: &&RouteOutcome| {
        outcome.parents.iter().any(|parent| {
            let namespace = parent.parent_ref.namespace.as_deref().unwrap_or(&outcome.namespace);
            parent.accepted.status && parent.parent_ref.name == gateway.name && namespace == gateway.namespace
        })
    };
    let accepted = |outcomes: &[RouteOutcome]| -> BTreeSet<(String, String)> {
        outcomes.iter().filter(on_gateway).map(|o| (o.namespace.clone(), o.name.clone())).collect()
    };
    let (http, grpc) = (accepted(&translation.routes), accepted(&translation.grpc_routes));
    let tls = accepted(&translation.tls_routes);
    let is_in = |set: &BTreeSet<(String, String)>, metadata: &ObjectMeta| {
        set.contains(&(
            metadata.namespace.clone().unwrap_or_default(),
            metadata.name.clone().unwrap_or_default(),
        ))
    };
    let http_routes = kinds.http.iter().filter(|route| is_in(&http, &route.metadata)).filter_map(|route| {
        Some((
            RouteId::of("HTTPRoute", &route.metadata)?,
            route.metadata.generation,
            CarriedSpec::Http(&route.spec),
        ))
    });
    let grpc_routes = kinds.grpc.iter().filter(|route| is_in(&grpc, &route.metadata)).filter_map(|route| {
        Some((
            RouteId::of("GRPCRoute", &route.metadata)?,
            route.metadata.generation,
            CarriedSpec::Grpc(&route.spec),
        ))
    });
    let tls_routes = kinds.tls.iter().filter(|route| is_in(&tls, &route.metadata)).filter_map(|route| {
        Some((
            RouteId::of("TLSRoute", &route.metadata)?,
            route.metadata.generation,
            CarriedSpec::Tls(&route.spec),
        ))
    });
    http_routes.chain(grpc_routes).chain(tls_routes).collect()
}

/// Whether `key` is the key of an Envoy that is a Gateway's fleet.
fn is_fleet_key(envoys: &[Arc<Envoy>], key: &FleetKey) -> bool {
    let Some((namespace, name)) = key.as_str().split_once('/') else { return false };
    let wanted = ObjectRef::<Envoy>::new(name).within(namespace);
    envoys.iter().any(|envoy| ObjectRef::from_obj(&**envoy) == wanted && is_gateway_fleet(envoy))
}

/// Publishes once the caches are filled (so that no Gateway is judged from a partial view),
/// then after every batch of changes, until `changed` ends. `ready` is called after the first
/// publication.
pub async fn run(
    caches: GatewayCaches,
    changed: impl Stream<Item = ()> + Send + 'static,
    outputs: GatewayOutputs,
    ready: impl FnOnce() + Send,
) {
    let changed = changed.fuse();
    tokio::pin!(changed);
    if !super::until_filled(caches.wait_until_ready(), &mut changed).await {
        return;
    }
    rebuild(&caches, &outputs).await;
    info!(
        gateways = outputs.outcomes.latest().gateways.len(),
        "the Gateway API translation's caches are filled"
    );
    ready();

    while changed.next().await.is_some() {
        super::batch(&mut changed, |()| {}).await;
        rebuild(&caches, &outputs).await;
    }
}

/// [`publish`] off the async workers: the whole cluster's Gateway API objects are CPU work.
async fn rebuild(caches: &GatewayCaches, outputs: &GatewayOutputs) {
    let (caches, outputs) = (caches.clone(), outputs.clone());
    publish_logged(move || publish(&caches, &outputs), &GATEWAYS_SAID).await;
}

const GATEWAYS_SAID: Said = Said {
    failed: "translating the Gateway API objects failed",
    inconsistent: "the Gateway's configuration is inconsistent; its proxies keep the last one",
    removed: "no longer serving the Gateway's fleet (its Gateway is gone or not of the operator's classes)",
    published: "published the Gateways' configuration",
};

#[cfg(test)]
mod tests {
    use envoy_operator_core::envoy::type_urls::LISTENER;
    use envoy_operator_core::xds::Resources;
    use kube::runtime::reflector::{self, store::Writer};
    use kube::runtime::watcher;
    use serde_json::{Value, json};

    use super::*;

    /// Writers of every cache of a [`GatewayCaches`], each listed (empty).
    struct Fixture {
        caches: GatewayCaches,
        classes: Writer<GatewayClass>,
        gateways: Writer<Gateway>,
        envoys: Writer<Envoy>,
        routes: Writer<HTTPRoute>,
        outputs: GatewayOutputs,
        cache: SnapshotCache,
        // Kept so the caches stay open.
        _others: (Writer<ReferenceGrant>, Writer<Namespace>, Writer<Service>),
        _more: (Writer<EndpointSlice>, Writer<Secret>),
    }

    fn listed<K: kube::Resource<DynamicType = ()> + Clone + 'static>() -> (Store<K>, Writer<K>) {
        let (store, mut writer) = reflector::store();
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
        (store, writer)
    }

    fn fixture() -> Fixture {
        let (classes, class_writer) = listed();
        let (gateways, gateway_writer) = listed();
        let (routes, route_writer) = listed();
        let (grants, grant_writer) = listed();
        let (namespaces, namespace_writer) = listed();
        let (services, service_writer) = listed();
        let (endpoint_slices, slice_writer) = listed();
        let (secrets, secret_writer) = listed();
        let (envoys, envoy_writer) = listed();
        let cache = SnapshotCache::new();
        Fixture {
            caches: GatewayCaches {
                classes,
                gateways,
                routes,
                grpc_routes: crate::xds::publish::inputs::listed_empty(),
                tls_routes: crate::xds::publish::inputs::listed_empty(),
                grants,
                namespaces,
                services,
                endpoint_slices,
                secrets,
                envoys,
                mesh_pods: crate::xds::publish::inputs::listed_empty(),
            },
            classes: class_writer,
            gateways: gateway_writer,
            envoys: envoy_writer,
            outputs: GatewayOutputs {
                snapshots: Some((cache.clone(), Tracker::new())),
                outcomes: GatewayOutcomes::new(),
                isolation: None,
            },
            cache,
            routes: route_writer,
            _others: (grant_writer, namespace_writer, service_writer),
            _more: (slice_writer, secret_writer),
        }
    }

    fn apply<K>(writer: &mut Writer<K>, object: Value)
    where
        K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned,
    {
        writer.apply_watcher_event(&watcher::Event::Apply(serde_json::from_value(object).unwrap()));
    }

    fn delete<K>(writer: &mut Writer<K>, object: Value)
    where
        K: kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned,
    {
        writer.apply_watcher_event(&watcher::Event::Delete(serde_json::from_value(object).unwrap()));
    }

    fn class() -> Value {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
               "metadata": {"name": "envoy", "generation": 1}, "spec": {"controllerName": CONTROLLER_NAME}})
    }

    fn gateway() -> Value {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
               "metadata": {"name": "edge", "namespace": "shop", "uid": "gw-1", "generation": 1},
               "spec": {"gatewayClassName": "envoy",
                        "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}})
    }

    /// An Envoy; the fleet of [`gateway`] when `gateway` names it (labelled and owned by it).
    fn envoy(name: &str, gateway: Option<&str>) -> Value {
        let mut envoy = json!({"apiVersion": "example.com/v1", "kind": "Envoy",
                               "metadata": {"name": name, "namespace": "shop"}, "spec": {}});
        if let Some(gateway) = gateway {
            envoy["metadata"]["labels"] = json!({GATEWAY_LABEL: gateway});
            envoy["metadata"]["ownerReferences"] = json!([{"apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway", "name": gateway, "uid": "gw-1", "controller": true}]);
        }
        envoy
    }

    fn empty_snapshot() -> crate::xds::server::Snapshot {
        snapshot(&Resources::default()).expect("an empty snapshot")
    }

    #[test]
    fn outcomes_wake_subscribers_only_when_the_translation_changes() {
        let outcomes = GatewayOutcomes::new();
        let mut subscriber = outcomes.subscribe();
        assert!(!outcomes.replace(GatewayTranslation::default()), "the same as the first");
        assert!(!subscriber.has_changed().unwrap());

        let mut f = fixture();
        apply(&mut f.classes, class());
        let translation =
            gateway::translate(&GatewayInputs { classes: &f.caches.classes.state(), ..Default::default() });
        assert_eq!(translation.classes.len(), 1, "our class is judged");
        assert!(outcomes.replace(translation.clone()));
        assert!(subscriber.has_changed().unwrap());
        assert_eq!(*subscriber.borrow_and_update().clone(), translation);
        assert!(!outcomes.replace(translation), "an equal translation wakes nobody");
        assert!(!subscriber.has_changed().unwrap());
        assert_eq!(outcomes.latest().classes.len(), 1);
    }

    #[test]
    fn a_gateway_is_published_under_its_fleet_until_it_is_gone() {
        let mut f = fixture();
        apply(&mut f.classes, class());
        apply(&mut f.gateways, gateway());
        apply(&mut f.envoys, envoy("edge-envoy", Some("edge")));
        let published = publish(&f.caches, &f.outputs);
        assert_eq!(
            published.fleets.iter().map(|(key, _)| key.as_str()).collect::<Vec<_>>(),
            ["shop/edge-envoy"]
        );
        assert!(published.failed.is_empty(), "{published:?}");
        let snapshot = f.cache.get(&FleetKey::from("shop/edge-envoy")).expect("the Gateway's snapshot");
        assert_eq!(snapshot.resources(LISTENER).iter().count(), 1, "one listener, on port 80");
        let latest = f.outputs.outcomes.latest();
        assert_eq!((latest.classes.len(), latest.gateways.len()), (1, 1), "{latest:?}");

        // Another Envoy of the namespace, the EnvoyRoute publisher's: never this one's to remove.
        apply(&mut f.envoys, envoy("mesh", None));
        f.cache.set(FleetKey::from("shop/mesh"), empty_snapshot());

        delete(&mut f.gateways, gateway());
        let published = publish(&f.caches, &f.outputs);
        assert_eq!(published.removed, [FleetKey::from("shop/edge-envoy")], "its fleet is left unserved");
        assert_eq!(f.cache.keys(), [FleetKey::from("shop/mesh")]);
        assert!(f.outputs.outcomes.latest().gateways.is_empty());
    }

    /// A fleet made under the Gateway's name (before fleets were named `<gateway>-<class>`) is
    /// served the Gateway's configuration beside the new one until it is deleted.
    #[test]
    fn a_fleet_of_the_gateway_under_its_earlier_name_is_served_until_it_goes() {
        let mut f = fixture();
        apply(&mut f.classes, class());
        apply(&mut f.gateways, gateway());
        apply(&mut f.envoys, envoy("edge", Some("edge")));
        let published = publish(&f.caches, &f.outputs);
        let keys: Vec<&str> = published.fleets.iter().map(|(key, _)| key.as_str()).collect();
        assert_eq!(keys, ["shop/edge-envoy", "shop/edge"]);
        let (new, old) =
            (f.cache.get(&FleetKey::from("shop/edge-envoy")), f.cache.get(&FleetKey::from("shop/edge")));
        let listeners = |snapshot: Option<Arc<crate::xds::server::Snapshot>>| {
            snapshot.expect("a snapshot").resources(LISTENER).iter().count()
        };
        assert_eq!((listeners(new), listeners(old)), (1, 1), "the same configuration");

        delete(&mut f.envoys, envoy("edge", Some("edge")));
        let published = publish(&f.caches, &f.outputs);
        assert_eq!(
            published.removed,
            [] as [FleetKey; 0],
            "a key whose Envoy is gone is the other publisher's"
        );
        assert_eq!(
            published.fleets.iter().map(|(key, _)| key.as_str()).collect::<Vec<_>>(),
            ["shop/edge-envoy"]
        );
    }

    #[test]
    fn a_gateway_of_another_controllers_class_is_not_ours_and_its_fleet_goes() {
        let mut f = fixture();
        apply(&mut f.classes, class());
        apply(&mut f.gateways, gateway());
        apply(&mut f.envoys, envoy("edge-envoy", Some("edge")));
        publish(&f.caches, &f.outputs);
        assert_eq!(f.cache.keys(), [FleetKey::from("shop/edge-envoy")]);

        // The class moves to another controller: no Gateway is the operator's any more.
        let mut theirs = class();
        theirs["spec"]["controllerName"] = json!("example.net/another-gateway");
        apply(&mut f.classes, theirs);
        let published = publish(&f.caches, &f.outputs);
        assert_eq!(published.removed, [FleetKey::from("shop/edge-envoy")]);
        assert!(f.cache.keys().is_empty());
        assert_eq!(*f.outputs.outcomes.latest(), GatewayTranslation::default());
    }

    #[test]
    fn a_gateway_whose_name_another_envoy_holds_takes_no_snapshot_of_it() {
        let mut f = fixture();
        apply(&mut f.classes, class());
        apply(&mut f.gateways, gateway());
        // A user's Envoy of the fleet's name, not its fleet: its snapshot is not ours.
        apply(&mut f.envoys, envoy("edge-envoy", None));
        f.cache.set(FleetKey::from("shop/edge-envoy"), empty_snapshot());
        let before = f.cache.get(&FleetKey::from("shop/edge-envoy")).expect("the Envoy's snapshot");
        let published = publish(&f.caches, &f.outputs);
        assert!(published.fleets.is_empty() && published.removed.is_empty(), "{published:?}");
        let after = f.cache.get(&FleetKey::from("shop/edge-envoy")).expect("still the Envoy's snapshot");
        assert!(Arc::ptr_eq(&before, &after), "untouched");
        assert_eq!(f.outputs.outcomes.latest().gateways[0].fleet, None);
    }

    #[tokio::test]
    async fn only_changes_to_what_gateway_api_objects_name_wake_the_translation() {
        let mut f = fixture();
        apply(&mut f.classes, class());
        apply(&mut f.gateways, gateway());
        apply(
            &mut f.routes,
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                   "metadata": {"name": "shop", "namespace": "shop"},
                   "spec": {"parentRefs": [{"name": "edge"}], "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}}),
        );
        let named = Named::from(&f.caches);
        let service = |namespace: &str, name: &str| -> Arc<Service> {
            Arc::new(
                serde_json::from_value(json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": name, "namespace": namespace}}))
                .unwrap(),
            )
        };
        let changes = futures::stream::iter([
            Change::Applied(service("shop", "web")),        // a route's backend
            Change::Applied(service("shop", "edge-envoy")), // the fleet's Service: its address
            Change::Applied(service("shop", "cart")),       // named by nothing
            Change::Deleted(service("other", "web")),       // a namesake elsewhere
            Change::Relisted,                               // anything may have changed
            Change::Deleted(service("shop", "web")),
        ]);
        let ticks = named_ticks(changes, move |s: &Service| {
            named.service(&s.namespace().unwrap_or_default(), &s.name_any())
        });
        assert_eq!(
            ticks.count().await,
            4,
            "web, edge-envoy, the relist and web's deletion; not cart nor other/web"
        );

        let named = Named::from(&f.caches);
        let typed = |value: Value| -> Envoy { serde_json::from_value(value).unwrap() };
        assert!(named.envoy(&typed(envoy("edge-envoy", Some("edge")))), "the fleet");
        assert!(named.envoy(&typed(envoy("edge", Some("edge")))), "the fleet under its name of before");
        assert!(named.envoy(&typed(envoy("edge-envoy", None))), "an Envoy in the fleet's way");
        assert!(!named.envoy(&typed(envoy("edge", None))), "an Envoy of the Gateway's name, not its fleet's");
        assert!(!named.envoy(&typed(envoy("cart", None))), "an Envoy of its own");
    }
}
