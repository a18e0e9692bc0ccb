//! Which proxies are connected to which fleet, and what they did with their configuration: per
//! type the last ACKed version and the last NACK (with Envoy's own error text), and the
//! snapshot version each proxy has fully applied. The operator reads it to write a fleet's
//! status (connected proxies, acknowledged version, a `ConfigAccepted` condition) and
//! subscribes to a [`ChangeFeed`] to know when to.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::SystemTime;

use tokio::sync::Notify;

use super::cache::FleetKey;

/// The xDS protocol variant a stream speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// `StreamAggregatedResources` (Envoy's `GRPC` ADS).
    StateOfTheWorld,
    /// `DeltaAggregatedResources` (Envoy's `DELTA_GRPC` ADS).
    Delta,
}

impl Protocol {
    /// A short, fixed label for metrics.
    pub fn label(self) -> &'static str {
        match self {
            Protocol::StateOfTheWorld => "sotw",
            Protocol::Delta => "delta",
        }
    }
}

/// Identifies one stream within this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

/// A rejected response, as Envoy explained it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nack {
    /// The snapshot version the rejected response came from.
    pub version: String,
    /// Envoy's `error_detail.message`, cut to 1,024 bytes (on a character boundary) with a
    /// note of how many bytes were left out: a client can send megabytes of it.
    pub message: String,
    pub at: SystemTime,
}

/// What one proxy did with one resource type.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TypeStatus {
    /// Snapshot version of the last response the proxy ACKed.
    pub acked_version: Option<String>,
    pub last_nack: Option<Nack>,
    /// Whether `last_nack` came after the last ACK: the proxy still runs without that change.
    pub rejecting: bool,
}

/// One connected proxy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyStatus {
    pub node_id: String,
    pub peer: Option<SocketAddr>,
    pub protocol: Protocol,
    pub connected_since: SystemTime,
    /// The last snapshot version the proxy applied entirely (every resource delivered and
    /// ACKed). It stays while the proxy works toward a newer one or rejected it.
    pub applied_version: Option<String>,
    /// By type URL.
    pub types: BTreeMap<String, TypeStatus>,
}

/// A NACK one proxy is still living with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyNack {
    pub node_id: String,
    pub type_url: String,
    pub nack: Nack,
}

/// A proxy that went away.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disconnect {
    pub node_id: String,
    pub peer: Option<SocketAddr>,
    pub at: SystemTime,
}

/// Everything known about a fleet's proxies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetStatus {
    /// Connected proxies by node id (one per node: the newest stream when a proxy reconnects
    /// before its old stream is gone).
    pub proxies: Vec<ProxyStatus>,
    /// The version every connected proxy has applied, if they agree (none without proxies).
    pub acked_version: Option<String>,
    /// The newest NACK that some connected proxy has not since overcome with an ACK of the
    /// same type: a reason to report the configuration as not accepted.
    pub last_nack: Option<ProxyNack>,
    /// The latest disconnects, newest last (at most [`RECENT_DISCONNECTS`]).
    pub recent_disconnects: Vec<Disconnect>,
}

/// How many disconnects a fleet remembers.
pub const RECENT_DISCONNECTS: usize = 16;

#[derive(Debug, Default)]
struct Fleet {
    streams: HashMap<StreamId, ProxyRecord>,
    disconnects: VecDeque<Disconnect>,
}

/// A connected proxy as kept: one for every stream, so compact, and read as a [`ProxyStatus`]
/// only when a fleet's status is asked for. Its types are a few (5 served), so a vector of
/// exactly their number rather than a map, whose first node has room for 11 (1.3 KiB).
#[derive(Debug)]
struct ProxyRecord {
    node_id: String,
    peer: Option<SocketAddr>,
    protocol: Protocol,
    connected_since: SystemTime,
    applied_version: Option<Box<str>>,
    types: Vec<(TypeUrl, TypeRecord)>,
}

/// A type URL: the served types' are the constants', not copies.
type TypeUrl = std::borrow::Cow<'static, str>;

fn type_url_of(type_url: &str) -> TypeUrl {
    use super::resource::type_url::*;
    [SECRET, CLUSTER, ENDPOINT, LISTENER, ROUTE, SCOPED_ROUTE, VIRTUAL_HOST]
        .into_iter()
        .find(|served| *served == type_url)
        .map_or_else(|| TypeUrl::Owned(type_url.to_owned()), TypeUrl::Borrowed)
}

/// What one proxy did with one type, as kept ([`TypeStatus`] as read).
#[derive(Debug, Default)]
struct TypeRecord {
    acked_version: Option<Box<str>>,
    last_nack: Option<Box<Nack>>,
    rejecting: bool,
}

impl ProxyRecord {
    fn status(&self) -> ProxyStatus {
        ProxyStatus {
            node_id: self.node_id.clone(),
            peer: self.peer,
            protocol: self.protocol,
            connected_since: self.connected_since,
            applied_version: self.applied_version.as_deref().map(str::to_owned),
            types: self
                .types
                .iter()
                .map(|(type_url, record)| {
                    let status = TypeStatus {
                        acked_version: record.acked_version.as_deref().map(str::to_owned),
                        last_nack: record.last_nack.as_deref().cloned(),
                        rejecting: record.rejecting,
                    };
                    (type_url.clone().into_owned(), status)
                })
                .collect(),
        }
    }

    fn type_record(&mut self, type_url: &str) -> &mut TypeRecord {
        let index = match self.types.iter().position(|(url, _)| url == type_url) {
            Some(index) => index,
            None => {
                self.types.reserve_exact(1);
                self.types.push((type_url_of(type_url), TypeRecord::default()));
                self.types.len() - 1
            }
        };
        &mut self.types[index].1
    }
}

#[derive(Default)]
struct Feed {
    dirty: Mutex<BTreeSet<FleetKey>>,
    wake: Notify,
}

#[derive(Default)]
struct State {
    fleets: HashMap<FleetKey, Fleet>,
    feeds: Vec<Weak<Feed>>,
}

/// Shared record of connected proxies. Cheap to clone; clones share the record.
#[derive(Clone, Default)]
pub struct Tracker {
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for Tracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tracker").field("fleets", &self.fleets()).finish()
    }
}

impl Tracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// The fleet's proxies, the version they all applied and the NACK that stands.
    pub fn fleet_status(&self, key: &FleetKey) -> FleetStatus {
        let state = self.lock();
        let Some(fleet) = state.fleets.get(key) else { return FleetStatus::default() };
        let mut newest_by_node: BTreeMap<&str, (StreamId, &ProxyRecord)> = BTreeMap::new();
        for (id, proxy) in &fleet.streams {
            let entry = newest_by_node.entry(&proxy.node_id).or_insert((*id, proxy));
            if *id > entry.0 {
                *entry = (*id, proxy);
            }
        }
        let proxies: Vec<ProxyStatus> =
            newest_by_node.into_values().map(|(_, proxy)| proxy.status()).collect();
        let acked_version = match proxies.split_first() {
            Some((first, rest))
                if rest.iter().all(|proxy| proxy.applied_version == first.applied_version) =>
            {
                first.applied_version.clone()
            }
            _ => None,
        };
        let last_nack = proxies
            .iter()
            .flat_map(|proxy| {
                proxy.types.iter().filter(|(_, status)| status.rejecting).filter_map(|(type_url, status)| {
                    let nack = status.last_nack.clone()?;
                    Some(ProxyNack { node_id: proxy.node_id.clone(), type_url: type_url.clone(), nack })
                })
            })
            .max_by_key(|rejection| rejection.nack.at);
        FleetStatus {
            proxies,
            acked_version,
            last_nack,
            recent_disconnects: fleet.disconnects.iter().cloned().collect(),
        }
    }

    /// Fleets with connected proxies or remembered disconnects.
    pub fn fleets(&self) -> Vec<FleetKey> {
        let mut keys: Vec<_> = self.lock().fleets.keys().cloned().collect();
        keys.sort();
        keys
    }

    /// Forgets a fleet's disconnects (e.g. once its Envoy resource is deleted); connected
    /// proxies stay.
    pub fn forget(&self, key: &FleetKey) {
        let mut state = self.lock();
        if let Some(fleet) = state.fleets.get_mut(key) {
            fleet.disconnects.clear();
            if fleet.streams.is_empty() {
                state.fleets.remove(key);
            }
        }
    }

    /// A feed of the fleets whose status changed. Each feed sees every change.
    pub fn changes(&self) -> ChangeFeed {
        let feed = Arc::new(Feed::default());
        let mut state = self.lock();
        state.feeds.retain(|feed| feed.strong_count() > 0);
        state.feeds.push(Arc::downgrade(&feed));
        ChangeFeed { feed }
    }

    pub(crate) fn connected(
        &self,
        key: &FleetKey,
        stream: StreamId,
        node_id: &str,
        peer: Option<SocketAddr>,
        protocol: Protocol,
    ) {
        let proxy = ProxyRecord {
            node_id: node_id.to_string(),
            peer,
            protocol,
            connected_since: SystemTime::now(),
            applied_version: None,
            types: Vec::new(),
        };
        let mut state = self.lock();
        state.fleets.entry(key.clone()).or_default().streams.insert(stream, proxy);
        state.changed(key);
    }

    pub(crate) fn disconnected(&self, key: &FleetKey, stream: StreamId) {
        let mut state = self.lock();
        let Some(fleet) = state.fleets.get_mut(key) else { return };
        let Some(proxy) = fleet.streams.remove(&stream) else { return };
        if fleet.disconnects.len() == RECENT_DISCONNECTS {
            fleet.disconnects.pop_front();
        }
        fleet.disconnects.push_back(Disconnect {
            node_id: proxy.node_id,
            peer: proxy.peer,
            at: SystemTime::now(),
        });
        state.changed(key);
    }

    pub(crate) fn acked(&self, key: &FleetKey, stream: StreamId, type_url: &str, version: &str) {
        self.update_type(key, stream, type_url, |status| {
            let changed = status.acked_version.as_deref() != Some(version) || status.rejecting;
            if status.acked_version.as_deref() != Some(version) {
                status.acked_version = Some(version.into());
            }
            status.rejecting = false;
            changed
        });
    }

    pub(crate) fn nacked(
        &self,
        key: &FleetKey,
        stream: StreamId,
        type_url: &str,
        version: &str,
        message: &str,
    ) {
        self.update_type(key, stream, type_url, |status| {
            let nack =
                Nack { version: version.to_string(), message: message.to_string(), at: SystemTime::now() };
            status.last_nack = Some(Box::new(nack));
            status.rejecting = true;
            true
        });
    }

    pub(crate) fn applied(&self, key: &FleetKey, stream: StreamId, version: &str) {
        let mut state = self.lock();
        let Some(proxy) = state.fleets.get_mut(key).and_then(|fleet| fleet.streams.get_mut(&stream)) else {
            return;
        };
        if proxy.applied_version.as_deref() != Some(version) {
            proxy.applied_version = Some(version.into());
            state.changed(key);
        }
    }

    fn update_type(
        &self,
        key: &FleetKey,
        stream: StreamId,
        type_url: &str,
        update: impl FnOnce(&mut TypeRecord) -> bool,
    ) {
        let mut state = self.lock();
        let Some(proxy) = state.fleets.get_mut(key).and_then(|fleet| fleet.streams.get_mut(&stream)) else {
            return;
        };
        if update(proxy.type_record(type_url)) {
            state.changed(key);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    fn changed(&mut self, key: &FleetKey) {
        self.feeds.retain(|feed| match feed.upgrade() {
            Some(feed) => {
                feed.dirty.lock().unwrap_or_else(PoisonError::into_inner).insert(key.clone());
                feed.wake.notify_one();
                true
            }
            None => false,
        });
    }
}

/// The fleets whose status changed since the feed was last read, coalesced: a burst of ACKs
/// from a thousand proxies of one fleet is one entry.
pub struct ChangeFeed {
    feed: Arc<Feed>,
}

impl fmt::Debug for ChangeFeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChangeFeed").finish_non_exhaustive()
    }
}

impl ChangeFeed {
    /// Waits until some fleet changed, then returns every fleet changed since the last call.
    pub async fn changed(&mut self) -> Vec<FleetKey> {
        loop {
            let keys = self.take();
            if !keys.is_empty() {
                return keys;
            }
            self.feed.wake.notified().await;
        }
    }

    /// The fleets changed since the last call, without waiting.
    pub fn take(&mut self) -> Vec<FleetKey> {
        std::mem::take(&mut *self.feed.dirty.lock().unwrap_or_else(PoisonError::into_inner))
            .into_iter()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CDS: &str = super::super::resource::type_url::CLUSTER;

    #[tokio::test]
    async fn a_fleet_reports_the_version_all_its_proxies_applied() {
        let tracker = Tracker::new();
        let mut feed = tracker.changes();
        let key = FleetKey::from("ns/edge");
        tracker.connected(&key, StreamId(1), "pod-a", None, Protocol::Delta);
        tracker.connected(&key, StreamId(2), "pod-b", None, Protocol::Delta);
        assert_eq!(feed.changed().await, vec![key.clone()]);
        tracker.applied(&key, StreamId(1), "v1");
        assert_eq!(tracker.fleet_status(&key).acked_version, None);
        tracker.applied(&key, StreamId(2), "v1");
        let status = tracker.fleet_status(&key);
        assert_eq!(status.acked_version.as_deref(), Some("v1"));
        assert_eq!(status.proxies.iter().map(|p| p.node_id.as_str()).collect::<Vec<_>>(), ["pod-a", "pod-b"]);
        assert_eq!(feed.take(), vec![key.clone()]);
    }

    #[test]
    fn a_nack_stands_until_the_same_type_is_acked() {
        let tracker = Tracker::new();
        let key = FleetKey::from("ns/edge");
        tracker.connected(&key, StreamId(1), "pod-a", None, Protocol::Delta);
        tracker.acked(&key, StreamId(1), CDS, "v1");
        tracker.nacked(&key, StreamId(1), CDS, "v2", "invalid cluster");
        let nack = tracker.fleet_status(&key).last_nack.unwrap();
        assert_eq!((nack.node_id.as_str(), nack.type_url.as_str()), ("pod-a", CDS));
        assert_eq!((nack.nack.version.as_str(), nack.nack.message.as_str()), ("v2", "invalid cluster"));
        tracker.acked(&key, StreamId(1), CDS, "v3");
        let status = tracker.fleet_status(&key);
        assert_eq!(status.last_nack, None);
        let types = &status.proxies[0].types[CDS];
        assert_eq!(types.acked_version.as_deref(), Some("v3"));
        assert_eq!(types.last_nack.as_ref().map(|nack| nack.message.as_str()), Some("invalid cluster"));
    }

    #[test]
    fn a_reconnecting_proxy_counts_once_and_its_old_stream_leaves_quietly() {
        let tracker = Tracker::new();
        let key = FleetKey::from("ns/edge");
        tracker.connected(&key, StreamId(1), "pod-a", None, Protocol::Delta);
        tracker.connected(&key, StreamId(2), "pod-a", None, Protocol::Delta);
        tracker.applied(&key, StreamId(2), "v2");
        let status = tracker.fleet_status(&key);
        assert_eq!(status.proxies.len(), 1);
        assert_eq!(status.proxies[0].applied_version.as_deref(), Some("v2"));
        tracker.disconnected(&key, StreamId(1));
        tracker.disconnected(&key, StreamId(2));
        let status = tracker.fleet_status(&key);
        assert!(status.proxies.is_empty() && status.acked_version.is_none());
        assert_eq!(status.recent_disconnects.len(), 2);
        tracker.forget(&key);
        assert!(tracker.fleets().is_empty());
    }
}
