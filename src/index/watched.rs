//! One kind's watch: a cache of its objects and a feed of their changes to every subscriber.

use std::fmt::Debug;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::ops::logging::readable;

/// Changes a subscriber may fall behind by before it is told [`Change::Relisted`] instead: a
/// consumer is level-driven, so it loses nothing but the detail.
const FEED_CAPACITY: usize = 1024;

/// What happened to a kind's objects, in the order its watch saw it.
#[derive(Debug)]
pub enum Change<K> {
    /// Created or changed: the object as the cache now holds it.
    Applied(Arc<K>),
    /// Deleted: the object as it last was.
    Deleted(Arc<K>),
    /// The cache was listed afresh (or the subscriber fell behind): objects may have changed or
    /// gone without a change of their own, so every object is suspect.
    Relisted,
}

impl<K> Clone for Change<K> {
    fn clone(&self) -> Self {
        match self {
            Self::Applied(object) => Self::Applied(object.clone()),
            Self::Deleted(object) => Self::Deleted(object.clone()),
            Self::Relisted => Self::Relisted,
        }
    }
}

/// A cache whose watch ended before it was listed.
#[derive(Debug, thiserror::Error)]
#[error("the cache of {0} stopped before it was listed")]
pub struct CacheUnavailable(pub String);

/// One kind's cache and change feed. Cheap to clone.
#[derive(Clone)]
pub struct Watched<K: Resource<DynamicType = ()> + 'static> {
    store: Store<K>,
    changes: broadcast::Sender<Change<K>>,
    listed: watch::Receiver<bool>,
}

impl<K> Watched<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    /// Starts watching `api` on the current runtime until `stop`. `reduce` strips each object
    /// of what nobody reads before it is cached.
    pub(super) fn start(
        api: Api<K>,
        config: watcher::Config,
        reduce: fn(&mut K),
        stop: CancellationToken,
    ) -> Self {
        let events = watcher(api, config).default_backoff().modify(reduce);
        Self::fed_by(events.take_until(stop.cancelled_owned()))
    }

    /// A cache kept by `events` (a watch's), which a task on the current runtime reads until
    /// they end.
    fn fed_by(
        events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    ) -> Self {
        let (store, mut writer) = reflector::store();
        let (changes, _) = broadcast::channel(FEED_CAPACITY);
        let (listed_tx, listed) = watch::channel(false);
        let feed = changes.clone();
        let reader = store.clone();
        tokio::spawn(async move {
            let mut events = std::pin::pin!(events);
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(error) => {
                        warn!(kind = %K::kind(&()), error = %readable(&error), "watch failed; retrying with backoff");
                        continue;
                    }
                };
                let Some(change) = apply(&mut writer, &reader, event) else { continue };
                if matches!(change, Change::Relisted) {
                    listed_tx.send_replace(true);
                }
                // Nobody subscribed yet is no error: subscribers start from the cache.
                let _ = feed.send(change);
            }
        });
        Self { store, changes, listed }
    }

    /// The cache (every object as last seen, shared).
    pub fn store(&self) -> &Store<K> {
        &self.store
    }

    /// Resolves once the cache has been listed (at once after that).
    pub async fn listed(&self) -> Result<(), CacheUnavailable> {
        let mut listed = self.listed.clone();
        match listed.wait_for(|listed| *listed).await {
            Ok(_) => Ok(()),
            Err(_) => Err(CacheUnavailable(K::kind(&()).into_owned())),
        }
    }

    /// The changes from now on, starting with [`Change::Relisted`] when the cache is already
    /// listed (a late subscriber sees every object once, as an early one does at the listing).
    pub fn changes(&self) -> impl Stream<Item = Change<K>> + Send + 'static {
        let receiver = self.changes.subscribe();
        let already_listed = *self.listed.borrow();
        let start = futures::stream::iter(already_listed.then_some(Change::Relisted));
        let live = futures::stream::unfold(receiver, |mut receiver| async move {
            match receiver.recv().await {
                Ok(change) => Some((change, receiver)),
                Err(broadcast::error::RecvError::Lagged(_)) => Some((Change::Relisted, receiver)),
                Err(broadcast::error::RecvError::Closed) => None,
            }
        });
        start.chain(live)
    }

    /// Objects created, changed or deleted; on a relisting, every object in the cache. What
    /// the owners of children, or the dependents of an object, are triggered by.
    pub fn touched(&self) -> impl Stream<Item = Arc<K>> + Send + 'static {
        let store = self.store.clone();
        self.changes().flat_map(move |change| {
            let objects = match change {
                Change::Applied(object) | Change::Deleted(object) => vec![object],
                Change::Relisted => store.state(),
            };
            futures::stream::iter(objects)
        })
    }
}

/// Applies one watch event to the cache (through `writer`; `reader` reads the same cache) and
/// says what changed: nothing while a listing is under way, until it is done.
fn apply<K>(
    writer: &mut reflector::store::Writer<K>,
    reader: &Store<K>,
    event: watcher::Event<K>,
) -> Option<Change<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    writer.apply_watcher_event(&event);
    match event {
        // The cache's own copy, shared rather than cloned once more.
        watcher::Event::Apply(object) => {
            let cached = reader.get(&ObjectRef::from_obj(&object));
            Some(Change::Applied(cached.unwrap_or_else(|| Arc::new(object))))
        }
        watcher::Event::Delete(object) => Some(Change::Deleted(Arc::new(object))),
        watcher::Event::InitDone => Some(Change::Relisted),
        watcher::Event::Init | watcher::Event::InitApply(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use envoy_operator_core::api::EnvoyRoute;
    use futures::channel::mpsc;
    use serde_json::json;

    use super::*;

    fn route(name: &str) -> EnvoyRoute {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
            "metadata": {"name": name, "namespace": "shop"}, "spec": {"parentRefs": [{"name": "edge"}]}}))
        .unwrap()
    }

    fn names(change: &Change<EnvoyRoute>) -> String {
        match change {
            Change::Applied(route) => {
                format!("applied {}", route.metadata.name.as_deref().unwrap_or_default())
            }
            Change::Deleted(route) => {
                format!("deleted {}", route.metadata.name.as_deref().unwrap_or_default())
            }
            Change::Relisted => "relisted".to_owned(),
        }
    }

    #[test]
    fn a_listing_is_one_change_and_applied_objects_are_the_caches_own() {
        let (reader, mut writer) = reflector::store::<EnvoyRoute>();
        let mut changes = Vec::new();
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(route("a")),
            watcher::Event::InitDone,
            watcher::Event::Apply(route("b")),
            watcher::Event::Delete(route("a")),
        ] {
            changes.extend(apply(&mut writer, &reader, event));
        }
        assert_eq!(changes.iter().map(names).collect::<Vec<_>>(), ["relisted", "applied b", "deleted a"]);
        let Change::Applied(b) = &changes[1] else { unreachable!() };
        let cached = reader.get(&ObjectRef::new("b").within("shop")).expect("b is cached");
        assert!(Arc::ptr_eq(b, &cached), "the change shares the cache's object");
        assert!(reader.get(&ObjectRef::new("a").within("shop")).is_none());
    }

    #[tokio::test]
    async fn a_late_subscriber_starts_from_a_relisting_and_one_that_falls_behind_is_told_to_relist() {
        let (events, feed) = mpsc::unbounded();
        let watched = Watched::<EnvoyRoute>::fed_by(feed);
        let early = watched.changes();
        events.unbounded_send(Ok(watcher::Event::Init)).unwrap();
        events.unbounded_send(Ok(watcher::Event::InitDone)).unwrap();
        watched.listed().await.expect("listed");
        let late: Vec<String> = watched.changes().take(1).map(|change| names(&change)).collect().await;
        assert_eq!(late, ["relisted"], "a subscriber after the listing sees every object once too");

        // More changes than the feed keeps, while the early subscriber reads none.
        let last = format!("r{FEED_CAPACITY}");
        for i in 0..=FEED_CAPACITY {
            events.unbounded_send(Ok(watcher::Event::Apply(route(&format!("r{i}"))))).unwrap();
        }
        while watched.store().get(&ObjectRef::new(&last).within("shop")).is_none() {
            tokio::task::yield_now().await;
        }
        drop((events, watched));
        let early: Vec<String> = early.map(|change| names(&change)).collect().await;
        assert_eq!(early[0], "relisted", "told to relist instead of the changes it missed");
        assert_eq!(early.len(), 1 + FEED_CAPACITY, "then the changes the feed kept");
        assert_eq!(early.last().map(String::as_str), Some(format!("applied {last}").as_str()));
    }
}
