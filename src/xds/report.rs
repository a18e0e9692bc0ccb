//! This replica's xDS report: every replica serves xDS, but only the leader writes the Envoys'
//! status, so each replica publishes what its own proxies did in a ConfigMap of the operator's
//! namespace (`envoy-operator-xds-<identity>`, format in
//! [`envoy_operator_core::fleet::report`]), which the leader's Envoy controller aggregates.
//!
//! The report is rewritten when the tracker says a fleet's proxies changed, and when a version
//! this replica serves a reported fleet changed (checked every [`POLL`]); at most once per
//! [`MIN_INTERVAL`], and never when its content is unchanged. A failed write is retried with a
//! doubling delay (up to [`MAX_RETRY`]).
//!
//! The ConfigMap is owned by the replica's Pod when its uid is known (`POD_UID`), so
//! Kubernetes deletes it with the pod, even after a crash; it is also deleted on a graceful
//! shutdown, so the leader stops counting this replica's proxies at once.

use std::future::Future;
use std::time::Duration;

use envoy_operator_core::fleet::isolate::Rejections;
use envoy_operator_core::fleet::report::{
    FleetReport, ProxyEntry, Rejection, ReplicaReport, report_config_map, report_name,
};
use envoy_operator_core::names::FIELD_MANAGER;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use tokio::time::{Instant, MissedTickBehavior};
use tracing::{debug, info, warn};

use crate::ops::logging::readable;
use crate::xds::isolate::Isolation;
use crate::xds::server::{FleetKey, ProxyStatus, SnapshotCache, Tracker};

/// The least time between two writes of the report.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// How often the served versions of the reported fleets are compared with the report.
pub const POLL: Duration = Duration::from_secs(1);
/// The longest wait before retrying a failed write.
pub const MAX_RETRY: Duration = Duration::from_secs(60);
/// How long the shutdown waits for the report's deletion.
const DELETE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where and as whom this replica reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportConfig {
    /// The operator's namespace, where the leader reads the reports.
    pub namespace: String,
    /// This replica's identity: its pod name in a cluster (`POD_NAME`), like the leader Lease's.
    pub identity: String,
    /// The uid of this replica's Pod (`POD_UID`, from the downward API): the report's owner.
    /// `None` outside a cluster: the report then has no owner.
    pub pod_uid: Option<String>,
}

impl ReportConfig {
    fn owner(&self) -> Option<OwnerReference> {
        self.pod_uid.as_ref().map(|uid| OwnerReference {
            api_version: "v1".to_owned(),
            kind: "Pod".to_owned(),
            name: self.identity.clone(),
            uid: uid.clone(),
            ..OwnerReference::default()
        })
    }
}

/// Tells the fleet's own proxies from the sidecars of other pods that name its Envoy: a
/// sidecar's NACK is reported, but not held against the fleet
/// ([`envoy_operator_core::fleet::status`]).
pub trait ProxyRoles: Send + Sync {
    fn is_sidecar(&self, fleet: &FleetKey, proxy: &ProxyStatus) -> bool;
}

/// Takes every proxy for one of the fleet's own (where nothing tells them apart).
#[derive(Clone, Copy, Debug, Default)]
pub struct FleetOnly;

impl ProxyRoles for FleetOnly {
    fn is_sidecar(&self, _fleet: &FleetKey, _proxy: &ProxyStatus) -> bool {
        false
    }
}

impl<F: Fn(&FleetKey, &ProxyStatus) -> bool + Send + Sync> ProxyRoles for F {
    fn is_sidecar(&self, fleet: &FleetKey, proxy: &ProxyStatus) -> bool {
        self(fleet, proxy)
    }
}

/// The NACK `proxy` lives with: of the types it rejects and has not accepted since, the newest.
fn standing_nack(proxy: &ProxyStatus) -> Option<Rejection> {
    let (type_url, nack) = proxy
        .types
        .iter()
        .filter(|(_, status)| status.rejecting)
        .filter_map(|(type_url, status)| Some((type_url, status.last_nack.as_ref()?)))
        .max_by_key(|(_, nack)| nack.at)?;
    Some(Rejection::new(&proxy.node_id, type_url, &nack.version, &nack.message))
}

/// The report of this replica's proxies as they are now: every fleet with connected proxies,
/// with the version this replica serves it; `roles` tells sidecars apart.
pub fn current_report(
    identity: &str,
    tracker: &Tracker,
    cache: &SnapshotCache,
    roles: &dyn ProxyRoles,
    rejected: &Rejections,
) -> ReplicaReport {
    let fleets = tracker.fleets().into_iter().filter_map(|key| {
        let status = tracker.fleet_status(&key);
        if status.proxies.is_empty() {
            return None;
        }
        let proxies = status
            .proxies
            .iter()
            .map(|proxy| ProxyEntry {
                applied: proxy.applied_version.as_deref(),
                sidecar: roles.is_sidecar(&key, proxy),
                rejection: standing_nack(proxy),
            })
            .collect();
        let served = cache.get(&key);
        let fleet = FleetReport::of(proxies, served.as_ref().map(|snapshot| snapshot.version()));
        Some((key.to_string(), fleet))
    });
    ReplicaReport::new(identity, fleets).with_rejected_routes(rejected)
}

/// Whether a version `cache` serves differs from what `report` says.
fn served_versions_moved(report: &ReplicaReport, cache: &SnapshotCache) -> bool {
    report.fleets.iter().any(|(key, fleet)| {
        let served = cache.get(&FleetKey::from(key.as_str()));
        served.as_ref().map(|snapshot| snapshot.version()) != fleet.served_version.as_deref()
    })
}

/// Keeps this replica's report current until `shutdown` resolves, then deletes it. Runs on
/// every replica, next to the xDS server whose `tracker` and `cache` it reports. Never fails:
/// API errors are logged and retried.
pub async fn run(
    client: Client,
    config: ReportConfig,
    tracker: Tracker,
    cache: SnapshotCache,
    roles: std::sync::Arc<dyn ProxyRoles>,
    isolation: Isolation,
    shutdown: impl Future<Output = ()>,
) {
    let api: Api<ConfigMap> = Api::namespaced(client, &config.namespace);
    let name = report_name(&config.identity);
    info!(namespace = %config.namespace, name = %name, owned = config.pod_uid.is_some(), "reporting this replica's xDS proxies");
    // Subscribed before the first report, so no change goes unseen.
    let mut changes = tracker.changes();
    let mut poll = tokio::time::interval(POLL);
    poll.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tokio::pin!(shutdown);

    // What the ConfigMap holds, as far as this replica knows.
    let mut written: Option<ReplicaReport> = None;
    let mut next_write = Instant::now();
    let mut failures: u32 = 0;
    'reporting: loop {
        tokio::select! {
            () = tokio::time::sleep_until(next_write) => {}
            () = &mut shutdown => break 'reporting,
        }
        let report =
            current_report(&config.identity, &tracker, &cache, roles.as_ref(), &isolation.rejections());
        if written.as_ref() != Some(&report) {
            match write(&api, &config, &report).await {
                Ok(()) => {
                    debug!(name = %name, fleets = report.fleets.len(), "report written");
                    if report.omitted_fleets > 0 {
                        warn!(name = %name, omitted = report.omitted_fleets, "the report is full: fleets left out of it show fewer proxies than they have");
                    }
                    written = Some(report);
                    failures = 0;
                    next_write = Instant::now() + MIN_INTERVAL;
                }
                Err(error) => {
                    failures = failures.saturating_add(1);
                    let delay = MIN_INTERVAL.saturating_mul(1 << failures.min(6)).min(MAX_RETRY);
                    warn!(name = %name, error = %readable(&error), retry_in_s = delay.as_secs(), "could not write this replica's xDS report");
                    next_write = Instant::now() + delay;
                    // Retried once the delay is over, whatever changes meanwhile.
                    continue 'reporting;
                }
            }
        }
        // Wait for a reason to look again.
        loop {
            tokio::select! {
                _ = changes.changed() => break,
                _ = poll.tick() => if written.as_ref().is_none_or(|report| {
                    served_versions_moved(report, &cache)
                        || report.rejected_routes_differ_from(&isolation.rejections())
                }) {
                    break;
                },
                () = &mut shutdown => break 'reporting,
            }
        }
    }

    match tokio::time::timeout(DELETE_TIMEOUT, api.delete(&name, &DeleteParams::default())).await {
        Ok(Ok(_)) => info!(name = %name, "deleted this replica's xDS report"),
        Ok(Err(kube::Error::Api(status))) if status.code == 404 => {}
        Ok(Err(error)) => {
            warn!(name = %name, error = %readable(&error), "could not delete this replica's xDS report")
        }
        Err(_) => {
            warn!(name = %name, "no answer deleting this replica's xDS report within {DELETE_TIMEOUT:?}")
        }
    }
}

async fn write(
    api: &Api<ConfigMap>,
    config: &ReportConfig,
    report: &ReplicaReport,
) -> Result<(), kube::Error> {
    let config_map = report_config_map(&config.namespace, &config.identity, config.owner(), report);
    let name = report_name(&config.identity);
    api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&config_map)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;

    use super::*;
    use crate::xds::server::{Protocol, Snapshot, StreamId};

    const CDS: &str = crate::xds::server::resource::type_url::CLUSTER;

    fn snapshot(cluster: &str) -> Snapshot {
        let mut builder = Snapshot::builder();
        builder.add(&ClusterLoadAssignment { cluster_name: cluster.into(), ..Default::default() });
        builder.build().unwrap()
    }

    #[test]
    fn the_report_says_what_the_proxies_applied_and_rejected_against_what_is_served() {
        let (tracker, cache) = (Tracker::new(), SnapshotCache::new());
        let (edge, quiet) = (FleetKey::from("ns/edge"), FleetKey::from("ns/quiet"));
        let served = cache.set(edge.clone(), snapshot("a"));
        cache.set(quiet.clone(), snapshot("b"));
        tracker.connected(&edge, StreamId(1), "pod-a", None, Protocol::Delta);
        tracker.connected(&edge, StreamId(2), "pod-b", None, Protocol::Delta);
        tracker.applied(&edge, StreamId(1), &served);
        tracker.nacked(&edge, StreamId(2), CDS, &served, "cluster 'web': bad");
        // A fleet whose proxies all left is not reported.
        tracker.connected(&quiet, StreamId(3), "pod-c", None, Protocol::Delta);
        tracker.disconnected(&quiet, StreamId(3));

        let report = current_report("replica-0", &tracker, &cache, &FleetOnly, Rejections::none());
        assert_eq!(report.fleets.keys().collect::<Vec<_>>(), ["ns/edge"]);
        let fleet = &report.fleets["ns/edge"];
        assert_eq!((fleet.connected_proxies, fleet.up_to_date_proxies), (2, 1));
        assert_eq!(fleet.served_version.as_deref(), Some(served.as_str()));
        let rejection = fleet.rejection.as_ref().expect("the NACK stands");
        assert_eq!((rejection.node.as_str(), rejection.message.as_str()), ("pod-b", "cluster 'web': bad"));
        assert!(!served_versions_moved(&report, &cache));
        cache.set(edge.clone(), snapshot("c"));
        assert!(served_versions_moved(&report, &cache));

        // Told apart, a sidecar's NACK is listed as a sidecar's.
        let sidecars = |_: &FleetKey, proxy: &ProxyStatus| proxy.node_id == "pod-b";
        let report = current_report("replica-0", &tracker, &cache, &sidecars, Rejections::none());
        let fleet = &report.fleets["ns/edge"];
        assert_eq!((fleet.sidecars, fleet.rejecting_sidecars), (1, 1));
        assert_eq!(fleet.rejection, None, "not the fleet's own");
        assert!(fleet.rejections[0].sidecar);
    }

    #[test]
    fn the_report_is_owned_by_the_pod_when_its_uid_is_known() {
        let config =
            ReportConfig { namespace: "ops".into(), identity: "op-1".into(), pod_uid: Some("u-1".into()) };
        let owner = config.owner().expect("an owner");
        assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()), ("Pod", "op-1", "u-1"));
        assert_eq!(ReportConfig { pod_uid: None, ..config }.owner(), None);
    }
}
