//! This replica's side of [`envoy_operator_core::fleet::isolate`]: the publishers record which
//! routes each snapshot version of a fleet carries; when a proxy NACKs a route configuration or
//! a listener, the route behind it is found, recorded as rejected, and its publisher runs again,
//! leaving it out of every fleet (with Envoy's words in its status) until it changes.
//!
//! Replicas share what they found through their xDS reports ([`super::report`] lists the
//! rejected routes; [`adopt_reported`] reads the others'): every replica leaves the route out,
//! so their snapshots stay equal, and the leader's statuses say so whichever replica's proxies
//! rejected it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use std::future::Future;

use envoy_operator_core::fleet::isolate::{
    Rejection, Rejections, RouteId, RouteVersion, VersionRoutes, culprits,
};
use envoy_operator_core::fleet::report::{RejectedRoute, report_of, reports_selector};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde::Serialize;
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::publish::inputs::Touched;
use crate::xds::server::resource::type_url;
use crate::xds::server::{FleetKey, FleetStatus, NACK_TEXT_NOT_KEPT, Tracker};

/// How many snapshot versions of a fleet are remembered: a proxy that last accepted an older
/// one is compared with nothing (see [`culprits`]).
const VERSIONS: usize = 32;

#[derive(Default)]
struct State {
    /// Per fleet, the routes of its latest snapshot versions, newest last.
    versions: HashMap<FleetKey, VecDeque<(String, Arc<VersionRoutes>)>>,
    /// Shared with the translations in progress: replaced, never changed in place.
    rejections: Arc<Rejections>,
}

/// Which routes each fleet's versions carry, and which routes are rejected. Cheap to clone;
/// clones share it.
#[derive(Clone, Default)]
pub struct Isolation {
    state: Arc<Mutex<State>>,
}

impl Isolation {
    /// The routes left out now.
    pub fn rejections(&self) -> Arc<Rejections> {
        self.lock().rejections.clone()
    }

    /// Records the routes `version` of `key` carries, each with its generation and spec (nothing
    /// when it is the newest version already). A route unchanged since the newest version keeps
    /// its words, so a publication serializes only the routes that changed.
    pub fn record<'a, S: Serialize + 'a>(
        &self,
        key: &FleetKey,
        version: &str,
        routes: impl IntoIterator<Item = (RouteId, Option<i64>, &'a S)>,
    ) {
        let mut state = self.lock();
        let versions = state.versions.entry(key.clone()).or_default();
        if versions.back().is_some_and(|(newest, _)| newest == version) {
            return;
        }
        let newest = versions.back().map(|(_, routes)| routes.clone()).unwrap_or_default();
        let carried: VersionRoutes = routes
            .into_iter()
            .map(|(id, generation, spec)| {
                let known = newest.get(&id).filter(|known| Some(known.generation) == generation).cloned();
                let version = known.unwrap_or_else(|| RouteVersion::new(generation, spec));
                (id, version)
            })
            .collect();
        if versions.len() == VERSIONS {
            versions.pop_front();
        }
        versions.push_back((version.to_owned(), Arc::new(carried)));
    }

    /// Forgets a fleet no longer served.
    pub fn forget(&self, key: &FleetKey) {
        self.lock().versions.remove(key);
    }

    /// The routes newly rejected because of what the proxies of `key` NACKed.
    pub fn examine(&self, key: &FleetKey, status: &FleetStatus) -> Vec<(RouteId, Rejection)> {
        let mut state = self.lock();
        let Some(versions) = state.versions.get(key) else { return Vec::new() };
        let carried = |version: &str| {
            versions.iter().find(|(known, _)| known == version).map(|(_, routes)| routes.clone())
        };
        // The standing NACKs of route-bearing types, with the version each proxy last accepted.
        let standing = || {
            status.proxies.iter().flat_map(|proxy| &proxy.types).filter_map(|(type_url, types)| {
                let route_bearing = type_url == type_url::ROUTE || type_url == type_url::LISTENER;
                let nack = types.last_nack.as_ref().filter(|_| types.rejecting && route_bearing)?;
                Some((type_url.as_str(), nack, types.acked_version.as_deref()))
            })
        };
        // A NACK whose explanation the server could not keep names no route: where another
        // proxy's explanation of the same refusal was kept, that one picks the culprits.
        let explained: HashSet<(&str, &str)> = standing()
            .filter(|(_, nack, _)| nack.message != NACK_TEXT_NOT_KEPT)
            .map(|(type_url, nack, _)| (type_url, nack.version.as_str()))
            .collect();
        let mut found = Vec::new();
        for (type_url, nack, acked_version) in standing() {
            if nack.message == NACK_TEXT_NOT_KEPT && explained.contains(&(type_url, nack.version.as_str())) {
                continue;
            }
            let Some(rejected) = carried(&nack.version) else { continue };
            let accepted = acked_version.and_then(carried);
            for id in culprits(&rejected, accepted.as_deref(), &nack.message) {
                let generation = rejected.get(&id).map_or(0, |version| version.generation);
                found.push((id, Rejection { generation, message: nack.message.clone() }));
            }
        }
        let mut rejections = Rejections::clone(&state.rejections);
        found.retain(|(id, rejection)| rejections.insert(id.clone(), rejection.clone()));
        if !found.is_empty() {
            state.rejections = Arc::new(rejections);
        }
        found
    }

    /// Records rejections found elsewhere (another replica's report); returns those that are new.
    pub fn adopt(
        &self,
        reported: impl IntoIterator<Item = (RouteId, Rejection)>,
    ) -> Vec<(RouteId, Rejection)> {
        let mut state = self.lock();
        let mut rejections = Rejections::clone(&state.rejections);
        let adopted: Vec<_> = reported
            .into_iter()
            .filter(|(id, rejection)| rejections.insert(id.clone(), rejection.clone()))
            .collect();
        if !adopted.is_empty() {
            state.rejections = Arc::new(rejections);
        }
        adopted
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where a rejection sends the publishers back to work.
#[derive(Clone)]
pub struct Republish {
    /// The EnvoyRoute publisher: the rejected route's namespace.
    pub routes: mpsc::UnboundedSender<Touched>,
    /// The Gateway API publisher.
    pub gateways: mpsc::UnboundedSender<()>,
}

impl Republish {
    fn route(&self, route: &RouteId) {
        // A publisher that is gone has nothing left to publish.
        if matches!(route.kind, "HTTPRoute" | "GRPCRoute") {
            let _ = self.gateways.send(());
        } else {
            let _ = self.routes.send(Touched::Namespace(route.namespace.clone()));
        }
    }
}

/// Examines every fleet whose proxies changed, until the tracker's feed ends (never, while the
/// server lives: the caller stops it with the publishers).
pub async fn run(isolation: Isolation, tracker: Tracker, republish: Republish) {
    let mut feed = tracker.changes();
    loop {
        for key in feed.changed().await {
            for (route, rejection) in isolation.examine(&key, &tracker.fleet_status(&key)) {
                warn!(
                    fleet = %key,
                    route = %format!("{}/{}", route.namespace, route.name),
                    kind = route.kind,
                    generation = rejection.generation,
                    envoy = %rejection.message,
                    "the fleet's proxies rejected a route: serving the fleet without it until it changes"
                );
                republish.route(&route);
            }
        }
    }
}

/// Adopts the rejected routes the replicas' reports in `namespace` list, until `shutdown`.
/// Never fails: a failed watch is retried with backoff.
pub async fn adopt_reported(
    client: Client,
    namespace: &str,
    isolation: Isolation,
    republish: Republish,
    shutdown: impl Future<Output = ()>,
) {
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let config = watcher::Config::default().labels_from(&reports_selector());
    let events = watcher(api, config).default_backoff();
    tokio::pin!(events, shutdown);
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            () = &mut shutdown => return,
        };
        let config_map = match event {
            Some(Ok(watcher::Event::Apply(config_map) | watcher::Event::InitApply(config_map))) => config_map,
            Some(Ok(_)) => continue,
            Some(Err(error)) => {
                warn!(%error, "watching the xDS reports for rejected routes failed; retrying with backoff");
                continue;
            }
            None => return,
        };
        let Ok(report) = report_of(&config_map) else { continue };
        let reported = report.rejected_routes.iter().filter_map(RejectedRoute::rejection);
        for (route, rejection) in isolation.adopt(reported) {
            info!(
                replica = %report.replica,
                route = %format!("{}/{}", route.namespace, route.name),
                kind = route.kind,
                generation = rejection.generation,
                "another replica's proxies rejected a route: serving its fleets without it until it changes"
            );
            republish.route(&route);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::SystemTime;

    use serde_json::{Value, json};

    use super::*;
    use crate::xds::server::{Nack, Protocol, ProxyStatus, TypeStatus};

    fn id(name: &str) -> RouteId {
        RouteId {
            kind: "EnvoyRoute",
            namespace: "shop".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
        }
    }

    fn routes(entries: &[(&str, i64)]) -> Vec<(RouteId, Option<i64>, Value)> {
        entries
            .iter()
            .map(|(name, generation)| (id(name), Some(*generation), json!({"name": name})))
            .collect()
    }

    fn record(isolation: &Isolation, key: &FleetKey, version: &str, entries: &[(&str, i64)]) {
        let routes = routes(entries);
        isolation.record(
            key,
            version,
            routes.iter().map(|(id, generation, spec)| (id.clone(), *generation, spec)),
        );
    }

    fn proxy(types: &[(&str, TypeStatus)]) -> ProxyStatus {
        ProxyStatus {
            node_id: "edge-1".into(),
            peer: None,
            protocol: Protocol::Delta,
            connected_since: SystemTime::now(),
            applied_version: Some("v1".into()),
            types: types
                .iter()
                .map(|(url, status)| ((*url).to_owned(), status.clone()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    fn nacked(accepted: &str, rejected: &str) -> TypeStatus {
        TypeStatus {
            acked_version: Some(accepted.into()),
            last_nack: Some(Nack { version: rejected.into(), message: "no".into(), at: SystemTime::now() }),
            rejecting: true,
        }
    }

    #[test]
    fn a_route_configuration_nack_rejects_the_route_that_changed_once() {
        let isolation = Isolation::default();
        let key = FleetKey::from("shop/edge");
        record(&isolation, &key, "v1", &[("a", 1), ("b", 1)]);
        record(&isolation, &key, "v2", &[("a", 1), ("b", 2)]);
        let status = FleetStatus {
            proxies: vec![proxy(&[(type_url::ROUTE, nacked("v1", "v2"))])],
            ..FleetStatus::default()
        };
        let found = isolation.examine(&key, &status);
        assert_eq!(
            found.iter().map(|(id, r)| (id.name.as_str(), r.generation)).collect::<Vec<_>>(),
            [("b", 2)]
        );
        assert!(isolation.examine(&key, &status).is_empty(), "known already");
        assert_eq!(isolation.rejections().iter().count(), 1);
    }

    #[test]
    fn a_nack_whose_explanation_was_not_kept_defers_to_another_proxys_explanation() {
        let key = FleetKey::from("shop/edge");
        let explained = |message: &str| {
            let mut status = nacked("v1", "v2");
            status.last_nack.as_mut().expect("a NACK").message = message.into();
            proxy(&[(type_url::ROUTE, status)])
        };
        let unexplained = explained(NACK_TEXT_NOT_KEPT);
        let named = |status: &FleetStatus| {
            let found = Isolation::default();
            record(&found, &key, "v1", &[("alpha", 1), ("bravo", 1)]);
            record(&found, &key, "v2", &[("alpha", 2), ("bravo", 2)]);
            let mut names: Vec<String> =
                found.examine(&key, status).into_iter().map(|(id, _)| id.name).collect();
            names.sort();
            names
        };
        let both = FleetStatus {
            proxies: vec![unexplained.clone(), explained("route 'bravo': invalid")],
            ..FleetStatus::default()
        };
        assert_eq!(named(&both), ["bravo"]);
        // Alone, it is a NACK that quotes nothing: every route that changed is a suspect.
        let alone = FleetStatus { proxies: vec![unexplained], ..FleetStatus::default() };
        assert_eq!(named(&alone), ["alpha", "bravo"]);
    }

    #[test]
    fn nacks_of_other_types_and_of_unknown_versions_reject_nothing() {
        let isolation = Isolation::default();
        let key = FleetKey::from("shop/edge");
        record(&isolation, &key, "v1", &[("a", 1)]);
        record(&isolation, &key, "v2", &[("a", 2)]);
        let cluster = FleetStatus {
            proxies: vec![proxy(&[(type_url::CLUSTER, nacked("v1", "v2"))])],
            ..FleetStatus::default()
        };
        assert!(isolation.examine(&key, &cluster).is_empty());
        let unknown = FleetStatus {
            proxies: vec![proxy(&[(type_url::ROUTE, nacked("v1", "v9"))])],
            ..FleetStatus::default()
        };
        assert!(isolation.examine(&key, &unknown).is_empty());
        let overcome = TypeStatus { rejecting: false, ..nacked("v2", "v2") };
        let acked =
            FleetStatus { proxies: vec![proxy(&[(type_url::ROUTE, overcome)])], ..FleetStatus::default() };
        assert!(isolation.examine(&key, &acked).is_empty());
    }

    #[test]
    fn a_rejection_another_replica_reports_is_adopted_once() {
        let isolation = Isolation::default();
        let rejection = Rejection { generation: 2, message: "no".into() };
        assert_eq!(isolation.adopt([(id("b"), rejection.clone())]).len(), 1);
        assert!(isolation.adopt([(id("b"), rejection)]).is_empty());
        assert_eq!(isolation.rejections().iter().count(), 1);
    }

    #[test]
    fn an_unchanged_route_keeps_its_words() {
        let isolation = Isolation::default();
        let key = FleetKey::from("shop/edge");
        record(&isolation, &key, "v1", &[("a", 1), ("b", 1)]);
        record(&isolation, &key, "v2", &[("a", 1), ("b", 2)]);
        let state = isolation.lock();
        let (v1, v2) = (&state.versions[&key][0].1, &state.versions[&key][1].1);
        assert!(Arc::ptr_eq(&v1[&id("a")].words, &v2[&id("a")].words), "a is shared");
        assert!(!Arc::ptr_eq(&v1[&id("b")].words, &v2[&id("b")].words), "b changed");
    }

    #[test]
    fn versions_are_bounded_per_fleet() {
        let isolation = Isolation::default();
        let key = FleetKey::from("shop/edge");
        for i in 0..VERSIONS + 5 {
            record(&isolation, &key, &format!("v{i}"), &[("a", i as i64)]);
        }
        assert_eq!(isolation.lock().versions[&key].len(), VERSIONS);
    }
}
