//! Backends: each Service port attached routes send requests to, with its ready endpoints
//! from the EndpointSlices of its Service (label `kubernetes.io/service-name`): their
//! addresses on the port the Service port targets. A Service without ready endpoints is a
//! backend without endpoints, and Envoy answers 503 for it.

use std::sync::Arc;

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::ir;
use crate::names::SERVICE_NAME_LABEL;
use crate::route::backend::{ClusterKey, find_service, service_port};

/// The backends of `keys`, sorted by name, without duplicates. Services and slices are
/// grouped once, so that each key's are found by lookup, not by a pass over the cluster's.
pub fn backends(
    keys: &[ClusterKey],
    services: &[Arc<Service>],
    slices: &[Arc<EndpointSlice>],
) -> Vec<ir::Backend> {
    let mut services_by_name: HashMap<(&str, &str), Vec<&Arc<Service>>> = HashMap::new();
    for service in services {
        let name = service.metadata.name.as_deref().unwrap_or_default();
        services_by_name
            .entry((service.metadata.namespace.as_deref().unwrap_or_default(), name))
            .or_default()
            .push(service);
    }
    let mut slices_by_service: HashMap<(&str, &str), Vec<&EndpointSlice>> = HashMap::new();
    for slice in slices {
        let Some(service) = slice.metadata.labels.as_ref().and_then(|labels| labels.get(SERVICE_NAME_LABEL))
        else {
            continue;
        };
        let namespace = slice.metadata.namespace.as_deref().unwrap_or_default();
        slices_by_service.entry((namespace, service.as_str())).or_default().push(slice);
    }
    let mut backends: Vec<ir::Backend> = keys
        .iter()
        .map(|key| {
            // Objects without a namespace are anyone's, as `find_service` says.
            let at = [(key.namespace.as_str(), key.service.as_str()), ("", key.service.as_str())];
            let at = if key.namespace.is_empty() { &at[..1] } else { &at[..] };
            let services: Vec<Arc<Service>> = at
                .iter()
                .filter_map(|at| services_by_name.get(at))
                .flatten()
                .map(|s| Arc::clone(s))
                .collect();
            let slices: Vec<&EndpointSlice> =
                at.iter().filter_map(|at| slices_by_service.get(at)).flatten().copied().collect();
            backend_of(key, &services, &slices)
        })
        .collect();
    backends.sort_by(|a, b| a.name.cmp(&b.name));
    backends.dedup_by(|a, b| a.name == b.name);
    backends
}

/// One backend, from its Service's slices: every ready endpoint of its Service port, sorted,
/// each once.
fn backend_of(key: &ClusterKey, services: &[Arc<Service>], slices: &[&EndpointSlice]) -> ir::Backend {
    let port = find_service(&key.namespace, &key.service, services).and_then(|s| service_port(s, key.port));
    let mut endpoints: BTreeSet<ir::Endpoint> = BTreeSet::new();
    if let Some(port) = port {
        for slice in slices {
            endpoints.extend(ready_endpoints(slice, port));
        }
    }
    ir::Backend {
        name: key.cluster_name(),
        // A GRPCRoute's (HTTP/2) and a TLSRoute's (TCP) backends speak what their route kind
        // needs; an HTTPRoute's, what its Service port's appProtocol says.
        protocol: match (key.protocol, port) {
            (ir::BackendProtocol::Http1, Some(port)) => protocol(port),
            (by_route_kind, _) => by_route_kind,
        },
        endpoints: endpoints.into_iter().collect(),
    }
}

/// The `appProtocol` of a Service port whose endpoints speak HTTP/2 in cleartext with prior
/// knowledge (Kubernetes' standard name, as Gateway API's `HTTPRouteBackendProtocolH2C` uses it).
pub const APP_PROTOCOL_H2C: &str = "kubernetes.io/h2c";

/// Which HTTP the proxies speak to `port`'s endpoints: HTTP/2 for `kubernetes.io/h2c`, else
/// HTTP/1.1. `kubernetes.io/ws` (WebSocket over HTTP/1.1) needs nothing more: every listener
/// lets upgrades through. Other values (`http`, a vendor's) are HTTP/1.1 too, as Envoy Gateway
/// reads them.
fn protocol(port: &ServicePort) -> ir::BackendProtocol {
    match port.app_protocol.as_deref() {
        Some(APP_PROTOCOL_H2C) => ir::BackendProtocol::Http2,
        _ => ir::BackendProtocol::Http1,
    }
}

/// The slice's endpoints that are not known to be unready, on the port the Service port
/// targets. Slices of FQDNs, and addresses that are not IP addresses, are left out: EDS
/// endpoints are IP addresses.
fn ready_endpoints(slice: &EndpointSlice, service_port: &ServicePort) -> Vec<ir::Endpoint> {
    if !matches!(slice.address_type.as_str(), "IPv4" | "IPv6") {
        return Vec::new();
    }
    let Some(port) = endpoint_port(slice, service_port) else { return Vec::new() };
    slice
        .endpoints
        .iter()
        // Kubernetes: "nil should be interpreted as ready".
        .filter(|endpoint| endpoint.conditions.as_ref().and_then(|c| c.ready) != Some(false))
        // The addresses of one endpoint are interchangeable; consumers use the first.
        .filter_map(|endpoint| endpoint.addresses.first()?.parse::<IpAddr>().ok())
        .map(|ip| ir::Endpoint { ip, port })
        .collect()
}

/// The port of the slice's endpoints that `service_port` targets: the slice port of the same
/// name (the EndpointSlice controller names them after the Service's ports), else the one the
/// target port names (by name or number). TCP only.
fn endpoint_port(slice: &EndpointSlice, service_port: &ServicePort) -> Option<u16> {
    let ports: Vec<_> = slice
        .ports
        .iter()
        .flatten()
        .filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP")
        .filter_map(|p| Some((p.name.as_deref().unwrap_or_default(), u16::try_from(p.port?).ok()?)))
        .filter(|(_, number)| *number != 0)
        .collect();
    let by_name = |name: &str| ports.iter().find(|(n, _)| *n == name).map(|(_, number)| *number);
    by_name(service_port.name.as_deref().unwrap_or_default()).or_else(|| match &service_port.target_port {
        Some(IntOrString::String(name)) => by_name(name),
        Some(IntOrString::Int(number)) => {
            ports.iter().find(|(_, n)| i64::from(*n) == i64::from(*number)).map(|(_, n)| *n)
        }
        None => ports.iter().find(|(_, n)| i64::from(*n) == i64::from(service_port.port)).map(|(_, n)| *n),
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ServiceSpec;
    use k8s_openapi::api::discovery::v1::{Endpoint as SliceEndpoint, EndpointConditions, EndpointPort};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;

    use super::*;
    use crate::xds::cluster::{cluster, cluster_load_assignment};

    fn service(ports: Vec<ServicePort>) -> Arc<Service> {
        Arc::new(Service {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("shop".into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec { ports: Some(ports), ..Default::default() }),
            status: None,
        })
    }

    fn service_port(name: Option<&str>, port: i32, target: Option<IntOrString>) -> ServicePort {
        ServicePort { name: name.map(Into::into), port, target_port: target, ..Default::default() }
    }

    fn slice(
        service: &str,
        address_type: &str,
        ports: &[(Option<&str>, i32)],
        endpoints: &[(&str, Option<bool>)],
    ) -> Arc<EndpointSlice> {
        Arc::new(EndpointSlice {
            metadata: ObjectMeta {
                name: Some(format!("{service}-abc")),
                namespace: Some("shop".into()),
                labels: Some([(SERVICE_NAME_LABEL.to_owned(), service.to_owned())].into()),
                ..Default::default()
            },
            address_type: address_type.into(),
            ports: Some(
                ports
                    .iter()
                    .map(|(name, port)| EndpointPort {
                        name: name.map(Into::into),
                        port: Some(*port),
                        ..Default::default()
                    })
                    .collect(),
            ),
            endpoints: endpoints
                .iter()
                .map(|(address, ready)| SliceEndpoint {
                    addresses: vec![(*address).to_owned()],
                    conditions: Some(EndpointConditions { ready: *ready, ..Default::default() }),
                    ..Default::default()
                })
                .collect(),
        })
    }

    fn key(port: i32) -> ClusterKey {
        ClusterKey { namespace: "shop".into(), service: "web".into(), port, protocol: Default::default() }
    }

    /// The backend of `key` alone.
    fn backend(key: &ClusterKey, services: &[Arc<Service>], slices: &[Arc<EndpointSlice>]) -> ir::Backend {
        let [backend] = <[ir::Backend; 1]>::try_from(backends(std::slice::from_ref(key), services, slices))
            .expect("one backend per key");
        backend
    }

    fn addresses(backend: &ir::Backend) -> Vec<String> {
        backend.endpoints.iter().map(|e| format!("{}:{}", e.ip, e.port)).collect()
    }

    #[test]
    fn ready_endpoints_on_the_targeted_port() {
        let services = [service(vec![
            service_port(Some("http"), 80, Some(IntOrString::String("web".into()))),
            service_port(Some("metrics"), 9090, Some(IntOrString::Int(9091))),
        ])];
        let slices = [
            slice(
                "web",
                "IPv4",
                &[(Some("http"), 8080), (Some("metrics"), 9091)],
                &[("10.0.0.2", Some(true)), ("10.0.0.1", None), ("10.0.0.3", Some(false))],
            ),
            slice("web", "IPv6", &[(Some("http"), 8080)], &[("fd00:0:0::1", Some(true))]),
            // A second slice repeating an endpoint, as during a slice migration.
            slice("web", "IPv4", &[(Some("http"), 8080)], &[("10.0.0.2", Some(true))]),
            slice("web", "FQDN", &[(Some("http"), 8080)], &[("web.example.com", Some(true))]),
            slice("api", "IPv4", &[(Some("http"), 8080)], &[("10.0.9.9", Some(true))]),
        ];
        let assignment = backend(&key(80), &services, &slices);
        assert_eq!(assignment.name, "shop/web/80");
        assert_eq!(addresses(&assignment), ["10.0.0.1:8080", "10.0.0.2:8080", "fd00::1:8080"]);
        let metrics = backend(&key(9090), &services, &slices);
        assert_eq!(addresses(&metrics), ["10.0.0.1:9091", "10.0.0.2:9091"]);
    }

    #[test]
    fn target_ports_resolve_by_name_or_number() {
        let by_number = service_port(None, 80, Some(IntOrString::Int(8080)));
        let unnamed = slice("web", "IPv4", &[(None, 8080)], &[("10.0.0.1", None)]);
        assert_eq!(endpoint_port(&unnamed, &by_number), Some(8080), "the unnamed port of a one-port Service");
        let named_other = slice("web", "IPv4", &[(Some("http-alt"), 8081), (Some("http"), 8080)], &[]);
        let by_target_name = service_port(Some("web"), 80, Some(IntOrString::String("http-alt".into())));
        assert_eq!(endpoint_port(&named_other, &by_target_name), Some(8081));
        let by_default = service_port(Some("web"), 8080, None);
        assert_eq!(
            endpoint_port(&named_other, &by_default),
            Some(8080),
            "the target port defaults to the port"
        );
        assert_eq!(endpoint_port(&named_other, &service_port(Some("x"), 1, Some(IntOrString::Int(2)))), None);
    }

    /// The conformance suite's infra-backend-v1: its `kubernetes.io/h2c` port speaks HTTP/2,
    /// its `kubernetes.io/ws` and plain ports HTTP/1.1.
    #[test]
    fn the_app_protocol_says_which_http_the_endpoints_speak() {
        let with_app_protocol = |name, port, app_protocol: Option<&str>| ServicePort {
            app_protocol: app_protocol.map(Into::into),
            ..service_port(Some(name), port, Some(IntOrString::Int(3000)))
        };
        let services = [service(vec![
            with_app_protocol("first-port", 8080, None),
            with_app_protocol("second-port", 8081, Some(APP_PROTOCOL_H2C)),
            with_app_protocol("third-port", 8082, Some("kubernetes.io/ws")),
        ])];
        let protocol = |port| backend(&key(port), &services, &[]).protocol;
        assert_eq!(protocol(8080), ir::BackendProtocol::Http1);
        assert_eq!(protocol(8081), ir::BackendProtocol::Http2);
        assert_eq!(protocol(8082), ir::BackendProtocol::Http1);
        assert_eq!(protocol(9999), ir::BackendProtocol::Http1, "no such port: no endpoints either");
    }

    #[test]
    fn no_endpoints_is_an_empty_assignment() {
        let services = [service(vec![service_port(Some("http"), 80, None)])];
        let assignment = backend(&key(80), &services, &[]);
        assert_eq!(
            serde_json::to_value(cluster_load_assignment(&assignment)).unwrap(),
            json!({"cluster_name": "shop/web/80"})
        );
        let broken = [slice("web", "IPv4", &[(Some("http"), 80)], &[("not-an-ip", None)])];
        assert!(backend(&key(80), &services, &broken).endpoints.is_empty());
        assert!(backend(&key(81), &services, &broken).endpoints.is_empty(), "no such Service port");
    }

    #[test]
    fn one_eds_cluster_per_service_port_sorted_by_name() {
        let key = |service: &str, port| ClusterKey {
            namespace: "shop".into(),
            service: service.into(),
            port,
            protocol: Default::default(),
        };
        let keys = [key("web", 80), key("api", 8080), key("web", 443), key("web", 80)];
        let clusters: Vec<_> = backends(&keys, &[], &[]).iter().map(cluster).collect();
        let names: Vec<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["shop/api/8080", "shop/web/443", "shop/web/80"]);
        assert_eq!(
            serde_json::to_value(&clusters[0]).unwrap(),
            json!({"name": "shop/api/8080", "type": "EDS", "connect_timeout": "5s", "lb_policy": "ROUND_ROBIN",
                   "eds_cluster_config": {"eds_config": {"ads": {}, "resource_api_version": "V3"}, "service_name": "shop/api/8080"}})
        );
    }
}
