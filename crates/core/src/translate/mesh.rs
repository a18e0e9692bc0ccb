//! The mesh door (Gateway API's GAMMA): HTTPRoutes whose parentRefs name a Service (`group:
//! ""`, `kind: Service`) route the requests the mesh's sidecars send to that Service, read by
//! the HTTPRoute reader into the same route model, into each meshed namespace's sidecar
//! configuration, and every such parent's status.
//!
//! - A **producer route** (in the Service's namespace) serves every client; a **consumer
//!   route** (in another namespace) serves the clients of its own namespace only, and there
//!   replaces the producer routes of that Service port (GEP-1426).
//! - A parentRef with a `port` (or a `sectionName`, the port's name) takes that Service port;
//!   without, every port of the Service that speaks HTTP ([`speaks_http`]).
//! - A request belongs to the Service it is sent to (a connection's original destination: the
//!   Service's cluster IP and port), never to its Host header, so route `hostnames` are not
//!   read.
//! - Every namespace labelled for injection (or holding a pod with a mesh sidecar) has one
//!   configuration, shared by all its sidecars
//!   ([`MeshOutcome`]): the Service ports some route takes there, nothing for the others, which
//!   pass through untouched. A route's change reaches the namespaces it is served in: a
//!   producer route every meshed namespace (but those overriding it), a consumer route its own.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Pod, Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::Serialize;

use crate::api::gateway::{HTTPRoute, ParentReference, ReferenceGrant};
use crate::fleet::isolate::Rejections;
use crate::inject::annotations::{NAMESPACE_LABEL, NAMESPACE_LABEL_ENABLED};
use crate::ir;
use crate::route::conditions::{ConditionState, REASON_NO_MATCHING_PARENT, REASON_UNSUPPORTED_VALUE};
use crate::route::{ClusterKey, Route};
use crate::translate::endpoints;
use crate::translate::gateway::conditions::{REASON_ACCEPTED, state};
use crate::translate::gateway::{ParentOutcome, RouteOutcome, httproute};
use crate::translate::hosts::{HostnameOrder, Served, ordered_virtual_hosts};
use crate::xds::{self, Resources};

/// Whether `route` names the Service `namespace/name` as a parent.
pub fn route_names_parent(route: &HTTPRoute, namespace: &str, name: &str) -> bool {
    let own = route.metadata.namespace.as_deref().unwrap_or_default();
    route.spec.parent_refs.iter().any(|parent| {
        is_service_parent(parent)
            && parent.name == name
            && parent.namespace.as_deref().unwrap_or(own) == namespace
    })
}

/// The routes (`<namespace>/<name>`) the sidecars of a mesh outcome serve, sorted, each once.
pub fn served_routes(outcome: &MeshOutcome) -> BTreeSet<(String, String)> {
    let services = outcome.ir.listeners.iter().filter_map(|listener| listener.outbound.as_ref());
    services
        .flat_map(|outbound| &outbound.services)
        .flat_map(|service| &service.virtual_hosts)
        .flat_map(|host| &host.routes)
        .filter_map(|route| {
            let mut parts = route.name.splitn(3, '/');
            Some((parts.next()?.to_owned(), parts.next()?.to_owned()))
        })
        .collect()
}

/// The name of every mesh sidecar's outbound listener.
pub const OUTBOUND_LISTENER: &str = "outbound";

#[derive(Clone, Copy, Debug, Default)]
pub struct MeshInputs<'a> {
    pub routes: &'a [Arc<HTTPRoute>],
    pub grants: &'a [Arc<ReferenceGrant>],
    pub namespaces: &'a [Arc<Namespace>],
    pub services: &'a [Arc<Service>],
    pub endpoint_slices: &'a [Arc<EndpointSlice>],
    pub rejected: &'a Rejections,
    /// The pods with a mesh sidecar (a pod opted in where its namespace is not labelled has
    /// one): their namespaces are meshed too.
    pub mesh_pods: &'a [Arc<Pod>],
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MeshTranslation {
    /// One per namespace labelled for injection, sorted by name.
    pub namespaces: Vec<MeshOutcome>,
    /// Per HTTPRoute naming a Service: what each Service parent makes of it, sorted by route.
    pub routes: Vec<RouteOutcome>,
}

/// The configuration of a meshed namespace's sidecars.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MeshOutcome {
    pub namespace: String,
    pub ir: ir::Fleet,
    #[serde(skip)]
    pub resources: Resources,
}

/// The key the sidecars of `namespace` are served under ([`crate::identity::mesh_fleet_key`]).
pub fn fleet_key(namespace: &str) -> String {
    crate::identity::mesh_fleet_key(namespace)
}

/// Whether `key` is a mesh's ([`fleet_key`]).
pub fn is_fleet_key(key: &str) -> bool {
    crate::identity::mesh_namespace(key).is_some()
}

/// Whether a namespace's pods get mesh sidecars: it is labelled for injection.
pub fn is_meshed(namespace: &Namespace) -> bool {
    let labels = namespace.metadata.labels.as_ref();
    labels.and_then(|labels| labels.get(NAMESPACE_LABEL)).map(String::as_str) == Some(NAMESPACE_LABEL_ENABLED)
}

/// Whether `parent` names a Service (a mesh route's parent).
pub fn is_service_parent(parent: &ParentReference) -> bool {
    parent.group.as_deref() == Some("") && parent.kind.as_deref() == Some("Service")
}

/// A Service port a route takes: the Service's namespace, name and the port.
type ServicePortKey = (String, String, u16);

pub fn translate(inputs: &MeshInputs) -> MeshTranslation {
    let mut read: Vec<Route> = Vec::new();
    let mut outcomes: Vec<RouteOutcome> = Vec::new();
    // Per Service port, the routes (by index of `read`) that take it.
    let mut taken: BTreeMap<ServicePortKey, BTreeSet<usize>> = BTreeMap::new();
    for route in inputs.routes.iter() {
        let mut parents: Vec<&ParentReference> =
            route.spec.parent_refs.iter().filter(|parent| is_service_parent(parent)).collect();
        if parents.is_empty() {
            continue;
        }
        parents.sort();
        parents.dedup();
        let mut model = httproute::read(route, inputs.services, inputs.grants);
        if let Some(rejection) = inputs.rejected.of(model.kind, &route.metadata) {
            model.refused = Some(rejection.condition_message());
        }
        let index = read.len();
        let parents = parents
            .into_iter()
            .map(|parent| {
                let (accepted, ports) = attach(&model, parent, inputs.services);
                for port in ports {
                    taken.entry(port).or_default().insert(index);
                }
                ParentOutcome {
                    parent_ref: parent.clone(),
                    accepted,
                    resolved_refs: model.resolved_refs.clone(),
                }
            })
            .collect();
        outcomes.push(RouteOutcome {
            namespace: model.namespace.clone(),
            name: model.name.clone(),
            uid: route.metadata.uid.clone(),
            generation: route.metadata.generation,
            parents,
        });
        read.push(model);
    }
    outcomes.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));

    let mut meshed: Vec<&str> = inputs
        .namespaces
        .iter()
        .filter(|namespace| is_meshed(namespace))
        .filter_map(|namespace| namespace.metadata.name.as_deref())
        .chain(inputs.mesh_pods.iter().filter_map(|pod| pod.metadata.namespace.as_deref()))
        .collect();
    meshed.sort_unstable();
    meshed.dedup();
    let namespaces = meshed
        .into_iter()
        .map(|namespace| {
            let ir = sidecars(namespace, &read, &taken, inputs);
            MeshOutcome { namespace: namespace.to_owned(), resources: xds::resources(&ir), ir }
        })
        .collect();
    MeshTranslation { namespaces, routes: outcomes }
}

/// What the parentRef `parent` of `route` makes of it: its `Accepted`, and the Service ports it
/// takes (none unless accepted).
fn attach(
    route: &Route,
    parent: &ParentReference,
    services: &[Arc<Service>],
) -> (ConditionState, Vec<ServicePortKey>) {
    let namespace = parent.namespace.clone().unwrap_or_else(|| route.namespace.clone());
    let named = format!("{namespace}/{}", parent.name);
    let refuse = |reason, message: String| (state(false, reason, message), Vec::new());
    let Some(service) = services.iter().find(|service| {
        service.metadata.namespace.as_deref() == Some(namespace.as_str())
            && service.metadata.name.as_deref() == Some(parent.name.as_str())
    }) else {
        return refuse(REASON_NO_MATCHING_PARENT, format!("the Service {named} does not exist"));
    };
    if cluster_ips(service).is_empty() {
        return refuse(
            REASON_UNSUPPORTED_VALUE,
            format!(
                "the Service {named} has no cluster IP (headless, or ExternalName): the requests sent to it cannot be told from others"
            ),
        );
    }
    let ports: Vec<&ServicePort> = service.spec.iter().flat_map(|spec| spec.ports.iter().flatten()).collect();
    let chosen: Vec<&ServicePort> = match (parent.port, parent.section_name.as_deref()) {
        (Some(number), _) => ports.into_iter().filter(|port| port.port == number).collect(),
        (None, Some(name)) => ports.into_iter().filter(|port| port.name.as_deref() == Some(name)).collect(),
        (None, None) => ports.into_iter().filter(|port| speaks_http(port)).collect(),
    };
    if let (Some(section), Some(number)) = (parent.section_name.as_deref(), parent.port)
        && !chosen.iter().any(|port| port.name.as_deref() == Some(section))
    {
        return refuse(
            REASON_NO_MATCHING_PARENT,
            format!("the Service {named} has no port {number} named {section:?}"),
        );
    }
    let taken: Vec<u16> = chosen.iter().filter_map(|port| u16::try_from(port.port).ok()).collect();
    if taken.is_empty() {
        let which = match (parent.port, parent.section_name.as_deref()) {
            (Some(number), _) => format!("no port {number}"),
            (None, Some(name)) => format!("no port named {name:?}"),
            (None, None) => "no port that speaks HTTP (by its appProtocol, or its name)".to_owned(),
        };
        return refuse(REASON_NO_MATCHING_PARENT, format!("the Service {named} has {which}"));
    }
    if let Some(why) = &route.refused {
        return refuse(REASON_UNSUPPORTED_VALUE, why.clone());
    }
    let list: Vec<String> = taken.iter().map(u16::to_string).collect();
    let ports = if list.len() == 1 { "port" } else { "ports" };
    let accepted = state(
        true,
        REASON_ACCEPTED,
        format!("routes the requests sent to the Service {named} on {ports} {}", list.join(", ")),
    );
    let keys = taken.into_iter().map(|port| (namespace.clone(), parent.name.clone(), port)).collect();
    (accepted, keys)
}

/// Whether a Service port speaks HTTP, for a route that names no port: its `appProtocol` says
/// so (`http`, `http2`, `grpc`, `kubernetes.io/h2c`, `kubernetes.io/ws`); without one, unless
/// its name says another protocol (`tcp`, `tls`, `https`, `udp`, or one of them followed by
/// `-…`), as Istio reads port names. A port named explicitly is taken whatever it speaks.
pub fn speaks_http(port: &ServicePort) -> bool {
    const HTTP: [&str; 5] = ["http", "http2", "grpc", "kubernetes.io/h2c", "kubernetes.io/ws"];
    const OTHER: [&str; 4] = ["tcp", "tls", "https", "udp"];
    if let Some(protocol) = port.app_protocol.as_deref() {
        return HTTP.contains(&protocol.to_ascii_lowercase().as_str());
    }
    if port.protocol.as_deref().is_some_and(|protocol| protocol != "TCP") {
        return false;
    }
    let name = port.name.as_deref().unwrap_or_default().to_ascii_lowercase();
    let prefix = name.split('-').next().unwrap_or_default();
    !OTHER.contains(&prefix)
}

/// The Service's cluster IPs, sorted, each once; none for a headless or ExternalName Service.
fn cluster_ips(service: &Service) -> Vec<IpAddr> {
    let spec = service.spec.as_ref();
    let listed = spec.and_then(|spec| spec.cluster_ips.clone()).unwrap_or_default();
    let single = spec.and_then(|spec| spec.cluster_ip.clone());
    let mut ips: Vec<IpAddr> = listed.iter().chain(single.iter()).filter_map(|ip| ip.parse().ok()).collect();
    ips.sort_unstable();
    ips.dedup();
    ips
}

/// The configuration of the sidecars of `namespace`: one outbound service per Service port a
/// route serves there, with those routes (its own consumer routes for that port, else the
/// Service's producer routes).
fn sidecars(
    namespace: &str,
    read: &[Route],
    taken: &BTreeMap<ServicePortKey, BTreeSet<usize>>,
    inputs: &MeshInputs,
) -> ir::Fleet {
    let mut services = Vec::new();
    let mut used: Vec<ClusterKey> = Vec::new();
    for ((service_namespace, service_name, port), routes) in taken {
        let servable = || routes.iter().map(|&i| &read[i]).filter(|route| route.servable());
        let consumers: Vec<&Route> = servable()
            .filter(|route| route.namespace == namespace && route.namespace != *service_namespace)
            .collect();
        let serving: Vec<&Route> = if consumers.is_empty() {
            servable().filter(|route| route.namespace == *service_namespace).collect()
        } else {
            consumers
        };
        let Some(service) = inputs.services.iter().find(|service| {
            service.metadata.namespace.as_deref() == Some(service_namespace.as_str())
                && service.metadata.name.as_deref() == Some(service_name.as_str())
        }) else {
            continue;
        };
        if serving.is_empty() {
            continue;
        }
        let served: Vec<Served> = serving.iter().map(|route| Served { route, hostnames: &[] }).collect();
        used.extend(serving.iter().flat_map(|route| route.used_clusters()).cloned());
        services.push(ir::OutboundService {
            name: format!("{service_namespace}/{service_name}/{port}"),
            addresses: cluster_ips(service),
            port: *port,
            virtual_hosts: ordered_virtual_hosts(&served, HostnameOrder::Ignored),
        });
    }
    services.sort_by(|a, b| a.name.cmp(&b.name));
    let listener = ir::Listener {
        name: OUTBOUND_LISTENER.to_owned(),
        port: crate::proxy::MESH_OUTBOUND_PORT,
        access_log: true,
        virtual_hosts: Vec::new(),
        tls_servers: Vec::new(),
        passthrough: Vec::new(),
        outbound: Some(ir::Outbound { services }),
    };
    ir::Fleet {
        listeners: vec![listener],
        backends: endpoints::backends(&used, inputs.services, inputs.endpoint_slices),
        secrets: Vec::new(),
    }
}
