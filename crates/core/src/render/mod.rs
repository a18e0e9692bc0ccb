//! What `envoy-operator render --xds` prints: for each Envoy of a set of manifests that the
//! operator's control plane serves (no `spec.xds`), the xDS resources its proxies receive, by
//! the server's own translation ([`translate`]) from the EnvoyRoutes, Services and EndpointSlices of the same
//! manifests, and what the routes' parents make of them. For a diff before `kubectl apply`.
//!
//! Each fleet is one document: its key, the route statuses, and the resources as
//! `DiscoveryResponse`s (`type_url` and `resources`, each resource with its `@type`), one per
//! type in the order the server pushes them, so a response can be handed to an Envoy as is.
//!
//! The Gateway API objects of the same manifests are rendered per Gateway ([`gateway`]).

pub mod gateway;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::{Value, json};

use crate::admission::{Admitted, defaulted_valid};
use crate::api::{Envoy, EnvoyRoute};
use crate::children::envoy::fleet_key;
use crate::envoy::{Packable, Packed};
use crate::manifest::{Outcome, display_name, type_meta};
use crate::rules::Defaulted;
use crate::translate::envoyroute::{Inputs, RouteStatus, Translation, translate};
use crate::xds::Resources;

use self::gateway::{GatewayDocument, GatewayObjects};
use crate::api::gateway::{GRPCRoute, Gateway, GatewayClass, HTTPRoute, ReferenceGrant, TLSRoute};
use crate::names::TLS_SECRET_TYPE;

/// The objects of the manifests a translation reads, defaulted and checked as the API server
/// would store them.
#[derive(Debug, Default)]
pub struct Manifests {
    envoys: Vec<Defaulted<Envoy>>,
    routes: Vec<Arc<EnvoyRoute>>,
    services: Vec<Arc<Service>>,
    endpoint_slices: Vec<Arc<EndpointSlice>>,
    gateway: GatewayObjects,
}

/// One Envoy's configuration, as `render --xds` prints it.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderedFleet {
    /// `<namespace>/<name>`.
    pub key: String,
    pub translation: Translation,
}

impl Manifests {
    /// Adds one object, in `default_namespace` if it names none (as `kubectl apply` puts it).
    /// `Err` is what to report about it: an object `kubectl apply` would refuse (rejected,
    /// unreadable), or an Envoy that has its own xDS server (skipped). Objects of other kinds
    /// play no part and are left out without a word.
    pub fn add(&mut self, mut object: Value, default_namespace: &str) -> Result<(), Outcome> {
        let (api_version, kind) = type_meta(&object)?;
        // A route `kubectl apply` refuses for a typo is left out, not served without the field.
        crate::strict::check(&object)?;
        let is = |group_version: &str, name: &str| api_version == group_version && kind == name;
        let (envoy, route) = (is("example.com/v1", "Envoy"), is("example.com/v1", "EnvoyRoute"));
        let (service, slice) = (is("v1", "Service"), is("discovery.k8s.io/v1", "EndpointSlice"));
        if let Some(kind) = GatewayKind::of(api_version, kind) {
            return self.add_gateway_object(kind, object, default_namespace);
        }
        if !(envoy || route || service || slice) {
            return Ok(());
        }
        let kind = kind.to_owned();
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
            && metadata.get("namespace").and_then(Value::as_str).is_none_or(str::is_empty)
        {
            metadata.insert("namespace".to_owned(), Value::String(default_namespace.to_owned()));
        }
        if envoy {
            let envoy = admitted::<Envoy>(&object)?;
            // The last of the same name wins, as with `kubectl apply`.
            self.gateway.envoys.retain(|other| fleet_key(other) != fleet_key(&envoy));
            self.gateway.envoys.push(Arc::new(Envoy::clone(&envoy)));
            if envoy.effective().xds.is_some() {
                return Err(Outcome::Skipped {
                    note: format!(
                        "Envoy {}: its proxies take their configuration from its spec.xds, not from the operator",
                        fleet_key(&envoy)
                    ),
                });
            }
            self.envoys.retain(|other| fleet_key(other) != fleet_key(&envoy));
            self.envoys.push(envoy);
        } else if route {
            self.routes.push(Arc::new(admitted::<EnvoyRoute>(&object)?.into_inner()));
        } else if service {
            self.services.push(Arc::new(typed(object, &kind)?));
        } else {
            self.endpoint_slices.push(Arc::new(typed(object, &kind)?));
        }
        Ok(())
    }

    /// A Gateway API object (or a Namespace, or a Secret a listener may present), typed, in
    /// `default_namespace` if it is namespaced and names none.
    fn add_gateway_object(
        &mut self,
        kind: GatewayKind,
        mut object: Value,
        default_namespace: &str,
    ) -> Result<(), Outcome> {
        let kind_name = kind.name();
        if object["metadata"]["name"].as_str().is_none_or(str::is_empty) {
            return Err(Outcome::Rejected {
                message: format!("{kind_name} {}: metadata.name is required", display_name(&object)),
            });
        }
        if kind.is_namespaced()
            && let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
            && metadata.get("namespace").and_then(Value::as_str).is_none_or(str::is_empty)
        {
            metadata.insert("namespace".to_owned(), Value::String(default_namespace.to_owned()));
        }
        let objects = &mut self.gateway;
        match kind {
            GatewayKind::Class => objects.classes.push(Arc::new(typed(object, kind_name)?)),
            GatewayKind::Gateway => objects.gateways.push(Arc::new(typed(object, kind_name)?)),
            GatewayKind::Route => objects.routes.push(Arc::new(typed(object, kind_name)?)),
            GatewayKind::GrpcRoute => objects.grpc_routes.push(Arc::new(typed(object, kind_name)?)),
            GatewayKind::TlsRoute => objects.tls_routes.push(Arc::new(typed(object, kind_name)?)),
            GatewayKind::Grant => objects.grants.push(Arc::new(typed(object, kind_name)?)),
            GatewayKind::Namespace => objects.namespaces.push(Arc::new(typed(object, kind_name)?)),
            GatewayKind::Secret => {
                // The operator reads `kubernetes.io/tls` Secrets only; others play no part.
                if object["type"].as_str() == Some(TLS_SECRET_TYPE) {
                    objects.secrets.push(Arc::new(typed(object, kind_name)?));
                }
            }
        }
        Ok(())
    }

    /// Each Gateway of the operator's GatewayClasses, sorted by namespace and name, and notes
    /// on the Gateway API objects of the manifests that no document shows.
    pub fn gateways(&self) -> (Vec<GatewayDocument>, Vec<String>) {
        if self.gateway.is_empty() {
            return (Vec::new(), Vec::new());
        }
        let translation = self.gateway.translate(&self.services, &self.endpoint_slices);
        (gateway::documents(&translation), self.gateway.unrendered(&translation))
    }

    /// Each Envoy's configuration, in the order of the manifests.
    pub fn fleets(&self) -> Vec<RenderedFleet> {
        self.envoys
            .iter()
            .map(|envoy| RenderedFleet {
                key: fleet_key(envoy),
                translation: translate(&Inputs {
                    envoy,
                    routes: &self.routes,
                    services: &self.services,
                    endpoint_slices: &self.endpoint_slices,
                    rejected: crate::fleet::isolate::Rejections::none(),
                }),
            })
            .collect()
    }

    /// Notes on the EnvoyRoutes naming an Envoy the manifests do not hold (or hold with its own
    /// xDS server): nothing here says what becomes of them.
    pub fn unrendered_parents(&self) -> Vec<String> {
        let mut notes = Vec::new();
        for route in &self.routes {
            let namespace = route.metadata.namespace.as_deref().unwrap_or_default();
            let mut missing: Vec<&str> = route
                .spec
                .parent_refs
                .iter()
                .map(|parent| parent.name.as_str())
                .filter(|name| {
                    !self.envoys.iter().any(|envoy| fleet_key(envoy) == format!("{namespace}/{name}"))
                })
                .collect();
            missing.sort_unstable();
            missing.dedup();
            for name in missing {
                notes.push(format!(
                    "EnvoyRoute {namespace}/{}: its parent Envoy {name} is not rendered here (not in the manifests, or it has spec.xds)",
                    route.metadata.name.as_deref().unwrap_or_default()
                ));
            }
        }
        notes
    }
}

/// The kinds of the Gateway API translation reads, besides Services and EndpointSlices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GatewayKind {
    Class,
    Gateway,
    Route,
    GrpcRoute,
    TlsRoute,
    Grant,
    Namespace,
    Secret,
}

impl GatewayKind {
    fn of(api_version: &str, kind: &str) -> Option<Self> {
        use kube::Resource;
        match kind {
            "GatewayClass" if GatewayClass::api_version(&()) == api_version => Some(Self::Class),
            "Gateway" if Gateway::api_version(&()) == api_version => Some(Self::Gateway),
            "HTTPRoute" if HTTPRoute::api_version(&()) == api_version => Some(Self::Route),
            "GRPCRoute" if GRPCRoute::api_version(&()) == api_version => Some(Self::GrpcRoute),
            "TLSRoute" if TLSRoute::api_version(&()) == api_version => Some(Self::TlsRoute),
            "ReferenceGrant" if ReferenceGrant::api_version(&()) == api_version => Some(Self::Grant),
            "Namespace" if api_version == "v1" => Some(Self::Namespace),
            "Secret" if api_version == "v1" => Some(Self::Secret),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Class => "GatewayClass",
            Self::Gateway => "Gateway",
            Self::Route => "HTTPRoute",
            Self::GrpcRoute => "GRPCRoute",
            Self::TlsRoute => "TLSRoute",
            Self::Grant => "ReferenceGrant",
            Self::Namespace => "Namespace",
            Self::Secret => "Secret",
        }
    }

    fn is_namespaced(self) -> bool {
        !matches!(self, Self::Class | Self::Namespace)
    }
}

/// A defaulted, valid object, or the API server's refusal.
fn admitted<K>(object: &Value) -> Result<Defaulted<K>, Outcome>
where
    K: Admitted + kube::Resource<DynamicType = ()>,
{
    let (admitted, _warnings) = defaulted_valid::<K>(object).map_err(|errors| Outcome::Rejected {
        message: errors.message(&K::kind(&()), &display_name(object)),
    })?;
    if admitted.meta().name.is_none() {
        return Err(Outcome::Rejected {
            message: format!("{} {}: metadata.name is required", K::kind(&()), display_name(object)),
        });
    }
    Ok(admitted)
}

fn typed<K: serde::de::DeserializeOwned>(object: Value, kind: &str) -> Result<K, Outcome> {
    let name = display_name(&object);
    serde_json::from_value(object)
        .map_err(|error| Outcome::Unreadable { message: format!("{kind} {name}: {error}") })
}

impl RenderedFleet {
    /// The fleet's document: its key, the route statuses, and the resources as one
    /// `DiscoveryResponse` per type, in push order.
    pub fn document(&self) -> Value {
        json!({
            "fleet": self.key,
            "route_statuses": self.translation.route_statuses,
            "xds": discovery_responses(&self.translation.resources),
        })
    }

    /// The fleet's IR document (`render --ir`): what its proxies should do, keys redacted.
    pub fn ir_document(&self) -> Value {
        json!({"fleet": self.key, "ir": self.translation.ir})
    }

    /// What a reader needs before the document: what it is, and each route status in a line.
    pub fn comment(&self) -> String {
        let mut comment = format!(
            "Envoy {}: the xDS resources the operator's control plane serves its proxies, by type in push order\n",
            self.key
        );
        let statuses = &self.translation.route_statuses;
        if statuses.is_empty() {
            comment.push_str("  no EnvoyRoute names it: its listeners answer 404\n");
        }
        for status in statuses {
            comment.push_str(&format!("  {}\n", status_line(status)));
        }
        comment
    }
}

/// `EnvoyRoute web (parentRef edge/http): Accepted, ResolvedRefs False (BackendNotFound: …)`.
fn status_line(status: &RouteStatus) -> String {
    let parent = match &status.parent_ref.section_name {
        Some(section) => format!("{}/{section}", status.parent_ref.name),
        None => status.parent_ref.name.clone(),
    };
    let condition = |name: &str, state: &crate::route::conditions::ConditionState| {
        if state.status {
            name.to_owned()
        } else {
            format!("{name} False ({}: {})", state.reason, state.message)
        }
    };
    format!(
        "EnvoyRoute {} (parentRef {parent}): {}, {}",
        status.route,
        condition("Accepted", &status.accepted),
        condition("ResolvedRefs", &status.resolved_refs)
    )
}

/// The resources as `DiscoveryResponse`s, clusters and endpoints before the listeners and
/// routes that use them (the order the server pushes them in).
pub fn discovery_responses(resources: &Resources) -> Vec<Value> {
    vec![
        response(&resources.clusters),
        response(&resources.cluster_load_assignments),
        response(&resources.listeners),
        response(&resources.route_configurations),
    ]
}

fn response<T: Packable>(resources: &[T]) -> Value {
    let resources: Vec<Packed<'_, T>> = resources.iter().map(Packed).collect();
    json!({"type_url": T::TYPE_URL, "resources": resources})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envoy::type_urls;
    use crate::manifest::parse_documents;

    const INPUT: &str = "\
apiVersion: example.com/v1
kind: Envoy
metadata: {name: edge}
spec: {}
---
apiVersion: example.com/v1
kind: Envoy
metadata: {name: external, namespace: default}
spec: {xds: {host: xds.mesh, port: 18000}}
---
apiVersion: example.com/v1
kind: EnvoyRoute
metadata: {name: web}
spec:
  parentRefs: [{name: edge}, {name: external}]
  rules: [{backendRefs: [{name: web, port: 80}, {name: gone, port: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints: [{addresses: [10.0.0.1], conditions: {ready: true}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: unrelated}
";

    fn manifests(text: &str) -> (Manifests, Vec<Outcome>) {
        let mut manifests = Manifests::default();
        let mut reported = Vec::new();
        for document in parse_documents(text) {
            if let Err(outcome) = manifests.add(document.content.unwrap(), "default") {
                reported.push(outcome);
            }
        }
        (manifests, reported)
    }

    #[test]
    fn each_envoy_of_the_operator_gets_its_resources_in_push_order() {
        let (manifests, reported) = manifests(INPUT);
        assert!(
            matches!(reported.as_slice(), [Outcome::Skipped { note }] if note.contains("default/external")),
            "{reported:?}"
        );
        let fleets = manifests.fleets();
        assert_eq!(fleets.len(), 1);
        let document = fleets[0].document();
        assert_eq!(document["fleet"], "default/edge");
        let types: Vec<&str> =
            document["xds"].as_array().unwrap().iter().map(|r| r["type_url"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                type_urls::CLUSTER,
                type_urls::CLUSTER_LOAD_ASSIGNMENT,
                type_urls::LISTENER,
                type_urls::ROUTE_CONFIGURATION
            ]
        );
        for response in document["xds"].as_array().unwrap() {
            for resource in response["resources"].as_array().unwrap() {
                assert_eq!(resource["@type"], response["type_url"]);
            }
        }
        let endpoints = &document["xds"][1]["resources"][0];
        assert_eq!(endpoints["cluster_name"], "default/web/80");
        assert_eq!(
            endpoints["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]["socket_address"]["address"],
            "10.0.0.1"
        );
        // The same translation the server serves.
        let served = serde_json::to_value(&fleets[0].translation.resources).unwrap();
        assert_eq!(document["xds"][2]["resources"][0]["name"], served["listeners"][0]["name"]);

        let comment = fleets[0].comment();
        assert!(comment.starts_with("Envoy default/edge: the xDS resources"), "{comment}");
        assert!(
            comment
                .contains("EnvoyRoute web (parentRef edge): Accepted, ResolvedRefs False (BackendNotFound: "),
            "{comment}"
        );
        assert_eq!(
            manifests.unrendered_parents(),
            [
                "EnvoyRoute default/web: its parent Envoy external is not rendered here (not in the manifests, or it has spec.xds)"
            ]
        );
    }

    /// Gateway API objects beside them change nothing of the Envoys' documents.
    #[test]
    fn gateways_leave_the_envoys_documents_as_they_were() {
        let gateway_api = "
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: envoy-operator}
spec: {controllerName: example.com/envoy-operator}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec: {gatewayClassName: envoy-operator, listeners: [{name: http, port: 80, protocol: HTTP}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec: {parentRefs: [{name: gw}], rules: [{backendRefs: [{name: web, port: 80}]}]}
---
apiVersion: v1
kind: Namespace
metadata: {name: default}
";
        let (alone, _) = manifests(INPUT);
        let (beside, reported) = manifests(&format!("{INPUT}{gateway_api}"));
        assert_eq!(reported.len(), 1, "the Envoy with spec.xds, as before: {reported:?}");
        let documents = |m: &Manifests| -> Vec<(String, Value)> {
            m.fleets().iter().map(|fleet| (fleet.comment(), fleet.document())).collect()
        };
        assert_eq!(documents(&alone), documents(&beside));
        assert_eq!(alone.unrendered_parents(), beside.unrendered_parents());
        let (gateways, notes) = beside.gateways();
        assert_eq!((gateways.len(), notes), (1, Vec::<String>::new()));
        assert_eq!(gateways[0].key(), "default/gw");
        // The Gateway's route is served the same Service as the Envoy's.
        assert_eq!(gateways[0].document()["xds"][0]["resources"][0]["name"], "default/web/80");
        assert_eq!(alone.gateways(), (Vec::new(), Vec::new()));
    }

    #[test]
    fn what_the_api_server_would_refuse_is_reported() {
        let text = "\
apiVersion: example.com/v1
kind: EnvoyRoute
metadata: {name: bad}
spec: {parentRefs: [], rules: [{matches: [{path: {type: RegularExpression, value: '(unclosed'}}]}]}
---
apiVersion: example.com/v1
kind: Envoy
metadata: {name: edge}
spec: {replicas: -1}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: 80}
";
        let (manifests, reported) = manifests(text);
        assert_eq!(reported.len(), 3, "{reported:?}");
        assert!(
            matches!(&reported[0], Outcome::Rejected { message } if message.contains("EnvoyRoute \"bad\" is invalid"))
        );
        assert!(matches!(&reported[1], Outcome::Rejected { message } if message.contains("spec.replicas")));
        assert!(
            matches!(&reported[2], Outcome::Unreadable { message } if message.starts_with("Service web: "))
        );
        assert!(manifests.fleets().is_empty());
    }
}
