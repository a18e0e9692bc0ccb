//! A fleet's xDS status from every replica's report: `status.xds` (connected proxies, the
//! version they all acknowledged, the version served) and the `ConfigAccepted` condition.
//!
//! `ConfigAccepted`:
//! - `Unknown`/`NoProxies`: no proxy of the fleet is connected to any replica;
//! - `False`/`Rejected`: a connected proxy of the fleet's own NACKed its configuration and has
//!   not accepted that type since; the message names the rejecting proxies (at most
//!   [`MAX_NAMED`], the others counted), each with the type and Envoy's words (cut to
//!   [`MAX_QUOTED_CHARS`]);
//! - `Unknown`/`Pending`: proxies are connected but have not all applied the served version
//!   (or the replicas serve different versions, or none yet);
//! - `True`/`Accepted`: every connected proxy applied the served version;
//! - `True`/`SidecarsRejected`: likewise, except sidecars that reject it, named in the message.
//!
//! Sidecars (of other pods naming the Envoy) count as connected proxies, but their NACKs never
//! turn the condition `False`: they run in someone else's pod, next to its ports and with its
//! image, and a NACK there (a port the application holds, an older Envoy) says nothing about
//! the fleet's own proxies. The message names them, and the Envoy gets a `ConfigRejected`
//! event ([`FleetObservation::rejected`]).
//!
//! As with the other conditions, `lastTransitionTime` moves only when the status changes, so
//! the same reports give the same status and the reconciler writes nothing.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::report::{Applied, FleetReport, Rejection};
use crate::api::envoy::CONFIG_ACCEPTED;
use crate::api::{EnvoyStatus, EnvoyXdsStatus};
use crate::bounded;
use crate::names::REASON_ACCEPTED;

pub const REASON_NO_PROXIES: &str = "NoProxies";
pub const REASON_PENDING: &str = "Pending";
pub const REASON_REJECTED: &str = "Rejected";
pub const REASON_SIDECARS_REJECTED: &str = "SidecarsRejected";
/// Reason of the Warning event on an Envoy whose configuration a proxy rejected.
pub const EVENT_CONFIG_REJECTED: &str = "ConfigRejected";

/// Rejecting proxies a condition message or an event names; the others are counted.
pub const MAX_NAMED: usize = 3;
/// Characters of Envoy's explanation quoted per rejection.
pub const MAX_QUOTED_CHARS: usize = 256;
/// Bytes of an event's note (the API server refuses more than 1 KiB).
pub const MAX_NOTE_BYTES: usize = 1000;

/// What the replicas' reports say about one fleet.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetObservation {
    pub xds: EnvoyXdsStatus,
    pub accepted: Acceptance,
    /// The NACKs that stand, for an event; `None` when no proxy rejects its configuration.
    pub rejected: Option<RejectionNotice>,
}

/// Standing NACKs, as an event tells them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectionNotice {
    /// Which rejections are named (proxy, type, version): the same key again is no news, so
    /// a caller publishes an event only when it changes.
    pub key: String,
    /// The event's note: the rejecting proxies and Envoy's words, within [`MAX_NOTE_BYTES`].
    pub note: String,
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
    let sum = |field: fn(&FleetReport) -> u32| {
        reports.iter().map(|(_, report)| field(report)).fold(0, u32::saturating_add)
    };
    let sidecars = sum(|report| report.sidecars);
    let mut rejections: Vec<&Rejection> = Vec::new();
    let (mut rejecting, mut rejecting_sidecars) = (0u32, 0u32);
    for (_, report) in &reports {
        let (listed, proxies, of_sidecars) = report.standing_rejections();
        rejections.extend(listed);
        rejecting = rejecting.saturating_add(proxies);
        rejecting_sidecars = rejecting_sidecars.saturating_add(of_sidecars);
    }
    rejections.sort_by(|a, b| a.listing_order(b));
    let named = describe(&rejections, rejecting);
    let rejected = (!rejections.is_empty()).then(|| RejectionNotice {
        key: rejections
            .iter()
            .take(MAX_NAMED)
            .map(|r| format!("{} {} {} {}", r.sidecar, r.node, r.type_url, r.version))
            .collect::<Vec<_>>()
            .join("\n"),
        note: cut_to_bytes(&named, MAX_NOTE_BYTES),
    });
    // Sidecars that reject the configuration are not waited for, and say so.
    let expected = connected.saturating_sub(rejecting_sidecars);
    let sidecar_note = match rejecting_sidecars {
        0 => String::new(),
        1 => format!("; 1 sidecar rejects it, which does not hold the fleet back: {named}"),
        n => format!("; {n} sidecars reject it, which does not hold the fleet back: {named}"),
    };
    let accepted = if connected == 0 {
        Acceptance::new(
            "Unknown",
            REASON_NO_PROXIES,
            "no proxy of the fleet is connected to the operator's xDS server".to_owned(),
        )
    } else if rejections.first().is_some_and(|first| !first.sidecar) {
        Acceptance::new("False", REASON_REJECTED, named)
    } else if expected == 0 {
        Acceptance::new(
            "Unknown",
            REASON_SIDECARS_REJECTED,
            format!("only sidecars are connected, and they reject the configuration: {named}"),
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
        let serving = proxies(expected, sidecars.saturating_sub(rejecting_sidecars));
        if up_to_date >= expected {
            let reason = if rejecting_sidecars > 0 { REASON_SIDECARS_REJECTED } else { REASON_ACCEPTED };
            let all = if expected == 1 { "" } else { "all " };
            Acceptance::new("True", reason, format!("{all}{serving} applied version {version}{sidecar_note}"))
        } else {
            Acceptance::new(
                "Unknown",
                REASON_PENDING,
                format!("{up_to_date} of {serving} applied version {version}{sidecar_note}"),
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
    FleetObservation { xds, accepted, rejected }
}

/// `count` connected proxies, saying how many are sidecars.
fn proxies(count: u32, sidecars: u32) -> String {
    let proxies =
        if count == 1 { "1 connected proxy".to_owned() } else { format!("{count} connected proxies") };
    match (count, sidecars) {
        (_, 0) => proxies,
        (1, _) => format!("{proxies} (a sidecar)"),
        (_, 1) => format!("{proxies} (1 of them a sidecar)"),
        (_, n) => format!("{proxies} ({n} of them sidecars)"),
    }
}

/// The first [`MAX_NAMED`] of `rejections` (in listing order) with Envoy's words, and how
/// many more of the `total` rejecting proxies there are.
fn describe(rejections: &[&Rejection], total: u32) -> String {
    let named: Vec<String> = rejections
        .iter()
        .take(MAX_NAMED)
        .map(|rejection| {
            format!(
                "{} {} rejected the {} of version {}: {}",
                if rejection.sidecar { "sidecar" } else { "proxy" },
                rejection.node,
                type_name(&rejection.type_url),
                rejection.version,
                bounded::truncate(&rejection.message, MAX_QUOTED_CHARS)
            )
        })
        .collect();
    let more = match total.saturating_sub(u32::try_from(named.len()).unwrap_or(u32::MAX)) {
        0 => String::new(),
        1 => " (1 more proxy rejects its configuration)".to_owned(),
        more => format!(" ({more} more proxies reject their configuration)"),
    };
    format!("{}{more}", named.join("; "))
}

/// `text` cut to at most `max` bytes, on a character boundary, saying it was cut.
fn cut_to_bytes(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    const CUT: &str = "…(cut)";
    let mut end = max - CUT.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{CUT}", &text[..end])
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
    use crate::fleet::report::{FleetReport, ProxyEntry};

    const CDS: &str = crate::envoy::type_urls::CLUSTER;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).unwrap())
    }

    fn fleet(applied: &[Option<&str>], served: Option<&str>) -> FleetReport {
        FleetReport::new(applied, served, None)
    }

    fn rejecting(applied: &[Option<&str>], served: &str, node: &str, message: &str) -> FleetReport {
        FleetReport::new(applied, Some(served), Some(Rejection::new(node, CDS, served, message)))
    }

    const LDS: &str = crate::envoy::type_urls::LISTENER;
    const LDS_BIND: &str = "cannot bind '0.0.0.0:8080': Address already in use";

    fn entry(
        node: &str,
        sidecar: bool,
        applied: Option<&'static str>,
        nack: Option<&str>,
    ) -> ProxyEntry<'static> {
        let rejection = nack.map(|message| Rejection::new(node, LDS, "v2", message));
        ProxyEntry { applied, sidecar, rejection }
    }

    fn sidecar(node: &str, applied: Option<&'static str>, nack: Option<&str>) -> ProxyEntry<'static> {
        entry(node, true, applied, nack)
    }

    fn own(node: &str, applied: Option<&'static str>) -> ProxyEntry<'static> {
        entry(node, false, applied, None)
    }

    fn with_proxies(proxies: Vec<ProxyEntry<'static>>, served: &str) -> FleetReport {
        FleetReport::of(proxies, Some(served))
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
                name: "NACKs on two replicas: each proxy named with its words",
                reports: vec![
                    ("b", rejecting(&[Some("v1")], "v2", "pod-b", "second")),
                    ("a", rejecting(&[Some("v1")], "v2", "pod-a", "first")),
                ],
                connected: 2,
                acked: Some("v1"),
                served: Some("v2"),
                status: "False",
                reason: REASON_REJECTED,
                message: "proxy pod-a rejected the envoy.config.cluster.v3.Cluster of version v2: first; proxy pod-b rejected the envoy.config.cluster.v3.Cluster of version v2: second",
            },
            Case {
                name: "a sidecar's NACK is named, and does not hold the fleet back",
                reports: vec![
                    ("a", fleet(&[Some("v2"), Some("v2")], Some("v2"))),
                    ("b", with_proxies(vec![sidecar("app-1", Some("v1"), Some(LDS_BIND))], "v2")),
                ],
                connected: 3,
                acked: None,
                served: Some("v2"),
                status: "True",
                reason: REASON_SIDECARS_REJECTED,
                message: "all 2 connected proxies applied version v2; 1 sidecar rejects it, which does not hold the fleet back: sidecar app-1 rejected the envoy.config.listener.v3.Listener of version v2: cannot bind '0.0.0.0:8080': Address already in use",
            },
            Case {
                name: "sidecars are counted as what they are",
                reports: vec![(
                    "a",
                    with_proxies(
                        vec![
                            sidecar("app-1", Some("v2"), None),
                            sidecar("app-2", Some("v2"), None),
                            own("edge-1", Some("v1")),
                        ],
                        "v2",
                    ),
                )],
                connected: 3,
                acked: None,
                served: Some("v2"),
                status: "Unknown",
                reason: REASON_PENDING,
                message: "2 of 3 connected proxies (2 of them sidecars) applied version v2",
            },
            Case {
                name: "the fleet's own NACK turns it False, naming the sidecar's too",
                reports: vec![
                    (
                        "a",
                        with_proxies(
                            vec![sidecar("app-1", Some("v1"), Some(LDS_BIND)), own("edge-1", Some("v1"))],
                            "v2",
                        ),
                    ),
                    ("b", rejecting(&[Some("v1")], "v2", "edge-2", "bad route")),
                ],
                connected: 3,
                acked: Some("v1"),
                served: Some("v2"),
                status: "False",
                reason: REASON_REJECTED,
                message: "proxy edge-2 rejected the envoy.config.cluster.v3.Cluster of version v2: bad route; sidecar app-1 rejected the envoy.config.listener.v3.Listener of version v2: cannot bind '0.0.0.0:8080': Address already in use",
            },
            Case {
                name: "only rejecting sidecars connected",
                reports: vec![("a", with_proxies(vec![sidecar("app-1", None, Some(LDS_BIND))], "v2"))],
                connected: 1,
                acked: None,
                served: Some("v2"),
                status: "Unknown",
                reason: REASON_SIDECARS_REJECTED,
                message: "only sidecars are connected, and they reject the configuration: sidecar app-1 rejected the envoy.config.listener.v3.Listener of version v2: cannot bind '0.0.0.0:8080': Address already in use",
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

    /// However many proxies reject, however long Envoy's words: the message and the event's
    /// note stay bounded, and the event's key names what the message names.
    #[test]
    fn rejections_are_told_within_bounds() {
        let long = "é".repeat(5000);
        let reports: Vec<(String, FleetReport)> = (0..50)
            .map(|i| {
                let proxies =
                    (0..20).map(|j| entry(&format!("edge-{i}-{j}"), j % 2 == 0, Some("v1"), Some(&long)));
                (format!("r{i}"), with_proxies(proxies.collect(), "v2"))
            })
            .collect();
        let observed = aggregate(reports.iter().map(|(replica, report)| (replica.as_str(), report)));
        let message = &observed.accepted.message;
        assert_eq!(observed.accepted.status, "False");
        assert!(message.len() < 4 * 1024, "{} bytes", message.len());
        assert!(message.ends_with("(997 more proxies reject their configuration)"), "{message}");
        assert_eq!(message.matches("rejected the").count(), MAX_NAMED);
        let notice = observed.rejected.expect("a notice");
        assert!(notice.note.len() <= MAX_NOTE_BYTES, "{}", notice.note.len());
        assert_eq!(notice.key.lines().count(), MAX_NAMED);
        assert!(notice.key.starts_with("false edge-0-1 "), "the fleet's own first: {}", notice.key);

        let quiet = aggregate([("a", &fleet(&[Some("v1")], Some("v1")))]);
        assert_eq!(quiet.rejected, None);
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
