//! What the translation made of every route, kept for the route status writer: the statuses it
//! writes are those of the pass that built the snapshots, never a second computation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use envoy_operator_core::api::EnvoyRoute;
use envoy_operator_core::translate::envoyroute::namespace::RouteOutcome;
use futures::Stream;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::broadcast;

/// Route changes a subscriber may fall behind by before it is told to look at every route.
const OUTCOME_FEED_CAPACITY: usize = 1024;

/// A change of outcomes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutcomeChange {
    /// This route's outcome changed (or it has one for the first time).
    Route(ObjectRef<EnvoyRoute>),
    /// Any route's may have (the subscriber fell behind).
    Every,
}

/// The newest outcome of every route of the namespaces translated so far. Cheap to clone.
#[derive(Clone)]
pub struct RouteOutcomes {
    outcomes: Arc<Mutex<HashMap<ObjectRef<EnvoyRoute>, Arc<RouteOutcome>>>>,
    changes: broadcast::Sender<OutcomeChange>,
}

impl Default for RouteOutcomes {
    fn default() -> Self {
        Self { outcomes: Arc::default(), changes: broadcast::channel(OUTCOME_FEED_CAPACITY).0 }
    }
}

impl RouteOutcomes {
    /// The newest outcome of `route`, if its namespace was translated since it appeared.
    pub fn get(&self, route: &ObjectRef<EnvoyRoute>) -> Option<Arc<RouteOutcome>> {
        self.lock().get(route).cloned()
    }

    /// The namespaces that hold outcomes.
    pub fn namespaces(&self) -> std::collections::BTreeSet<String> {
        self.lock().keys().filter_map(|route| route.namespace.clone()).collect()
    }

    /// Sets the outcomes of `namespace` to `outcomes` (routes of that namespace not among them
    /// are gone) and tells subscribers which changed.
    pub fn replace_namespace(&self, namespace: &str, outcomes: impl IntoIterator<Item = RouteOutcome>) {
        let mut changed = Vec::new();
        {
            let mut current = self.lock();
            let mut kept = Vec::new();
            for outcome in outcomes {
                let key = ObjectRef::new(&outcome.name).within(namespace);
                kept.push(key.clone());
                if current.get(&key).is_none_or(|known| **known != outcome) {
                    current.insert(key.clone(), Arc::new(outcome));
                    changed.push(key);
                }
            }
            current.retain(|key, _| key.namespace.as_deref() != Some(namespace) || kept.contains(key));
        }
        for route in changed {
            // Nobody subscribed (no status writer in this process) is no error.
            let _ = self.changes.send(OutcomeChange::Route(route));
        }
    }

    /// The changes from now on; a subscriber that falls behind is told [`OutcomeChange::Every`].
    pub fn changes(&self) -> impl Stream<Item = OutcomeChange> + Send + 'static {
        futures::stream::unfold(self.changes.subscribe(), |mut receiver| async move {
            match receiver.recv().await {
                Ok(change) => Some((change, receiver)),
                Err(broadcast::error::RecvError::Lagged(_)) => Some((OutcomeChange::Every, receiver)),
                Err(broadcast::error::RecvError::Closed) => None,
            }
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectRef<EnvoyRoute>, Arc<RouteOutcome>>> {
        self.outcomes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;

    fn outcome(route: &str, generation: i64) -> RouteOutcome {
        RouteOutcome {
            namespace: "shop".into(),
            name: route.into(),
            uid: None,
            generation: Some(generation),
            parents: Vec::new(),
        }
    }

    #[tokio::test]
    async fn only_changed_outcomes_are_told_and_vanished_routes_forgotten() {
        let outcomes = RouteOutcomes::default();
        let mut changes = Box::pin(outcomes.changes());
        outcomes.replace_namespace("shop", [outcome("a", 1), outcome("b", 1)]);
        outcomes.replace_namespace("blog", [outcome("a", 1)]);
        outcomes.replace_namespace("shop", [outcome("a", 2), outcome("b", 1)]);
        outcomes.replace_namespace("shop", [outcome("a", 2)]);
        let told: Vec<OutcomeChange> = (&mut changes).take(4).collect().await;
        let route =
            |namespace: &str, name: &str| OutcomeChange::Route(ObjectRef::new(name).within(namespace));
        assert_eq!(told, [route("shop", "a"), route("shop", "b"), route("blog", "a"), route("shop", "a")]);
        assert!(outcomes.get(&ObjectRef::new("b").within("shop")).is_none(), "b is gone from shop");
        assert_eq!(outcomes.get(&ObjectRef::new("a").within("blog")).map(|o| o.generation), Some(Some(1)));
    }
}
