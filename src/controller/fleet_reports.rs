//! The leader's view of every replica's xDS report (the ConfigMaps
//! [`crate::xds::report`] writes in the operator's namespace): decoded once per
//! change and kept by ConfigMap name, so a reconcile aggregates one fleet without parsing
//! anything. A report change triggers a reconcile of every Envoy it names, and of every Envoy
//! that dropped out of it.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, PoisonError, RwLock};

use envoy_operator_core::api::Envoy;
use envoy_operator_core::fleet::report::{ReplicaReport, report_of, reports_selector};
use envoy_operator_core::fleet::status::{FleetObservation, aggregate};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tracing::warn;

use super::{Error, Result};
use crate::ops::logging::readable;

/// The decoded reports; clones share them.
#[derive(Clone, Debug)]
pub struct FleetReports {
    index: Arc<RwLock<Index>>,
    /// True once the reports were listed; closed when the watch feeding them is gone.
    listed: watch::Receiver<bool>,
}

#[derive(Debug, Default)]
struct Index {
    /// By ConfigMap name.
    reports: HashMap<String, ReplicaReport>,
    /// Reports seen during a relist, replacing `reports` when it is done.
    relisting: Option<HashMap<String, ReplicaReport>>,
}

/// Applies the watch's events to the index.
#[derive(Debug)]
pub struct ReportIndexer {
    index: Arc<RwLock<Index>>,
    listed: watch::Sender<bool>,
}

impl FleetReports {
    /// An empty index and the indexer that fills it.
    pub fn new() -> (Self, ReportIndexer) {
        let (listed, receiver) = watch::channel(false);
        let index = Arc::new(RwLock::new(Index::default()));
        (Self { index: index.clone(), listed: receiver }, ReportIndexer { index, listed })
    }

    /// Waits until the reports were listed once, so a reconcile never takes a report not yet
    /// seen for a fleet without proxies.
    pub async fn ready(&self) -> Result<()> {
        let mut listed = self.listed.clone();
        listed
            .wait_for(|listed| *listed)
            .await
            .map_err(|_| Error::CacheUnavailable("xDS reports".to_owned()))?;
        Ok(())
    }

    /// What the replicas report about the fleet of the Envoy `namespace/name`.
    pub fn observe(&self, namespace: &str, name: &str) -> FleetObservation {
        let key = format!("{namespace}/{name}");
        let index = self.index.read().unwrap_or_else(PoisonError::into_inner);
        aggregate(
            index
                .reports
                .values()
                .filter_map(|report| Some((report.replica.as_str(), report.fleets.get(&key)?))),
        )
    }
}

impl ReportIndexer {
    /// Applies one watch event; returns the fleet keys whose reports it changed.
    pub fn apply(&self, event: &watcher::Event<ConfigMap>) -> BTreeSet<String> {
        let mut index = self.index.write().unwrap_or_else(PoisonError::into_inner);
        let mut changed = BTreeSet::new();
        match event {
            watcher::Event::Apply(config_map) => {
                let report = decoded(config_map);
                changed.extend(report.fleets.keys().cloned());
                if let Some(old) = index.reports.insert(config_map.name_any(), report) {
                    changed.extend(old.fleets.into_keys());
                }
            }
            watcher::Event::Delete(config_map) => {
                if let Some(old) = index.reports.remove(&config_map.name_any()) {
                    changed.extend(old.fleets.into_keys());
                }
            }
            watcher::Event::Init => index.relisting = Some(HashMap::new()),
            watcher::Event::InitApply(config_map) => {
                let report = decoded(config_map);
                index.relisting.get_or_insert_default().insert(config_map.name_any(), report);
            }
            watcher::Event::InitDone => {
                let listed = index.relisting.take().unwrap_or_default();
                let old = std::mem::replace(&mut index.reports, listed);
                for report in old.values().chain(index.reports.values()) {
                    changed.extend(report.fleets.keys().cloned());
                }
                self.listed.send_replace(true);
            }
        }
        changed
    }
}

/// A ConfigMap's report; one that cannot be read counts as reporting nothing (and says why).
fn decoded(config_map: &ConfigMap) -> ReplicaReport {
    report_of(config_map).unwrap_or_else(|error| {
        warn!(name = %config_map.name_any(), %error, "ignoring an xDS report this operator cannot read");
        ReplicaReport::default()
    })
}

/// The Envoy a fleet key names, if it is in the watched namespace (all when `None`); a
/// namespace's mesh sidecars (`<namespace>/:mesh`) are no Envoy's.
fn envoy_of(key: &str, watched: Option<&str>) -> Option<ObjectRef<Envoy>> {
    if envoy_operator_core::identity::mesh_namespace(key).is_some() {
        return None;
    }
    let (namespace, name) = key.split_once('/')?;
    if watched.is_some_and(|watched| watched != namespace) || name.is_empty() {
        return None;
    }
    Some(ObjectRef::new(name).within(namespace))
}

/// Watches the reports in the operator's `namespace` (label-selected) into a [`FleetReports`];
/// the stream yields the Envoys (of the `watched` namespace, or all) whose reports changed, for
/// the Envoy controller to reconcile. It must be polled for the index to fill.
pub fn watch_reports(
    client: &Client,
    namespace: &str,
    watched: Option<String>,
) -> (FleetReports, impl Stream<Item = ObjectRef<Envoy>> + Send + 'static) {
    let (reports, indexer) = FleetReports::new();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let config = watcher::Config::default().labels_from(&reports_selector());
    let triggers = watcher(api, config).default_backoff().flat_map(move |event| {
        let envoys: Vec<ObjectRef<Envoy>> = match event {
            Ok(event) => {
                indexer.apply(&event).iter().filter_map(|key| envoy_of(key, watched.as_deref())).collect()
            }
            Err(error) => {
                warn!(error = %readable(&error), "watching the xDS reports failed; retrying with backoff");
                Vec::new()
            }
        };
        futures::stream::iter(envoys)
    });
    (reports, triggers)
}

#[cfg(test)]
mod tests {
    use envoy_operator_core::fleet::report::{FleetReport, report_config_map};

    use super::*;

    fn config_map(identity: &str, fleets: &[(&str, &[Option<&str>])]) -> ConfigMap {
        let fleets = fleets
            .iter()
            .map(|(key, applied)| ((*key).to_owned(), FleetReport::new(applied, Some("v1"), None)));
        report_config_map("ops", identity, None, &ReplicaReport::new(identity, fleets))
    }

    fn keys(changed: BTreeSet<String>) -> Vec<String> {
        changed.into_iter().collect()
    }

    #[tokio::test]
    async fn events_keep_the_index_and_name_the_fleets_they_touch() {
        let (reports, indexer) = FleetReports::new();
        let a = config_map("a", &[("ns/edge", &[Some("v1")]), ("ns/side", &[None])]);
        indexer.apply(&watcher::Event::Init);
        indexer.apply(&watcher::Event::InitApply(a.clone()));
        assert!(!*reports.listed.borrow(), "not listed before the list is done");
        assert_eq!(keys(indexer.apply(&watcher::Event::InitDone)), ["ns/edge", "ns/side"]);
        reports.ready().await.unwrap();

        let b = config_map("b", &[("ns/edge", &[Some("v1"), Some("v1")])]);
        assert_eq!(keys(indexer.apply(&watcher::Event::Apply(b.clone()))), ["ns/edge"]);
        assert_eq!(reports.observe("ns", "edge").xds.connected_proxies, 3);
        // `side` dropped out of a's report: it is named too.
        let a_later = config_map("a", &[("ns/edge", &[Some("v1")])]);
        assert_eq!(keys(indexer.apply(&watcher::Event::Apply(a_later))), ["ns/edge", "ns/side"]);
        assert_eq!(reports.observe("ns", "side").xds.connected_proxies, 0);
        assert_eq!(keys(indexer.apply(&watcher::Event::Delete(b))), ["ns/edge"]);
        assert_eq!(reports.observe("ns", "edge").xds.connected_proxies, 1);

        // A relist replaces everything: a report gone meanwhile names its fleets as well.
        indexer.apply(&watcher::Event::Init);
        assert_eq!(keys(indexer.apply(&watcher::Event::InitDone)), ["ns/edge"]);
        assert_eq!(reports.observe("ns", "edge").xds.connected_proxies, 0);
    }

    #[test]
    fn an_unreadable_report_reports_nothing() {
        let (reports, indexer) = FleetReports::new();
        let mut broken = config_map("a", &[("ns/edge", &[Some("v1")])]);
        broken.data = Some([("report.json".to_owned(), "{\"format\": 9}".to_owned())].into());
        assert!(indexer.apply(&watcher::Event::Apply(broken)).is_empty());
        assert_eq!(reports.observe("ns", "edge").xds.connected_proxies, 0);
    }

    #[tokio::test]
    async fn readiness_fails_once_the_watch_is_gone() {
        let (reports, indexer) = FleetReports::new();
        drop(indexer);
        assert!(matches!(reports.ready().await, Err(Error::CacheUnavailable(_))));
    }

    #[test]
    fn fleets_outside_the_watched_namespace_trigger_nothing() {
        assert_eq!(envoy_of("apps/edge", Some("apps")), Some(ObjectRef::new("edge").within("apps")));
        assert_eq!(envoy_of("other/edge", Some("apps")), None);
        assert_eq!(envoy_of("other/edge", None), Some(ObjectRef::new("edge").within("other")));
        assert_eq!(envoy_of("no-slash", None), None);
        assert_eq!(envoy_of("apps/:mesh", None), None, "mesh sidecars report no Envoy's status");
    }
}
