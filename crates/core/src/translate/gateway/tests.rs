//! What the golden files (`crates/core/tests/testdata/golden/gateway/`, one per conformance
//! test of the suite v1.3.0, profile GATEWAY-HTTP, named after it) cannot say, because they pin
//! one translation of one set of objects: statuses written over time (observedGeneration and
//! transition times as objects change), one Gateway edited in turn, and Envoy's resources
//! where the IR leaves a detail to the rendering (response header options, mirror policies,
//! certificates over SDS). The manifests are the suite's (its base and each test's own, with
//! `{GATEWAY_CLASS_NAME}` filled in), the asserts those of the Go test.
//!
//! Conformance (the rest of each test is its golden case):
//! - GatewayClassObservedGenerationBump → `conformance_gateway_class_observed_generation_bump`
//! - GatewayModifyListeners → `conformance_gateway_modify_listeners`
//! - GatewayObservedGenerationBump → `conformance_gateway_observed_generation_bump`
//! - HTTPRouteHTTPSListener → `conformance_httproute_https_listener`
//! - HTTPRouteObservedGenerationBump → `conformance_httproute_observed_generation_bump`
//! - HTTPRouteRequestMirror → `conformance_httproute_request_mirror`
//! - HTTPRouteResponseHeaderModifier → `conformance_httproute_response_header_modifier`
//!
//! And the operator's own: a Gateway claims only the addresses of the Service its fleet
//! controls, even beside a Service of the same name it does not.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use serde_json::{Value, json};

use super::conditions::*;
use super::status::{class_status, gateway_status, route_status};
use super::*;
use crate::api::gateway::{Gateway, GatewayClass, HTTPRoute, ReferenceGrant, RouteParentStatus};
use crate::names::{CONTROLLER_NAME, SERVICE_NAME_LABEL};

const INFRA: &str = "gateway-conformance-infra";
const WEB: &str = "gateway-conformance-web-backend";
const APP: &str = "gateway-conformance-app-backend";
const CLASS: &str = "envoy-operator";

const CERTIFICATE: &str =
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n";
const PRIVATE_KEY: &str =
    "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIEtleQ==\n-----END PRIVATE KEY-----\n";

/// The suite's base manifests (`conformance/base/manifests.yaml`): its namespaces (with the
/// label the API server adds) and Gateways.
const BASE: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: envoy-operator, generation: 1}
spec: {controllerName: example.com/envoy-operator}
---
apiVersion: v1
kind: Namespace
metadata:
  name: gateway-conformance-infra
  labels: {gateway-conformance: infra, kubernetes.io/metadata.name: gateway-conformance-infra}
---
apiVersion: v1
kind: Namespace
metadata:
  name: gateway-conformance-app-backend
  labels: {gateway-conformance: backend, kubernetes.io/metadata.name: gateway-conformance-app-backend}
---
apiVersion: v1
kind: Namespace
metadata:
  name: gateway-conformance-web-backend
  labels: {gateway-conformance: backend, kubernetes.io/metadata.name: gateway-conformance-web-backend}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: same-namespace, namespace: gateway-conformance-infra, uid: uid-same-namespace, generation: 1}
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - name: http
    port: 80
    protocol: HTTP
    allowedRoutes: {namespaces: {from: Same}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: same-namespace-with-https-listener, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - name: https
    port: 443
    protocol: HTTPS
    allowedRoutes: {namespaces: {from: Same}}
    tls:
      certificateRefs:
      - {group: "", kind: Secret, name: tls-validity-checks-certificate, namespace: gateway-conformance-infra}
  - name: https-with-hostname
    port: 443
    hostname: second-example.org
    protocol: HTTPS
    allowedRoutes: {namespaces: {from: Same}}
    tls:
      certificateRefs:
      - {group: "", kind: Secret, name: tls-validity-checks-certificate, namespace: gateway-conformance-infra}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: all-namespaces, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - name: http
    port: 80
    protocol: HTTP
    allowedRoutes: {namespaces: {from: All}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: backend-namespaces, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - name: http
    port: 80
    protocol: HTTP
    allowedRoutes:
      namespaces:
        from: Selector
        selector: {matchLabels: {gateway-conformance: backend}}
"#;

/// Every object the translation reads.
#[derive(Default)]
struct World {
    classes: Vec<Arc<GatewayClass>>,
    gateways: Vec<Arc<Gateway>>,
    routes: Vec<Arc<HTTPRoute>>,
    grants: Vec<Arc<ReferenceGrant>>,
    namespaces: Vec<Arc<Namespace>>,
    services: Vec<Arc<Service>>,
    slices: Vec<Arc<EndpointSlice>>,
    secrets: Vec<Arc<Secret>>,
    fleets: Vec<Arc<Envoy>>,
    parameters: Vec<Arc<Envoy>>,
    rejected: crate::fleet::isolate::Rejections,
}

/// Puts `object` in `list`, replacing the one of the same namespace and name.
fn upsert<K: Resource>(list: &mut Vec<Arc<K>>, object: K) {
    let key = |o: &K| (o.meta().namespace.clone(), o.meta().name.clone());
    list.retain(|known| key(known) != key(&object));
    list.push(Arc::new(object));
}

fn read<K: serde::de::DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("a readable object")
}

impl World {
    /// The suite's base: its class, namespaces, Gateways, backends (each with one ready
    /// endpoint) and the Gateways' certificate.
    fn conformance() -> Self {
        let mut world = Self::default();
        world.apply(BASE);
        let backends = [
            (INFRA, "infra-backend-v1", "10.0.1.1"),
            (INFRA, "infra-backend-v2", "10.0.1.2"),
            (INFRA, "infra-backend-v3", "10.0.1.3"),
            (WEB, "web-backend", "10.0.2.1"),
            (APP, "app-backend-v1", "10.0.3.1"),
            (APP, "app-backend-v2", "10.0.3.2"),
        ];
        for (namespace, name, ip) in backends {
            world.apply(&format!(
                "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec: {{ports: [{{port: 8080, targetPort: 3000}}]}}"
            ));
            world.slices.push(Arc::new(read(json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": format!("{name}-1"), "namespace": namespace, "labels": {SERVICE_NAME_LABEL: name}},
                "addressType": "IPv4", "ports": [{"port": 3000}], "endpoints": [{"addresses": [ip]}]}))));
        }
        world.secrets.push(tls_secret(INFRA, "tls-validity-checks-certificate"));
        world
    }

    /// Applies a multi-document manifest, as `kubectl apply` would.
    fn apply(&mut self, manifest: &str) {
        for document in manifest.replace("{GATEWAY_CLASS_NAME}", CLASS).split("\n---\n") {
            let value: Value = serde_saphyr::from_str(document).expect("a YAML document");
            match value["kind"].as_str().unwrap_or_default() {
                "GatewayClass" => upsert(&mut self.classes, read(value)),
                "Gateway" => upsert(&mut self.gateways, read(value)),
                "HTTPRoute" => upsert(&mut self.routes, read(value)),
                "ReferenceGrant" => upsert(&mut self.grants, read(value)),
                "Namespace" => upsert(&mut self.namespaces, read(value)),
                "Service" => upsert(&mut self.services, read(value)),
                "Secret" => upsert(&mut self.secrets, read(value)),
                "Envoy" => upsert(&mut self.parameters, read(value)),
                other => panic!("no such kind in the tests: {other:?}"),
            }
        }
    }

    fn translate(&self) -> GatewayTranslation {
        translate(&GatewayInputs {
            classes: &self.classes,
            gateways: &self.gateways,
            routes: &self.routes,
            grpc_routes: &[],
            tls_routes: &[],
            grants: &self.grants,
            namespaces: &self.namespaces,
            services: &self.services,
            endpoint_slices: &self.slices,
            secrets: &self.secrets,
            fleets: &self.fleets,
            parameters: &self.parameters,
            rejected: &self.rejected,
            mesh_pods: &[],
        })
    }
}

fn tls_secret(namespace: &str, name: &str) -> Arc<Secret> {
    Arc::new(Secret {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(BTreeMap::from([
            ("tls.crt".to_owned(), ByteString(CERTIFICATE.as_bytes().to_vec())),
            ("tls.key".to_owned(), ByteString(PRIVATE_KEY.as_bytes().to_vec())),
        ])),
        ..Default::default()
    })
}

fn gateway<'a>(translation: &'a GatewayTranslation, name: &str) -> &'a GatewayOutcome {
    translation.gateways.iter().find(|g| g.name == name).unwrap_or_else(|| panic!("no Gateway {name}"))
}

fn listener<'a>(gateway: &'a GatewayOutcome, name: &str) -> &'a ListenerOutcome {
    gateway.listeners.iter().find(|l| l.name == name).unwrap_or_else(|| panic!("no listener {name}"))
}

fn route<'a>(translation: &'a GatewayTranslation, namespace: &str, name: &str) -> &'a RouteOutcome {
    translation
        .routes
        .iter()
        .find(|r| r.namespace == namespace && r.name == name)
        .unwrap_or_else(|| panic!("no outcome for the route {namespace}/{name}"))
}

/// The state of condition `type_`.
fn condition<'a>(conditions: &'a [Judged], type_: &str) -> &'a ConditionState {
    &conditions.iter().find(|c| c.type_ == type_).unwrap_or_else(|| panic!("no {type_}")).state
}

/// `(status, reason)` of condition `type_`.
fn said(conditions: &[Judged], type_: &str) -> (bool, &'static str) {
    let state = condition(conditions, type_);
    (state.status, state.reason)
}

/// `(Accepted, ResolvedRefs)` of a route's only parent, as `(status, reason)`.
fn parent_said(route: &RouteOutcome) -> ((bool, &'static str), (bool, &'static str)) {
    let [parent] = route.parents.as_slice() else { panic!("one parent: {:?}", route.parents) };
    (
        (parent.accepted.status, parent.accepted.reason),
        (parent.resolved_refs.status, parent.resolved_refs.reason),
    )
}

/// The IR listener of a fleet's port.
fn port<'a>(gateway: &'a GatewayOutcome, name: &str) -> &'a ir::Listener {
    gateway.ir.listeners.iter().find(|l| l.name == name).unwrap_or_else(|| panic!("no port {name}"))
}

/// A virtual host's routes: their names and where each sends requests (`backend=weight`,
/// `500=weight` for what does not resolve).
fn host(listener_hosts: &[ir::VirtualHost], domain: &str) -> Vec<(String, Vec<String>)> {
    let Some(host) = listener_hosts.iter().find(|h| h.domain.to_string() == domain) else {
        panic!(
            "no host {domain} in {:?}",
            listener_hosts.iter().map(|h| h.domain.to_string()).collect::<Vec<_>>()
        )
    };
    host.routes
        .iter()
        .map(|route| {
            let targets = match &route.action {
                ir::Action::Forward(forward) => {
                    let mut targets: Vec<String> =
                        forward.backends.iter().map(|b| format!("{}={}", b.backend, b.weight)).collect();
                    if forward.unresolved_weight > 0 {
                        targets.push(format!("500={}", forward.unresolved_weight));
                    }
                    targets
                }
                ir::Action::Redirect(redirect) => vec![format!("redirect {}", redirect.status_code)],
            };
            (route.name.clone(), targets)
        })
        .collect()
}

fn domains(hosts: &[ir::VirtualHost]) -> Vec<String> {
    hosts.iter().map(|h| h.domain.to_string()).collect()
}

fn to(backend: &str, weight: u32) -> Vec<String> {
    vec![format!("{backend}={weight}")]
}

/// HTTPRouteHTTPSListener: HTTPS listeners sharing port 443 are one listener of TLS servers,
/// chosen by SNI, each with the certificate of its Secret and its own routes.
#[test]
fn conformance_httproute_https_listener() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: httproute-https-test, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace-with-https-listener}]
  hostnames: [example.org]
  rules: [{backendRefs: [{name: infra-backend-v1, port: 8080}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: httproute-https-test-no-hostname, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace-with-https-listener, sectionName: https-with-hostname}]
  rules: [{backendRefs: [{name: infra-backend-v2, port: 8080}]}]
"#,
    );
    let translation = world.translate();
    for name in ["httproute-https-test", "httproute-https-test-no-hostname"] {
        assert_eq!(
            parent_said(route(&translation, INFRA, name)),
            ((true, REASON_ACCEPTED), (true, REASON_RESOLVED_REFS))
        );
    }
    let gateway = gateway(&translation, "same-namespace-with-https-listener");
    assert_eq!(listener(gateway, "https").attached_routes, 1);
    assert_eq!(listener(gateway, "https-with-hostname").attached_routes, 1);
    let https = port(gateway, "https-443");
    assert_eq!(https.port, 10443);
    assert!(https.virtual_hosts.is_empty(), "TLS servers hold the hosts");
    let servers: Vec<(&str, String, &[String])> = https
        .tls_servers
        .iter()
        .map(|s| (s.name.as_str(), s.server_name.to_string(), s.certificates.as_slice()))
        .collect();
    let certificate = ["gateway-conformance-infra/tls-validity-checks-certificate".to_owned()];
    assert_eq!(
        servers,
        [
            ("https", "*".to_owned(), &certificate[..]),
            ("https-with-hostname", "second-example.org".to_owned(), &certificate[..])
        ]
    );
    assert_eq!(domains(&https.tls_servers[0].virtual_hosts), ["example.org"]);
    assert_eq!(
        host(&https.tls_servers[1].virtual_hosts, "second-example.org")[0].1,
        to("gateway-conformance-infra/infra-backend-v2/8080", 1)
    );
    let [secret] = gateway.ir.secrets.as_slice() else { panic!("one secret, shared") };
    assert_eq!(
        (secret.name.as_str(), secret.certificate_chain.as_str()),
        (certificate[0].as_str(), CERTIFICATE)
    );
    assert_eq!(secret.private_key, PRIVATE_KEY);
    let fleet = gateway.fleet.as_ref().expect("a fleet");
    assert_eq!(fleet.spec.ports.len(), 1, "one port for both listeners");
    assert_eq!(fleet.spec.ports[0].name, "https-443");
}

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).unwrap())
}

fn observed(conditions: &[Condition]) -> Vec<Option<i64>> {
    conditions.iter().map(|c| c.observed_generation).collect()
}

/// GatewayObservedGenerationBump: every condition of the Gateway and of its listeners carries
/// the generation judged; a condition keeps its transition time while its status holds.
#[test]
fn conformance_gateway_observed_generation_bump() {
    let mut world = World::conformance();
    let translation = world.translate();
    let mut stored =
        (*world.gateways.iter().find(|g| g.metadata.name.as_deref() == Some("same-namespace")).unwrap())
            .as_ref()
            .clone();
    let first = gateway_status(&stored, gateway(&translation, "same-namespace"), &at(100));
    assert_eq!(observed(&first.conditions), [Some(1), Some(1)]);
    assert_eq!(observed(&first.listeners[0].conditions), [Some(1); 4]);
    let types: Vec<&str> = first.listeners[0].conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, [ACCEPTED, PROGRAMMED, RESOLVED_REFS, CONFLICTED]);

    stored.status = Some(first.clone());
    stored.metadata.generation = Some(2);
    stored.spec.listeners[0].name = "http".to_owned();
    stored.spec.listeners.push(
        serde_json::from_value(json!({"name": "http-8080", "port": 8080, "protocol": "HTTP"})).unwrap(),
    );
    upsert(&mut world.gateways, stored.clone());
    let translation = world.translate();
    let second = gateway_status(&stored, gateway(&translation, "same-namespace"), &at(200));
    assert_eq!(observed(&second.conditions), [Some(2), Some(2)]);
    for listener in &second.listeners {
        assert_eq!(observed(&listener.conditions), [Some(2); 4], "{}", listener.name);
    }
    assert_eq!(second.conditions[0].last_transition_time, at(100), "Accepted stayed True");
    assert_eq!(
        second.listeners[1].conditions[0].last_transition_time,
        at(200),
        "a new listener's conditions are new"
    );
}

/// GatewayModifyListeners: adding a listener adds its status and its port; removing one
/// removes them.
#[test]
fn conformance_gateway_modify_listeners() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gateway-add-listener, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - {name: https, port: 443, protocol: HTTPS, hostname: secure.test.com, tls: {certificateRefs: [{name: tls-validity-checks-certificate}]}}
"#,
    );
    let ports = |world: &World| {
        let translation = world.translate();
        let gateway = gateway(&translation, "gateway-add-listener");
        let listeners: Vec<String> = gateway.listeners.iter().map(|l| l.name.clone()).collect();
        let ports: Vec<String> = gateway.ir.listeners.iter().map(|l| l.name.clone()).collect();
        (listeners, ports)
    };
    assert_eq!(ports(&world), (vec!["https".to_owned()], vec!["https-443".to_owned()]));
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gateway-add-listener, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - {name: https, port: 443, protocol: HTTPS, hostname: secure.test.com, tls: {certificateRefs: [{name: tls-validity-checks-certificate}]}}
  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}
"#,
    );
    assert_eq!(
        ports(&world),
        (vec!["https".to_owned(), "http".to_owned()], vec!["http-80".to_owned(), "https-443".to_owned()])
    );
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gateway-add-listener, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}
"#,
    );
    assert_eq!(ports(&world), (vec!["http".to_owned()], vec!["http-80".to_owned()]));
}

/// GatewayClassObservedGenerationBump: the class's conditions follow its generation.
#[test]
fn conformance_gateway_class_observed_generation_bump() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: other-controller}
spec: {controllerName: example.com/someone-else}
"#,
    );
    let translation = world.translate();
    let names: Vec<&str> = translation.classes.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, [CLASS], "only the operator's classes");
    let mut class =
        world.classes.iter().find(|c| c.metadata.name.as_deref() == Some(CLASS)).unwrap().as_ref().clone();
    let first = class_status(&class, &translation.classes[0], &at(1));
    assert_eq!(
        first
            .conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str(), c.observed_generation))
            .collect::<Vec<_>>(),
        [
            ("Accepted", "True", "Accepted", Some(1)),
            ("SupportedVersion", "True", "SupportedVersion", Some(1))
        ]
    );
    class.status = Some(first);
    class.metadata.generation = Some(2);
    class.spec.description = Some("bumped".into());
    upsert(&mut world.classes, class.clone());
    let second = class_status(&class, &world.translate().classes[0], &at(2));
    assert_eq!(observed(&second.conditions), [Some(2), Some(2)]);
    assert_eq!(second.conditions[0].last_transition_time, at(1));
}

/// HTTPRouteObservedGenerationBump: the route's conditions follow its generation; other
/// controllers' entries are kept.
#[test]
fn conformance_httproute_observed_generation_bump() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: observed-generation-bump, namespace: gateway-conformance-infra, generation: 1}
spec:
  parentRefs: [{name: same-namespace}]
  rules: [{backendRefs: [{name: infra-backend-v1, port: 8080}]}]
"#,
    );
    let mut stored = world.routes[0].as_ref().clone();
    let theirs = RouteParentStatus {
        parent_ref: serde_json::from_value(json!({"name": "their-gateway"})).unwrap(),
        controller_name: "example.com/someone-else".into(),
        conditions: Vec::new(),
    };
    stored.status = Some(crate::api::gateway::HTTPRouteStatus { parents: vec![theirs.clone()] });
    let first = route_status(
        &stored,
        route(&world.translate(), INFRA, "observed-generation-bump"),
        CONTROLLER_NAME,
        &at(1),
    );
    assert_eq!(first.parents.len(), 2);
    assert_eq!(first.parents[0], theirs);
    assert_eq!(first.parents[1].controller_name, CONTROLLER_NAME);
    assert_eq!(observed(&first.parents[1].conditions), [Some(1), Some(1)]);

    stored.status = Some(first);
    stored.metadata.generation = Some(2);
    stored.spec.rules[0].backend_refs[0].backend.name = "infra-backend-v2".into();
    upsert(&mut world.routes, stored.clone());
    let second = route_status(
        &stored,
        route(&world.translate(), INFRA, "observed-generation-bump"),
        CONTROLLER_NAME,
        &at(2),
    );
    assert_eq!(observed(&second.parents[1].conditions), [Some(2), Some(2)]);
    assert_eq!(second.parents[1].conditions[0].last_transition_time, at(1));

    stored.spec.parent_refs.clear();
    let gone = route_status(
        &stored,
        route(&world.translate(), INFRA, "observed-generation-bump"),
        CONTROLLER_NAME,
        &at(3),
    );
    assert_eq!(gone.parents, [theirs], "our entry goes with its parentRef");
}

/// HTTPRouteResponseHeaderModifier: set, add and remove response headers (names of any case,
/// lowercased), rendered as the Envoy route's response header options.
#[test]
fn conformance_httproute_response_header_modifier() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: response-header-modifier, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /response}}]
    filters:
    - type: ResponseHeaderModifier
      responseHeaderModifier:
        set: [{name: X-Header-Set, value: set-overwrites-values}]
        add: [{name: X-Header-Add, value: add-appends-values}]
        remove: [X-Header-Remove]
    backendRefs: [{name: infra-backend-v1, port: 8080}]
"#,
    );
    let translation = world.translate();
    let outcome = route(&translation, INFRA, "response-header-modifier");
    assert_eq!(parent_said(outcome).0, (true, REASON_ACCEPTED));
    let gateway = gateway(&translation, "same-namespace");
    let ir_route = &port(gateway, "http-80").virtual_hosts[0].routes[0];
    assert_eq!(ir_route.request_headers, ir::HeaderChanges::default());
    let changes = &ir_route.response_headers;
    assert_eq!(
        changes.set,
        [ir::Header { name: "x-header-set".into(), value: "set-overwrites-values".into() }]
    );
    assert_eq!(changes.add, [ir::Header { name: "x-header-add".into(), value: "add-appends-values".into() }]);
    assert_eq!(changes.remove, ["x-header-remove"]);

    let rendered = serde_json::to_value(&gateway.resources.route_configurations[0]).unwrap();
    let envoy_route = &rendered["virtual_hosts"][0]["routes"][0];
    assert_eq!(
        envoy_route["response_headers_to_add"],
        json!([
            {"header": {"key": "x-header-set", "value": "set-overwrites-values"}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"},
            {"header": {"key": "x-header-add", "value": "add-appends-values"}, "append_action": "APPEND_IF_EXISTS_OR_ADD"},
        ])
    );
    assert_eq!(envoy_route["response_headers_to_remove"], json!(["x-header-remove"]));
    assert!(envoy_route.get("request_headers_to_add").is_none(), "{envoy_route}");
}

/// HTTPRouteRequestMirror: requests are answered by infra-backend-v1 and copied to
/// infra-backend-v2, which becomes a backend of the fleet (with its endpoints) and the route's
/// mirror policy; a RequestHeaderModifier applies to both.
#[test]
fn conformance_httproute_request_mirror() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: request-mirror, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /mirror}}]
    filters:
    - type: RequestMirror
      requestMirror: {backendRef: {name: infra-backend-v2, namespace: gateway-conformance-infra, port: 8080}}
    backendRefs: [{name: infra-backend-v1, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /mirror-and-modify-request-headers}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: X-Header-Set, value: set-overwrites-values}]}
    - type: RequestMirror
      requestMirror: {backendRef: {name: infra-backend-v2, port: 8080}, percent: 35}
    backendRefs: [{name: infra-backend-v1, port: 8080}]
"#,
    );
    let translation = world.translate();
    let outcome = route(&translation, INFRA, "request-mirror");
    assert_eq!(parent_said(outcome), ((true, REASON_ACCEPTED), (true, REASON_RESOLVED_REFS)));
    let gateway = gateway(&translation, "same-namespace");
    let routes = &port(gateway, "http-80").virtual_hosts[0].routes;
    let mirrors = |name: &str| -> Vec<ir::Mirror> {
        let found =
            routes.iter().find(|r| r.name.ends_with(name)).unwrap_or_else(|| panic!("no route {name}"));
        match &found.action {
            ir::Action::Forward(forward) => {
                assert_eq!(forward.backends.len(), 1, "{forward:?}");
                assert_eq!(forward.backends[0].backend, "gateway-conformance-infra/infra-backend-v1/8080");
                forward.mirrors.clone()
            }
            other => panic!("{name}: {other:?}"),
        }
    };
    let v2 = "gateway-conformance-infra/infra-backend-v2/8080".to_owned();
    assert_eq!(mirrors("rule/0/match/0"), [ir::Mirror { backend: v2.clone(), share: None }]);
    assert_eq!(
        mirrors("rule/1/match/0"),
        [ir::Mirror { backend: v2.clone(), share: Some(ir::Fraction::percent(35)) }]
    );
    let backends: Vec<(&str, usize)> =
        gateway.ir.backends.iter().map(|b| (b.name.as_str(), b.endpoints.len())).collect();
    assert_eq!(
        backends,
        [
            ("gateway-conformance-infra/infra-backend-v1/8080", 1),
            ("gateway-conformance-infra/infra-backend-v2/8080", 1)
        ]
    );
    assert!(gateway.resources.clusters.iter().any(|c| c.name == v2));

    let rendered = serde_json::to_value(&gateway.resources.route_configurations[0]).unwrap();
    let policies: Vec<&Value> = rendered["virtual_hosts"][0]["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["route"]["request_mirror_policies"])
        .collect();
    assert!(policies.contains(&&json!([{"cluster": v2}])), "{policies:?}");
    assert!(
        policies.contains(&&json!([{"cluster": v2, "runtime_fraction": {"default_value": {"numerator": 35, "denominator": "HUNDRED"}}}])),
        "{policies:?}"
    );
}

// The operator's own rules.

/// The fleet of `same-namespace` as stored: its uid, and `status`.
fn stored_fleet(world: &World, status: Value) -> Envoy {
    let mut fleet = gateway(&world.translate(), "same-namespace").fleet.clone().expect("a fleet");
    fleet.metadata.uid = Some("uid-fleet".into());
    fleet.status = Some(serde_json::from_value(status).unwrap());
    fleet
}

/// A Service of `name` in the suite's namespace with a cluster IP, controlled by the Envoy of
/// `owner_uid` if given, with `lb_status`.
fn fleet_service(name: &str, owner_uid: Option<&str>, lb_status: Value) -> Arc<Service> {
    let owners: Vec<Value> = owner_uid
        .map(|uid| json!({"apiVersion": "example.com/v1", "kind": "Envoy", "name": name, "uid": uid, "controller": true}))
        .into_iter()
        .collect();
    Arc::new(read(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": INFRA, "ownerReferences": owners},
        "spec": {"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}, "status": lb_status})))
}

/// A Gateway claims no address it does not own: not that of a user's Service of the Gateway's
/// own name, nor of one of its fleet's name that its fleet does not control; and a fleet that
/// cannot make its proxies (a user's object holds a child's name) says so in `Programmed`.
#[test]
fn a_gateway_claims_only_the_address_of_the_service_its_fleet_controls() {
    let mut world = World::conformance();
    let ready = stored_fleet(&world, json!({"readyReplicas": 1}));
    world.fleets.push(Arc::new(ready));
    world.services.push(fleet_service("same-namespace", None, json!({})));
    let translated = world.translate();
    assert!(gateway(&translated, "same-namespace").addresses.is_empty(), "the user's Service of its name");
    world.services.push(fleet_service("same-namespace-envoy-operator", Some("uid-someone-else"), json!({})));
    world.services.push(fleet_service("same-namespace-envoy-operator", None, json!({})));
    let translated = world.translate();
    assert!(
        gateway(&translated, "same-namespace").addresses.is_empty(),
        "a Service its fleet does not control"
    );
    assert_eq!(
        said(&gateway(&translated, "same-namespace").conditions, PROGRAMMED),
        (false, REASON_ADDRESS_NOT_ASSIGNED)
    );

    let clash =
        "Service Resource \"same-namespace-envoy-operator\" already exists and is not managed by Envoy";
    let blocked = stored_fleet(
        &world,
        json!({"readyReplicas": 1, "conditions": [{"type": "Degraded", "status": "True", "reason": "ErrResourceExists",
               "message": clash, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}),
    );
    world.fleets = vec![Arc::new(blocked)];
    let translated = world.translate();
    let programmed = condition(&gateway(&translated, "same-namespace").conditions, PROGRAMMED);
    assert_eq!((programmed.status, programmed.reason), (false, REASON_INVALID));
    assert_eq!(
        programmed.message,
        format!(
            "the fleet {INFRA}/same-namespace-envoy-operator cannot make its proxies: {clash}: rename or delete it"
        )
    );
}
