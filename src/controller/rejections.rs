//! When to tell that a fleet's proxies reject their configuration: a Warning `ConfigRejected`
//! event on the Envoy when the rejections its status names change (a new proxy, type or
//! version), never again for the same ones, and at most one per
//! [`REJECTION_EVENT_INTERVAL`] per Envoy, so a proxy that flaps between rejecting and
//! accepting cannot flood the Envoy's events. A change held back is told once the interval is
//! over: the caller requeues the Envoy for then.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::ObjectKey;

/// The least time between two `ConfigRejected` events about one Envoy.
pub const REJECTION_EVENT_INTERVAL: Duration = Duration::from_secs(60);

/// What to do about an Envoy's rejections now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Nothing new to tell.
    Quiet,
    /// News, to be told after this wait.
    Hold(Duration),
    /// News: publish the event.
    Tell,
}

#[derive(Debug)]
struct Told {
    /// The rejections last told, while they stand; `None` once none does.
    key: Option<String>,
    at: Instant,
}

/// The last event per Envoy. An entry stays after its rejections clear, so the interval also
/// holds for a proxy that rejects again; it goes with the Envoy ([`Self::forget`]).
#[derive(Debug)]
pub struct RejectionEvents {
    told: Mutex<HashMap<ObjectKey, Told>>,
    interval: Duration,
}

impl Default for RejectionEvents {
    fn default() -> Self {
        Self::with_interval(REJECTION_EVENT_INTERVAL)
    }
}

impl RejectionEvents {
    /// At most one event per Envoy per `interval` (tests shorten it).
    pub fn with_interval(interval: Duration) -> Self {
        Self { told: Mutex::default(), interval }
    }

    /// Whether to tell `rejected` (the key of the rejections that stand, `None` for none) about
    /// `object` at `now`. A [`Gate::Tell`] is recorded as told.
    pub fn check(&self, object: &ObjectKey, rejected: Option<&str>, now: Instant) -> Gate {
        let mut told = self.told.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(rejected) = rejected else {
            if let Some(entry) = told.get_mut(object) {
                entry.key = None;
            }
            return Gate::Quiet;
        };
        match told.get(object) {
            Some(entry) if entry.key.as_deref() == Some(rejected) => Gate::Quiet,
            Some(entry) if now < entry.at + self.interval => Gate::Hold(entry.at + self.interval - now),
            _ => {
                told.insert(object.clone(), Told { key: Some(rejected.to_owned()), at: now });
                Gate::Tell
            }
        }
    }

    /// Forgets a deleted Envoy.
    pub fn forget(&self, object: &ObjectKey) {
        self.told.lock().unwrap_or_else(PoisonError::into_inner).remove(object);
    }

    /// Envoys on record.
    pub fn len(&self) -> usize {
        self.told.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use envoy_operator_core::api::Envoy;
    use kube::runtime::reflector::ObjectRef;

    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectRef::<Envoy>::new(name).within("shop").erase()
    }

    #[test]
    fn new_rejections_are_told_once_and_a_flapping_proxy_at_most_once_per_interval() {
        let events = RejectionEvents::default();
        let (edge, start) = (key("edge"), Instant::now());
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        assert_eq!(events.check(&edge, None, at(0)), Gate::Quiet, "nothing rejected");
        assert_eq!(events.check(&edge, Some("pod-a v2"), at(0)), Gate::Tell);
        assert_eq!(events.check(&edge, Some("pod-a v2"), at(1)), Gate::Quiet, "told already");
        assert_eq!(events.check(&edge, Some("pod-a v2"), at(600)), Gate::Quiet, "still told");
        // It flaps: accepted, then rejected again, within the interval of the last event.
        assert_eq!(events.check(&edge, None, at(610)), Gate::Quiet);
        assert_eq!(events.check(&edge, Some("pod-a v2"), at(611)), Gate::Tell, "the interval is over");
        assert_eq!(events.check(&edge, None, at(612)), Gate::Quiet);
        assert_eq!(events.check(&edge, Some("pod-a v2"), at(613)), Gate::Hold(Duration::from_secs(58)));
        assert_eq!(events.check(&edge, Some("pod-a v3"), at(650)), Gate::Hold(Duration::from_secs(21)));
        assert_eq!(events.check(&edge, Some("pod-a v3"), at(671)), Gate::Tell);
        // Per Envoy.
        assert_eq!(events.check(&key("other"), Some("pod-a v2"), at(672)), Gate::Tell);
        events.forget(&edge);
        assert_eq!(events.len(), 1);
    }
}
