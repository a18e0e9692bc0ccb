//! Events on routes, for `kubectl describe`: once a route's new status is written, a Warning
//! for each parent condition that turned bad (the parent refuses the route, a reference does
//! not resolve, its proxies reject it) and a Normal event for each that is good again
//! ([`envoy_operator_core::route::events`] decides which). The event's related object is
//! the parent, so the recorder folds repeats per route, parent and reason into one series.

use envoy_operator_core::names::CONTROLLER_NAME;
use envoy_operator_core::route::events::parent_events;
use envoy_operator_core::route::status::ParentEntry;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::events::{Event, EventType};
use tracing::{debug, warn};

use super::Context;
use super::terminating::refused_as_terminating;
use crate::ops::logging::KubeError;

/// How a route's parents are named in its events.
pub(super) struct Parents<F, R> {
    /// As a person reads it (`Envoy "edge"`).
    pub describe: F,
    /// The parent as the event's related object, where it is a kind the operator knows.
    pub related: R,
}

/// Publishes the events that the change of `route`'s `status.parents` from `previous` to
/// `current` (just written) calls for. Best effort: a failure is logged, never fails the
/// reconcile.
pub(super) async fn publish<K, E, F, R>(
    ctx: &Context,
    route: &K,
    previous: &[E],
    current: &[E],
    parents: Parents<F, R>,
) where
    K: Resource<DynamicType = ()>,
    E: ParentEntry,
    F: Fn(&E::Ref) -> String,
    R: Fn(&E::Ref) -> Option<ObjectReference>,
{
    let regarding = route.object_ref(&());
    for told in parent_events(previous, current, CONTROLLER_NAME, parents.describe) {
        let event = Event {
            type_: if told.warning { EventType::Warning } else { EventType::Normal },
            secondary: (parents.related)(&told.parent_ref),
            reason: told.reason,
            note: Some(told.note),
            action: told.action,
        };
        let published = ctx.recorder.publish(&event, &regarding).await;
        ctx.metrics.wrote("Event", "publish");
        match published {
            Ok(()) => {}
            Err(error) if refused_as_terminating(&error) => {
                debug!(reason = %event.reason, "no event: the namespace is being deleted");
            }
            Err(error) => {
                warn!(error = %KubeError(&error), reason = %event.reason, "could not publish event")
            }
        }
    }
}
