//! Backends: the Service port a backendRef names, found among the namespace's Services, and
//! the Envoy cluster that stands for it. A backend that does not resolve says why, in words a
//! user can act on (they become the route's `ResolvedRefs` condition).

use std::sync::Arc;

use std::fmt;

use k8s_openapi::api::core::v1::{Service, ServicePort};

use crate::ir;
use crate::rules::route::EffectiveBackendRef;

/// One Service port of one namespace, and the protocol spoken to it: what a cluster stands
/// for. One port used by an HTTPRoute (HTTP/1.1) and a GRPCRoute (HTTP/2) is two clusters: a
/// cluster has one upstream protocol, and neither route kind may change the other's.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterKey {
    pub namespace: String,
    pub service: String,
    /// The Service's port (`spec.ports[].port`).
    pub port: i32,
    pub protocol: ir::BackendProtocol,
}

impl ClusterKey {
    /// The cluster's name, also the EDS service name: `<namespace>/<service>/<port>`, and
    /// `/h2c` after it for HTTP/2, `/tcp` for TCP. Stable, and unique since Kubernetes names never contain `/`.
    pub fn cluster_name(&self) -> String {
        let base = format!("{}/{}/{}", self.namespace, self.service, self.port);
        match self.protocol {
            ir::BackendProtocol::Http1 => base,
            ir::BackendProtocol::Http2 => format!("{base}/h2c"),
            ir::BackendProtocol::Tcp => format!("{base}/tcp"),
        }
    }

    /// The same Service port, spoken to in `protocol`.
    pub fn with_protocol(self, protocol: ir::BackendProtocol) -> Self {
        Self { protocol, ..self }
    }
}

/// Why a backend does not resolve, as the route's `ResolvedRefs` condition says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unresolved {
    /// `BackendNotFound` or `InvalidKind`.
    pub reason: &'static str,
    pub message: String,
}

impl fmt::Display for Unresolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

pub const REASON_BACKEND_NOT_FOUND: &str = "BackendNotFound";
pub const REASON_INVALID_KIND: &str = "InvalidKind";

/// The Service port `backend` names in `namespace`, or why there is none.
pub fn resolve(
    namespace: &str,
    backend: &EffectiveBackendRef,
    services: &[Arc<Service>],
) -> Result<ClusterKey, Unresolved> {
    if !backend.is_service() {
        let group_kind = if backend.group.is_empty() {
            backend.kind.clone()
        } else {
            format!("{}.{}", backend.kind, backend.group)
        };
        return Err(Unresolved {
            reason: REASON_INVALID_KIND,
            message: format!(
                "backend {:?} is a {group_kind}: only Services (kind Service, group \"\") can be backends",
                backend.name
            ),
        });
    }
    let not_found = |message: String| Unresolved { reason: REASON_BACKEND_NOT_FOUND, message };
    let Some(service) = find_service(namespace, &backend.name, services) else {
        return Err(not_found(format!("Service {:?} not found in namespace {namespace:?}", backend.name)));
    };
    let Some(port) = backend.port else {
        return Err(not_found(format!("backend Service {:?} names no port", backend.name)));
    };
    if service_port(service, port).is_none() {
        let ports: Vec<String> = service_ports(service).iter().map(|p| p.port.to_string()).collect();
        let known = if ports.is_empty() { "none".to_owned() } else { ports.join(", ") };
        return Err(not_found(format!(
            "Service {:?} has no port {port} (its ports: {known}); backendRefs name the Service's port, not the target port",
            backend.name
        )));
    }
    Ok(ClusterKey {
        namespace: namespace.to_owned(),
        service: backend.name.clone(),
        port,
        protocol: ir::BackendProtocol::Http1,
    })
}

/// The Service `name` of `namespace` (a Service without a namespace is taken to be in it).
pub fn find_service<'a>(namespace: &str, name: &str, services: &'a [Arc<Service>]) -> Option<&'a Service> {
    services
        .iter()
        .find(|service| {
            service.metadata.name.as_deref() == Some(name)
                && service.metadata.namespace.as_deref().is_none_or(|ns| ns == namespace)
        })
        .map(AsRef::as_ref)
}

/// The port `port` of `service`'s `spec.ports`.
pub fn service_port(service: &Service, port: i32) -> Option<&ServicePort> {
    service_ports(service).iter().find(|p| p.port == port)
}

fn service_ports(service: &Service) -> &[ServicePort] {
    service.spec.as_ref().and_then(|spec| spec.ports.as_deref()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ServiceSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn service(name: &str, ports: &[i32]) -> Arc<Service> {
        Arc::new(Service {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("shop".into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                ports: Some(ports.iter().map(|&port| ServicePort { port, ..Default::default() }).collect()),
                ..Default::default()
            }),
            status: None,
        })
    }

    fn backend(kind: &str, name: &str, port: Option<i32>) -> EffectiveBackendRef {
        EffectiveBackendRef { group: String::new(), kind: kind.into(), name: name.into(), port, weight: 1 }
    }

    #[test]
    fn a_service_port_resolves_to_its_cluster() {
        let services = [service("web", &[80, 443])];
        let key = resolve("shop", &backend("Service", "web", Some(443)), &services).unwrap();
        assert_eq!(key.cluster_name(), "shop/web/443");
    }

    #[test]
    fn what_does_not_resolve_says_why() {
        let services = [service("web", &[80, 443]), service("other-ns", &[80])];
        let error = |b: EffectiveBackendRef| resolve("shop", &b, &services).unwrap_err();
        assert_eq!(
            error(backend("Service", "api", Some(80))),
            Unresolved {
                reason: REASON_BACKEND_NOT_FOUND,
                message: "Service \"api\" not found in namespace \"shop\"".into()
            }
        );
        let wrong_port = error(backend("Service", "web", Some(8080)));
        assert_eq!(wrong_port.reason, REASON_BACKEND_NOT_FOUND);
        assert!(wrong_port.message.starts_with("Service \"web\" has no port 8080 (its ports: 80, 443)"));
        let pod = error(backend("Pod", "web", Some(80)));
        assert_eq!(pod.reason, REASON_INVALID_KIND);
        assert_eq!(
            pod.message,
            "backend \"web\" is a Pod: only Services (kind Service, group \"\") can be backends"
        );
        assert!(
            resolve("elsewhere", &backend("Service", "web", Some(80)), &services).is_err(),
            "Services of another namespace"
        );
    }
}
