//! `check` for the Gateway API: a GatewayClass, a Gateway or an HTTPRoute is checked alone,
//! through the operator's own translation ([`translate()`]), for what its spec says by itself.
//!
//! The Gateway API's CRDs hold the schema, so the API server refuses what breaks it; what they
//! let through and the operator cannot serve (a backend of another kind than Service, a
//! listener protocol it does not implement, two listeners in conflict, a match Envoy cannot
//! compile, a class's parameters of another kind than Envoy) is what this reports, in the words
//! the status would use. References to other objects (Secrets, Services, ReferenceGrants, the
//! parent Gateways, a class's Envoy) are not looked up: they are another set of manifests'
//! (`render --xds` judges them together).

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use crate::api::gateway::{
    AllowedRoutes, BackendObjectReference, GROUP, Gateway, GatewayClass, GatewayClassSpec, GatewaySpec,
    HTTPRoute, Listener, ParentReference, RouteNamespaces,
};
use crate::api::{Envoy, EnvoySpec};
use crate::manifest::{Outcome, display_name};
use crate::names::CONTROLLER_NAME;
use crate::translate::gateway::{GatewayInputs, Judged, translate};

/// Reasons a route's parent gives for what only the other objects decide (which Gateway, which
/// listener, which namespace): not the route's own problem.
const CONTEXTUAL_ROUTE_REASONS: [&str; 4] =
    ["NoMatchingParent", "NotAllowedByListeners", "NoMatchingListenerHostname", "Pending"];
/// Reasons a listener gives for references this check does not look up.
const CONTEXTUAL_LISTENER_REASONS: [&str; 3] = ["InvalidCertificateRef", "RefNotPermitted", "Pending"];
/// Conditions that depend on the running fleet, which offline there is none of.
const FLEET_CONDITIONS: [&str; 1] = ["Programmed"];

/// Whether the kind is checked here.
pub fn is_checked(api_version: &str, kind: &str) -> bool {
    api_version == format!("{GROUP}/v1") && matches!(kind, "GatewayClass" | "Gateway" | "HTTPRoute")
}

/// Checks a GatewayClass, a Gateway or an HTTPRoute (see [`is_checked`]).
pub fn check(object: Value, kind: &str) -> Outcome {
    let name = display_name(&object);
    if object["metadata"]["name"].as_str().is_none_or(str::is_empty) {
        return Outcome::Rejected { message: format!("{kind} {name}: metadata.name is required") };
    }
    let problems = match kind {
        "GatewayClass" => match serde_json::from_value::<GatewayClass>(object.clone()) {
            Ok(class) if class.spec.controller_name != CONTROLLER_NAME => {
                let note = format!(
                    "GatewayClass {name}: names the controller {:?}, not {CONTROLLER_NAME}: the operator leaves it and its Gateways alone",
                    class.spec.controller_name
                );
                return Outcome::Unchanged { object, note };
            }
            read => read.map(|class| class_problems(&class)),
        },
        "Gateway" => serde_json::from_value(object.clone()).map(|gateway| gateway_problems(&gateway)),
        _ => serde_json::from_value(object.clone()).map(|route| route_problems(&route)),
    };
    // A class is accepted, a Gateway or a route served.
    let (does, would) = if kind == "GatewayClass" { ("accepts", "accept") } else { ("serves", "serve") };
    match problems {
        Err(error) => Outcome::Unreadable { message: format!("{kind} {name}: {error}") },
        Ok(problems) if problems.is_empty() => Outcome::Unchanged {
            object,
            note: format!(
                "{kind} {name}: the operator {does} it as written (checked alone: the objects it names are not looked up)"
            ),
        },
        Ok(problems) => Outcome::Rejected {
            message: format!(
                "{kind} {name}: the operator would not {would} it as written: {}",
                problems.join("; ")
            ),
        },
    }
}

/// What a GatewayClass of the operator's says by itself that the operator cannot accept: a
/// `parametersRef` it cannot read. The Envoy it names is taken to exist.
fn class_problems(class: &GatewayClass) -> Vec<String> {
    let named: Vec<Arc<Envoy>> = class
        .spec
        .parameters_ref
        .iter()
        .map(|reference| {
            let mut envoy = Envoy::new(&reference.name, EnvoySpec::default());
            envoy.metadata.namespace.clone_from(&reference.namespace);
            Arc::new(envoy)
        })
        .collect();
    let translation = translate(&GatewayInputs {
        classes: &[Arc::new(class.clone())],
        parameters: &named,
        ..Default::default()
    });
    translation.classes.iter().flat_map(|outcome| unhealthy(&outcome.conditions, &[])).collect()
}

/// What a Gateway's spec says by itself that the operator cannot serve.
fn gateway_problems(gateway: &Gateway) -> Vec<String> {
    let mut problems = certificate_ref_problems(gateway);
    let class = own_class(&gateway.spec.gateway_class_name);
    // Where `kubectl apply` would put it, if it names no namespace.
    let mut gateway = gateway.clone();
    gateway.metadata.namespace.get_or_insert_with(|| "default".to_owned());
    let translation =
        translate(&GatewayInputs { classes: &[class], gateways: &[Arc::new(gateway)], ..Default::default() });
    let Some(outcome) = translation.gateways.first() else {
        problems.push("the operator's translation leaves it out".to_owned());
        return problems;
    };
    for listener in &outcome.listeners {
        for problem in unhealthy(&listener.conditions, &CONTEXTUAL_LISTENER_REASONS) {
            problems.push(format!("listener {}: {problem}", listener.name));
        }
    }
    // A Gateway whose listeners are invalid says so in `Accepted` too: said once, above.
    let listeners_said = !problems.is_empty();
    for problem in unhealthy(&outcome.conditions, &CONTEXTUAL_LISTENER_REASONS) {
        if !(listeners_said && problem.contains("ListenersNotValid")) {
            problems.push(problem);
        }
    }
    problems
}

/// HTTPS listeners that terminate TLS need certificates, and those must be Secrets.
fn certificate_ref_problems(gateway: &Gateway) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, listener) in gateway.spec.listeners.iter().enumerate() {
        if listener.protocol != "HTTPS" {
            continue;
        }
        let tls = listener.tls.as_ref();
        let terminates = tls.and_then(|tls| tls.mode.as_deref()).is_none_or(|mode| mode == "Terminate");
        let refs = tls.map(|tls| tls.certificate_refs.as_slice()).unwrap_or_default();
        if terminates && refs.is_empty() {
            problems.push(format!(
                "spec.listeners[{i}] ({}): an HTTPS listener terminating TLS needs tls.certificateRefs (a kubernetes.io/tls Secret)",
                listener.name
            ));
        }
        for (k, reference) in refs.iter().enumerate() {
            let (group, kind) =
                (reference.group.as_deref().unwrap_or(""), reference.kind.as_deref().unwrap_or("Secret"));
            if !group.is_empty() || kind != "Secret" {
                problems.push(format!(
                    "spec.listeners[{i}].tls.certificateRefs[{k}]: {} is not a Secret (InvalidCertificateRef)",
                    group_kind(group, kind)
                ));
            }
        }
    }
    problems
}

/// What an HTTPRoute's spec says by itself that the operator cannot serve: backends of
/// another kind than Service, and what its parents, whichever they are, would refuse it for.
fn route_problems(route: &HTTPRoute) -> Vec<String> {
    let mut problems = backend_kind_problems(route);
    let namespace = route.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned());
    let mut route = route.clone();
    route.metadata.namespace = Some(namespace.clone());
    if !route.spec.parent_refs.iter().any(is_gateway) {
        problems.push("spec.parentRefs names no Gateway: no Gateway serves it".to_owned());
        // Still judged as a Gateway would judge it.
        route
            .spec
            .parent_refs
            .push(ParentReference { name: "check".to_owned(), ..ParentReference::default() });
    }
    // A Gateway for every parentRef, that lets the route in: only the route's own problems are
    // left.
    let gateways = parent_gateways(&route, &namespace);
    let classes = [own_class("check")];
    let translation = translate(&GatewayInputs {
        classes: &classes,
        gateways: &gateways,
        routes: &[Arc::new(route)],
        ..Default::default()
    });
    let mut said = BTreeSet::new();
    for parent in translation.routes.iter().flat_map(|route| &route.parents) {
        let accepted = Judged { type_: "Accepted", state: parent.accepted.clone() };
        for problem in unhealthy(&[accepted], &CONTEXTUAL_ROUTE_REASONS) {
            if said.insert(problem.clone()) {
                problems.push(problem);
            }
        }
    }
    problems
}

/// Backends must be Services (`InvalidKind` otherwise): the one kind the operator forwards to.
fn backend_kind_problems(route: &HTTPRoute) -> Vec<String> {
    let mut problems = Vec::new();
    let mut check = |path: String, backend: &BackendObjectReference| {
        let (group, kind) =
            (backend.group.as_deref().unwrap_or(""), backend.kind.as_deref().unwrap_or("Service"));
        if !group.is_empty() || kind != "Service" {
            problems.push(format!(
                "{path}: {} {} is not a Service, the only kind of backend the operator forwards to (ResolvedRefs False, InvalidKind)",
                group_kind(group, kind),
                backend.name
            ));
        }
    };
    for (i, rule) in route.spec.rules.iter().enumerate() {
        for (k, backend) in rule.backend_refs.iter().enumerate() {
            check(format!("spec.rules[{i}].backendRefs[{k}]"), &backend.backend);
        }
        for (f, filter) in rule.filters.iter().enumerate() {
            if let Some(mirror) = &filter.request_mirror {
                check(format!("spec.rules[{i}].filters[{f}].requestMirror.backendRef"), &mirror.backend_ref);
            }
        }
    }
    problems
}

fn group_kind(group: &str, kind: &str) -> String {
    if group.is_empty() { kind.to_owned() } else { format!("{kind}.{group}") }
}

fn is_gateway(parent: &ParentReference) -> bool {
    parent.group.as_deref().unwrap_or(GROUP) == GROUP
        && parent.kind.as_deref().unwrap_or("Gateway") == "Gateway"
}

/// One Gateway per Gateway the route names, with a listener for each of its parentRefs there
/// (named by `sectionName`, on `port`), each letting in routes from every namespace.
fn parent_gateways(route: &HTTPRoute, route_namespace: &str) -> Vec<Arc<Gateway>> {
    let mut gateways: Vec<Gateway> = Vec::new();
    for (i, parent) in route.spec.parent_refs.iter().filter(|p| is_gateway(p)).enumerate() {
        let namespace = parent.namespace.clone().unwrap_or_else(|| route_namespace.to_owned());
        let listener = Listener {
            name: parent.section_name.clone().unwrap_or_else(|| format!("check-{i}")),
            port: parent.port.unwrap_or(80),
            protocol: "HTTP".to_owned(),
            allowed_routes: Some(AllowedRoutes {
                namespaces: Some(RouteNamespaces { from: Some("All".to_owned()), selector: None }),
                kinds: Vec::new(),
            }),
            ..Listener::default()
        };
        let existing = gateways.iter_mut().find(|g| {
            g.metadata.name.as_deref() == Some(parent.name.as_str())
                && g.metadata.namespace.as_deref() == Some(namespace.as_str())
        });
        match existing {
            Some(gateway) => {
                if !gateway.spec.listeners.iter().any(|l| l.name == listener.name) {
                    // Distinct ports: listeners without hostnames on one port would conflict.
                    let port = 1024 + gateway.spec.listeners.len() as i32;
                    gateway.spec.listeners.push(Listener { port: parent.port.unwrap_or(port), ..listener });
                }
            }
            None => {
                let mut gateway = Gateway::new(
                    &parent.name,
                    GatewaySpec {
                        gateway_class_name: "check".to_owned(),
                        listeners: vec![listener],
                        addresses: Vec::new(),
                        infrastructure: None,
                    },
                );
                gateway.metadata.namespace = Some(namespace);
                gateways.push(gateway);
            }
        }
    }
    gateways.into_iter().map(Arc::new).collect()
}

/// A GatewayClass of the operator's named `name`.
fn own_class(name: &str) -> Arc<GatewayClass> {
    Arc::new(GatewayClass::new(
        name,
        GatewayClassSpec { controller_name: CONTROLLER_NAME.to_owned(), ..GatewayClassSpec::default() },
    ))
}

/// The conditions not in their healthy state, as `Type False (Reason: message)`, but those for
/// `contextual` reasons and those of the fleet.
fn unhealthy(conditions: &[Judged], contextual: &[&str]) -> Vec<String> {
    conditions
        .iter()
        .filter(|condition| !FLEET_CONDITIONS.contains(&condition.type_))
        .filter(|condition| !contextual.contains(&condition.state.reason))
        .filter_map(|condition| {
            let state = &condition.state;
            // `Conflicted` is healthy when False.
            let healthy = if condition.type_ == "Conflicted" { !state.status } else { state.status };
            let status = if state.status { "True" } else { "False" };
            (!healthy).then(|| format!("{} {status} ({}: {})", condition.type_, state.reason, state.message))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_backend_of_another_kind_is_reported_with_its_path() {
        let route = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "web"},
            "spec": {"parentRefs": [{"name": "edge"}],
                     "rules": [{"backendRefs": [{"name": "web", "port": 80},
                                                {"kind": "ConfigMap", "name": "settings", "port": 80}]}]}});
        let Outcome::Rejected { message } = check(route, "HTTPRoute") else { panic!("rejected") };
        assert!(
            message.starts_with("HTTPRoute web: the operator would not serve it as written: spec.rules[0].backendRefs[1]: ConfigMap settings is not a Service"),
            "{message}"
        );
    }

    #[test]
    fn an_https_listener_without_certificates_is_reported() {
        let gateway = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "edge"},
            "spec": {"gatewayClassName": "envoy",
                     "listeners": [{"name": "https", "port": 443, "protocol": "HTTPS"},
                                   {"name": "tls", "port": 8443, "protocol": "HTTPS",
                                    "tls": {"certificateRefs": [{"kind": "ConfigMap", "name": "c"}]}}]}});
        let Outcome::Rejected { message } = check(gateway, "Gateway") else { panic!("rejected") };
        assert!(
            message.contains(
                "spec.listeners[0] (https): an HTTPS listener terminating TLS needs tls.certificateRefs"
            ),
            "{message}"
        );
        assert!(
            message.contains("spec.listeners[1].tls.certificateRefs[0]: ConfigMap is not a Secret"),
            "{message}"
        );
    }

    #[test]
    fn classes_are_checked_for_parameters_the_operator_can_read() {
        let class = |parameters: Value| {
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                "metadata": {"name": "internal"},
                "spec": {"controllerName": CONTROLLER_NAME, "parametersRef": parameters}})
        };
        let template = json!({"group": "example.com", "kind": "Envoy", "name": "t", "namespace": "ops"});
        assert!(matches!(check(class(template), "GatewayClass"), Outcome::Unchanged { .. }));
        let config_map = json!({"group": "", "kind": "ConfigMap", "name": "t", "namespace": "ops"});
        let Outcome::Rejected { message } = check(class(config_map), "GatewayClass") else {
            panic!("rejected")
        };
        assert!(message.contains("Accepted False (InvalidParameters: "), "{message}");
        let other = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "other"}, "spec": {"controllerName": "example.net/other"}});
        assert!(
            matches!(check(other, "GatewayClass"), Outcome::Unchanged { note, .. } if note.contains("leaves it and its Gateways alone"))
        );
    }

    #[test]
    fn unreadable_and_unnamed_objects_are_said_so() {
        let unnamed =
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {}});
        assert!(
            matches!(check(unnamed, "Gateway"), Outcome::Rejected { message } if message.contains("metadata.name is required"))
        );
        let unreadable = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "web"}, "spec": {"rules": "all"}});
        assert!(
            matches!(check(unreadable, "HTTPRoute"), Outcome::Unreadable { message } if message.starts_with("HTTPRoute web: "))
        );
    }

    #[test]
    fn a_route_of_services_is_served_as_written() {
        let route = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"parentRefs": [{"name": "edge", "namespace": "infra", "sectionName": "https"}],
                     "hostnames": ["shop.example.com"],
                     "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/cart"}}],
                                "backendRefs": [{"name": "cart", "namespace": "backends", "port": 8080}]}]}});
        let outcome = check(route, "HTTPRoute");
        assert!(
            matches!(&outcome, Outcome::Unchanged { note, .. } if note.contains("serves it as written")),
            "{outcome:?}"
        );
    }
}
