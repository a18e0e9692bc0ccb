//! What one replica's xDS server says about the fleets it serves: per fleet, its connected
//! proxies, what they applied, the version it serves and the NACK that stands. Every replica
//! writes its report into a ConfigMap of the operator's namespace ([`report_name`]); the leader
//! reads them all and aggregates them into the Envoys' status ([`super::status`]).
//!
//! The format is versioned ([`FORMAT`]): a reader refuses a report of a format it does not know
//! instead of misreading it. Within a format, fields are only ever added (a reader ignores
//! fields it does not know).
//!
//! Size: a ConfigMap holds at most 1 MiB. Every string a report carries is cut to a bound
//! (Envoy's message to [`MAX_MESSAGE_CHARS`]), and [`ReplicaReport::new`] keeps fleets, in key
//! order, only while the encoded report stays within [`MAX_REPORT_BYTES`] and [`MAX_FLEETS`];
//! the fleets left out are counted in [`ReplicaReport::omitted_fleets`]. With typical entries
//! (~300 bytes) the count cap is what binds; with worst-case ones (every string at its bound, full
//! of characters JSON escapes) the byte budget does.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::core::Selector;
use serde::{Deserialize, Serialize};

use super::isolate::{self, RouteId};
use crate::bounded;
use crate::names::{
    COMPONENT_KEY, MANAGED_BY, MANAGED_BY_KEY, XDS_REPORT_COMPONENT, XDS_REPORT_KEY, XDS_REPORT_PREFIX,
};

/// The report format this code writes and reads.
pub const FORMAT: u32 = 1;
/// The most fleets one report lists.
pub const MAX_FLEETS: usize = 1000;
/// The encoded report's budget: under the ConfigMap's 1 MiB with room for its metadata.
pub const MAX_REPORT_BYTES: usize = 900 * 1024;
/// Characters of Envoy's NACK message kept (a condition message may hold 32 KiB; a fleet's
/// status needs the first lines of Envoy's explanation, not all of them).
pub const MAX_MESSAGE_CHARS: usize = 1024;
/// Characters kept of a node id (a pod name is at most 253).
pub const MAX_NODE_CHARS: usize = 253;
/// Characters kept of a version or a type URL (ours are far shorter).
pub const MAX_TOKEN_CHARS: usize = 128;
/// The longest fleet key that can name an Envoy: a namespace (63), `/`, a name (253).
pub const MAX_FLEET_KEY_BYTES: usize = 63 + 1 + 253;
/// NACKs a fleet's entry lists (each one proxy's); the others are counted.
pub const MAX_REJECTIONS: usize = 3;

/// One replica's report.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaReport {
    /// [`FORMAT`].
    pub format: u32,
    /// The replica's identity (its pod name).
    pub replica: String,
    /// By fleet key (`<namespace>/<name>` of the Envoy): only fleets with connected proxies.
    #[serde(default)]
    pub fleets: BTreeMap<String, FleetReport>,
    /// Fleets with connected proxies left out to keep the report within its bounds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted_fleets: usize,
    /// Routes left out of the fleets because proxies rejected them ([`super::isolate`]), at most
    /// [`MAX_REJECTED_ROUTES`], so that every replica leaves them out and the leader's statuses
    /// say so whichever replica's proxies rejected them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected_routes: Vec<RejectedRoute>,
}

/// Rejected routes one report lists (beside [`MAX_REPORT_BYTES`] of fleets: with every string at
/// its bound and escaped, they stay under 100 KiB, the rest of a ConfigMap's 1 MiB).
pub const MAX_REJECTED_ROUTES: usize = 16;
/// Characters kept of Envoy's message about a rejected route.
pub const MAX_ROUTE_MESSAGE_CHARS: usize = 256;

/// A route some replica's proxies rejected.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RejectedRoute {
    /// `EnvoyRoute` or `HTTPRoute`.
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The generation rejected: a changed route is tried again.
    pub generation: i64,
    /// Envoy's message, cut to [`MAX_ROUTE_MESSAGE_CHARS`].
    pub message: String,
}

impl RejectedRoute {
    fn of(id: &RouteId, rejection: &isolate::Rejection) -> Self {
        let cut = |value: &str, max| bounded::truncate(value, max).into_owned();
        Self {
            kind: id.kind.to_owned(),
            namespace: cut(&id.namespace, MAX_NODE_CHARS),
            name: cut(&id.name, MAX_NODE_CHARS),
            uid: cut(&id.uid, MAX_TOKEN_CHARS),
            generation: rejection.generation,
            message: cut(&rejection.message, MAX_ROUTE_MESSAGE_CHARS),
        }
    }

    /// The route and its rejection; `None` for a kind this operator does not know.
    pub fn rejection(&self) -> Option<(RouteId, isolate::Rejection)> {
        let kind = isolate::ROUTE_KINDS.iter().find(|kind| **kind == self.kind)?;
        let id = RouteId {
            kind,
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
        };
        Some((id, isolate::Rejection { generation: self.generation, message: self.message.clone() }))
    }
}

fn is_zero(count: &usize) -> bool {
    *count == 0
}

fn is_zero_u32(count: &u32) -> bool {
    *count == 0
}

fn is_false(flag: &bool) -> bool {
    !*flag
}

/// One fleet, as one replica sees it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FleetReport {
    /// Proxies of the fleet connected to this replica.
    pub connected_proxies: u32,
    /// Those of them that applied [`served_version`](Self::served_version).
    pub up_to_date_proxies: u32,
    /// What the connected proxies applied.
    pub applied: Applied,
    /// The version this replica serves the fleet; none without a snapshot (e.g. the Envoy is
    /// gone, or not yet translated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_version: Option<String>,
    /// The NACK some connected proxy of the fleet's own still lives with: never a sidecar's
    /// (what readers from before [`rejections`](Self::rejections) read, so they never hold a
    /// sidecar's against the fleet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejection: Option<Rejection>,
    /// Of the connected proxies, those that are sidecars of other pods naming the Envoy.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub sidecars: u32,
    /// Connected proxies living with a NACK, sidecars included.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub rejecting_proxies: u32,
    /// Of those, sidecars.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub rejecting_sidecars: u32,
    /// Their NACKs, one per proxy, at most [`MAX_REJECTIONS`]: the fleet's own proxies first,
    /// then by node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejections: Vec<Rejection>,
}

/// One connected proxy, as a fleet's report counts it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyEntry<'a> {
    /// The snapshot version it applied entirely, if any.
    pub applied: Option<&'a str>,
    /// Whether it is the sidecar of another pod naming the Envoy, not one of the fleet's own.
    pub sidecar: bool,
    /// The NACK it lives with, if any.
    pub rejection: Option<Rejection>,
}

/// The version a replica's connected proxies applied entirely.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub enum Applied {
    /// None of them has applied a version yet.
    #[default]
    Nothing,
    /// Every one of them applied this version.
    Version(String),
    /// They applied different versions (or some none yet).
    Mixed,
}

impl Applied {
    /// What proxies that applied `versions` (one entry per proxy) agree on.
    pub fn of<'a>(versions: impl IntoIterator<Item = Option<&'a str>>) -> Self {
        let mut versions = versions.into_iter();
        let Some(first) = versions.next() else { return Self::Nothing };
        if versions.any(|version| version != first) {
            return Self::Mixed;
        }
        match first {
            Some(version) => Self::Version(bounded::truncate(version, MAX_TOKEN_CHARS).into_owned()),
            None => Self::Nothing,
        }
    }
}

/// A NACK, as Envoy explained it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Rejection {
    /// The proxy's node id.
    pub node: String,
    /// The type URL of the rejected resources.
    pub type_url: String,
    /// The version the rejected response came from.
    pub version: String,
    /// Envoy's `error_detail.message`, cut to [`MAX_MESSAGE_CHARS`].
    pub message: String,
    /// Whether the proxy is the sidecar of another pod naming the Envoy.
    #[serde(default, skip_serializing_if = "is_false")]
    pub sidecar: bool,
}

impl Rejection {
    /// A rejection with every field cut to its bound.
    pub fn new(node: &str, type_url: &str, version: &str, message: &str) -> Self {
        let cut = |value: &str, max| bounded::truncate(value, max).into_owned();
        Self {
            node: cut(node, MAX_NODE_CHARS),
            type_url: cut(type_url, MAX_TOKEN_CHARS),
            version: cut(version, MAX_TOKEN_CHARS),
            message: cut(message, MAX_MESSAGE_CHARS),
            sidecar: false,
        }
    }

    /// The order rejections are listed and named in: the fleet's own proxies first, then by
    /// node and type.
    pub fn listing_order(&self, other: &Self) -> std::cmp::Ordering {
        (self.sidecar, &self.node, &self.type_url).cmp(&(other.sidecar, &other.node, &other.type_url))
    }
}

impl FleetReport {
    /// The report of a fleet whose connected proxies applied `applied` (one entry per proxy),
    /// served `served_version`, with `rejection` standing.
    pub fn new(applied: &[Option<&str>], served_version: Option<&str>, rejection: Option<Rejection>) -> Self {
        let count = |versions: &[Option<&str>]| u32::try_from(versions.len()).unwrap_or(u32::MAX);
        let up_to_date: Vec<_> = applied
            .iter()
            .copied()
            .filter(|version| version.is_some() && *version == served_version)
            .collect();
        Self {
            connected_proxies: count(applied),
            up_to_date_proxies: count(&up_to_date),
            applied: Applied::of(applied.iter().copied()),
            served_version: served_version
                .map(|version| bounded::truncate(version, MAX_TOKEN_CHARS).into_owned()),
            rejecting_proxies: u32::from(rejection.is_some()),
            rejections: rejection.iter().cloned().collect(),
            rejection,
            ..Self::default()
        }
    }

    /// The report of a fleet whose connected proxies are `proxies`, served `served_version`.
    pub fn of(proxies: Vec<ProxyEntry<'_>>, served_version: Option<&str>) -> Self {
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let applied: Vec<Option<&str>> = proxies.iter().map(|proxy| proxy.applied).collect();
        let mut report = Self::new(&applied, served_version, None);
        report.sidecars = count(proxies.iter().filter(|proxy| proxy.sidecar).count());
        let mut rejections: Vec<Rejection> = proxies
            .into_iter()
            .filter_map(|proxy| Some(Rejection { sidecar: proxy.sidecar, ..proxy.rejection? }))
            .collect();
        report.rejecting_proxies = count(rejections.len());
        report.rejecting_sidecars = count(rejections.iter().filter(|rejection| rejection.sidecar).count());
        rejections.sort_by(Rejection::listing_order);
        rejections.truncate(MAX_REJECTIONS);
        report.rejection = rejections.first().filter(|rejection| !rejection.sidecar).cloned();
        report.rejections = rejections;
        report
    }

    /// The NACKs that stand (at most [`MAX_REJECTIONS`]), how many proxies live with one, and
    /// how many of those are sidecars; of a report from before `rejections`, its `rejection`.
    pub fn standing_rejections(&self) -> (&[Rejection], u32, u32) {
        match (&self.rejections[..], &self.rejection) {
            ([], Some(rejection)) => (std::slice::from_ref(rejection), 1, 0),
            (listed, _) => (listed, self.rejecting_proxies, self.rejecting_sidecars),
        }
    }
}

impl ReplicaReport {
    /// The report of `replica` over `fleets`, within the bounds: fleets in key order while the
    /// encoded report stays within [`MAX_REPORT_BYTES`] and [`MAX_FLEETS`]; fleets without
    /// proxies are not reported, fleets whose key cannot name an Envoy are left out.
    pub fn new(replica: &str, fleets: impl IntoIterator<Item = (String, FleetReport)>) -> Self {
        let mut report = Self {
            format: FORMAT,
            replica: bounded::truncate(replica, MAX_NODE_CHARS).into_owned(),
            ..Self::default()
        };
        let sorted: BTreeMap<String, FleetReport> =
            fleets.into_iter().filter(|(_, fleet)| fleet.connected_proxies > 0).collect();
        // The envelope, with room for the omitted count's digits.
        let mut size = encoded_len(&report) + r#","omittedFleets":18446744073709551615"#.len();
        for (key, fleet) in sorted {
            // `"key":{…},`
            let entry = encoded_len(&key) + 1 + encoded_len(&fleet) + 1;
            if key.len() > MAX_FLEET_KEY_BYTES
                || report.fleets.len() == MAX_FLEETS
                || size + entry > MAX_REPORT_BYTES
            {
                report.omitted_fleets += 1;
                continue;
            }
            size += entry;
            report.fleets.insert(key, fleet);
        }
        report
    }

    /// The report, listing `rejections` (the first [`MAX_REJECTED_ROUTES`]).
    pub fn with_rejected_routes(mut self, rejections: &isolate::Rejections) -> Self {
        self.rejected_routes =
            rejections.iter().take(MAX_REJECTED_ROUTES).map(|(id, r)| RejectedRoute::of(id, r)).collect();
        self
    }

    /// Whether the report would list other routes than it does with `rejections`.
    pub fn rejected_routes_differ_from(&self, rejections: &isolate::Rejections) -> bool {
        let listed: Vec<RejectedRoute> =
            rejections.iter().take(MAX_REJECTED_ROUTES).map(|(id, r)| RejectedRoute::of(id, r)).collect();
        listed != self.rejected_routes
    }

    /// The report as stored in the ConfigMap.
    pub fn encode(&self) -> String {
        // Plain data with string keys: serializing cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a stored report.
    pub fn decode(text: &str) -> Result<Self, ReportError> {
        #[derive(Deserialize)]
        struct Envelope {
            format: u32,
        }
        let envelope: Envelope =
            serde_json::from_str(text).map_err(|e| ReportError::Invalid(e.to_string()))?;
        if envelope.format != FORMAT {
            return Err(ReportError::UnsupportedFormat(envelope.format));
        }
        serde_json::from_str(text).map_err(|e| ReportError::Invalid(e.to_string()))
    }
}

fn encoded_len(value: &impl Serialize) -> usize {
    serde_json::to_string(value).map_or(0, |text| text.len())
}

/// Why a stored report cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    #[error("not a report: {0}")]
    Invalid(String),
    #[error("report format {0} is not known to this version of the operator (it reads format {FORMAT})")]
    UnsupportedFormat(u32),
}

/// The name of the ConfigMap holding the report of the replica `identity`:
/// `envoy-operator-xds-<identity>`, made a valid object name (lowercase alphanumerics, `-` and
/// `.`, at most 253 characters). An identity that had to be changed gets a hash of the original
/// appended, so two identities never share a report.
pub fn report_name(identity: &str) -> String {
    const MAX: usize = 253;
    let cleaned: String = identity
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            c @ ('a'..='z' | '0'..='9' | '-' | '.') => c,
            _ => '-',
        })
        .collect();
    let cleaned = cleaned.trim_matches(|c| c == '-' || c == '.');
    let name = format!("{XDS_REPORT_PREFIX}{cleaned}");
    if cleaned == identity && name.len() <= MAX {
        return name;
    }
    let hash = short_hash(identity);
    let room = MAX - hash.len() - 1;
    let kept = name[..name.len().min(room)].trim_end_matches(['-', '.']);
    format!("{kept}-{hash}")
}

/// Labels of every report ConfigMap.
pub fn report_labels() -> BTreeMap<String, String> {
    [(MANAGED_BY_KEY, MANAGED_BY), (COMPONENT_KEY, XDS_REPORT_COMPONENT)]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect()
}

/// The leader's watch selector of every replica's report.
pub fn reports_selector() -> Selector {
    Selector::from_iter(report_labels())
}

/// The ConfigMap carrying `report` of the replica `identity` in `namespace`, owned by the
/// replica's pod when `owner` is given (so it goes with the pod).
pub fn report_config_map(
    namespace: &str,
    identity: &str,
    owner: Option<OwnerReference>,
    report: &ReplicaReport,
) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(report_name(identity)),
            namespace: Some(namespace.to_owned()),
            labels: Some(report_labels()),
            owner_references: owner.map(|owner| vec![owner]),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(XDS_REPORT_KEY.to_owned(), report.encode())])),
        ..ConfigMap::default()
    }
}

/// The report a ConfigMap carries.
pub fn report_of(config_map: &ConfigMap) -> Result<ReplicaReport, ReportError> {
    let text = config_map
        .data
        .as_ref()
        .and_then(|data| data.get(XDS_REPORT_KEY))
        .ok_or_else(|| ReportError::Invalid(format!("no key {XDS_REPORT_KEY}")))?;
    ReplicaReport::decode(text)
}

fn short_hash(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes()).iter().take(5).map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet(proxies: &[Option<&str>], served: Option<&str>) -> FleetReport {
        FleetReport::new(proxies, served, None)
    }

    #[test]
    fn rejected_routes_round_trip_bounded_in_count_and_size() {
        let mut rejections = isolate::Rejections::default();
        for i in 0..MAX_REJECTED_ROUTES + 4 {
            let long = |c: &str| c.repeat(300);
            let id = RouteId {
                kind: "HTTPRoute",
                namespace: format!("{i:02}{}", long("\u{1}")),
                name: long("\""),
                uid: long("u"),
            };
            rejections.insert(id, isolate::Rejection { generation: 3, message: long("\u{1}\"") });
        }
        let report = ReplicaReport::new("operator-0", []).with_rejected_routes(&rejections);
        assert_eq!(report.rejected_routes.len(), MAX_REJECTED_ROUTES);
        assert!(
            encoded_len(&report.rejected_routes) < 100 * 1024,
            "{}",
            encoded_len(&report.rejected_routes)
        );
        let read = ReplicaReport::decode(&report.encode()).expect("readable");
        let (id, rejection) = read.rejected_routes[0].rejection().expect("a known kind");
        assert_eq!((id.kind, rejection.generation), ("HTTPRoute", 3));
        assert!(rejection.message.chars().count() < MAX_ROUTE_MESSAGE_CHARS + 32, "cut, with a note");
        let unknown = RejectedRoute { kind: "TCPRoute".into(), ..RejectedRoute::default() };
        assert!(unknown.rejection().is_none());
    }

    #[test]
    fn a_report_round_trips_in_its_documented_shape() {
        let rejection =
            Rejection::new("pod-a", "type.googleapis.com/envoy.config.cluster.v3.Cluster", "v2", "bad");
        let report = ReplicaReport::new(
            "operator-0",
            [
                (
                    "ns/edge".to_owned(),
                    FleetReport::new(&[Some("v1"), Some("v1")], Some("v2"), Some(rejection)),
                ),
                ("ns/idle".to_owned(), fleet(&[], Some("v1"))),
            ],
        );
        let text = report.encode();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            serde_json::json!({"format": 1, "replica": "operator-0", "fleets": {"ns/edge": {
                "connectedProxies": 2, "upToDateProxies": 0, "applied": {"version": "v1"}, "servedVersion": "v2",
                "rejection": {"node": "pod-a", "typeUrl": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
                              "version": "v2", "message": "bad"},
                "rejectingProxies": 1,
                "rejections": [{"node": "pod-a", "typeUrl": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
                              "version": "v2", "message": "bad"}]}}}),
            "a fleet without proxies is not reported"
        );
        assert_eq!(ReplicaReport::decode(&text), Ok(report));
    }

    /// Sidecars are told apart; the NACKs listed are bounded, the fleet's own first, and the
    /// field readers from before them read never carries a sidecar's.
    #[test]
    fn rejections_are_listed_fleet_first_and_bounded() {
        let nack = |node: &str| Some(Rejection::new(node, "t", "v2", "bad"));
        let proxy =
            |node: &str, sidecar: bool| ProxyEntry { applied: Some("v1"), sidecar, rejection: nack(node) };
        let proxies = vec![
            proxy("app-b", true),
            proxy("app-a", true),
            ProxyEntry { applied: Some("v2"), sidecar: true, rejection: None },
            proxy("edge-2", false),
            proxy("edge-1", false),
            proxy("app-c", true),
        ];
        let report = FleetReport::of(proxies, Some("v2"));
        assert_eq!((report.connected_proxies, report.up_to_date_proxies, report.sidecars), (6, 1, 4));
        assert_eq!((report.rejecting_proxies, report.rejecting_sidecars), (5, 3));
        let listed: Vec<(&str, bool)> =
            report.rejections.iter().map(|r| (r.node.as_str(), r.sidecar)).collect();
        assert_eq!(listed, [("edge-1", false), ("edge-2", false), ("app-a", true)]);
        assert_eq!(report.rejection.as_ref().map(|r| r.node.as_str()), Some("edge-1"));

        let only_sidecars =
            FleetReport::of(vec![proxy("app-a", true), proxy("edge-1", false)][..1].to_vec(), None);
        assert_eq!(
            only_sidecars.rejection, None,
            "older leaders never hold a sidecar's NACK against the fleet"
        );
        assert_eq!(only_sidecars.standing_rejections().1, 1);

        // A report from before `rejections`: its one rejection stands.
        let old: FleetReport = serde_json::from_value(serde_json::json!({"connectedProxies": 1, "upToDateProxies": 0,
            "applied": "nothing", "rejection": {"node": "edge-1", "typeUrl": "t", "version": "v2", "message": "m"}}))
        .unwrap();
        let (listed, total, sidecars) = old.standing_rejections();
        assert_eq!((listed.len(), total, sidecars), (1, 1, 0));
    }

    #[test]
    fn applied_versions_agree_or_are_mixed() {
        assert_eq!(Applied::of([]), Applied::Nothing);
        assert_eq!(Applied::of([None, None]), Applied::Nothing);
        assert_eq!(Applied::of([Some("v1"), Some("v1")]), Applied::Version("v1".into()));
        assert_eq!(Applied::of([Some("v1"), Some("v2")]), Applied::Mixed);
        assert_eq!(Applied::of([Some("v1"), None]), Applied::Mixed);
        let report = fleet(&[Some("v2"), Some("v1"), None], Some("v2"));
        assert_eq!((report.connected_proxies, report.up_to_date_proxies), (3, 1));
        assert_eq!(
            fleet(&[None], None).up_to_date_proxies,
            0,
            "nothing applied is not up to date with nothing served"
        );
    }

    #[test]
    fn unknown_formats_and_garbage_are_refused_with_a_reason() {
        assert_eq!(
            ReplicaReport::decode(r#"{"format": 2, "replica": "x", "fleets": {"a/b": "new shape"}}"#),
            Err(ReportError::UnsupportedFormat(2))
        );
        assert!(matches!(ReplicaReport::decode("{"), Err(ReportError::Invalid(_))));
        assert!(matches!(
            ReplicaReport::decode(r#"{"format": 1, "fleets": 3}"#),
            Err(ReportError::Invalid(_))
        ));
        // Fields added later within the format are ignored.
        let newer = r#"{"format": 1, "replica": "x", "heartbeat": "now", "fleets": {}}"#;
        assert_eq!(ReplicaReport::decode(newer).map(|r| r.replica), Ok("x".to_owned()));
    }

    #[test]
    fn envoys_text_is_cut_to_its_bound() {
        let rejection = Rejection::new(&"n".repeat(400), "t", "v", &"é".repeat(5000));
        assert!(rejection.message.starts_with(&"é".repeat(MAX_MESSAGE_CHARS)));
        assert!(rejection.message.ends_with("more bytes)"), "says it was cut");
        assert!(rejection.node.chars().count() < 300);
    }

    #[test]
    fn the_report_stays_within_its_budget_and_counts_what_it_left_out() {
        // Worst case: every string at its bound and made of characters JSON escapes 6-fold.
        let nasty = "\u{1}".repeat(10_000);
        let worst = || {
            let rejection = Rejection::new(&nasty, &nasty, &nasty, &nasty);
            FleetReport::new(&[Some(nasty.as_str()); 3], Some(&nasty), Some(rejection))
        };
        let fleets = (0..2000).map(|i| (format!("namespace-{i:04}/{}", "n".repeat(240)), worst()));
        let report = ReplicaReport::new(&nasty, fleets);
        let encoded = report.encode();
        assert!(encoded.len() <= MAX_REPORT_BYTES, "{} bytes", encoded.len());
        assert!(!report.fleets.is_empty());
        assert_eq!(report.fleets.len() + report.omitted_fleets, 2000);
        assert_eq!(ReplicaReport::decode(&encoded), Ok(report.clone()));
        // Typical entries: the count cap binds, the first fleets by key are kept.
        let typical = (0..1500).map(|i| {
            (format!("ns/fleet-{i:04}"), fleet(&[Some("0123456789abcdef")], Some("0123456789abcdef")))
        });
        let report = ReplicaReport::new("operator-0", typical);
        assert_eq!((report.fleets.len(), report.omitted_fleets), (MAX_FLEETS, 500));
        assert!(report.fleets.contains_key("ns/fleet-0000") && !report.fleets.contains_key("ns/fleet-1499"));
        // A key that cannot name an Envoy is left out.
        let long = ReplicaReport::new("r", [("a".repeat(400), fleet(&[None], None))]);
        assert_eq!((long.fleets.len(), long.omitted_fleets), (0, 1));
    }

    #[test]
    fn a_config_map_carries_the_report_under_the_selected_labels() {
        use kube::core::SelectorExt;
        let report = ReplicaReport::new("pod-0", [("ns/edge".to_owned(), fleet(&[Some("v1")], Some("v1")))]);
        let owner = OwnerReference {
            kind: "Pod".into(),
            name: "pod-0".into(),
            uid: "u".into(),
            ..Default::default()
        };
        let config_map = report_config_map("ops", "pod-0", Some(owner), &report);
        assert_eq!(config_map.metadata.name.as_deref(), Some("envoy-operator-xds-pod-0"));
        assert_eq!(config_map.metadata.owner_references.as_ref().map(Vec::len), Some(1));
        let labels = config_map.metadata.labels.clone().unwrap_or_default();
        assert!(reports_selector().matches(&labels));
        assert!(!crate::children::labels::envoy_children_selector().matches(&labels), "not an Envoy's child");
        assert_eq!(report_of(&config_map), Ok(report));
        assert!(matches!(report_of(&ConfigMap::default()), Err(ReportError::Invalid(_))));
    }

    #[test]
    fn report_names_are_valid_object_names_and_distinct() {
        assert_eq!(report_name("envoy-operator-7d9f-abcde"), "envoy-operator-xds-envoy-operator-7d9f-abcde");
        let odd = report_name("My_Laptop.local");
        assert!(odd.starts_with("envoy-operator-xds-my-laptop.local-"), "{odd}");
        assert_ne!(odd, report_name("my-laptop.local"));
        let long = report_name(&"a".repeat(300));
        assert!(long.len() <= 253 && long.starts_with("envoy-operator-xds-aaa"), "{long}");
        assert_ne!(long, report_name(&"a".repeat(301)));
        let valid = |name: &str| {
            name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
                && !name.ends_with('-')
        };
        for identity in ["x", "-", "Ünïcode", "a/b", &"z".repeat(400)] {
            assert!(valid(&report_name(identity)), "{identity}: {}", report_name(identity));
        }
    }
}
