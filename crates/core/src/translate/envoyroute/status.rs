//! Route status, as Gateway API words it: per route and parentRef, `Accepted` (is the route
//! attached?) and `ResolvedRefs` (do its backends resolve?), each with a reason and a message a
//! user can act on ([`crate::route::conditions`]); and the route's whole `status.parents` computed
//! from them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde::Serialize;

use super::attach::attach;
use super::listener;
use super::read::ReadEnvoyRoute;
use crate::api::route::{EnvoyRouteStatus, ParentReference, RouteParentStatus, RouteSummary};
use crate::api::{Envoy, EnvoyRoute};
use crate::route::conditions::ConditionState;
use crate::route::status::{ParentEntry, distinct, parent_statuses};
use crate::rules::Defaulted;

/// What one Envoy (parentRef) makes of one route.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteStatus {
    /// The route's `metadata.name` (routes and their Envoys share a namespace).
    pub route: String,
    pub parent_ref: ParentReference,
    pub accepted: ConditionState,
    pub resolved_refs: ConditionState,
}

/// The outcome of each of `route`'s parentRefs, given the Envoys and Services of its namespace:
/// what a status writer needs for every parent, including Envoys that do not exist (which no
/// translation sees).
pub fn route_parents(read: &ReadEnvoyRoute, envoys: &[Defaulted<Envoy>]) -> Vec<RouteStatus> {
    let route = &read.route;
    read.parent_refs()
        .into_iter()
        .map(|parent_ref| {
            let envoy = envoys.iter().find(|envoy| {
                envoy.metadata.name.as_deref() == Some(parent_ref.name.as_str())
                    && envoy.metadata.namespace.as_deref() == Some(route.namespace.as_str())
            });
            let listeners: Vec<String> = envoy
                .map(|envoy| listener::listeners(envoy).into_iter().map(|l| l.name).collect())
                .unwrap_or_default();
            let (accepted, _) = attach(route, parent_ref, envoy, &listeners);
            RouteStatus {
                route: route.name.clone(),
                parent_ref: parent_ref.clone(),
                accepted,
                resolved_refs: route.resolved_refs.clone(),
            }
        })
        .collect()
}

/// The route's `status.parents` for `controller_name`, from the outcomes of its parentRefs
/// ([`route_parents`], or the translations' `route_statuses`): one entry per parentRef of the
/// spec that has an outcome, in the spec's order; entries of other controllers are kept as
/// they are, entries for parentRefs no longer in the spec dropped. A condition's
/// `lastTransitionTime` moves only when its status changes, so computing the status twice from
/// the same outcomes gives the same status. `status.summary` says the same for `kubectl get`
/// (see [`summary`]).
pub fn route_status(
    route: &EnvoyRoute,
    outcomes: &[RouteStatus],
    controller_name: &str,
    now: &Time,
) -> EnvoyRouteStatus {
    let previous = route.status.as_ref().map(|s| s.parents.as_slice()).unwrap_or_default();
    let name = route.metadata.name.as_deref().unwrap_or_default();
    let judged = |parent_ref: &ParentReference| {
        outcomes.iter().find(|o| o.route == name && &o.parent_ref == parent_ref)
    };
    let parents = parent_statuses(
        previous,
        &route.spec.parent_refs,
        controller_name,
        route.metadata.generation,
        now,
        |parent_ref| judged(parent_ref).map(|o| (&o.accepted, &o.resolved_refs)),
    );
    let seen = distinct(&route.spec.parent_refs);
    let accepted =
        seen.iter().filter_map(|parent_ref| judged(parent_ref)).filter(|o| o.accepted.status).count();
    EnvoyRouteStatus { parents, summary: Some(summary(&route.spec.hostnames, &seen, accepted)) }
}

impl ParentEntry for RouteParentStatus {
    type Ref = ParentReference;
    fn new(parent_ref: ParentReference, controller_name: String, conditions: Vec<Condition>) -> Self {
        Self { parent_ref, controller_name, conditions }
    }
    fn controller_name(&self) -> &str {
        &self.controller_name
    }
    fn parent_ref(&self) -> &ParentReference {
        &self.parent_ref
    }
    fn conditions(&self) -> &[Condition] {
        &self.conditions
    }
}

/// What `kubectl get envoyroute` prints: `accepted` of the distinct `parent_refs` accepted the
/// route (`2/3`), the parentRefs (`edge,gateway/http`) and the hostnames (`*` for every host),
/// each comma-separated as `kubectl get ingress` prints its hosts.
pub fn summary(hostnames: &[String], parent_refs: &[&ParentReference], accepted: usize) -> RouteSummary {
    let parents: Vec<String> = parent_refs
        .iter()
        .map(|parent| match &parent.section_name {
            Some(listener) => format!("{}/{listener}", parent.name),
            None => parent.name.clone(),
        })
        .collect();
    RouteSummary {
        accepted: format!("{accepted}/{}", parent_refs.len()),
        parents: parents.join(","),
        hostnames: if hostnames.is_empty() { "*".to_owned() } else { hostnames.join(",") },
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    use std::sync::Arc;

    use k8s_openapi::api::core::v1::Service;

    use super::*;
    use crate::api::EnvoySpec;
    use crate::fleet::isolate::Rejections;
    use crate::names::CONTROLLER_NAME;
    use crate::route::backend::REASON_BACKEND_NOT_FOUND;
    use crate::route::conditions::{ACCEPTED, REASON_NO_MATCHING_PARENT, RESOLVED_REFS};
    use crate::rules::defaulted;

    fn parents(
        route: &EnvoyRoute,
        envoys: &[Defaulted<Envoy>],
        services: &[Arc<Service>],
    ) -> Vec<RouteStatus> {
        route_parents(&ReadEnvoyRoute::read(route, services, &Rejections::default()), envoys)
    }

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).unwrap())
    }

    fn route(spec: serde_json::Value) -> EnvoyRoute {
        serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
            "metadata": {"name": "shop", "namespace": "shop", "generation": 3}, "spec": spec}))
        .unwrap()
    }

    fn envoy(name: &str) -> Defaulted<Envoy> {
        defaulted(Envoy {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("shop".into()),
                ..Default::default()
            },
            spec: EnvoySpec::default(),
            status: None,
        })
    }

    fn web() -> Arc<Service> {
        Arc::new(Service {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("shop".into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                ports: Some(vec![ServicePort { port: 80, ..Default::default() }]),
                ..Default::default()
            }),
            status: None,
        })
    }

    #[test]
    fn every_parent_gets_an_outcome() {
        let route = route(json!({
            "parentRefs": [{"name": "gone"}, {"name": "edge"}],
            "rules": [{"backendRefs": [{"name": "web", "port": 80}, {"name": "api", "port": 80}]}]
        }));
        let outcomes = parents(&route, &[envoy("edge")], &[web()]);
        assert_eq!(outcomes.len(), 2);
        assert!(outcomes[0].accepted.status);
        assert_eq!(outcomes[1].accepted.reason, REASON_NO_MATCHING_PARENT);
        for outcome in &outcomes {
            assert_eq!(outcome.resolved_refs.reason, REASON_BACKEND_NOT_FOUND);
            assert_eq!(
                outcome.resolved_refs.message,
                "spec.rules[0].backendRefs[1]: Service \"api\" not found in namespace \"shop\"; their share of the requests is answered with 500"
            );
        }
    }

    #[test]
    fn status_keeps_other_controllers_and_transition_times() {
        let mut route = route(json!({"parentRefs": [{"name": "edge"}, {"name": "gone"}],
            "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}));
        let theirs = RouteParentStatus {
            parent_ref: ParentReference { name: "edge".into(), section_name: None },
            controller_name: "example.net/other".into(),
            conditions: Vec::new(),
        };
        route.status = Some(EnvoyRouteStatus { parents: vec![theirs.clone()], summary: None });
        let outcomes = parents(&route, &[envoy("edge")], &[web()]);
        let first = route_status(&route, &outcomes, CONTROLLER_NAME, &at(10));
        assert_eq!(first.parents.len(), 3);
        assert_eq!(first.parents[0], theirs);
        let edge = &first.parents[1];
        assert_eq!(edge.controller_name, CONTROLLER_NAME);
        assert_eq!(edge.conditions[0].type_, ACCEPTED);
        assert_eq!(edge.conditions[0].status, "True");
        assert_eq!(edge.conditions[0].observed_generation, Some(3));
        assert_eq!(edge.conditions[1].type_, RESOLVED_REFS);
        assert_eq!(first.parents[2].conditions[0].reason, REASON_NO_MATCHING_PARENT);
        let summary = first.summary.as_ref().expect("a summary");
        assert_eq!(summary.accepted, "1/2", "accepted by edge, not by the missing Envoy gone");

        route.status = Some(first.clone());
        let again = route_status(&route, &outcomes, CONTROLLER_NAME, &at(20));
        assert_eq!(again, first, "the same outcomes give the same status");

        route.spec.parent_refs.truncate(1);
        route.metadata.generation = Some(4);
        let mut broken = outcomes.clone();
        broken[0].resolved_refs =
            ConditionState { status: false, reason: REASON_BACKEND_NOT_FOUND, message: "x".into() };
        let changed = route_status(&route, &broken, CONTROLLER_NAME, &at(30));
        assert_eq!(changed.parents.len(), 2, "the parentRef no longer in the spec is dropped");
        let conditions = &changed.parents[1].conditions;
        assert_eq!(conditions[0].last_transition_time, at(10), "Accepted did not change");
        assert_eq!(conditions[1].last_transition_time, at(30), "ResolvedRefs did");
        assert_eq!(conditions[1].observed_generation, Some(4));
        assert_eq!(changed.summary.map(|s| s.accepted).as_deref(), Some("1/1"));
    }

    /// `kubectl get er` prints the summary: every parent counted (a route accepted by one
    /// Envoy and refused by another is not "True"), lists as text.
    #[test]
    fn the_summary_counts_every_parent_and_lists_as_text() {
        let shop = route(json!({
            "parentRefs": [{"name": "edge"}, {"name": "inner", "sectionName": "admin"}, {"name": "gone"}],
            "hostnames": ["shop.example.com", "*.shop.example.com"]
        }));
        let outcomes = parents(&shop, &[envoy("edge"), envoy("inner")], &[]);
        let status = route_status(&shop, &outcomes, CONTROLLER_NAME, &at(10));
        assert_eq!(
            status.summary,
            Some(RouteSummary {
                accepted: "1/3".into(),
                parents: "edge,inner/admin,gone".into(),
                hostnames: "shop.example.com,*.shop.example.com".into(),
            }),
            "edge accepts it; inner has no listener admin, and gone does not exist"
        );

        let every_host = route(json!({"parentRefs": [{"name": "edge"}]}));
        let outcomes = parents(&every_host, &[envoy("edge")], &[]);
        let summary =
            route_status(&every_host, &outcomes, CONTROLLER_NAME, &at(10)).summary.expect("a summary");
        assert_eq!((summary.accepted.as_str(), summary.hostnames.as_str()), ("1/1", "*"));
    }
}
