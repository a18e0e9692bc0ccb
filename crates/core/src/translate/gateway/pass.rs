//! The pass: GatewayClasses, then their Gateways' listeners, then every HTTPRoute's,
//! GRPCRoute's and TLSRoute's parentRefs naming them (the two kinds' hostname conflicts settled per listener,
//! [`kinds`]), then each Gateway's IR, resources and conditions from what attached.

use std::collections::{BTreeMap, BTreeSet};

use super::addresses;
use super::attach::{attach, gateway_namespace};
use super::class::{self, AcceptedClass};
use super::conditions::{
    ACCEPTED, CONFLICTED, PROGRAMMED, REASON_ACCEPTED, REASON_ADDRESS_NOT_ASSIGNED,
    REASON_ADDRESS_NOT_USABLE, REASON_INVALID, REASON_INVALID_PARAMETERS, REASON_LISTENERS_NOT_VALID,
    REASON_PENDING, REASON_PROGRAMMED, REASON_UNSUPPORTED_ADDRESS, RESOLVED_REFS, judged, state,
};
use super::fleet::Blocked;
use super::kinds::{self, Attachment};
use super::listeners::{self, GRPC_ROUTE, JudgedListener, TLS_ROUTE};
use super::{
    ClassOutcome, GatewayInputs, GatewayOutcome, GatewayTranslation, ListenerOutcome, ParentOutcome,
    RouteOutcome, fleet, merge,
};
use super::{grpcroute, httproute, tlsroute};
use crate::api::Envoy;
use crate::api::gateway::{Gateway, ParentReference};
use crate::route::Route;
use crate::translate::hosts::Served;
use crate::translate::mesh::{self, MeshInputs};
use crate::xds;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A Gateway of an accepted class, its listeners judged.
pub(super) struct JudgedGateway<'a> {
    pub(super) gateway: &'a Gateway,
    template: Option<&'a Envoy>,
    pub(super) listeners: Vec<JudgedListener>,
    /// Per listener (by index): the routes accepted there (by index of the routes read), with
    /// the hostnames they serve there.
    pub(super) attached: BTreeMap<usize, Vec<Attachment>>,
    /// Per listener: the routes (kind, namespace, name) accepted there.
    pub(super) attached_names: BTreeMap<usize, BTreeSet<(&'static str, String, String)>>,
}

/// A route object of a kind the pass reads: what attachment needs of it before it is read.
struct RouteObject<'a> {
    metadata: &'a ObjectMeta,
    parent_refs: &'a [ParentReference],
}

pub fn translate(inputs: &GatewayInputs) -> GatewayTranslation {
    let mut classes: Vec<(ClassOutcome, Option<AcceptedClass>)> = inputs
        .classes
        .iter()
        .filter(|class| class::is_ours(class))
        .map(|class| class::judge(class, inputs.parameters))
        .collect();
    classes.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    let accepted: Vec<AcceptedClass> = classes.iter().filter_map(|(_, accepted)| *accepted).collect();

    let mut gateways: Vec<JudgedGateway> = inputs
        .gateways
        .iter()
        .filter_map(|gateway| {
            let class = accepted.iter().find(|class| class.name == gateway.spec.gateway_class_name)?;
            Some(JudgedGateway {
                gateway,
                template: class.template,
                listeners: listeners::judge(gateway, inputs.secrets, inputs.grants),
                attached: BTreeMap::new(),
                attached_names: BTreeMap::new(),
            })
        })
        .collect();
    gateways.sort_by(|a, b| key(a.gateway).cmp(&key(b.gateway)));

    // `read[i]` is the route of `outcomes[i]`.
    let mut read: Vec<Route> = Vec::new();
    let mut outcomes: Vec<RouteOutcome> = Vec::new();
    for route in inputs.routes.iter() {
        let object = RouteObject { metadata: &route.metadata, parent_refs: &route.spec.parent_refs };
        let read_route = || httproute::read(route, inputs.services, inputs.grants);
        route_outcome(&object, read_route, &mut gateways, &mut read, &mut outcomes, inputs);
    }
    for route in inputs.grpc_routes.iter() {
        let object = RouteObject { metadata: &route.metadata, parent_refs: &route.spec.parent_refs };
        let read_route = || grpcroute::read(route, inputs.services, inputs.grants);
        route_outcome(&object, read_route, &mut gateways, &mut read, &mut outcomes, inputs);
    }
    for route in inputs.tls_routes.iter() {
        let object = RouteObject { metadata: &route.metadata, parent_refs: &route.spec.parent_refs };
        let read_route = || tlsroute::read(route, inputs.services, inputs.grants);
        route_outcome(&object, read_route, &mut gateways, &mut read, &mut outcomes, inputs);
    }
    for gateway in &mut gateways {
        kinds::settle_conflicts(gateway, &read, &mut outcomes);
    }
    let gateway_outcomes = gateways.iter().map(|gateway| gateway_outcome(gateway, &read, inputs)).collect();
    let (mut routes, mut grpc_routes, mut tls_routes) = (Vec::new(), Vec::new(), Vec::new());
    for (route, outcome) in read.iter().zip(outcomes) {
        match route.kind {
            GRPC_ROUTE => grpc_routes.push(outcome),
            TLS_ROUTE => tls_routes.push(outcome),
            _ => routes.push(outcome),
        }
    }
    // HTTPRoutes on Services: their Service parents join the same outcomes, so one status
    // write holds every parent the operator judges.
    let mesh = mesh::translate(&MeshInputs {
        routes: inputs.routes,
        grants: inputs.grants,
        namespaces: inputs.namespaces,
        services: inputs.services,
        endpoint_slices: inputs.endpoint_slices,
        rejected: inputs.rejected,
        mesh_pods: inputs.mesh_pods,
    });
    for outcome in mesh.routes {
        let same =
            |known: &&mut RouteOutcome| known.namespace == outcome.namespace && known.name == outcome.name;
        match routes.iter_mut().find(same) {
            Some(known) => {
                known.parents.extend(outcome.parents);
                known.parents.sort_by(|a, b| a.parent_ref.cmp(&b.parent_ref));
            }
            None => routes.push(outcome),
        }
    }
    let by_name = |a: &RouteOutcome, b: &RouteOutcome| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name));
    routes.sort_by(by_name);
    grpc_routes.sort_by(by_name);
    tls_routes.sort_by(by_name);

    GatewayTranslation {
        classes: classes.into_iter().map(|(outcome, _)| outcome).collect(),
        gateways: gateway_outcomes,
        routes,
        grpc_routes,
        tls_routes,
        meshes: mesh.namespaces,
    }
}

fn key(gateway: &Gateway) -> (Option<&String>, Option<&String>) {
    (gateway.metadata.namespace.as_ref(), gateway.metadata.name.as_ref())
}

/// What the Gateways of `gateways` a route names make of it (none naming one: nothing), and
/// the route attached to their listeners. The route is read (into `read_routes`, its outcome
/// into `outcomes` at the same index) once, whatever the number of listeners it attaches to.
fn route_outcome(
    route: &RouteObject,
    read_route: impl FnOnce() -> Route,
    gateways: &mut [JudgedGateway],
    read_routes: &mut Vec<Route>,
    outcomes: &mut Vec<RouteOutcome>,
    inputs: &GatewayInputs,
) {
    let namespace = route.metadata.namespace.clone().unwrap_or_default();
    let names_gateway = |parent_ref: &ParentReference, gateway: &Gateway| {
        gateway_namespace(parent_ref, &namespace) == gateway.metadata.namespace.as_deref()
            && gateway.metadata.name.as_deref() == Some(parent_ref.name.as_str())
    };
    let mut parent_refs: Vec<&ParentReference> = route
        .parent_refs
        .iter()
        .filter(|parent_ref| gateways.iter().any(|judged| names_gateway(parent_ref, judged.gateway)))
        .collect();
    if parent_refs.is_empty() {
        return;
    }
    parent_refs.sort();
    parent_refs.dedup();
    let mut read = read_route();
    if let Some(rejection) = inputs.rejected.of(read.kind, route.metadata) {
        read.refused = Some(rejection.condition_message());
    }
    let index = read_routes.len();
    let mut parents = Vec::new();
    for (parent, parent_ref) in parent_refs.into_iter().enumerate() {
        let Some(judged) = gateways.iter_mut().find(|judged| names_gateway(parent_ref, judged.gateway))
        else {
            continue;
        };
        let (accepted, on) = attach(&read, parent_ref, judged.gateway, &judged.listeners, inputs.namespaces);
        for (listener, hostnames) in on {
            let route_key = (read.kind, read.namespace.clone(), read.name.clone());
            // A route attached to a listener by two parentRefs serves there once.
            if judged.attached_names.entry(listener).or_default().insert(route_key) {
                judged.attached.entry(listener).or_default().push(Attachment {
                    route: index,
                    parent,
                    hostnames,
                });
            }
        }
        parents.push(ParentOutcome {
            parent_ref: parent_ref.clone(),
            accepted,
            resolved_refs: read.resolved_refs.clone(),
        });
    }
    outcomes.push(RouteOutcome {
        namespace,
        name: read.name.clone(),
        uid: route.metadata.uid.clone(),
        generation: route.metadata.generation,
        parents,
    });
    read_routes.push(read);
}

fn gateway_outcome(gateway_judged: &JudgedGateway, read: &[Route], inputs: &GatewayInputs) -> GatewayOutcome {
    let gateway = gateway_judged.gateway;
    let listeners = &gateway_judged.listeners;
    let ports = fleet::ports(listeners);
    let stored = fleet::stored(gateway, inputs.fleets);
    let name = gateway.metadata.name.as_deref().unwrap_or_default();
    let (ours, foreign) = match stored {
        Some(envoy) if fleet::is_fleet_of(envoy, name, gateway.metadata.uid.as_deref()) => {
            (Some(envoy), None)
        }
        stored => (None, stored),
    };
    let requested = addresses::requested(gateway);
    let desired = if ports.is_empty() {
        Err(None)
    } else {
        fleet::desired(gateway, ports, gateway_judged.template, requested.cluster_ip.clone()).map_err(Some)
    };
    let served = listeners.iter().filter(|listener| listener.served()).count();

    let accepted = if let Some(why) = &requested.unsupported {
        state(false, REASON_UNSUPPORTED_ADDRESS, why.clone())
    } else if let Some(reference) =
        gateway.spec.infrastructure.as_ref().and_then(|infrastructure| infrastructure.parameters_ref.as_ref())
    {
        // Gateway API: a parametersRef the implementation cannot use makes the Gateway
        // `InvalidParameters`, rather than serving it without what it asked for.
        state(
            false,
            REASON_INVALID_PARAMETERS,
            format!(
                "spec.infrastructure.parametersRef ({} {}) is not supported: a Gateway's fleet takes its settings from its GatewayClass's parametersRef",
                reference.kind, reference.name
            ),
        )
    } else if let Err(Some(message)) = &desired {
        state(false, REASON_INVALID, message.clone())
    } else if served == 0 {
        state(false, REASON_LISTENERS_NOT_VALID, "no listener of the Gateway is valid")
    } else {
        state(true, REASON_ACCEPTED, format!("{served} of {} listeners are valid", listeners.len()))
    };
    let namespace = gateway.metadata.namespace.clone().unwrap_or_default();
    let name = gateway.metadata.name.clone().unwrap_or_default();
    let fleet_name = fleet::name_of(gateway);
    // Only the Service the Gateway's own fleet controls gives it addresses; and a Gateway with
    // nothing to serve has no fleet, so no address. A Gateway that asked for addresses lists
    // those its Service holds, and only those.
    let service = ours.filter(|_| accepted.status).and_then(|envoy| fleet::service(envoy, inputs.services));
    let addresses = match service {
        Some(service) if requested.any() => requested.held(fleet::cluster_ip(service)),
        Some(service) => fleet::addresses(service),
        None => Vec::new(),
    };
    let programmed = if let Some(envoy) = foreign {
        state(
            false,
            REASON_INVALID,
            format!(
                "the Envoy {namespace}/{} is not this Gateway's fleet (it lacks the label {}={name} or the Gateway's ownerReference): rename or delete it",
                envoy.metadata.name.as_deref().unwrap_or_default(),
                crate::names::GATEWAY_LABEL
            ),
        )
    } else if !accepted.status {
        state(false, REASON_INVALID, "the Gateway is not accepted: it has no fleet")
    } else if let Some(why) = &requested.unusable {
        state(false, REASON_ADDRESS_NOT_USABLE, why.clone())
    } else if let Some(Blocked::Address(why)) = ours.and_then(fleet::blocked) {
        let ip = requested.cluster_ip.as_deref().unwrap_or_default();
        state(
            false,
            REASON_ADDRESS_NOT_USABLE,
            format!("the fleet's Service {namespace}/{fleet_name} cannot take the cluster IP {ip}: {why}"),
        )
    } else if let Some(Blocked::Children(why)) = ours.and_then(fleet::blocked) {
        state(
            false,
            REASON_INVALID,
            format!("the fleet {namespace}/{fleet_name} cannot make its proxies: {why}: rename or delete it"),
        )
    } else if addresses.is_empty() {
        state(
            false,
            REASON_ADDRESS_NOT_ASSIGNED,
            format!("the fleet's Service {namespace}/{fleet_name} has no address yet"),
        )
    } else if !ours.is_some_and(fleet::ready) {
        state(false, REASON_PENDING, format!("the fleet {namespace}/{fleet_name} has no ready proxy yet"))
    } else {
        state(true, REASON_PROGRAMMED, format!("served by the fleet {namespace}/{fleet_name}"))
    };

    let access_log = gateway_judged.template.and_then(|envoy| envoy.spec.access_log).unwrap_or(true);
    let attached: BTreeMap<usize, Vec<Served>> = gateway_judged
        .attached
        .iter()
        .map(|(&listener, routes)| {
            let served = routes
                .iter()
                .map(|attachment| Served { route: &read[attachment.route], hostnames: &attachment.hostnames })
                .collect();
            (listener, served)
        })
        .collect();
    let ir = merge::fleet(listeners, &attached, access_log, inputs.services, inputs.endpoint_slices);
    GatewayOutcome {
        namespace,
        name,
        uid: gateway.metadata.uid.clone(),
        generation: gateway.metadata.generation,
        // Proxies only for a Gateway with something to serve, under a name that is free.
        fleet: desired.ok().filter(|_| accepted.status && foreign.is_none()),
        resources: xds::resources(&ir),
        ir,
        addresses,
        conditions: vec![judged(ACCEPTED, accepted), judged(PROGRAMMED, programmed)],
        listeners: listeners
            .iter()
            .enumerate()
            .map(|(i, listener)| {
                listener_outcome(listener, gateway_judged.attached_names.get(&i).map_or(0, BTreeSet::len))
            })
            .collect(),
    }
}

fn listener_outcome(listener: &JudgedListener, attached_routes: usize) -> ListenerOutcome {
    let programmed = if listener.served() {
        state(true, REASON_PROGRAMMED, format!("served on the proxies' port {}", listener.container_port))
    } else {
        let why = [&listener.accepted, &listener.resolved_refs]
            .into_iter()
            .find(|condition| !condition.status)
            .or(listener.conflicted.status.then_some(&listener.conflicted))
            .map_or_else(
                || "it takes no route kind the operator implements".to_owned(),
                |c| c.message.clone(),
            );
        state(false, REASON_INVALID, format!("not served: {why}"))
    };
    ListenerOutcome {
        name: listener.name.clone(),
        supported_kinds: listener.supported_kinds.clone(),
        attached_routes: i32::try_from(attached_routes).unwrap_or(i32::MAX),
        conditions: vec![
            judged(ACCEPTED, listener.accepted.clone()),
            judged(PROGRAMMED, programmed),
            judged(RESOLVED_REFS, listener.resolved_refs.clone()),
            judged(CONFLICTED, listener.conflicted.clone()),
        ],
    }
}
