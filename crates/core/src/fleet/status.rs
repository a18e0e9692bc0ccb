//! A fleet's xDS status from every replica's report: `status.xds` (connected proxies, the
//! version they all acknowledged, the version served) and the `ConfigAccepted` condition.
//!
//! `ConfigAccepted`:
//! - `Unknown`/`NoProxies`: no proxy of the fleet is connected to any replica;
//! - `False`/`Rejected`: a connected proxy NACKed its configuration and has not accepted that
//!   type since; the message names the proxy and the type and quotes Envoy;
//! - `Unknown`/`Pending`: proxies are connected but have not all applied the served version
//!   (or the replicas serve different versions, or none yet);
//! - `True`/`Accepted`: every connected proxy applied the served version.
//!
//! As with the other conditions, `lastTransitionTime` moves only when the status changes, so
//! the same reports give the same status and the reconciler writes nothing.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::report::{Applied, FleetReport, Rejection};
use crate::api::envoy::CONFIG_ACCEPTED;
use crate::api::{EnvoyStatus, EnvoyXdsStatus};

pub const REASON_NO_PROXIES: &str = "NoProxies";
pub const REASON_PENDING: &str = "Pending";
pub const REASON_REJECTED: &str = "Rejected";
pub const REASON_ACCEPTED: &str = "Accepted";

/// What the replicas' reports say about one fleet.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetObservation {
    pub xds: EnvoyXdsStatus,
    pub accepted: Acceptance,
}

/// The `ConfigAccepted` condition's target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acceptance {
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

impl Acceptance {
    fn new(status: &'static str, reason: &'static str, message: String) -> Self {
        Self { status, reason, message }
    }
}

/// Aggregates one fleet's entries of every replica's report (`(replica, entry)`; a replica
/// without proxies of the fleet has no entry).
pub fn aggregate<'a>(reports: impl IntoIterator<Item = (&'a str, &'a FleetReport)>) -> FleetObservation {
    // Whatever order the reports come in, the same reports give the same status: sets below,
    // and the rejection quoted is the least by node and type.
    let reports: Vec<(&str, &FleetReport)> =
        reports.into_iter().filter(|(_, report)| report.connected_proxies > 0).collect();
    let connected: u32 =
        reports.iter().map(|(_, report)| report.connected_proxies).fold(0, u32::saturating_add);
    let up_to_date: u32 =
        reports.iter().map(|(_, report)| report.up_to_date_proxies).fold(0, u32::saturating_add);
    let served: BTreeSet<Option<&str>> =
        reports.iter().map(|(_, report)| report.served_version.as_deref()).collect();
    let served_version = match served.iter().collect::<Vec<_>>().as_slice() {
        [Some(version)] => Some(*version),
        _ => None,
    };
    let applied: BTreeSet<&Applied> = reports.iter().map(|(_, report)| &report.applied).collect();
    let acked_version = match applied.iter().collect::<Vec<_>>().as_slice() {
        [Applied::Version(version)] => Some(version.clone()),
        _ => None,
    };
    let xds = EnvoyXdsStatus {
        connected_proxies: i32::try_from(connected).unwrap_or(i32::MAX),
        acked_version,
        served_version: served_version.map(str::to_owned),
    };
    let rejections: Vec<&Rejection> =
        reports.iter().filter_map(|(_, report)| report.rejection.as_ref()).collect();
    let accepted = if connected == 0 {
        Acceptance::new(
            "Unknown",
            REASON_NO_PROXIES,
            "no proxy of the fleet is connected to the operator's xDS server".to_owned(),
        )
    } else if let Some(first) =
        rejections.iter().min_by(|a, b| (&a.node, &a.type_url).cmp(&(&b.node, &b.type_url)))
    {
        let others = match rejections.len() - 1 {
            0 => String::new(),
            1 => " (1 more proxy rejects its configuration)".to_owned(),
            more => format!(" ({more} more proxies reject their configuration)"),
        };
        Acceptance::new(
            "False",
            REASON_REJECTED,
            format!(
                "proxy {} rejected the {} of version {}{others}: {}",
                first.node,
                type_name(&first.type_url),
                first.version,
                first.message
            ),
        )
    } else if served.len() > 1 {
        let versions: Vec<&str> = served.iter().map(|version| version.unwrap_or("none")).collect();
        Acceptance::new(
            "Unknown",
            REASON_PENDING,
            format!(
                "the replicas serve different versions ({}); waiting for them to agree",
                versions.join(", ")
            ),
        )
    } else if let Some(version) = served_version {
        if up_to_date >= connected {
            Acceptance::new(
                "True",
                REASON_ACCEPTED,
                match connected {
                    1 => format!("1 connected proxy applied version {version}"),
                    all => format!("all {all} connected proxies applied version {version}"),
                },
            )
        } else {
            Acceptance::new(
                "Unknown",
                REASON_PENDING,
                format!("{up_to_date} of {connected} connected proxies applied version {version}"),
            )
        }
    } else {
        Acceptance::new(
            "Unknown",
            REASON_PENDING,
            match connected {
                1 => "1 proxy is connected, but the xDS server has no configuration for the fleet yet"
                    .to_owned(),
                all => format!(
                    "{all} proxies are connected, but the xDS server has no configuration for the fleet yet"
                ),
            },
        )
    };
    FleetObservation { xds, accepted }
}

/// The message's name of a type URL: `envoy.config.cluster.v3.Cluster` for
/// `type.googleapis.com/envoy.config.cluster.v3.Cluster`.
fn type_name(type_url: &str) -> &str {
    type_url.rsplit('/').next().unwrap_or(type_url)
}

/// The `ConfigAccepted` condition for `acceptance`, keeping the previous one's
/// `lastTransitionTime` unless the status changes.
pub fn config_accepted(
    previous: &[Condition],
    generation: Option<i64>,
    acceptance: &Acceptance,
    now: &Time,
) -> Condition {
    let since = previous
        .iter()
        .find(|c| c.type_ == CONFIG_ACCEPTED && c.status == acceptance.status)
        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
    Condition {
        type_: CONFIG_ACCEPTED.to_owned(),
        status: acceptance.status.to_owned(),
        reason: acceptance.reason.to_owned(),
        message: acceptance.message.clone(),
        observed_generation: generation,
        last_transition_time: since,
    }
}

/// `status` with the fleet's xDS part: `status.xds` and `ConfigAccepted` from `observation`
/// for a fleet the operator serves, neither for one it does not (`None`). `previous` are the
/// conditions the Envoy has now.
pub fn with_xds(
    mut status: EnvoyStatus,
    previous: &[Condition],
    observation: Option<&FleetObservation>,
    now: &Time,
) -> EnvoyStatus {
    status.conditions.retain(|condition| condition.type_ != CONFIG_ACCEPTED);
    status.xds = observation.map(|observation| observation.xds.clone());
    if let Some(observation) = observation {
        let generation = status.observed_generation;
        status.conditions.push(config_accepted(previous, generation, &observation.accepted, now));
    }
    status
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::fleet::report::FleetReport;

    const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).unwrap())
    }

    fn fleet(applied: &[Option<&str>], served: Option<&str>) -> FleetReport {
        FleetReport::new(applied, served, None)
    }

    fn rejecting(applied: &[Option<&str>], served: &str, node: &str, message: &str) -> FleetReport {
        FleetReport::new(applied, Some(served), Some(Rejection::new(node, CDS, served, message)))
    }

    struct Case {
        name: &'static str,
        reports: Vec<(&'static str, FleetReport)>,
        connected: i32,
        acked: Option<&'static str>,
        served: Option<&'static str>,
        status: &'static str,
        reason: &'static str,
        message: &'static str,
    }

    #[test]
    fn reports_aggregate_into_status_and_condition() {
        let cases = [
            Case {
                name: "no replica has a proxy",
                reports: vec![("a", fleet(&[], Some("v1")))],
                connected: 0,
                acked: None,
                served: None,
                status: "Unknown",
                reason: REASON_NO_PROXIES,
                message: "no proxy of the fleet is connected to the operator's xDS server",
            },
            Case {
                name: "two replicas, every proxy on the served version",
                reports: vec![
                    ("b", fleet(&[Some("v1")], Some("v1"))),
                    ("a", fleet(&[Some("v1"); 2], Some("v1"))),
                ],
                connected: 3,
                acked: Some("v1"),
                served: Some("v1"),
                status: "True",
                reason: REASON_ACCEPTED,
                message: "all 3 connected proxies applied version v1",
            },
            Case {
                name: "one proxy",
                reports: vec![("a", fleet(&[Some("v1")], Some("v1")))],
                connected: 1,
                acked: Some("v1"),
                served: Some("v1"),
                status: "True",
                reason: REASON_ACCEPTED,
                message: "1 connected proxy applied version v1",
            },
            Case {
                name: "a proxy still on the old version",
                reports: vec![
                    ("a", fleet(&[Some("v2")], Some("v2"))),
                    ("b", fleet(&[Some("v1")], Some("v2"))),
                ],
                connected: 2,
                acked: None,
                served: Some("v2"),
                status: "Unknown",
                reason: REASON_PENDING,
                message: "1 of 2 connected proxies applied version v2",
            },
            Case {
                name: "proxies agree on an old version",
                reports: vec![
                    ("a", fleet(&[Some("v1")], Some("v2"))),
                    ("b", fleet(&[Some("v1")], Some("v2"))),
                ],
                connected: 2,
                acked: Some("v1"),
                served: Some("v2"),
                status: "Unknown",
                reason: REASON_PENDING,
                message: "0 of 2 connected proxies applied version v2",
            },
            Case {
                name: "replicas serve different versions",
                reports: vec![
                    ("a", fleet(&[Some("v1")], Some("v1"))),
                    ("b", fleet(&[Some("v2")], Some("v2"))),
                ],
                connected: 2,
                acked: None,
                served: None,
                status: "Unknown",
                reason: REASON_PENDING,
                message: "the replicas serve different versions (v1, v2); waiting for them to agree",
            },
            Case {
                name: "connected, nothing served yet",
                reports: vec![("a", fleet(&[None, None], None))],
                connected: 2,
                acked: None,
                served: None,
                status: "Unknown",
                reason: REASON_PENDING,
                message: "2 proxies are connected, but the xDS server has no configuration for the fleet yet",
            },
            Case {
                name: "a NACK stands, quoted with node and type",
                reports: vec![
                    ("a", fleet(&[Some("v2")], Some("v2"))),
                    ("b", rejecting(&[Some("v1")], "v2", "edge-7f-x", "cluster 'web': unknown field")),
                ],
                connected: 2,
                acked: None,
                served: Some("v2"),
                status: "False",
                reason: REASON_REJECTED,
                message: "proxy edge-7f-x rejected the envoy.config.cluster.v3.Cluster of version v2: cluster 'web': unknown field",
            },
            Case {
                name: "NACKs on two replicas: the first node is named, the rest counted",
                reports: vec![
                    ("b", rejecting(&[Some("v1")], "v2", "pod-b", "second")),
                    ("a", rejecting(&[Some("v1")], "v2", "pod-a", "first")),
                ],
                connected: 2,
                acked: Some("v1"),
                served: Some("v2"),
                status: "False",
                reason: REASON_REJECTED,
                message: "proxy pod-a rejected the envoy.config.cluster.v3.Cluster of version v2 (1 more proxy rejects its configuration): first",
            },
        ];
        for case in cases {
            let observed = aggregate(case.reports.iter().map(|(replica, report)| (*replica, report)));
            let expected = EnvoyXdsStatus {
                connected_proxies: case.connected,
                acked_version: case.acked.map(str::to_owned),
                served_version: case.served.map(str::to_owned),
            };
            assert_eq!(observed.xds, expected, "{}", case.name);
            assert_eq!(
                (observed.accepted.status, observed.accepted.reason, observed.accepted.message.as_str()),
                (case.status, case.reason, case.message),
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let base = EnvoyStatus { observed_generation: Some(4), ..EnvoyStatus::default() };
        let pending = aggregate([("a", &fleet(&[Some("v1")], Some("v2")))]);
        let first = with_xds(base.clone(), &[], Some(&pending), &at(10));
        let condition = |status: &EnvoyStatus| {
            status.conditions.iter().find(|c| c.type_ == CONFIG_ACCEPTED).cloned().unwrap()
        };
        assert_eq!(condition(&first).last_transition_time, at(10));
        assert_eq!(condition(&first).observed_generation, Some(4));
        // The same observation later: the same status, nothing to write.
        assert_eq!(with_xds(base.clone(), &first.conditions, Some(&pending), &at(20)), first);
        // Another message, the same status: the time stays.
        let still_pending = aggregate([("a", &fleet(&[Some("v1"), Some("v3")], Some("v3")))]);
        let second = with_xds(base.clone(), &first.conditions, Some(&still_pending), &at(30));
        assert_eq!(condition(&second).last_transition_time, at(10));
        assert_eq!(condition(&second).message, "1 of 2 connected proxies applied version v3");
        // Accepted: the time moves.
        let accepted = aggregate([("a", &fleet(&[Some("v3")], Some("v3")))]);
        let third = with_xds(base, &second.conditions, Some(&accepted), &at(40));
        assert_eq!(
            (condition(&third).status.as_str(), condition(&third).last_transition_time),
            ("True", at(40))
        );
    }

    #[test]
    fn a_fleet_the_operator_does_not_serve_has_no_xds_status() {
        let previous = with_xds(EnvoyStatus::default(), &[], Some(&aggregate([])), &at(1));
        assert_eq!(previous.xds.as_ref().map(|xds| xds.connected_proxies), Some(0));
        let status = with_xds(previous.clone(), &previous.conditions, None, &at(2));
        assert_eq!(status.xds, None);
        assert!(status.conditions.iter().all(|c| c.type_ != CONFIG_ACCEPTED), "{:?}", status.conditions);
    }
}
