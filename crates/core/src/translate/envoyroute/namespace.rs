//! One namespace in one pass: the configuration of every fleet the operator serves there, and
//! the outcome of every route there, so that the snapshots served and the statuses written can
//! never disagree (Envoy Gateway's translator returns its IR and every object's status together).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::read::ReadEnvoyRoute;
use super::status::{RouteStatus, route_parents};
use super::{Translation, translate_read};
use crate::api::route::ParentReference;
use crate::api::{Envoy, EnvoyRoute};
use crate::fleet::isolate::Rejections;
use crate::names::GATEWAY_LABEL;
#[cfg(test)]
use crate::route::conditions::REASON_UNSUPPORTED_VALUE;
use crate::route::conditions::{ConditionState, REASON_NO_MATCHING_PARENT};
use crate::rules::Defaulted;

/// The objects of one namespace.
#[derive(Clone, Copy, Debug)]
pub struct NamespaceInputs<'a> {
    /// Every Envoy of the namespace, defaulted.
    pub envoys: &'a [Defaulted<Envoy>],
    pub routes: &'a [Arc<EnvoyRoute>],
    pub services: &'a [Arc<Service>],
    pub endpoint_slices: &'a [Arc<EndpointSlice>],
    /// Routes the fleets' proxies refused ([`crate::fleet::isolate`]): left out, with the reason.
    pub rejected: &'a Rejections,
}

/// A fleet the operator serves (an Envoy without `spec.xds`), translated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetTranslation {
    /// The Envoy's name.
    pub envoy: String,
    pub translation: Translation,
}

/// What the parents of one route make of it: one per distinct parentRef, including those
/// naming no Envoy.
pub type RouteOutcome = crate::route::status::RouteOutcome<RouteStatus>;

/// Every fleet and every route of a namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceTranslation {
    pub fleets: Vec<FleetTranslation>,
    pub routes: Vec<RouteOutcome>,
}

/// Translates a namespace: each fleet the operator serves, then each route's outcome per
/// parentRef: the translation's own where a served fleet judged it, and otherwise (an Envoy with
/// an xDS server of its own, or no Envoy of that name) judged here by the same rules.
pub fn translate_namespace(inputs: &NamespaceInputs) -> NamespaceTranslation {
    // Each route is read (defaulted, judged, resolved) once, whichever fleets it names.
    let routes: Vec<ReadEnvoyRoute> = inputs
        .routes
        .iter()
        .map(|route| ReadEnvoyRoute::read(route, inputs.services, inputs.rejected))
        .collect();
    let fleets: Vec<FleetTranslation> = inputs
        .envoys
        .iter()
        .filter(|envoy| envoy.spec.xds.is_none() && gateway_of(envoy).is_none())
        .map(|envoy| FleetTranslation {
            envoy: envoy.metadata.name.clone().unwrap_or_default(),
            translation: translate_read(envoy, &routes, inputs.services, inputs.endpoint_slices),
        })
        .collect();
    let routes = routes.iter().map(|route| route_outcome(route, &fleets, inputs)).collect();
    NamespaceTranslation { fleets, routes }
}

/// The Gateway whose fleet `envoy` is ([`GATEWAY_LABEL`]), if any.
fn gateway_of(envoy: &Envoy) -> Option<&str> {
    envoy.metadata.labels.as_ref()?.get(GATEWAY_LABEL).map(String::as_str)
}

/// A Gateway's fleet takes its configuration from the Gateway's HTTPRoutes: an EnvoyRoute
/// naming it is refused, and told where to go instead.
fn refused_by_gateway_fleet(mut outcome: RouteStatus, envoys: &[Defaulted<Envoy>]) -> RouteStatus {
    let fleet = envoys.iter().find(|envoy| envoy.metadata.name.as_deref() == Some(&outcome.parent_ref.name));
    if let Some(gateway) = fleet.and_then(|envoy| gateway_of(envoy)) {
        outcome.accepted = ConditionState {
            status: false,
            reason: REASON_NO_MATCHING_PARENT,
            message: format!(
                "Envoy {:?} is the fleet of Gateway {gateway:?}: attach an HTTPRoute to the Gateway",
                outcome.parent_ref.name
            ),
        };
    }
    outcome
}

fn route_outcome(
    read: &ReadEnvoyRoute,
    fleets: &[FleetTranslation],
    inputs: &NamespaceInputs,
) -> RouteOutcome {
    let route = read.object;
    let name = read.route.name.clone();
    let parent_refs = read.parent_refs();
    let served = |parent_ref: &ParentReference| {
        let fleet = fleets.iter().find(|fleet| fleet.envoy == parent_ref.name)?;
        // Sorted by route, then parentRef: a lookup, not a pass over every route's statuses.
        let statuses = &fleet.translation.route_statuses;
        let at = statuses.binary_search_by(|s| (&s.route, &s.parent_ref).cmp(&(&name, parent_ref))).ok()?;
        statuses.get(at)
    };
    let parents = if parent_refs.iter().all(|parent_ref| served(parent_ref).is_some()) {
        parent_refs.iter().filter_map(|parent_ref| served(parent_ref).cloned()).collect()
    } else {
        let judged = route_parents(read, inputs.envoys);
        judged
            .into_iter()
            .map(|outcome| served(&outcome.parent_ref).cloned().unwrap_or(outcome))
            .map(|outcome| refused_by_gateway_fleet(outcome, inputs.envoys))
            .collect()
    };
    RouteOutcome {
        namespace: read.route.namespace.clone(),
        name,
        uid: route.metadata.uid.clone(),
        generation: route.metadata.generation,
        parents,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::rules::defaulted;

    fn envoy(name: &str, xds: Option<serde_json::Value>) -> Defaulted<Envoy> {
        let mut spec = json!({"replicas": 1});
        if let Some(xds) = xds {
            spec["xds"] = xds;
        }
        defaulted(
            serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Envoy",
                "metadata": {"name": name, "namespace": "shop", "uid": format!("uid-{name}")}, "spec": spec}))
            .unwrap(),
        )
    }

    fn route(parents: serde_json::Value) -> Arc<EnvoyRoute> {
        Arc::new(
            serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "EnvoyRoute",
            "metadata": {"name": "shop", "namespace": "shop", "generation": 3, "uid": "route-uid"},
            "spec": {"parentRefs": parents, "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}}))
            .unwrap(),
        )
    }

    /// The outcomes of the pass are those the status writer computed on its own before, for
    /// served fleets, self-served Envoys and missing ones alike.
    #[test]
    fn every_parent_ref_is_judged_as_the_route_parents_rules_judge_it() {
        let envoys =
            [envoy("edge", None), envoy("own", Some(json!({"host": "xds.example.com", "port": 18000})))];
        let routes =
            [route(json!([{"name": "edge"}, {"name": "own"}, {"name": "missing"}, {"name": "edge"}]))];
        let inputs = NamespaceInputs {
            envoys: &envoys,
            routes: &routes,
            services: &[],
            endpoint_slices: &[],
            rejected: crate::fleet::isolate::Rejections::none(),
        };
        let translated = translate_namespace(&inputs);
        assert_eq!(translated.fleets.iter().map(|f| f.envoy.as_str()).collect::<Vec<_>>(), ["edge"]);
        let [outcome] = translated.routes.as_slice() else { panic!("one route: {:?}", translated.routes) };
        assert_eq!((outcome.uid.as_deref(), outcome.generation), (Some("route-uid"), Some(3)));
        let read = ReadEnvoyRoute::read(&routes[0], &[], &Rejections::default());
        assert_eq!(outcome.parents, route_parents(&read, &envoys));
        assert_eq!(outcome.parents.len(), 3, "one outcome per distinct parentRef");
    }

    /// A Gateway's fleet is configured from the Gateway: EnvoyRoutes naming it are refused.
    #[test]
    fn a_gateways_fleet_is_not_an_envoyroute_parent() {
        let mut fleet = envoy("gw", None).into_inner();
        fleet.metadata.labels = Some([(GATEWAY_LABEL.to_owned(), "gw".to_owned())].into());
        let envoys = [defaulted(fleet), envoy("edge", None)];
        let routes = [route(json!([{"name": "gw"}, {"name": "edge"}]))];
        let inputs = NamespaceInputs {
            envoys: &envoys,
            routes: &routes,
            services: &[],
            endpoint_slices: &[],
            rejected: crate::fleet::isolate::Rejections::none(),
        };
        let translated = translate_namespace(&inputs);
        assert_eq!(translated.fleets.iter().map(|f| f.envoy.as_str()).collect::<Vec<_>>(), ["edge"]);
        let parents = &translated.routes[0].parents;
        assert_eq!(parents.len(), 2);
        let edge = parents.iter().find(|p| p.parent_ref.name == "edge").expect("edge");
        assert!(edge.accepted.status);
        let gw = parents.iter().find(|p| p.parent_ref.name == "gw").expect("gw");
        assert_eq!((gw.accepted.status, gw.accepted.reason), (false, REASON_NO_MATCHING_PARENT));
        assert_eq!(
            gw.accepted.message,
            "Envoy \"gw\" is the fleet of Gateway \"gw\": attach an HTTPRoute to the Gateway"
        );
    }

    #[test]
    fn a_route_of_served_fleets_only_takes_the_translations_outcome() {
        let envoys = [envoy("edge", None)];
        let routes = [route(json!([{"name": "edge"}]))];
        let inputs = NamespaceInputs {
            envoys: &envoys,
            routes: &routes,
            services: &[],
            endpoint_slices: &[],
            rejected: crate::fleet::isolate::Rejections::none(),
        };
        let translated = translate_namespace(&inputs);
        assert_eq!(translated.routes[0].parents, translated.fleets[0].translation.route_statuses);
    }

    /// A route the proxies refused is left out of its fleet, alone, with Envoy's words in its
    /// status; once it changes it is tried again.
    #[test]
    fn a_rejected_route_drops_out_alone_until_it_changes() {
        use crate::fleet::isolate::{Rejection, Rejections, RouteId};

        let envoys = [envoy("edge", None)];
        let mut other = EnvoyRoute::clone(&route(json!([{"name": "edge"}])));
        other.metadata.name = Some("other".to_owned());
        other.metadata.uid = Some("other-uid".to_owned());
        let routes = [route(json!([{"name": "edge"}])), Arc::new(other)];
        let mut rejected = Rejections::default();
        let id = RouteId::of("EnvoyRoute", &routes[0].metadata).expect("stored");
        rejected
            .insert(id, Rejection { generation: 3, message: "invalid repetition size: {1001}".to_owned() });
        let inputs = NamespaceInputs {
            envoys: &envoys,
            routes: &routes,
            services: &[],
            endpoint_slices: &[],
            rejected: &rejected,
        };
        let translated = translate_namespace(&inputs);
        let accepted = |name: &str| {
            let outcome = translated.routes.iter().find(|r| r.name == name).expect(name);
            outcome.parents[0].accepted.clone()
        };
        let refused = accepted("shop");
        assert_eq!((refused.status, refused.reason), (false, REASON_UNSUPPORTED_VALUE));
        assert!(refused.message.ends_with(": invalid repetition size: {1001}"), "{}", refused.message);
        assert!(accepted("other").status);
        let virtual_hosts = &translated.fleets[0].translation.ir.listeners[0].virtual_hosts;
        let served: Vec<&str> =
            virtual_hosts.iter().flat_map(|vh| &vh.routes).map(|r| r.name.as_str()).collect();
        assert!(
            !served.is_empty() && served.iter().all(|name| name.starts_with("shop/other/")),
            "{served:?}"
        );

        let mut changed = EnvoyRoute::clone(&routes[0]);
        changed.metadata.generation = Some(4);
        let routes = [Arc::new(changed), routes[1].clone()];
        let inputs = NamespaceInputs { routes: &routes, ..inputs };
        assert!(translate_namespace(&inputs).routes.iter().all(|r| r.parents[0].accepted.status));
    }
}
