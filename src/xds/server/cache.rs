//! The snapshot cache: the newest snapshot of every fleet, and a wake-up for the streams of a
//! fleet when it changes.
//!
//! Each fleet has a `tokio::sync::watch` channel. Setting a snapshot replaces the value and
//! wakes the fleet's streams; a stream that is busy (or whose proxy reads slowly) sees only
//! the newest value when it next looks, so nothing queues up, and the writer never waits for
//! a stream.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

use tokio::sync::watch;

use super::snapshot::Snapshot;

/// Names the fleet a proxy belongs to, e.g. `"<namespace>/<name>"` of its Envoy resource.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FleetKey(Arc<str>);

impl FleetKey {
    pub fn new(key: impl Into<Arc<str>>) -> Self {
        Self(key.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for FleetKey {
    fn from(key: &str) -> Self {
        Self(key.into())
    }
}

impl From<String> for FleetKey {
    fn from(key: String) -> Self {
        Self(key.into())
    }
}

impl fmt::Display for FleetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for FleetKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// A snapshot as published, with the moment it was set: push durations are measured from it.
#[derive(Clone, Debug)]
pub(crate) struct Published {
    pub snapshot: Arc<Snapshot>,
    pub set_at: Instant,
}

type Slot = watch::Sender<Option<Published>>;

/// The newest snapshot per fleet. Cheap to clone; clones share the snapshots.
#[derive(Clone, Default)]
pub struct SnapshotCache {
    fleets: Arc<RwLock<HashMap<FleetKey, Slot>>>,
}

impl fmt::Debug for SnapshotCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotCache").field("fleets", &self.keys()).finish()
    }
}

impl SnapshotCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Publishes `snapshot` as the fleet's configuration and returns its version, which is what
    /// proxies will report as acknowledged. Resources equal in content to the previous snapshot's
    /// keep their version; a snapshot equal to the current one wakes no stream.
    pub fn set(&self, key: impl Into<FleetKey>, snapshot: Snapshot) -> String {
        let slot = self.slot(&key.into());
        // Compared outside the channel's lock: readers are not held up by the decoding it may do.
        let previous = slot.borrow().clone();
        let snapshot = match previous {
            Some(previous) => snapshot.stabilized(&previous.snapshot),
            None => snapshot,
        };
        let version = snapshot.version().to_string();
        slot.send_if_modified(|current| {
            if current.as_ref().is_some_and(|current| current.snapshot.version() == version) {
                return false;
            }
            *current = Some(Published { snapshot: Arc::new(snapshot), set_at: Instant::now() });
            true
        });
        version
    }

    /// Forgets the fleet's snapshot. Its streams stay open and their proxies keep the
    /// configuration they have; whether such a proxy may still connect is the authorizer's call.
    /// Returns whether there was a snapshot.
    pub fn remove(&self, key: &FleetKey) -> bool {
        let mut fleets = self.fleets.write().unwrap_or_else(PoisonError::into_inner);
        let Some(slot) = fleets.get(key) else { return false };
        let had_snapshot = slot.send_replace(None).is_some();
        if slot.receiver_count() == 0 {
            fleets.remove(key);
        }
        had_snapshot
    }

    pub fn get(&self, key: &FleetKey) -> Option<Arc<Snapshot>> {
        let fleets = self.fleets.read().unwrap_or_else(PoisonError::into_inner);
        fleets.get(key)?.borrow().as_ref().map(|published| published.snapshot.clone())
    }

    /// Fleets that have a snapshot.
    pub fn keys(&self) -> Vec<FleetKey> {
        let fleets = self.fleets.read().unwrap_or_else(PoisonError::into_inner);
        let mut keys: Vec<_> =
            fleets.iter().filter(|(_, slot)| slot.borrow().is_some()).map(|(key, _)| key.clone()).collect();
        keys.sort();
        keys
    }

    /// A receiver that sees the fleet's current snapshot and every later change.
    pub(crate) fn subscribe(&self, key: &FleetKey) -> watch::Receiver<Option<Published>> {
        self.slot(key).subscribe()
    }

    /// Drops the fleet's slot if it has neither a snapshot nor a stream watching it.
    pub(crate) fn release(&self, key: &FleetKey) {
        let mut fleets = self.fleets.write().unwrap_or_else(PoisonError::into_inner);
        if fleets.get(key).is_some_and(|slot| slot.borrow().is_none() && slot.receiver_count() == 0) {
            fleets.remove(key);
        }
    }

    fn slot(&self, key: &FleetKey) -> Slot {
        if let Some(slot) = self.fleets.read().unwrap_or_else(PoisonError::into_inner).get(key) {
            return slot.clone();
        }
        let mut fleets = self.fleets.write().unwrap_or_else(PoisonError::into_inner);
        fleets.entry(key.clone()).or_insert_with(|| watch::Sender::new(None)).clone()
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;

    use super::*;

    fn snapshot(clusters: &[&str]) -> Snapshot {
        let mut builder = Snapshot::builder();
        for name in clusters {
            builder.add(&ClusterLoadAssignment { cluster_name: (*name).into(), ..Default::default() });
        }
        builder.build().unwrap()
    }

    #[tokio::test]
    async fn setting_wakes_watchers_with_only_the_newest_snapshot() {
        let cache = SnapshotCache::new();
        let key = FleetKey::from("ns/a");
        let mut watcher = cache.subscribe(&key);
        assert!(watcher.borrow_and_update().is_none());
        cache.set(key.clone(), snapshot(&["x"]));
        let newest = cache.set(key.clone(), snapshot(&["x", "y"]));
        watcher.changed().await.unwrap();
        let seen = watcher.borrow_and_update().clone().unwrap();
        assert_eq!(seen.snapshot.version(), newest);
        assert!(!watcher.has_changed().unwrap());
    }

    #[tokio::test]
    async fn an_equal_snapshot_wakes_nobody() {
        let cache = SnapshotCache::new();
        let key = FleetKey::from("ns/a");
        let first = cache.set(key.clone(), snapshot(&["x"]));
        let mut watcher = cache.subscribe(&key);
        watcher.borrow_and_update();
        assert_eq!(cache.set(key.clone(), snapshot(&["x"])), first);
        assert!(!watcher.has_changed().unwrap());
    }

    #[test]
    fn removing_keeps_a_watched_slot_and_drops_an_unwatched_one() {
        let cache = SnapshotCache::new();
        let (watched, unwatched) = (FleetKey::from("ns/w"), FleetKey::from("ns/u"));
        cache.set(watched.clone(), snapshot(&["x"]));
        cache.set(unwatched.clone(), snapshot(&["x"]));
        let watcher = cache.subscribe(&watched);
        assert!(cache.remove(&watched) && cache.remove(&unwatched));
        assert!(cache.keys().is_empty() && cache.get(&watched).is_none());
        // A later snapshot reaches the stream that kept watching.
        cache.set(watched.clone(), snapshot(&["y"]));
        assert!(watcher.borrow().is_some());
        drop(watcher);
        cache.remove(&watched);
        cache.release(&watched);
        assert!(cache.fleets.read().unwrap().is_empty());
    }
}
