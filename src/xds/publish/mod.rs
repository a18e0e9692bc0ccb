//! From caches to snapshots and route outcomes: each namespace is translated in one pass
//! ([`translate_namespace`]): every Envoy without `spec.xds` (the fleets the operator serves)
//! with the EnvoyRoutes, Services and EndpointSlices of its namespace, converted and published
//! in the snapshot cache, whose streams then move their proxies to it; and every route's
//! outcome, which the route status writer writes ([`RouteOutcomes`]). A fleet whose Envoy is
//! gone, or now names an xDS server of its own, loses its snapshot: its proxies keep what they
//! have.
//!
//! Level-driven like the reconcilers: a batch of touched namespaces is rebuilt from the caches
//! as they are then, whatever the events said; an unchanged translation gives an equal snapshot,
//! which wakes no stream ([`SnapshotCache::set`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_operator_core::api::route::EnvoyRouteSpec;
use envoy_operator_core::api::{Envoy, EnvoyRoute};
use envoy_operator_core::children::envoy::fleet_key;
use envoy_operator_core::fleet::isolate::RouteId;
use envoy_operator_core::rules::{Defaulted, defaulted};
use envoy_operator_core::translate::envoyroute::RouteStatus;
use envoy_operator_core::translate::envoyroute::namespace::{NamespaceInputs, translate_namespace};
use envoy_operator_core::translate::mesh;
use envoy_operator_core::xds::Resources;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use tracing::{debug, info, warn};

mod convert;
pub mod gateways;
pub mod inputs;
pub mod outcomes;

pub use self::gateways::GatewayOutcomes;
use self::inputs::{Caches, Touched};
pub use self::outcomes::{OutcomeChange, RouteOutcomes};
use crate::xds::isolate::Isolation;
use crate::xds::server::{Describe, FleetKey, Snapshot, SnapshotCache, SnapshotError, Tracker};

/// How long to gather further changes after the first of a batch: a `kubectl apply` of many
/// objects becomes one rebuild per namespace, while a single change still reaches Envoy in a
/// few milliseconds.
pub const BATCH_WINDOW: Duration = Duration::from_millis(10);

/// A fleet's translation as the xDS server serves it. A listener's references (what Envoy
/// requests over ADS because of it: its route configurations and certificates) come from the
/// model, as the encoded listener hides them in `Any`s.
pub fn snapshot(resources: &Resources) -> Result<Snapshot, SnapshotError> {
    use crate::xds::server::Reference;
    use crate::xds::server::resource::type_url;

    let mut builder = Snapshot::builder();
    builder.describe(Arc::new(Described(resources.clone())));
    for listener in &resources.listeners {
        let reference = |type_url, name: &str| Reference { type_url, name: name.to_owned() };
        let routes =
            listener.ads_route_configurations().into_iter().map(|name| reference(type_url::ROUTE, name));
        let secrets = listener.ads_secrets().into_iter().map(|name| reference(type_url::SECRET, name));
        builder.add_listener_referencing(&convert::listener(listener), routes.chain(secrets));
    }
    for secret in &resources.secrets {
        builder.add(&convert::secret(secret));
    }
    for routes in &resources.route_configurations {
        builder.add(&convert::route_configuration(routes));
    }
    for cluster in &resources.clusters {
        builder.add(&convert::cluster(cluster));
    }
    for assignment in &resources.cluster_load_assignments {
        builder.add(&convert::cluster_load_assignment(assignment));
    }
    builder.build()
}

/// A fleet's resources in the JSON form `render --xds` prints (private keys redacted), for
/// `/debug/proxies` ([`crate::xds::debug`]).
#[derive(Debug)]
struct Described(Resources);

impl Describe for Described {
    fn describe(&self) -> serde_json::Value {
        serde_json::to_value(&self.0)
            .unwrap_or_else(|error| serde_json::json!({"error": format!("not printable: {error}")}))
    }
}

/// Which namespaces a batch rebuilds.
#[derive(Debug, Default, PartialEq, Eq)]
pub enum Scope {
    #[default]
    Nothing,
    Namespaces(BTreeSet<String>),
    Everything,
}

impl Scope {
    fn add(&mut self, touched: Touched) {
        match (&mut *self, touched) {
            (Self::Everything, _) => {}
            (_, Touched::Everything) => *self = Self::Everything,
            (Self::Namespaces(namespaces), Touched::Namespace(namespace)) => {
                namespaces.insert(namespace);
            }
            (Self::Nothing, Touched::Namespace(namespace)) => *self = Self::Namespaces([namespace].into()),
        }
    }

    fn covers(&self, namespace: &str) -> bool {
        match self {
            Self::Nothing => false,
            Self::Namespaces(namespaces) => namespaces.contains(namespace),
            Self::Everything => true,
        }
    }
}

/// The objects of one namespace a batch rebuilds, taken from the caches at once: shared with
/// them, never copied (but for the Envoys, which are defaulted).
#[derive(Default)]
struct Namespaced {
    envoys: Vec<Defaulted<Envoy>>,
    routes: Vec<Arc<EnvoyRoute>>,
    services: Vec<Arc<Service>>,
    endpoint_slices: Vec<Arc<EndpointSlice>>,
}

impl Namespaced {
    /// The objects of every namespace of `scope` that holds an Envoy or an EnvoyRoute (the
    /// others have nothing to translate), by namespace.
    fn read(caches: &Caches, scope: &Scope) -> BTreeMap<String, Self> {
        let mut namespaces: BTreeMap<String, Self> = BTreeMap::new();
        for envoy in caches.envoys.state() {
            if let Some(namespace) = envoy.namespace().filter(|namespace| scope.covers(namespace)) {
                namespaces.entry(namespace).or_default().envoys.push(defaulted(Envoy::clone(&envoy)));
            }
        }
        for route in caches.routes.state() {
            if let Some(namespace) = route.namespace().filter(|namespace| scope.covers(namespace)) {
                namespaces.entry(namespace).or_default().routes.push(route);
            }
        }
        for service in caches.services.state() {
            if let Some(objects) = service.namespace().and_then(|ns| namespaces.get_mut(&ns)) {
                objects.services.push(service);
            }
        }
        for slice in caches.endpoint_slices.state() {
            if let Some(objects) = slice.namespace().and_then(|ns| namespaces.get_mut(&ns)) {
                objects.endpoint_slices.push(slice);
            }
        }
        namespaces
    }
}

/// Where a batch's results go.
#[derive(Clone, Default)]
pub struct Outputs {
    /// The snapshots served, and the tracker of their proxies (`None` where this process
    /// serves no xDS: the `controller` command).
    pub snapshots: Option<(SnapshotCache, Tracker)>,
    /// Every route's outcome, for the route status writer.
    pub outcomes: RouteOutcomes,
    /// Which routes each published version carries, and those the proxies rejected, left out
    /// (`None` where no proxy is served).
    pub isolation: Option<Isolation>,
}

/// What one batch did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Published {
    /// Fleets whose snapshot was set (changed or not).
    pub fleets: Vec<(FleetKey, String)>,
    /// Fleets whose snapshot was removed.
    pub removed: Vec<FleetKey>,
    /// Fleets whose translation could not be made a snapshot (their proxies keep the last one).
    pub failed: Vec<(FleetKey, String)>,
}

/// Rebuilds the fleets and route outcomes of `scope` from the caches into `outputs`.
pub fn publish(caches: &Caches, scope: &Scope, outputs: &Outputs) -> Published {
    let mut published = Published::default();
    let mut served = BTreeSet::new();
    let mut translated = BTreeSet::new();
    let rejected = outputs.isolation.as_ref().map(Isolation::rejections).unwrap_or_default();
    for (namespace, objects) in Namespaced::read(caches, scope) {
        let translation = translate_namespace(&NamespaceInputs {
            envoys: &objects.envoys,
            routes: &objects.routes,
            services: &objects.services,
            endpoint_slices: &objects.endpoint_slices,
            rejected: &rejected,
        });
        outputs.outcomes.replace_namespace(&namespace, translation.routes);
        translated.insert(namespace.clone());
        let Some((cache, _)) = &outputs.snapshots else { continue };
        for fleet in translation.fleets {
            let envoy =
                objects.envoys.iter().find(|envoy| envoy.metadata.name.as_ref() == Some(&fleet.envoy));
            // A Gateway's fleet is configured by the Gateway API translation alone.
            let Some(envoy) = envoy.filter(|envoy| !gateways::is_gateway_fleet(envoy)) else { continue };
            let key = FleetKey::from(fleet_key(envoy));
            served.insert(key.clone());
            match snapshot(&fleet.translation.resources) {
                Ok(snapshot) => {
                    let version = cache.set(key.clone(), snapshot);
                    if let Some(isolation) = &outputs.isolation {
                        isolation.record(
                            &key,
                            &version,
                            carried(&fleet.translation.route_statuses, &objects.routes),
                        );
                    }
                    published.fleets.push((key, version));
                }
                Err(error) => published.failed.push((key, error.to_string())),
            }
        }
    }
    // A namespace of the scope left with neither Envoys nor routes: no outcomes, no fleets.
    for namespace in scope_namespaces(scope, outputs).difference(&translated) {
        outputs.outcomes.replace_namespace(namespace, []);
    }
    if let Some((cache, tracker)) = &outputs.snapshots {
        // Gateways' fleets are the Gateway publisher's ([`gateways`]), which removes their own.
        let gateway_fleets: BTreeSet<FleetKey> = caches
            .envoys
            .state()
            .iter()
            .filter(|envoy| gateways::is_gateway_fleet(envoy))
            .map(|envoy| FleetKey::from(fleet_key(envoy)))
            .collect();
        for key in cache.keys() {
            let namespace = key.as_str().split_once('/').map_or("", |(namespace, _)| namespace);
            let others = gateway_fleets.contains(&key) || mesh::is_fleet_key(key.as_str());
            if scope.covers(namespace) && !served.contains(&key) && !others {
                cache.remove(&key);
                tracker.forget(&key);
                if let Some(isolation) = &outputs.isolation {
                    isolation.forget(&key);
                }
                published.removed.push(key);
            }
        }
    }
    published
}

/// The routes a fleet's version carries: those it accepted, as they are now.
fn carried<'a>(
    statuses: &[RouteStatus],
    routes: &'a [Arc<EnvoyRoute>],
) -> impl Iterator<Item = (RouteId, Option<i64>, &'a EnvoyRouteSpec)> {
    let accepted: BTreeSet<String> =
        statuses.iter().filter(|status| status.accepted.status).map(|status| status.route.clone()).collect();
    routes
        .iter()
        .filter(move |route| route.metadata.name.as_ref().is_some_and(|name| accepted.contains(name)))
        .filter_map(|route| {
            Some((RouteId::of("EnvoyRoute", &route.metadata)?, route.metadata.generation, &route.spec))
        })
}

/// The namespaces of `scope` that hold outcomes now.
fn scope_namespaces(scope: &Scope, outputs: &Outputs) -> BTreeSet<String> {
    outputs.outcomes.namespaces().into_iter().filter(|namespace| scope.covers(namespace)).collect()
}

/// Publishes every fleet once the caches are filled (so that no fleet is served from a partial
/// view), then every batch of changes, until `touched` ends. `ready` is called after the first
/// publication.
pub async fn run(
    caches: Caches,
    touched: impl Stream<Item = Touched> + Send + 'static,
    outputs: Outputs,
    ready: impl FnOnce() + Send,
) {
    let touched = touched.fuse();
    tokio::pin!(touched);
    if !until_filled(caches.wait_until_ready(), &mut touched).await {
        return;
    }
    rebuild(&caches, Scope::Everything, &outputs).await;
    let fleets = outputs.snapshots.as_ref().map_or(0, |(cache, _)| cache.keys().len());
    info!(fleets, "the translation's caches are filled");
    ready();

    while let Some(first) = touched.next().await {
        let mut scope = Scope::Nothing;
        scope.add(first);
        batch(&mut touched, |event| scope.add(event)).await;
        rebuild(&caches, scope, &outputs).await;
    }
}

/// Waits until the caches are `filled`, draining `events` meanwhile (the caches fill only while
/// their watches are polled). False when the caches' writers or the events end first.
pub(crate) async fn until_filled<E, S: Stream + Unpin>(
    filled: impl Future<Output = Result<(), E>>,
    events: &mut S,
) -> bool {
    tokio::pin!(filled);
    loop {
        tokio::select! {
            result = &mut filled => return result.is_ok(),
            event = events.next() => if event.is_none() { return false },
        }
    }
}

/// Hands `add` the events of one [`BATCH_WINDOW`] (or until `events` ends).
pub(crate) async fn batch<S: Stream + Unpin>(events: &mut S, mut add: impl FnMut(S::Item)) {
    let window = tokio::time::sleep(BATCH_WINDOW);
    tokio::pin!(window);
    loop {
        tokio::select! {
            () = &mut window => break,
            event = events.next() => match event {
                Some(event) => add(event),
                None => break,
            },
        }
    }
}

/// [`publish`] off the async workers: a namespace of many routes is CPU work.
async fn rebuild(caches: &Caches, scope: Scope, outputs: &Outputs) {
    let (caches, outputs) = (caches.clone(), outputs.clone());
    publish_logged(move || publish(&caches, &scope, &outputs), &FLEETS_SAID).await;
}

/// What a publisher logs of each publication.
pub(crate) struct Said {
    /// The translation itself failed (panicked).
    pub failed: &'static str,
    /// A fleet's resources are inconsistent: it keeps its last configuration.
    pub inconsistent: &'static str,
    pub removed: &'static str,
    pub published: &'static str,
}

const FLEETS_SAID: Said = Said {
    failed: "rebuilding the fleets' configuration failed",
    inconsistent: "the fleet's configuration is inconsistent; its proxies keep the last one",
    removed: "no longer serving the fleet (its Envoy is gone or names its own xDS server)",
    published: "published the fleets' configuration",
};

/// Runs `publish` off the async workers (translating is CPU work) and logs what it published.
pub(crate) async fn publish_logged(publish: impl FnOnce() -> Published + Send + 'static, said: &Said) {
    let started = Instant::now();
    let published = match tokio::task::spawn_blocking(publish).await {
        Ok(published) => published,
        Err(error) => {
            warn!(%error, "{}", said.failed);
            return;
        }
    };
    for (fleet, error) in &published.failed {
        warn!(%fleet, %error, "{}", said.inconsistent);
    }
    for fleet in &published.removed {
        info!(%fleet, "{}", said.removed);
    }
    debug!(fleets = published.fleets.len(), took = ?started.elapsed(), "{}", said.published);
}

#[cfg(test)]
mod tests {
    use kube::runtime::reflector::{self, ObjectRef, store::Writer};
    use kube::runtime::watcher;
    use serde_json::{Value, json};

    use super::*;
    use crate::xds::server::TypeResources;

    use envoy_operator_core::envoy::type_urls::{
        CLUSTER, CLUSTER_LOAD_ASSIGNMENT as ENDPOINTS, LISTENER, ROUTE_CONFIGURATION as ROUTES,
    };

    struct Fixture {
        caches: Caches,
        envoys: Writer<Envoy>,
        routes: Writer<EnvoyRoute>,
        services: Writer<Service>,
        endpoint_slices: Writer<EndpointSlice>,
        cache: SnapshotCache,
        tracker: Tracker,
        outcomes: RouteOutcomes,
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

    fn envoy(namespace: &str, name: &str, external: bool) -> Value {
        let mut spec = json!({"ports": [{"name": "http", "port": 80, "targetPort": 8080}]});
        if external {
            spec["xds"] = json!({"host": "xds.mesh", "port": 18000});
        }
        json!({"apiVersion": "example.com/v1", "kind": "Envoy",
               "metadata": {"name": name, "namespace": namespace}, "spec": spec})
    }

    fn route(namespace: &str, backend: &str) -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
               "metadata": {"name": "shop", "namespace": namespace, "generation": 1},
               "spec": {"parentRefs": [{"name": "edge"}],
                        "rules": [{"backendRefs": [{"name": backend, "port": 8080}]}]}})
    }

    fn service(namespace: &str, name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace},
               "spec": {"ports": [{"name": "http", "port": 8080, "targetPort": 8080}]}})
    }

    fn slice(namespace: &str, service: &str, address: &str) -> Value {
        json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
               "metadata": {"name": format!("{service}-abc"), "namespace": namespace,
                            "labels": {"kubernetes.io/service-name": service}},
               "addressType": "IPv4",
               "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
               "endpoints": [{"addresses": [address], "conditions": {"ready": true}}]})
    }

    fn fixture() -> Fixture {
        let (envoy_reader, envoys) = reflector::store();
        let (route_reader, routes) = reflector::store();
        let (service_reader, services) = reflector::store();
        let (slice_reader, endpoint_slices) = reflector::store();
        let (pod_reader, _) = reflector::store();
        Fixture {
            caches: Caches {
                envoys: envoy_reader,
                routes: route_reader,
                services: service_reader,
                endpoint_slices: slice_reader,
                pods: pod_reader,
            },
            envoys,
            routes,
            services,
            endpoint_slices,
            cache: SnapshotCache::new(),
            tracker: Tracker::new(),
            outcomes: RouteOutcomes::default(),
        }
    }

    impl Fixture {
        fn publish(&self, scope: Scope) -> Published {
            let outputs = Outputs {
                snapshots: Some((self.cache.clone(), self.tracker.clone())),
                outcomes: self.outcomes.clone(),
                isolation: None,
            };
            publish(&self.caches, &scope, &outputs)
        }

        fn resources(&self, fleet: &str, type_url: &str) -> Vec<String> {
            let snapshot = self.cache.get(&FleetKey::from(fleet)).expect("a snapshot");
            let resources: &TypeResources = snapshot.resources(type_url);
            resources.iter().map(|resource| resource.name().to_owned()).collect()
        }
    }

    fn namespaces(names: &[&str]) -> Scope {
        Scope::Namespaces(names.iter().map(|name| (*name).to_owned()).collect())
    }

    #[test]
    fn an_envoy_without_its_own_xds_server_is_served_its_routes_backends_and_endpoints() {
        let mut f = fixture();
        apply(&mut f.envoys, envoy("shop", "edge", false));
        apply(&mut f.envoys, envoy("shop", "external", true));
        apply(&mut f.routes, route("shop", "api"));
        apply(&mut f.services, service("shop", "api"));
        apply(&mut f.endpoint_slices, slice("shop", "api", "10.1.0.7"));

        let published = f.publish(Scope::Everything);
        assert_eq!(published.fleets.len(), 1, "{published:?}");
        assert_eq!(published.fleets[0].0, FleetKey::from("shop/edge"));
        assert!(published.failed.is_empty() && published.removed.is_empty(), "{published:?}");
        assert_eq!(f.cache.keys(), [FleetKey::from("shop/edge")], "an Envoy with spec.xds is not served");

        assert_eq!(f.resources("shop/edge", LISTENER).len(), 1);
        assert_eq!(f.resources("shop/edge", ROUTES).len(), 1);
        let clusters = f.resources("shop/edge", CLUSTER);
        assert_eq!(clusters.len(), 1, "{clusters:?}");
        assert_eq!(f.resources("shop/edge", ENDPOINTS), clusters, "EDS for every cluster");
    }

    #[test]
    fn a_change_publishes_a_new_version_and_no_change_keeps_the_version() {
        let mut f = fixture();
        apply(&mut f.envoys, envoy("shop", "edge", false));
        apply(&mut f.routes, route("shop", "api"));
        apply(&mut f.services, service("shop", "api"));
        apply(&mut f.endpoint_slices, slice("shop", "api", "10.1.0.7"));
        let first = f.publish(namespaces(&["shop"])).fleets[0].1.clone();
        assert_eq!(f.publish(namespaces(&["shop"])).fleets[0].1, first, "same inputs, same version");

        // A backend scales: the endpoints change, so does the version.
        apply(&mut f.endpoint_slices, slice("shop", "api", "10.1.0.8"));
        let scaled = f.publish(namespaces(&["shop"])).fleets[0].1.clone();
        assert_ne!(scaled, first);
    }

    #[test]
    fn only_touched_namespaces_are_rebuilt_and_gone_fleets_are_no_longer_served() {
        let mut f = fixture();
        apply(&mut f.envoys, envoy("shop", "edge", false));
        apply(&mut f.envoys, envoy("blog", "edge", false));
        f.publish(Scope::Everything);
        assert_eq!(f.cache.keys(), [FleetKey::from("blog/edge"), FleetKey::from("shop/edge")]);

        delete(&mut f.envoys, envoy("shop", "edge", false));
        let untouched = f.publish(namespaces(&["blog"]));
        assert!(untouched.removed.is_empty(), "shop was not touched: {untouched:?}");
        assert_eq!(f.cache.keys().len(), 2);

        let touched = f.publish(namespaces(&["shop"]));
        assert_eq!(touched.removed, [FleetKey::from("shop/edge")]);
        assert_eq!(f.cache.keys(), [FleetKey::from("blog/edge")]);

        // An Envoy that now names its own xDS server is no longer ours to serve.
        apply(&mut f.envoys, envoy("blog", "edge", true));
        assert_eq!(f.publish(Scope::Everything).removed, [FleetKey::from("blog/edge")]);
        assert!(f.cache.keys().is_empty());
    }

    /// The pass that builds a fleet's snapshot judges its routes too, those of Envoys it does
    /// not serve and of missing ones included; a namespace's last route gone, its outcomes go.
    #[test]
    fn every_route_of_a_translated_namespace_gets_its_outcome_from_the_same_pass() {
        let mut f = fixture();
        apply(&mut f.envoys, envoy("shop", "edge", false));
        apply(&mut f.routes, route("shop", "api"));
        apply(&mut f.routes, route("blog", "api"));
        f.publish(Scope::Everything);
        let outcome = |namespace: &str| f.outcomes.get(&ObjectRef::new("shop").within(namespace));
        let served = outcome("shop").expect("the route of the served fleet");
        assert_eq!(served.generation, Some(1));
        assert!(served.parents[0].accepted.status, "{served:?}");
        assert!(!served.parents[0].resolved_refs.status, "no Service api: {served:?}");
        let orphan = outcome("blog").expect("a route naming no Envoy is judged too");
        assert_eq!(orphan.parents[0].accepted.reason, "NoMatchingParent");

        delete(&mut f.routes, route("blog", "api"));
        f.publish(namespaces(&["blog"]));
        assert!(outcome("blog").is_none(), "the route is gone");
        assert!(outcome("shop").is_some(), "another namespace keeps its outcomes");
    }

    #[test]
    fn churn_where_no_fleet_lives_rebuilds_nothing() {
        let mut f = fixture();
        apply(&mut f.envoys, envoy("shop", "edge", false));
        let before = f.publish(Scope::Everything).fleets;
        apply(&mut f.endpoint_slices, slice("batch", "jobs", "10.2.0.9"));
        assert_eq!(f.publish(namespaces(&["batch"])), Published::default());
        assert_eq!(f.publish(namespaces(&["shop"])).fleets, before, "the fleet itself is unchanged");
    }

    /// A Gateway's fleet is an Envoy, labelled with its Gateway: the Gateway publisher's to
    /// serve and to remove, never this one's.
    #[test]
    fn gateway_fleets_are_left_to_the_gateway_publisher() {
        let mut f = fixture();
        let mut fleet = envoy("shop", "edge", false);
        fleet["metadata"]["labels"] = json!({envoy_operator_core::names::GATEWAY_LABEL: "edge"});
        apply(&mut f.envoys, fleet);
        apply(&mut f.routes, route("shop", "api"));
        let gateways = snapshot(&Resources::default()).expect("an empty snapshot");
        let version = f.cache.set(FleetKey::from("shop/edge"), gateways);
        let published = f.publish(Scope::Everything);
        assert_eq!(published, Published::default(), "neither served nor removed");
        assert_eq!(f.cache.keys(), [FleetKey::from("shop/edge")]);
        let same = snapshot(&Resources::default()).expect("an empty snapshot");
        assert_eq!(f.cache.set(FleetKey::from("shop/edge"), same), version, "the snapshot is unchanged");
    }

    #[test]
    fn scopes_grow_to_everything() {
        let mut scope = Scope::Nothing;
        scope.add(Touched::Namespace("a".into()));
        scope.add(Touched::Namespace("b".into()));
        assert_eq!(scope, namespaces(&["a", "b"]));
        assert!(scope.covers("a") && !scope.covers("c"));
        scope.add(Touched::Everything);
        scope.add(Touched::Namespace("c".into()));
        assert_eq!(scope, Scope::Everything);
        assert!(scope.covers("z"));
    }
}
