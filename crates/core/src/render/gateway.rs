//! `render --xds` for the Gateway API: the GatewayClasses, Gateways, HTTPRoutes, GRPCRoutes,
//! ReferenceGrants, Namespaces and `kubernetes.io/tls` Secrets of a set of manifests, through
//! the operator's own [`translate()`], printed per Gateway: its fleet's xDS resources
//! and the statuses the operator would write (the Gateway's, and its routes' parents).
//!
//! Private keys never leave the translation: every `private_key` of a document is replaced by
//! its size ([`redact_private_keys`]), so the output can be pasted into a ticket.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::{discovery_responses, response};
use crate::api::Envoy;
use crate::api::gateway::{
    GROUP, GRPCRoute, Gateway, GatewayClass, GatewayRoute, HTTPRoute, ParentReference, ReferenceGrant,
    TLSRoute,
};
use crate::names::CONTROLLER_NAME;
use crate::route::conditions::ConditionState;
use crate::translate::gateway::{
    GatewayInputs, GatewayOutcome, GatewayTranslation, Judged, ListenerOutcome, ParentOutcome, translate,
};
use crate::xds::Resources;

use crate::names::NAMESPACE_NAME_LABEL;

/// The Gateway API objects of a set of manifests, and the Secrets and Namespaces they use.
#[derive(Debug, Default)]
pub struct GatewayObjects {
    pub classes: Vec<Arc<GatewayClass>>,
    pub gateways: Vec<Arc<Gateway>>,
    pub routes: Vec<Arc<HTTPRoute>>,
    pub grpc_routes: Vec<Arc<GRPCRoute>>,
    pub tls_routes: Vec<Arc<TLSRoute>>,
    pub grants: Vec<Arc<ReferenceGrant>>,
    pub namespaces: Vec<Arc<Namespace>>,
    /// `kubernetes.io/tls` Secrets only (what the operator reads).
    pub secrets: Vec<Arc<Secret>>,
    /// Every Envoy of the manifests, defaulted: what GatewayClasses' `parametersRef`s may name,
    /// and what may hold a Gateway's fleet's name.
    pub envoys: Vec<Arc<Envoy>>,
}

/// One Gateway of the operator's classes: what its fleet is served, and the statuses.
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayDocument {
    pub outcome: GatewayOutcome,
    /// What the Gateway makes of each route naming it: `(kind, namespace/name, parent)`,
    /// sorted.
    pub routes: Vec<(&'static str, String, ParentOutcome)>,
}

impl GatewayObjects {
    /// Whether the manifests hold any Gateway API object.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
            && self.gateways.is_empty()
            && self.routes.is_empty()
            && self.grpc_routes.is_empty()
            && self.tls_routes.is_empty()
            && self.grants.is_empty()
    }

    /// The translation of every object naming the operator, as `run` would make it.
    pub fn translate(
        &self,
        services: &[Arc<Service>],
        endpoint_slices: &[Arc<EndpointSlice>],
    ) -> GatewayTranslation {
        let namespaces = self.namespaces_as_stored();
        translate(&GatewayInputs {
            classes: &self.classes,
            gateways: &self.gateways,
            routes: &self.routes,
            grpc_routes: &self.grpc_routes,
            tls_routes: &self.tls_routes,
            grants: &self.grants,
            namespaces: &namespaces,
            services,
            endpoint_slices,
            secrets: &self.secrets,
            // Offline, no fleet runs: `Programmed` says the Gateway waits for it. An Envoy of the
            // manifests with a Gateway's fleet's name is not its fleet, as `run` would find it.
            fleets: &self.envoys,
            parameters: &self.envoys,
            rejected: crate::fleet::isolate::Rejections::none(),
            mesh_pods: &[],
        })
    }

    /// Notes on what the manifests hold that no document shows: the operator's GatewayClasses
    /// it would not accept, Gateways of a class that is not in the manifests or is another
    /// controller's, and routes naming Gateways not rendered.
    pub fn unrendered(&self, translation: &GatewayTranslation) -> Vec<String> {
        let mut notes = Vec::new();
        for class in &translation.classes {
            for condition in class.conditions.iter().filter(|condition| !condition.state.status) {
                let state = &condition.state;
                notes.push(format!(
                    "GatewayClass {}: {} False ({}: {})",
                    class.name, condition.type_, state.reason, state.message
                ));
            }
        }
        let rendered = |namespace: &str, name: &str| {
            translation.gateways.iter().any(|g| g.namespace == namespace && g.name == name)
        };
        for gateway in &self.gateways {
            let (namespace, name) = namespace_and_name(&gateway.metadata);
            if !rendered(namespace, name) {
                let class = &gateway.spec.gateway_class_name;
                notes.push(format!(
                    "Gateway {namespace}/{name}: its GatewayClass {class} is not in the manifests, or names another controller than {CONTROLLER_NAME}: not rendered"
                ));
            }
        }
        let routes = (self.routes.iter().map(|route| ("HTTPRoute", &route.metadata, route.parent_refs())))
            .chain(self.grpc_routes.iter().map(|route| ("GRPCRoute", &route.metadata, route.parent_refs())))
            .chain(self.tls_routes.iter().map(|route| ("TLSRoute", &route.metadata, route.parent_refs())));
        for (kind, metadata, parent_refs) in routes {
            let (namespace, name) = namespace_and_name(metadata);
            let mut missing: Vec<String> = parent_refs
                .iter()
                .filter(|parent| is_gateway(parent))
                .map(|parent| (parent.namespace.as_deref().unwrap_or(namespace), parent.name.as_str()))
                .filter(|(parent_namespace, parent_name)| !rendered(parent_namespace, parent_name))
                .map(|(parent_namespace, parent_name)| format!("{parent_namespace}/{parent_name}"))
                .collect();
            missing.sort_unstable();
            missing.dedup();
            for gateway in missing {
                notes.push(format!(
                    "{kind} {namespace}/{name}: its parent Gateway {gateway} is not rendered here (not in the manifests, or not of a class of {CONTROLLER_NAME})"
                ));
            }
        }
        notes
    }

    /// The Namespaces as the API server stores them: those of the manifests, and one for every
    /// other namespace an object is in, each with the label naming it.
    fn namespaces_as_stored(&self) -> Vec<Arc<Namespace>> {
        let mut namespaces: BTreeMap<String, Namespace> = BTreeMap::new();
        for namespace in &self.namespaces {
            let mut namespace = Namespace::clone(namespace);
            let name = namespace.metadata.name.clone().unwrap_or_default();
            namespace
                .metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .insert(NAMESPACE_NAME_LABEL.to_owned(), name.clone());
            namespaces.insert(name, namespace);
        }
        let used = (self.gateways.iter().map(|g| &g.metadata))
            .chain(self.routes.iter().map(|r| &r.metadata))
            .chain(self.grpc_routes.iter().map(|r| &r.metadata))
            .chain(self.tls_routes.iter().map(|r| &r.metadata))
            .chain(self.grants.iter().map(|g| &g.metadata))
            .chain(self.secrets.iter().map(|s| &s.metadata))
            .filter_map(|metadata| metadata.namespace.clone());
        for name in used {
            namespaces.entry(name.clone()).or_insert_with(|| Namespace {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    labels: Some(BTreeMap::from([(NAMESPACE_NAME_LABEL.to_owned(), name)])),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            });
        }
        namespaces.into_values().map(Arc::new).collect()
    }
}

/// One document per Gateway of the operator's classes in `translation`, sorted by namespace
/// and name.
pub fn documents(translation: &GatewayTranslation) -> Vec<GatewayDocument> {
    translation
        .gateways
        .iter()
        .map(|outcome| {
            let kinds = [
                ("HTTPRoute", &translation.routes),
                ("GRPCRoute", &translation.grpc_routes),
                ("TLSRoute", &translation.tls_routes),
            ];
            let mut routes: Vec<(&'static str, String, ParentOutcome)> = kinds
                .into_iter()
                .flat_map(|(kind, routes)| routes.iter().map(move |route| (kind, route)))
                .flat_map(|(kind, route)| {
                    let key = format!("{}/{}", route.namespace, route.name);
                    route
                        .parents
                        .iter()
                        .filter(|parent| names_gateway(&parent.parent_ref, &route.namespace, outcome))
                        .map(move |parent| (kind, key.clone(), parent.clone()))
                })
                .collect();
            routes.sort_by(|a, b| (a.0, &a.1, &a.2.parent_ref).cmp(&(b.0, &b.1, &b.2.parent_ref)));
            GatewayDocument { outcome: outcome.clone(), routes }
        })
        .collect()
}

fn namespace_and_name(metadata: &ObjectMeta) -> (&str, &str) {
    (metadata.namespace.as_deref().unwrap_or_default(), metadata.name.as_deref().unwrap_or_default())
}

/// Whether a parentRef names a Gateway (its group and kind, defaulted).
fn is_gateway(parent: &ParentReference) -> bool {
    parent.group.as_deref().unwrap_or(GROUP) == GROUP
        && parent.kind.as_deref().unwrap_or("Gateway") == "Gateway"
}

fn names_gateway(parent: &ParentReference, route_namespace: &str, gateway: &GatewayOutcome) -> bool {
    is_gateway(parent)
        && parent.name == gateway.name
        && parent.namespace.as_deref().unwrap_or(route_namespace) == gateway.namespace
}

impl GatewayDocument {
    /// `<namespace>/<name>` of the Gateway.
    pub fn key(&self) -> String {
        format!("{}/{}", self.outcome.namespace, self.outcome.name)
    }

    /// The Gateway's document: its key, its fleet's, its status, its routes' statuses, and its
    /// fleet's resources as one `DiscoveryResponse` per type in push order, private keys
    /// redacted.
    /// The Gateway's IR document (`render --ir`): what its fleet's proxies should do, keys
    /// redacted.
    pub fn ir_document(&self) -> Value {
        json!({"gateway": format!("{}/{}", self.outcome.namespace, self.outcome.name), "ir": self.outcome.ir})
    }

    pub fn document(&self) -> Value {
        let outcome = &self.outcome;
        let fleet = outcome.fleet.as_ref().map(|envoy| {
            format!(
                "{}/{}",
                envoy.metadata.namespace.as_deref().unwrap_or(&outcome.namespace),
                envoy.metadata.name.as_deref().unwrap_or_default()
            )
        });
        let routes: Vec<Value> = self
            .routes
            .iter()
            .map(|(kind, route, parent)| {
                let mut document = json!({"route": route, "parentRef": parent.parent_ref,
                       "accepted": parent.accepted, "resolvedRefs": parent.resolved_refs});
                // HTTPRoute, the kind most routes are, goes unsaid, as before there were others.
                if *kind != "HTTPRoute" {
                    document["kind"] = json!(kind);
                }
                document
            })
            .collect();
        let mut document = json!({
            "gateway": self.key(),
            "fleet": fleet,
            "status": {
                "addresses": outcome.addresses,
                "conditions": conditions(&outcome.conditions),
                "listeners": outcome.listeners.iter().map(listener_status).collect::<Vec<_>>(),
            },
            "route_statuses": routes,
            "xds": gateway_discovery_responses(&outcome.resources),
        });
        redact_private_keys(&mut document);
        document
    }

    /// What a reader needs before the document: what it is, the Gateway's conditions, each
    /// listener's, and each route's, a line each.
    pub fn comment(&self) -> String {
        let outcome = &self.outcome;
        let fleet = match &outcome.fleet {
            Some(fleet) => {
                format!("its fleet (the Envoy {})", fleet.metadata.name.as_deref().unwrap_or_default())
            }
            None => "no fleet (see its conditions)".to_owned(),
        };
        let mut comment = format!(
            "Gateway {}: {fleet}, served these xDS resources by the operator's control plane, by type in push order (private keys redacted)\n",
            self.key()
        );
        comment.push_str(&format!("  {}\n", condition_words(&outcome.conditions)));
        for listener in &outcome.listeners {
            let routes = match listener.attached_routes {
                1 => "1 route".to_owned(),
                n => format!("{n} routes"),
            };
            comment.push_str(&format!(
                "  listener {} ({routes}): {}\n",
                listener.name,
                condition_words(&listener.conditions)
            ));
        }
        if self.routes.is_empty() {
            comment.push_str("  no route names it: its listeners answer 404\n");
        }
        for (kind, route, parent) in &self.routes {
            let reference = match &parent.parent_ref.section_name {
                Some(section) => format!("{}/{section}", parent.parent_ref.name),
                None => parent.parent_ref.name.clone(),
            };
            let words = [("Accepted", &parent.accepted), ("ResolvedRefs", &parent.resolved_refs)]
                .map(|(type_, state)| word(type_, state))
                .join(", ");
            comment.push_str(&format!("  {kind} {route} (parentRef {reference}): {words}\n"));
        }
        comment
    }
}

fn conditions(judged: &[Judged]) -> Vec<Value> {
    judged
        .iter()
        .map(|condition| {
            let state = &condition.state;
            json!({"type": condition.type_, "status": if state.status { "True" } else { "False" },
                   "reason": state.reason, "message": state.message})
        })
        .collect()
}

fn listener_status(listener: &ListenerOutcome) -> Value {
    json!({"name": listener.name, "supportedKinds": listener.supported_kinds,
           "attachedRoutes": listener.attached_routes, "conditions": conditions(&listener.conditions)})
}

/// `Accepted, Programmed False (Pending: …)`: the conditions in their healthy state by name
/// alone, the others with their reason and message.
fn condition_words(judged: &[Judged]) -> String {
    let words: Vec<String> = judged
        .iter()
        .filter_map(|condition| {
            // `Conflicted` is healthy when False: said only when True.
            if condition.type_ == "Conflicted" {
                let state = &condition.state;
                return state.status.then(|| format!("Conflicted ({}: {})", state.reason, state.message));
            }
            Some(word(condition.type_, &condition.state))
        })
        .collect();
    words.join(", ")
}

fn word(type_: &str, state: &ConditionState) -> String {
    if state.status {
        type_.to_owned()
    } else {
        format!("{type_} False ({}: {})", state.reason, state.message)
    }
}

/// The fleet's resources as `DiscoveryResponse`s in push order: the certificates (SDS) the
/// HTTPS listeners present, when there are any, first, with the clusters and endpoints, before
/// the listeners and routes that use them. Private keys as they are: [`GatewayDocument::document`]
/// redacts them.
fn gateway_discovery_responses(resources: &Resources) -> Vec<Value> {
    let mut responses = discovery_responses(resources);
    if !resources.secrets.is_empty() {
        responses.insert(0, response(&resources.secrets));
    }
    responses
}

/// Replaces every `private_key` of a document by its size: `{"inline_string": "<redacted: N
/// bytes>"}` (Envoy's `DataSource` shape), whatever form the key was in.
pub fn redact_private_keys(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            for (name, field) in fields.iter_mut() {
                if name == "private_key" {
                    let bytes = secret_size(field);
                    *field = json!({"inline_string": format!("<redacted: {bytes} bytes>")});
                } else {
                    redact_private_keys(field);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_private_keys),
        _ => {}
    }
}

/// The size of a key as Envoy would read it: the text of a `DataSource` (`inline_string`,
/// `inline_bytes`), or the value's own text.
fn secret_size(field: &Value) -> usize {
    match field {
        Value::String(text) => text.len(),
        Value::Object(source) => source.values().map(secret_size).sum(),
        other => other.to_string().len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_keys_are_replaced_by_their_size_wherever_they_are() {
        let mut document = json!({"xds": [{"resources": [
            {"name": "shop/cert", "tls_certificate": {
                "certificate_chain": {"inline_string": "CHAIN"},
                "private_key": {"inline_string": "-----BEGIN PRIVATE KEY-----"}}},
            {"nested": [{"private_key": "raw"}]}]}]});
        redact_private_keys(&mut document);
        let text = document.to_string();
        assert!(!text.contains("BEGIN PRIVATE KEY") && !text.contains("raw"), "{text}");
        let secret = &document["xds"][0]["resources"][0]["tls_certificate"];
        assert_eq!(secret["private_key"]["inline_string"], "<redacted: 27 bytes>");
        assert_eq!(secret["certificate_chain"]["inline_string"], "CHAIN");
        assert_eq!(
            document["xds"][0]["resources"][1]["nested"][0]["private_key"]["inline_string"],
            "<redacted: 3 bytes>"
        );
    }

    /// A GRPCRoute is rendered with its Gateway: its parent's statuses say its kind.
    #[test]
    fn grpc_routes_are_rendered_with_their_gateway() {
        fn object<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
            serde_json::from_value(value).unwrap()
        }
        let objects = GatewayObjects {
            classes: vec![Arc::new(object(json!({"apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "GatewayClass", "metadata": {"name": "own"},
                "spec": {"controllerName": CONTROLLER_NAME}})))],
            gateways: vec![Arc::new(object(json!({"apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "Gateway", "metadata": {"name": "edge", "namespace": "shop"},
                "spec": {"gatewayClassName": "own",
                         "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}})))],
            grpc_routes: vec![Arc::new(object(json!({"apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "GRPCRoute", "metadata": {"name": "api", "namespace": "shop"},
                "spec": {"parentRefs": [{"name": "edge"}, {"name": "gone"}],
                         "rules": [{"backendRefs": [{"name": "grpc", "port": 8080}]}]}})))],
            ..GatewayObjects::default()
        };
        assert!(!objects.is_empty());
        let translation = objects.translate(&[], &[]);
        let [document] = documents(&translation).try_into().expect("one Gateway");
        assert_eq!(document.document()["route_statuses"][0]["kind"], "GRPCRoute");
        assert!(
            document.comment().contains("  GRPCRoute shop/api (parentRef edge): "),
            "{}",
            document.comment()
        );
        assert_eq!(
            objects.unrendered(&translation),
            [format!(
                "GRPCRoute shop/api: its parent Gateway shop/gone is not rendered here (not in the manifests, or not of a class of {CONTROLLER_NAME})"
            )]
        );
    }

    #[test]
    fn namespaces_are_as_the_api_server_stores_them() {
        let route: HTTPRoute = serde_json::from_value(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "web", "namespace": "shop"}, "spec": {}}))
        .unwrap();
        let declared: Namespace = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "edge", "labels": {"team": "a"}}}))
        .unwrap();
        let objects = GatewayObjects {
            routes: vec![Arc::new(route)],
            namespaces: vec![Arc::new(declared)],
            ..GatewayObjects::default()
        };
        let stored = objects.namespaces_as_stored();
        let labels: Vec<_> = stored.iter().map(|ns| ns.metadata.labels.clone().unwrap_or_default()).collect();
        assert_eq!(stored.len(), 2);
        assert_eq!(labels[0].get("team").map(String::as_str), Some("a"));
        assert_eq!(labels[0].get(NAMESPACE_NAME_LABEL).map(String::as_str), Some("edge"));
        assert_eq!(labels[1].get(NAMESPACE_NAME_LABEL).map(String::as_str), Some("shop"));
    }

    #[test]
    fn conflicted_is_said_only_when_true() {
        let state = |status| ConditionState { status, reason: "R", message: "m".to_owned() };
        let judged = [
            Judged { type_: "Accepted", state: state(true) },
            Judged { type_: "Programmed", state: state(false) },
            Judged { type_: "Conflicted", state: state(false) },
        ];
        assert_eq!(condition_words(&judged), "Accepted, Programmed False (R: m)");
        let conflicted = [Judged { type_: "Conflicted", state: state(true) }];
        assert_eq!(condition_words(&conflicted), "Conflicted (R: m)");
    }
}
