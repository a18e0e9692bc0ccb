//! The Gateway API conformance suite's cases (v1.3.0, `conformance/tests/*.go` and `.yaml`,
//! profile GATEWAY-HTTP), reproduced as object in, status and IR out: the manifests are the
//! suite's (its base manifests and each test's own, with `{GATEWAY_CLASS_NAME}` filled in),
//! the asserts those of the Go test on status, and on traffic where the IR decides it.
//!
//! Conformance:
//! - GatewayClassObservedGenerationBump → `conformance_gateway_class_observed_generation_bump`
//! - GatewayInvalidRouteKind → `conformance_gateway_invalid_route_kind`
//! - GatewayInvalidTLSConfiguration → `conformance_gateway_invalid_tls_configuration`
//! - GatewayModifyListeners → `conformance_gateway_modify_listeners`
//! - GatewayObservedGenerationBump → `conformance_gateway_observed_generation_bump`
//! - GatewaySecretInvalidReferenceGrant → `conformance_gateway_secret_invalid_reference_grant`
//! - GatewaySecretMissingReferenceGrant → `conformance_gateway_secret_missing_reference_grant`
//! - GatewaySecretReferenceGrantAllInNamespace →
//!   `conformance_gateway_secret_reference_grant_all_in_namespace`
//! - GatewaySecretReferenceGrantSpecific → `conformance_gateway_secret_reference_grant_specific`
//! - GatewayWithAttachedRoutes → `conformance_gateway_with_attached_routes`
//! - HTTPRouteCrossNamespace → `conformance_httproute_cross_namespace`
//! - HTTPRouteHostnameIntersection → `conformance_httproute_hostname_intersection`
//! - HTTPRouteHTTPSListener → `conformance_httproute_https_listener`
//! - HTTPRouteInvalidBackendRefUnknownKind → `conformance_httproute_invalid_backend_ref_unknown_kind`
//! - HTTPRouteInvalidCrossNamespaceBackendRef →
//!   `conformance_httproute_invalid_cross_namespace_backend_ref`
//! - HTTPRouteInvalidCrossNamespaceParentRef →
//!   `conformance_httproute_invalid_cross_namespace_parent_ref`
//! - HTTPRouteInvalidNonExistentBackendRef → `conformance_httproute_invalid_nonexistent_backend_ref`
//! - HTTPRouteInvalidParentRefNotMatchingListenerPort →
//!   `conformance_httproute_invalid_parent_ref_not_matching_listener_port`
//! - HTTPRouteInvalidParentRefNotMatchingSectionName →
//!   `conformance_httproute_invalid_parent_ref_not_matching_section_name`
//! - HTTPRouteInvalidReferenceGrant → `conformance_httproute_invalid_reference_grant`
//! - HTTPRouteListenerHostnameMatching → `conformance_httproute_listener_hostname_matching`
//! - HTTPRouteMatching → `conformance_httproute_matching`
//! - HTTPRouteMatchingAcrossRoutes → `conformance_httproute_matching_across_routes`
//! - HTTPRouteObservedGenerationBump → `conformance_httproute_observed_generation_bump`
//! - HTTPRoutePartiallyInvalidViaInvalidReferenceGrant →
//!   `conformance_httproute_partially_invalid_via_invalid_reference_grant`
//! - HTTPRouteRedirectHostAndStatus → `conformance_httproute_redirect_host_and_status`
//! - HTTPRouteReferenceGrant → `conformance_httproute_reference_grant`
//! - HTTPRouteRequestHeaderModifier → `conformance_httproute_request_header_modifier`
//! - HTTPRouteRequestMirror → `conformance_httproute_request_mirror`
//! - HTTPRouteRequestMultipleMirrors → `conformance_httproute_request_multiple_mirrors`
//! - HTTPRouteResponseHeaderModifier → `conformance_httproute_response_header_modifier`
//! - HTTPRouteSimpleSameNamespace → `conformance_httproute_simple_same_namespace`
//! - HTTPRouteWeight → `conformance_httproute_weight`
//!
//! The operator's own rules (fleet, addresses, `Programmed`, conflicts, unsupported features)
//! are tested after them.

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
use crate::api::ServiceType;
use crate::api::gateway::{Gateway, GatewayClass, HTTPRoute, ReferenceGrant, RouteParentStatus};
use crate::names::{CONTROLLER_NAME, GATEWAY_LABEL, SERVICE_NAME_LABEL};

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
            grants: &self.grants,
            namespaces: &self.namespaces,
            services: &self.services,
            endpoint_slices: &self.slices,
            secrets: &self.secrets,
            fleets: &self.fleets,
            parameters: &self.parameters,
            rejected: &self.rejected,
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

/// HTTPRouteSimpleSameNamespace: a route in the Gateway's namespace attaches to its listener
/// and sends every request to its backend.
#[test]
fn conformance_httproute_simple_same_namespace() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: gateway-conformance-infra-test, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules: [{backendRefs: [{name: infra-backend-v1, port: 8080}]}]
"#,
    );
    let translation = world.translate();
    let outcome = route(&translation, INFRA, "gateway-conformance-infra-test");
    assert_eq!(parent_said(outcome), ((true, REASON_ACCEPTED), (true, REASON_RESOLVED_REFS)));
    let gateway = gateway(&translation, "same-namespace");
    assert_eq!(listener(gateway, "http").attached_routes, 1);
    let http = port(gateway, "http-80");
    assert_eq!(http.port, 10080, "port 80 is bound unprivileged");
    assert_eq!(
        host(&http.virtual_hosts, "*"),
        [(
            "gateway-conformance-infra/gateway-conformance-infra-test/rule/0/match/0".to_owned(),
            to("gateway-conformance-infra/infra-backend-v1/8080", 1)
        )]
    );
    let [backend] = gateway.ir.backends.as_slice() else { panic!("one backend") };
    let endpoints: Vec<String> = backend.endpoints.iter().map(|e| format!("{}:{}", e.ip, e.port)).collect();
    assert_eq!(endpoints, ["10.0.1.1:3000"], "the Service's ready endpoint, on its target port");
    assert!(!gateway.resources.listeners.is_empty(), "the IR is rendered");
}

/// A route the fleet's proxies refused is left out alone (fleet::isolate): the other route on
/// the listener keeps serving, the refused one says why, the listener counts only the other.
#[test]
fn a_route_the_proxies_refused_drops_out_alone() {
    use crate::fleet::isolate::{Rejection, RouteId};
    let mut world = World::conformance();
    for (name, path) in [("good", "/good"), ("bad", "/bad")] {
        world.apply(&format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {INFRA}, uid: uid-{name}, generation: 2}}\nspec:\n  parentRefs: [{{name: same-namespace}}]\n  rules: [{{matches: [{{path: {{type: PathPrefix, value: {path}}}}}], backendRefs: [{{name: infra-backend-v1, port: 8080}}]}}]\n"
        ));
    }
    let bad = world.routes.iter().find(|r| r.metadata.name.as_deref() == Some("bad")).expect("bad");
    let id = RouteId::of("HTTPRoute", &bad.metadata).expect("stored");
    world
        .rejected
        .insert(id, Rejection { generation: 2, message: "header 'host' may not be modified".to_owned() });
    let translation = world.translate();
    let ((accepted, reason), _) = parent_said(route(&translation, INFRA, "bad"));
    assert_eq!((accepted, reason), (false, REASON_UNSUPPORTED_VALUE));
    let message = &route(&translation, INFRA, "bad").parents[0].accepted.message;
    assert!(message.ends_with("header 'host' may not be modified"), "{message}");
    assert_eq!(parent_said(route(&translation, INFRA, "good")).0, (true, REASON_ACCEPTED));
    let gateway = gateway(&translation, "same-namespace");
    assert_eq!(listener(gateway, "http").attached_routes, 1);
    let served: Vec<String> =
        host(&port(gateway, "http-80").virtual_hosts, "*").into_iter().map(|(name, _)| name).collect();
    assert!(
        !served.is_empty() && served.iter().all(|name| name.starts_with("gateway-conformance-infra/good/")),
        "{served:?}"
    );
}

/// HTTPRouteRedirectHostAndStatus: a rule with a `RequestRedirect` answers with the redirect
/// even beside backendRefs (which Gateway API allows and EnvoyRoute forbids); they get nothing.
#[test]
fn conformance_httproute_redirect_host_and_status() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: redirect-host-and-status, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /hostname-redirect}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: example.org}}]
    backendRefs: [{name: infra-backend-v1, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /host-and-status}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: example.org, statusCode: 301}}]
"#,
    );
    let translation = world.translate();
    let outcome = route(&translation, INFRA, "redirect-host-and-status");
    assert_eq!(parent_said(outcome), ((true, REASON_ACCEPTED), (true, REASON_RESOLVED_REFS)));
    let gateway = gateway(&translation, "same-namespace");
    let hosts = &port(gateway, "http-80").virtual_hosts;
    let redirects: Vec<(String, u16)> = hosts[0]
        .routes
        .iter()
        .map(|route| match &route.action {
            ir::Action::Redirect(redirect) => {
                (redirect.hostname.clone().unwrap_or_default(), redirect.status_code)
            }
            other => panic!("{} forwards: {other:?}", route.name),
        })
        .collect();
    assert_eq!(redirects, [("example.org".to_owned(), 302), ("example.org".to_owned(), 301)]);
    assert!(gateway.ir.backends.is_empty(), "the redirect's backendRefs get nothing");
}

/// HTTPRouteRedirectPortAndScheme's HTTP listeners (features `HTTPRoutePortRedirect`,
/// `GatewayPort8080`): a redirect naming neither port nor scheme goes to the Gateway listener's
/// port, which Envoy would drop with the hostname, so it is written in off the scheme's
/// well-known port; with a scheme or a port, the rendering decides as for EnvoyRoutes.
#[test]
fn conformance_httproute_redirect_port_and_scheme_keeps_the_listener_port() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: same-namespace-with-http-listener-on-8080, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - {name: http, port: 8080, protocol: HTTP, allowedRoutes: {namespaces: {from: Same}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: http-route-for-listener-on-port-80, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /scheme-nil-and-port-nil}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: example.org}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: http-route-for-listener-on-port-8080, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace-with-http-listener-on-8080}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /scheme-nil-and-port-nil}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: example.org}}]
  - matches: [{path: {type: PathPrefix, value: /scheme-nil-and-port-80}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: example.org, port: 80}}]
  - matches: [{path: {type: PathPrefix, value: /scheme-https-and-port-nil}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: example.org, scheme: https}}]
  - matches: [{path: {type: PathPrefix, value: /path-only}}]
    filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplaceFullPath, replaceFullPath: /elsewhere}}}]
"#,
    );
    let translation = world.translate();
    let redirect_ports = |gateway_name: &str, port_name: &str| -> Vec<(String, Option<u32>)> {
        let gateway = gateway(&translation, gateway_name);
        let hosts = &port(gateway, port_name).virtual_hosts;
        let mut ports: Vec<(String, Option<u32>)> = hosts[0]
            .routes
            .iter()
            .map(|route| match &route.action {
                ir::Action::Redirect(redirect) => (route.name.clone(), redirect.port),
                other => panic!("{} forwards: {other:?}", route.name),
            })
            .collect();
        ports.sort();
        ports
    };
    let on_80 = "gateway-conformance-infra/http-route-for-listener-on-port-80/rule";
    assert_eq!(
        redirect_ports("same-namespace", "http-80"),
        [(format!("{on_80}/0/match/0"), None)],
        "the scheme's well-known port is left out"
    );
    let on_8080 = "gateway-conformance-infra/http-route-for-listener-on-port-8080/rule";
    assert_eq!(
        redirect_ports("same-namespace-with-http-listener-on-8080", "http-8080"),
        [
            (format!("{on_8080}/0/match/0"), Some(8080)),
            (format!("{on_8080}/1/match/0"), Some(80)),
            (format!("{on_8080}/2/match/0"), None),
            (format!("{on_8080}/3/match/0"), None),
        ],
        "the listener's port where the hostname would drop the request's; the filter's own; \
         the new scheme's (at rendering); the request's Host kept"
    );
}

/// HTTPRouteCrossNamespace: a route of a backend namespace attaches to a Gateway selecting
/// its namespace by label, and sends requests to a Service of its own namespace.
#[test]
fn conformance_httproute_cross_namespace() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: cross-namespace, namespace: gateway-conformance-web-backend}
spec:
  parentRefs: [{name: backend-namespaces, namespace: gateway-conformance-infra}]
  rules: [{backendRefs: [{name: web-backend, port: 8080}]}]
"#,
    );
    let translation = world.translate();
    assert_eq!(
        parent_said(route(&translation, WEB, "cross-namespace")),
        ((true, REASON_ACCEPTED), (true, REASON_RESOLVED_REFS))
    );
    let gateway = gateway(&translation, "backend-namespaces");
    assert_eq!(
        host(&port(gateway, "http-80").virtual_hosts, "*")[0].1,
        to("gateway-conformance-web-backend/web-backend/8080", 1)
    );
}

/// HTTPRouteInvalidCrossNamespaceParentRef: a Gateway whose listener takes routes of its own
/// namespace only does not accept a route of another.
#[test]
fn conformance_httproute_invalid_cross_namespace_parent_ref() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: invalid-cross-namespace-parent-ref, namespace: gateway-conformance-web-backend}
spec:
  parentRefs: [{name: same-namespace, namespace: gateway-conformance-infra}]
  rules: [{backendRefs: [{name: web-backend, port: 8080}]}]
"#,
    );
    let translation = world.translate();
    let (accepted, _) = parent_said(route(&translation, WEB, "invalid-cross-namespace-parent-ref"));
    assert_eq!(accepted, (false, REASON_NOT_ALLOWED_BY_LISTENERS));
    let gateway = gateway(&translation, "same-namespace");
    assert_eq!(listener(gateway, "http").attached_routes, 0);
    assert!(port(gateway, "http-80").virtual_hosts.is_empty(), "nothing routed: 404");
}

const REFERENCE_GRANT_ROUTE: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: reference-grant, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules: [{backendRefs: [{name: web-backend, namespace: gateway-conformance-web-backend, port: 8080}]}]
"#;

/// HTTPRouteReferenceGrant: a ReferenceGrant in the backend's namespace lets the route send
/// requests there.
#[test]
fn conformance_httproute_reference_grant() {
    let mut world = World::conformance();
    world.apply(REFERENCE_GRANT_ROUTE);
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: reference-grant, namespace: gateway-conformance-web-backend}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: gateway-conformance-infra}]
  to: [{group: "", kind: Service, name: web-backend}]
"#,
    );
    let translation = world.translate();
    assert_eq!(
        parent_said(route(&translation, INFRA, "reference-grant")),
        ((true, REASON_ACCEPTED), (true, REASON_RESOLVED_REFS))
    );
    let gateway = gateway(&translation, "same-namespace");
    assert_eq!(
        host(&port(gateway, "http-80").virtual_hosts, "*")[0].1,
        to("gateway-conformance-web-backend/web-backend/8080", 1)
    );
    assert_eq!(gateway.ir.backends[0].name, "gateway-conformance-web-backend/web-backend/8080");
}

/// HTTPRouteInvalidReferenceGrant: a ReferenceGrant naming another Service allows nothing here.
#[test]
fn conformance_httproute_invalid_reference_grant() {
    let mut world = World::conformance();
    world.apply(REFERENCE_GRANT_ROUTE);
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: reference-grant, namespace: gateway-conformance-web-backend}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: gateway-conformance-infra}]
  to: [{group: "", kind: Service, name: not-web-backend}]
"#,
    );
    let translation = world.translate();
    let outcome = route(&translation, INFRA, "reference-grant");
    assert_eq!(parent_said(outcome), ((true, REASON_ACCEPTED), (false, REASON_REF_NOT_PERMITTED)));
    let gateway = gateway(&translation, "same-namespace");
    assert_eq!(host(&port(gateway, "http-80").virtual_hosts, "*")[0].1, ["500=1"], "answered 500");
    assert!(gateway.ir.backends.is_empty(), "no cluster for a Service it may not reach");
}

/// HTTPRouteInvalidCrossNamespaceBackendRef: without a ReferenceGrant, a backend of another
/// namespace does not resolve (`RefNotPermitted`) and its requests are answered 500.
#[test]
fn conformance_httproute_invalid_cross_namespace_backend_ref() {
    let mut world = World::conformance();
    world.apply(REFERENCE_GRANT_ROUTE);
    let translation = world.translate();
    let outcome = route(&translation, INFRA, "reference-grant");
    assert_eq!(parent_said(outcome), ((true, REASON_ACCEPTED), (false, REASON_REF_NOT_PERMITTED)));
    assert_eq!(
        outcome.parents[0].resolved_refs.message,
        "spec.rules[0].backendRefs[0]: Service gateway-conformance-web-backend/web-backend: no ReferenceGrant in namespace \"gateway-conformance-web-backend\" allows HTTPRoutes of namespace \"gateway-conformance-infra\" to reference it; their share of the requests is answered with 500"
    );
    assert_eq!(
        host(&port(gateway(&translation, "same-namespace"), "http-80").virtual_hosts, "*")[0].1,
        ["500=1"]
    );
}

/// HTTPRoutePartiallyInvalidViaInvalidReferenceGrant: one rule's backend is not permitted; the
/// other rule still serves.
#[test]
fn conformance_httproute_partially_invalid_via_invalid_reference_grant() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: reference-grant-wrong-namespace, namespace: gateway-conformance-web-backend}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: gateway-conformance-infra}]
  to: [{group: "", kind: Service, name: app-backend-v2}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: invalid-reference-grant, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /v2}}]
    backendRefs: [{name: app-backend-v2, namespace: gateway-conformance-app-backend, port: 8080}]
  - backendRefs: [{name: infra-backend-v1, port: 8080}]
"#,
    );
    let translation = world.translate();
    let outcome = route(&translation, INFRA, "invalid-reference-grant");
    assert_eq!(parent_said(outcome), ((true, REASON_ACCEPTED), (false, REASON_REF_NOT_PERMITTED)));
    let routes = host(&port(gateway(&translation, "same-namespace"), "http-80").virtual_hosts, "*");
    assert_eq!(routes[0].1, ["500=1"], "/v2 answers 500");
    assert_eq!(routes[1].1, to("gateway-conformance-infra/infra-backend-v1/8080", 1), "/ still served");
}

/// HTTPRouteInvalidNonExistentBackendRef: a Service that does not exist is `BackendNotFound`,
/// answered 500.
#[test]
fn conformance_httproute_invalid_nonexistent_backend_ref() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: invalid-nonexistent-backend-ref, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules: [{backendRefs: [{name: nonexistent, port: 8080}]}]
"#,
    );
    let translation = world.translate();
    let outcome = route(&translation, INFRA, "invalid-nonexistent-backend-ref");
    assert_eq!(parent_said(outcome), ((true, REASON_ACCEPTED), (false, REASON_BACKEND_NOT_FOUND)));
    assert_eq!(
        host(&port(gateway(&translation, "same-namespace"), "http-80").virtual_hosts, "*")[0].1,
        ["500=1"]
    );
}

/// HTTPRouteInvalidBackendRefUnknownKind: a backend of a kind other than Service is
/// `InvalidKind`, answered 500.
#[test]
fn conformance_httproute_invalid_backend_ref_unknown_kind() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: invalid-backend-ref-unknown-kind, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules: [{backendRefs: [{group: unknownkind.example.com, kind: UnknownKind, name: infra-backend-v1, port: 8080}]}]
"#,
    );
    let translation = world.translate();
    let outcome = route(&translation, INFRA, "invalid-backend-ref-unknown-kind");
    assert_eq!(parent_said(outcome), ((true, REASON_ACCEPTED), (false, REASON_INVALID_KIND)));
    assert_eq!(
        host(&port(gateway(&translation, "same-namespace"), "http-80").virtual_hosts, "*")[0].1,
        ["500=1"]
    );
}

/// HTTPRouteInvalidParentRefNotMatchingSectionName: a sectionName naming no listener.
#[test]
fn conformance_httproute_invalid_parent_ref_not_matching_section_name() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: httproute-with-nonmatching-section-name, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace, sectionName: unknownsectionname}]
  rules: [{backendRefs: [{name: infra-backend-v1, port: 8080}]}]
"#,
    );
    let translation = world.translate();
    let outcome = route(&translation, INFRA, "httproute-with-nonmatching-section-name");
    assert_eq!(parent_said(outcome).0, (false, REASON_NO_MATCHING_PARENT));
    assert_eq!(
        outcome.parents[0].accepted.message,
        "Gateway gateway-conformance-infra/same-namespace has no listener named \"unknownsectionname\""
    );
    assert_eq!(listener(gateway(&translation, "same-namespace"), "http").attached_routes, 0);
}

/// HTTPRouteInvalidParentRefNotMatchingListenerPort: a port no listener has.
#[test]
fn conformance_httproute_invalid_parent_ref_not_matching_listener_port() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: httproute-listener-not-matching-route-port, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace, port: 81}]
  rules: [{backendRefs: [{name: infra-backend-v1, port: 8080}]}]
"#,
    );
    let translation = world.translate();
    let outcome = route(&translation, INFRA, "httproute-listener-not-matching-route-port");
    assert_eq!(parent_said(outcome).0, (false, REASON_NO_MATCHING_PARENT));
}

/// HTTPRouteHostnameIntersection: routes attach to the listeners their hostnames intersect,
/// and serve only the intersection; one intersecting none is `NoMatchingListenerHostname`.
#[test]
fn conformance_httproute_hostname_intersection() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: httproute-hostname-intersection, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - {name: listener-1, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: Same}}, hostname: very.specific.com}
  - {name: listener-2, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: Same}}, hostname: "*.wildcard.io"}
  - {name: listener-3, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: Same}}, hostname: "*.anotherwildcard.io"}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: specific-host-matches-listener-specific-host, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: httproute-hostname-intersection, namespace: gateway-conformance-infra}]
  hostnames: [non.matching.com, "*.nonmatchingwildcard.io", very.specific.com]
  rules: [{matches: [{path: {type: PathPrefix, value: /s1}}], backendRefs: [{name: infra-backend-v1, port: 8080}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: specific-host-matches-listener-wildcard-host, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: httproute-hostname-intersection, namespace: gateway-conformance-infra}]
  hostnames: [non.matching.com, wildcard.io, foo.wildcard.io, bar.wildcard.io, foo.bar.wildcard.io]
  rules: [{matches: [{path: {type: PathPrefix, value: /s2}}], backendRefs: [{name: infra-backend-v2, port: 8080}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: wildcard-host-matches-listener-specific-host, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: httproute-hostname-intersection, namespace: gateway-conformance-infra}]
  hostnames: [non.matching.com, "*.specific.com"]
  rules: [{matches: [{path: {type: PathPrefix, value: /s3}}], backendRefs: [{name: infra-backend-v3, port: 8080}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: wildcard-host-matches-listener-wildcard-host, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: httproute-hostname-intersection, namespace: gateway-conformance-infra}]
  hostnames: ["*.anotherwildcard.io"]
  rules: [{matches: [{path: {type: PathPrefix, value: /s4}}], backendRefs: [{name: infra-backend-v1, port: 8080}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: no-intersecting-hosts, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: httproute-hostname-intersection, namespace: gateway-conformance-infra}]
  hostnames: [specific.but.wrong.com, wildcard.io]
  rules: [{matches: [{path: {type: PathPrefix, value: /s5}}], backendRefs: [{name: infra-backend-v2, port: 8080}]}]
"#,
    );
    let translation = world.translate();
    for name in [
        "specific-host-matches-listener-specific-host",
        "specific-host-matches-listener-wildcard-host",
        "wildcard-host-matches-listener-specific-host",
        "wildcard-host-matches-listener-wildcard-host",
    ] {
        assert_eq!(
            parent_said(route(&translation, INFRA, name)),
            ((true, REASON_ACCEPTED), (true, REASON_RESOLVED_REFS))
        );
    }
    let (accepted, _) = parent_said(route(&translation, INFRA, "no-intersecting-hosts"));
    assert_eq!(accepted, (false, REASON_NO_MATCHING_LISTENER_HOSTNAME));

    let gateway = gateway(&translation, "httproute-hostname-intersection");
    let attached: Vec<i32> = gateway.listeners.iter().map(|l| l.attached_routes).collect();
    assert_eq!(attached, [2, 1, 1], "only accepted routes count");
    for listener in &gateway.listeners {
        assert_eq!(said(&listener.conditions, ACCEPTED), (true, REASON_ACCEPTED));
        assert_eq!(said(&listener.conditions, RESOLVED_REFS), (true, REASON_RESOLVED_REFS));
    }
    let hosts = &port(gateway, "http-80").virtual_hosts;
    // Only the intersections are served: non.matching.com, wildcard.io and the like get 404.
    assert_eq!(
        domains(hosts),
        [
            "bar.wildcard.io",
            "foo.bar.wildcard.io",
            "foo.wildcard.io",
            "very.specific.com",
            "*.anotherwildcard.io"
        ]
    );
    let names = |domain| host(hosts, domain).into_iter().map(|(name, _)| name).collect::<Vec<_>>();
    assert_eq!(
        names("very.specific.com"),
        [
            "gateway-conformance-infra/specific-host-matches-listener-specific-host/rule/0/match/0",
            "gateway-conformance-infra/wildcard-host-matches-listener-specific-host/rule/0/match/0"
        ]
    );
    assert_eq!(
        names("foo.wildcard.io"),
        ["gateway-conformance-infra/specific-host-matches-listener-wildcard-host/rule/0/match/0"]
    );
    assert_eq!(
        names("*.anotherwildcard.io"),
        ["gateway-conformance-infra/wildcard-host-matches-listener-wildcard-host/rule/0/match/0"]
    );
}

/// HTTPRouteListenerHostnameMatching: a request goes to the listener with the most specific
/// matching hostname, and only that listener's routes answer it.
#[test]
fn conformance_httproute_listener_hostname_matching() {
    let mut world = World::conformance();
    let mut manifest = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: httproute-listener-hostname-matching, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - {name: listener-1, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: Same}}, hostname: bar.com}
  - {name: listener-2, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: Same}}, hostname: foo.bar.com}
  - {name: listener-3, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: Same}}, hostname: "*.bar.com"}
  - {name: listener-4, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: Same}}, hostname: "*.foo.com"}
"#
    .to_owned();
    for (route, sections, backend) in [
        ("backend-v1", "[listener-1]", "infra-backend-v1"),
        ("backend-v2", "[listener-2]", "infra-backend-v2"),
        ("backend-v3", "[listener-3, listener-4]", "infra-backend-v3"),
    ] {
        let parents = if sections.contains(',') {
            "[{name: httproute-listener-hostname-matching, sectionName: listener-3}, {name: httproute-listener-hostname-matching, sectionName: listener-4}]".to_owned()
        } else {
            format!(
                "[{{name: httproute-listener-hostname-matching, sectionName: {}}}]",
                &sections[1..sections.len() - 1]
            )
        };
        manifest.push_str(&format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {route}, namespace: gateway-conformance-infra}}\nspec:\n  parentRefs: {parents}\n  rules: [{{backendRefs: [{{name: {backend}, port: 8080}}]}}]\n"
        ));
    }
    world.apply(&manifest);
    let translation = world.translate();
    let gateway = gateway(&translation, "httproute-listener-hostname-matching");
    let attached: Vec<i32> = gateway.listeners.iter().map(|l| l.attached_routes).collect();
    assert_eq!(attached, [1, 1, 1, 1]);
    let hosts = &port(gateway, "http-80").virtual_hosts;
    assert_eq!(
        domains(hosts),
        ["bar.com", "foo.bar.com", "*.bar.com", "*.foo.com"],
        "no host for foo.com: 404"
    );
    let backend = |domain| host(hosts, domain).into_iter().map(|(_, targets)| targets).collect::<Vec<_>>();
    assert_eq!(backend("bar.com"), [to("gateway-conformance-infra/infra-backend-v1/8080", 1)]);
    assert_eq!(
        backend("foo.bar.com"),
        [to("gateway-conformance-infra/infra-backend-v2/8080", 1)],
        "listener-3's route does not answer for listener-2's hostname"
    );
    assert_eq!(backend("*.bar.com"), [to("gateway-conformance-infra/infra-backend-v3/8080", 1)]);
    assert_eq!(backend("*.foo.com"), [to("gateway-conformance-infra/infra-backend-v3/8080", 1)]);
}

/// A more specific listener without routes still keeps a less specific listener's routes off
/// its hostname (the spirit of HTTPRouteListenerHostnameMatching): its host answers 404.
#[test]
fn a_listener_without_routes_keeps_its_hostname() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: shadowing, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - {name: wildcard, port: 80, protocol: HTTP, hostname: "*.bar.com"}
  - {name: exact, port: 80, protocol: HTTP, hostname: foo.bar.com}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: wildcard, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: shadowing, sectionName: wildcard}]
  rules: [{backendRefs: [{name: infra-backend-v1, port: 8080}]}]
"#,
    );
    let translation = world.translate();
    let hosts = &port(gateway(&translation, "shadowing"), "http-80").virtual_hosts;
    assert_eq!(domains(hosts), ["foo.bar.com", "*.bar.com"]);
    assert!(host(hosts, "foo.bar.com").is_empty());
    assert_eq!(host(hosts, "*.bar.com").len(), 1);
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

/// GatewayInvalidRouteKind: a listener asking only for kinds the operator does not implement
/// supports none (`InvalidRouteKinds`); one also asking for HTTPRoute supports HTTPRoute.
#[test]
fn conformance_gateway_invalid_route_kind() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gateway-only-invalid-route-kind, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}, kinds: [{kind: InvalidRoute}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gateway-supported-and-invalid-route-kind, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}, kinds: [{kind: InvalidRoute}, {kind: HTTPRoute}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: gateway-supported-and-invalid-route-kind-control, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: gateway-supported-and-invalid-route-kind, sectionName: http}]
  hostnames: [supported-route-kind.example.com]
  rules: [{backendRefs: [{name: infra-backend-v1, port: 8080}]}]
"#,
    );
    let translation = world.translate();
    let only_invalid = listener(gateway(&translation, "gateway-only-invalid-route-kind"), "http");
    assert!(only_invalid.supported_kinds.is_empty());
    assert_eq!(said(&only_invalid.conditions, RESOLVED_REFS), (false, REASON_INVALID_ROUTE_KINDS));
    assert_eq!(only_invalid.attached_routes, 0);
    let mixed_gateway = gateway(&translation, "gateway-supported-and-invalid-route-kind");
    let mixed = listener(mixed_gateway, "http");
    assert_eq!(
        serde_json::to_value(&mixed.supported_kinds).unwrap(),
        json!([{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}])
    );
    assert_eq!(said(&mixed.conditions, RESOLVED_REFS), (false, REASON_INVALID_ROUTE_KINDS));
    assert_eq!(mixed.attached_routes, 1);
    assert_eq!(said(&mixed.conditions, PROGRAMMED), (true, REASON_PROGRAMMED), "HTTPRoutes are still served");
    assert_eq!(domains(&port(mixed_gateway, "http-80").virtual_hosts), ["supported-route-kind.example.com"]);
}

/// GatewayInvalidTLSConfiguration: a missing Secret, a reference of another group or kind, a
/// Secret that is not PEM: `ResolvedRefs` False `InvalidCertificateRef`, nothing attached, not
/// served; the Gateway's HTTP listener still is.
#[test]
fn conformance_gateway_invalid_tls_configuration() {
    let mut world = World::conformance();
    let mut manifest = String::new();
    for (name, reference) in [
        (
            "gateway-certificate-nonexistent-secret",
            r#"{group: "", kind: Secret, name: nonexistent-certificate}"#,
        ),
        (
            "gateway-certificate-unsupported-group",
            "{group: wrong.group.company.io, kind: Secret, name: tls-validity-checks-certificate}",
        ),
        (
            "gateway-certificate-unsupported-kind",
            r#"{group: "", kind: WrongKind, name: tls-validity-checks-certificate}"#,
        ),
        ("gateway-certificate-malformed-secret", r#"{group: "", kind: Secret, name: malformed-certificate}"#),
    ] {
        manifest.push_str(&format!(
            r#"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {name}, namespace: gateway-conformance-infra}}
spec:
  gatewayClassName: "{{GATEWAY_CLASS_NAME}}"
  listeners:
  - {{name: http, port: 80, protocol: HTTP, allowedRoutes: {{namespaces: {{from: Same}}}}}}
  - name: https
    port: 443
    protocol: HTTPS
    allowedRoutes: {{namespaces: {{from: All}}}}
    tls: {{certificateRefs: [{reference}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}-control, namespace: gateway-conformance-infra}}
spec:
  parentRefs: [{{name: {name}, sectionName: http}}]
  rules: [{{backendRefs: [{{name: infra-backend-v1, port: 8080}}]}}]
---
"#
        ));
    }
    manifest.push_str(
        r#"apiVersion: v1
kind: Secret
metadata: {name: malformed-certificate, namespace: gateway-conformance-infra}
data: {tls.crt: SGVsbG8gd29ybGQK, tls.key: SGVsbG8gd29ybGQK}
type: kubernetes.io/tls"#,
    );
    world.apply(&manifest);
    let translation = world.translate();
    for name in [
        "gateway-certificate-nonexistent-secret",
        "gateway-certificate-unsupported-group",
        "gateway-certificate-unsupported-kind",
        "gateway-certificate-malformed-secret",
    ] {
        let gateway = gateway(&translation, name);
        let https = listener(gateway, "https");
        assert_eq!(said(&https.conditions, RESOLVED_REFS), (false, REASON_INVALID_CERTIFICATE_REF), "{name}");
        assert_eq!(said(&https.conditions, PROGRAMMED), (false, REASON_INVALID), "{name}");
        assert_eq!(https.attached_routes, 0);
        assert_eq!(https.supported_kinds.len(), 1);
        assert_eq!(listener(gateway, "http").attached_routes, 1);
        assert_eq!(
            said(&gateway.conditions, ACCEPTED),
            (true, REASON_ACCEPTED),
            "{name}: its HTTP listener is valid"
        );
        let ports: Vec<&str> = gateway.ir.listeners.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(ports, ["http-80"], "{name}: the HTTPS listener is not served");
        assert!(gateway.ir.secrets.is_empty());
    }
    let malformed = listener(gateway(&translation, "gateway-certificate-malformed-secret"), "https");
    assert_eq!(
        condition(&malformed.conditions, RESOLVED_REFS).message,
        "tls.certificateRefs[0]: Secret gateway-conformance-infra/malformed-certificate: tls.crt holds no PEM certificate"
    );
}

fn secret_gateway(reference_namespace: &str) -> String {
    format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gateway-secret-reference-grant, namespace: gateway-conformance-infra}}
spec:
  gatewayClassName: "{{GATEWAY_CLASS_NAME}}"
  listeners:
  - name: https
    port: 443
    protocol: HTTPS
    allowedRoutes: {{namespaces: {{from: All}}}}
    tls:
      certificateRefs: [{{group: "", kind: Secret, name: certificate, namespace: {reference_namespace}}}]
"#
    )
}

fn https_resolved(world: &World) -> (bool, &'static str) {
    let translation = world.translate();
    said(
        &listener(gateway(&translation, "gateway-secret-reference-grant"), "https").conditions,
        RESOLVED_REFS,
    )
}

/// GatewaySecretReferenceGrantAllInNamespace: a ReferenceGrant to every Secret of a namespace.
#[test]
fn conformance_gateway_secret_reference_grant_all_in_namespace() {
    let mut world = World::conformance();
    world.secrets.push(tls_secret(WEB, "certificate"));
    world.apply(&secret_gateway(WEB));
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: reference-grant-all-in-namespace, namespace: gateway-conformance-web-backend}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: gateway-conformance-infra}]
  to: [{group: "", kind: Secret}]
"#,
    );
    assert_eq!(https_resolved(&world), (true, REASON_RESOLVED_REFS));
    let translation = world.translate();
    let gateway = gateway(&translation, "gateway-secret-reference-grant");
    assert_eq!(said(&listener(gateway, "https").conditions, PROGRAMMED), (true, REASON_PROGRAMMED));
    assert_eq!(gateway.ir.secrets[0].name, "gateway-conformance-web-backend/certificate");
}

/// GatewaySecretReferenceGrantSpecific: a ReferenceGrant to the one Secret.
#[test]
fn conformance_gateway_secret_reference_grant_specific() {
    let mut world = World::conformance();
    world.secrets.push(tls_secret(WEB, "certificate"));
    world.apply(&secret_gateway(WEB));
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: reference-grant-specific, namespace: gateway-conformance-web-backend}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: gateway-conformance-infra}]
  to: [{group: "", kind: Secret, name: certificate}]
"#,
    );
    assert_eq!(https_resolved(&world), (true, REASON_RESOLVED_REFS));
}

/// GatewaySecretMissingReferenceGrant: a Secret of another namespace without a grant.
#[test]
fn conformance_gateway_secret_missing_reference_grant() {
    let mut world = World::conformance();
    world.secrets.push(tls_secret(WEB, "certificate"));
    world.apply(&secret_gateway(WEB));
    assert_eq!(https_resolved(&world), (false, REASON_REF_NOT_PERMITTED));
    let translation = world.translate();
    let gateway = gateway(&translation, "gateway-secret-reference-grant");
    assert_eq!(said(&gateway.conditions, ACCEPTED), (false, REASON_LISTENERS_NOT_VALID));
    assert!(gateway.ir.secrets.is_empty(), "a Secret it may not read is never served");
}

/// GatewaySecretInvalidReferenceGrant: grants in the wrong namespace, from the wrong group,
/// kind or namespace, to the wrong group, kind or name: none allows the reference.
#[test]
fn conformance_gateway_secret_invalid_reference_grant() {
    let mut world = World::conformance();
    world.secrets.push(tls_secret(WEB, "certificate"));
    world.apply(&secret_gateway(WEB));
    let grants = [
        (APP, "gateway.networking.k8s.io", "Gateway", INFRA, "", "Secret", "certificate"),
        (WEB, "not-the-group-youre-looking-for", "Gateway", INFRA, "", "Secret", "certificate"),
        (WEB, "gateway.networking.k8s.io", "HTTPRoute", INFRA, "", "Secret", "certificate"),
        (
            WEB,
            "gateway.networking.k8s.io",
            "Gateway",
            "not-the-namespace-youre-looking-for",
            "",
            "Secret",
            "certificate",
        ),
        (
            WEB,
            "gateway.networking.k8s.io",
            "Gateway",
            INFRA,
            "not-the-group-youre-looking-for",
            "Secret",
            "certificate",
        ),
        (WEB, "gateway.networking.k8s.io", "Gateway", INFRA, "", "Service", "certificate"),
        (
            WEB,
            "gateway.networking.k8s.io",
            "Gateway",
            INFRA,
            "",
            "Secret",
            "not-the-certificate-youre-looking-for",
        ),
    ];
    for (i, (namespace, from_group, from_kind, from_namespace, to_group, to_kind, to_name)) in
        grants.into_iter().enumerate()
    {
        world.grants.push(Arc::new(read(
            json!({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
            "metadata": {"name": format!("grant-{i}"), "namespace": namespace},
            "spec": {"from": [{"group": from_group, "kind": from_kind, "namespace": from_namespace}],
                     "to": [{"group": to_group, "kind": to_kind, "name": to_name}]}}),
        )));
    }
    assert_eq!(https_resolved(&world), (false, REASON_REF_NOT_PERMITTED));
}

/// GatewayWithAttachedRoutes: `attachedRoutes` counts the routes attached to each listener
/// (namespaces selected by the label the API server puts on every namespace).
#[test]
fn conformance_gateway_with_attached_routes() {
    let mut world = World::conformance();
    let selector = "allowedRoutes: {kinds: [{kind: HTTPRoute}], namespaces: {from: Selector, selector: {matchLabels: {kubernetes.io/metadata.name: gateway-conformance-infra}}}}";
    let mut manifest = String::new();
    for gateway in ["gateway-with-one-attached-route", "gateway-with-two-attached-routes"] {
        manifest.push_str(&format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {gateway}, namespace: gateway-conformance-infra}}\nspec:\n  gatewayClassName: envoy-operator\n  listeners:\n  - {{name: http, port: 80, protocol: HTTP, {selector}}}\n---\n"
        ));
    }
    for (route, gateway) in [
        ("http-route-1", "gateway-with-one-attached-route"),
        ("http-route-2", "gateway-with-two-attached-routes"),
        ("http-route-3", "gateway-with-two-attached-routes"),
    ] {
        manifest.push_str(&format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {route}, namespace: gateway-conformance-infra}}\nspec:\n  parentRefs: [{{kind: Gateway, name: {gateway}, namespace: gateway-conformance-infra}}]\n  rules: [{{backendRefs: [{{name: infra-backend-v1, port: 8080}}]}}]\n---\n"
        ));
    }
    world.apply(manifest.trim_end_matches("---\n"));
    let translation = world.translate();
    for (gateway_name, attached) in
        [("gateway-with-one-attached-route", 1), ("gateway-with-two-attached-routes", 2)]
    {
        let http = listener(gateway(&translation, gateway_name), "http");
        assert_eq!(http.attached_routes, attached, "{gateway_name}");
        assert_eq!(said(&http.conditions, ACCEPTED), (true, REASON_ACCEPTED));
        assert_eq!(said(&http.conditions, RESOLVED_REFS), (true, REASON_RESOLVED_REFS));
        assert_eq!(
            serde_json::to_value(&http.supported_kinds).unwrap(),
            json!([{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}])
        );
    }
}

/// GatewayWithAttachedRoutesWithPort8080 (feature `GatewayPort8080`): a Gateway with listeners
/// on 8080 and 80; the route naming `http` by `sectionName` attaches to it alone, and both
/// listeners are valid and served (8080 on its own port, unprivileged already).
#[test]
fn conformance_gateway_with_attached_routes_with_port_8080() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gateway-with-two-listeners-and-one-attached-route, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - {name: http-unattached, port: 8080, protocol: HTTP, allowedRoutes: {kinds: [{kind: HTTPRoute}], namespaces: {from: All}}}
  - {name: http, port: 80, protocol: HTTP, allowedRoutes: {kinds: [{kind: HTTPRoute}], namespaces: {from: All}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: http-route-4-port8080, namespace: gateway-conformance-infra}
spec:
  parentRefs:
  - {kind: Gateway, name: gateway-with-two-listeners-and-one-attached-route, namespace: gateway-conformance-infra, sectionName: http}
  rules: [{backendRefs: [{name: infra-backend-v1, port: 8080}]}]
"#,
    );
    let translation = world.translate();
    let gateway = gateway(&translation, "gateway-with-two-listeners-and-one-attached-route");
    for (name, attached) in [("http-unattached", 0), ("http", 1)] {
        let listener = listener(gateway, name);
        assert_eq!(listener.attached_routes, attached, "{name}");
        assert_eq!(said(&listener.conditions, ACCEPTED), (true, REASON_ACCEPTED), "{name}");
        assert_eq!(said(&listener.conditions, RESOLVED_REFS), (true, REASON_RESOLVED_REFS), "{name}");
        assert_eq!(
            serde_json::to_value(&listener.supported_kinds).unwrap(),
            json!([{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}])
        );
    }
    assert_eq!(port(gateway, "http-8080").port, 8080);
    assert_eq!(port(gateway, "http-80").port, 10080);
    let outcome = route(&translation, INFRA, "http-route-4-port8080");
    assert_eq!(parent_said(outcome), ((true, REASON_ACCEPTED), (true, REASON_RESOLVED_REFS)));
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

/// HTTPRouteMatching: paths, headers, by Gateway API's precedence.
#[test]
fn conformance_httproute_matching() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: matching, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}, {headers: [{name: version, value: one}]}]
    backendRefs: [{name: infra-backend-v1, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /v2}}, {headers: [{name: version, value: two}]}]
    backendRefs: [{name: infra-backend-v2, port: 8080}]
"#,
    );
    let translation = world.translate();
    let hosts = &port(gateway(&translation, "same-namespace"), "http-80").virtual_hosts;
    let order: Vec<String> = host(hosts, "*").into_iter().map(|(name, _)| name).collect();
    assert_eq!(
        order,
        [
            "gateway-conformance-infra/matching/rule/1/match/0", // /v2
            "gateway-conformance-infra/matching/rule/0/match/1", // / and a header: the first rule first
            "gateway-conformance-infra/matching/rule/1/match/1",
            "gateway-conformance-infra/matching/rule/0/match/0", // / alone
        ]
    );
    let with_header = &hosts[0].routes[1];
    assert_eq!(with_header.headers[0].name, "version");
}

/// HTTPRouteMatchingAcrossRoutes: the matches of every route serving a host are ordered
/// together, by their matches: `/v2` of the `*.com` route beats `/` of the `example.com` one.
#[test]
fn conformance_httproute_matching_across_routes() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: matching-part1, namespace: gateway-conformance-infra, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  parentRefs: [{name: same-namespace}]
  hostnames: [example.com, example.net]
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}, {headers: [{name: version, value: one}]}]
    backendRefs: [{name: infra-backend-v1, port: 8080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: matching-part2, namespace: gateway-conformance-infra, creationTimestamp: "2024-01-01T00:00:01Z"}
spec:
  parentRefs: [{name: same-namespace}]
  hostnames: ["*.com"]
  rules:
  - matches: [{path: {type: PathPrefix, value: /v2}}, {headers: [{name: version, value: two}]}]
    backendRefs: [{name: infra-backend-v2, port: 8080}]
"#,
    );
    let translation = world.translate();
    let hosts = &port(gateway(&translation, "same-namespace"), "http-80").virtual_hosts;
    assert_eq!(domains(hosts), ["example.com", "example.net", "*.com"]);
    let backends = |domain| host(hosts, domain).into_iter().map(|(_, t)| t[0].clone()).collect::<Vec<_>>();
    let v1 = "gateway-conformance-infra/infra-backend-v1/8080=1";
    let v2 = "gateway-conformance-infra/infra-backend-v2/8080=1";
    // example.com: /v2 → v2; then the header matches, the older route's first (version: one →
    // v1, version: two → v2); then / → v1.
    assert_eq!(backends("example.com"), [v2, v1, v2, v1]);
    // example.net is not under *.com: v2's matches never apply.
    assert_eq!(backends("example.net"), [v1, v1]);
}

/// HTTPRouteWeight: requests are shared by weight.
#[test]
fn conformance_httproute_weight() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: weighted-backends, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules:
  - backendRefs:
    - {name: infra-backend-v1, port: 8080, weight: 70}
    - {name: infra-backend-v2, port: 8080, weight: 30}
    - {name: infra-backend-v3, port: 8080, weight: 0}
"#,
    );
    let translation = world.translate();
    let hosts = &port(gateway(&translation, "same-namespace"), "http-80").virtual_hosts;
    assert_eq!(
        host(hosts, "*")[0].1,
        [
            "gateway-conformance-infra/infra-backend-v1/8080=70",
            "gateway-conformance-infra/infra-backend-v2/8080=30"
        ]
    );
}

/// HTTPRouteRequestHeaderModifier: set, add and remove request headers.
#[test]
fn conformance_httproute_request_header_modifier() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: request-header-modifier, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /set}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set: [{name: X-Header-Set, value: set-overwrites-values}]
        add: [{name: X-Header-Add, value: add-appends-values}]
        remove: [X-Header-Remove]
    backendRefs: [{name: infra-backend-v1, port: 8080}]
"#,
    );
    let translation = world.translate();
    assert_eq!(parent_said(route(&translation, INFRA, "request-header-modifier")).0, (true, REASON_ACCEPTED));
    let hosts = &port(gateway(&translation, "same-namespace"), "http-80").virtual_hosts;
    let changes = &hosts[0].routes[0].request_headers;
    assert_eq!(
        changes.set,
        [ir::Header { name: "x-header-set".into(), value: "set-overwrites-values".into() }]
    );
    assert_eq!(changes.add, [ir::Header { name: "x-header-add".into(), value: "add-appends-values".into() }]);
    assert_eq!(changes.remove, ["x-header-remove"]);
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

/// A ResponseHeaderModifier is checked as Gateway API checks header modifiers: one action per
/// header name, valid names, no `Host`, one such filter per rule. The route is refused.
#[test]
fn invalid_response_header_modifiers_are_unsupported_values() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad-response-headers, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules:
  - filters:
    - type: ResponseHeaderModifier
      responseHeaderModifier:
        set: [{name: X-A, value: one}, {name: Host, value: h}]
        remove: [x-a, "bad name"]
    - type: ResponseHeaderModifier
      responseHeaderModifier: {remove: [x-b]}
    backendRefs: [{name: infra-backend-v1, port: 8080}]
"#,
    );
    let translation = world.translate();
    let accepted = &route(&translation, INFRA, "bad-response-headers").parents[0].accepted;
    assert_eq!((accepted.status, accepted.reason), (false, REASON_UNSUPPORTED_VALUE));
    for expected in [
        "spec.rules[0].filters[0].responseHeaderModifier.set[1]: the Host header of a response cannot be changed",
        "spec.rules[0].filters[0].responseHeaderModifier.remove[0]: header \"x-a\" is already in set",
        "spec.rules[0].filters[0].responseHeaderModifier.remove[1]: \"bad name\"",
        "spec.rules[0].filters[1]: a rule may have one ResponseHeaderModifier filter only",
    ] {
        assert!(accepted.message.contains(expected), "{expected:?} not in {:?}", accepted.message);
    }
    assert!(port(gateway(&translation, "same-namespace"), "http-80").virtual_hosts.is_empty());
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
    assert_eq!(mirrors("rule/0/match/0"), [ir::Mirror { backend: v2.clone(), percent: None }]);
    assert_eq!(mirrors("rule/1/match/0"), [ir::Mirror { backend: v2.clone(), percent: Some(35) }]);
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

/// HTTPRouteRequestMultipleMirrors: two mirrors on one rule, both rendered, in order.
#[test]
fn conformance_httproute_request_multiple_mirrors() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: request-multiple-mirrors, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /multi-mirror}}]
    filters:
    - type: RequestMirror
      requestMirror: {backendRef: {name: infra-backend-v2, port: 8080}}
    - type: RequestMirror
      requestMirror: {backendRef: {name: infra-backend-v3, port: 8080}}
    backendRefs: [{name: infra-backend-v1, port: 8080}]
"#,
    );
    let translation = world.translate();
    let gateway = gateway(&translation, "same-namespace");
    let ir::Action::Forward(forward) = &port(gateway, "http-80").virtual_hosts[0].routes[0].action else {
        panic!("not forwarded")
    };
    let mirrored: Vec<&str> = forward.mirrors.iter().map(|m| m.backend.as_str()).collect();
    assert_eq!(
        mirrored,
        [
            "gateway-conformance-infra/infra-backend-v2/8080",
            "gateway-conformance-infra/infra-backend-v3/8080"
        ]
    );
    assert_eq!(gateway.ir.backends.len(), 3);
}

/// A mirror's backendRef resolves as a backendRef does: one that does not (no such Service,
/// another namespace without a ReferenceGrant) makes `ResolvedRefs` false with its reason and
/// mirrors nothing, while the route still serves.
#[test]
fn unresolved_mirrors_mirror_nothing() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: mirror-nowhere, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules:
  - filters:
    - type: RequestMirror
      requestMirror: {backendRef: {name: no-such-service, port: 8080}}
    - type: RequestMirror
      requestMirror: {backendRef: {name: web-backend, namespace: gateway-conformance-web-backend, port: 8080}}
    backendRefs: [{name: infra-backend-v1, port: 8080}]
"#,
    );
    let translation = world.translate();
    let parent = &route(&translation, INFRA, "mirror-nowhere").parents[0];
    assert_eq!((parent.accepted.status, parent.accepted.reason), (true, REASON_ACCEPTED));
    let resolved = &parent.resolved_refs;
    assert_eq!((resolved.status, resolved.reason), (false, crate::route::backend::REASON_BACKEND_NOT_FOUND));
    assert!(
        resolved.message.starts_with(
            "spec.rules[0].filters[0].requestMirror.backendRef: Service \"no-such-service\" not found"
        ),
        "{}",
        resolved.message
    );
    assert!(
        resolved.message.contains("spec.rules[0].filters[1].requestMirror.backendRef: Service gateway-conformance-web-backend/web-backend: no ReferenceGrant"),
        "{}",
        resolved.message
    );
    let gateway = gateway(&translation, "same-namespace");
    let ir::Action::Forward(forward) = &port(gateway, "http-80").virtual_hosts[0].routes[0].action else {
        panic!("not forwarded")
    };
    assert!(forward.mirrors.is_empty(), "{:?}", forward.mirrors);
    assert_eq!(forward.backends.len(), 1);
    assert_eq!(gateway.ir.backends.len(), 1);
}

// The operator's own rules.

/// A Gateway's fleet: an Envoy named `<gateway>-<class>`, labelled with the Gateway, owned by
/// it, with one port per Gateway port bound unprivileged, behind a LoadBalancer Service.
#[test]
fn a_gateways_fleet_is_an_envoy_it_owns() {
    let world = World::conformance();
    let translation = world.translate();
    let gateway = gateway(&translation, "same-namespace");
    let fleet = serde_json::to_value(gateway.fleet.as_ref().expect("a fleet")).unwrap();
    assert_eq!(fleet["metadata"]["name"], "same-namespace-envoy-operator");
    assert_eq!(fleet["metadata"]["namespace"], INFRA);
    assert_eq!(fleet["metadata"]["labels"][GATEWAY_LABEL], "same-namespace");
    assert_eq!(
        fleet["metadata"]["ownerReferences"],
        json!([{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "name": "same-namespace",
                "uid": "uid-same-namespace", "controller": true}])
    );
    assert_eq!(fleet["spec"]["ports"], json!([{"name": "http-80", "port": 80, "targetPort": 10080}]));
    assert_eq!(fleet["spec"]["serviceType"], "LoadBalancer");
    assert!(fleet["spec"].get("xds").is_none(), "served by the operator");
}

/// The class's parametersRef names the template of its fleets.
#[test]
fn a_class_takes_its_fleets_settings_from_an_envoy() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: example.com/v1
kind: Envoy
metadata: {name: gateway-template, namespace: envoy-operator}
spec: {replicas: 3, image: "envoyproxy/envoy:v1.35.0", serviceType: NodePort, accessLog: false, name: ignored, ports: [{name: x, port: 1}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: envoy-operator, generation: 1}
spec:
  controllerName: example.com/envoy-operator
  parametersRef: {group: example.com, kind: Envoy, name: gateway-template, namespace: envoy-operator}
"#,
    );
    let translation = world.translate();
    assert_eq!(said(&translation.classes[0].conditions, ACCEPTED), (true, REASON_ACCEPTED));
    let gateway = gateway(&translation, "same-namespace");
    let fleet = gateway.fleet.as_ref().expect("a fleet");
    assert_eq!(fleet.spec.replicas, Some(3));
    assert_eq!(fleet.spec.image.as_deref(), Some("envoyproxy/envoy:v1.35.0"));
    assert_eq!(fleet.spec.service_type, Some(ServiceType::NodePort));
    assert_eq!(fleet.spec.name, None, "the template's name is ignored");
    assert_eq!(fleet.spec.ports[0].name, "http-80", "and so are its ports");
    assert!(!port(gateway, "http-80").access_log);

    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: envoy-operator, generation: 2}
spec:
  controllerName: example.com/envoy-operator
  parametersRef: {group: example.com, kind: Envoy, name: missing, namespace: envoy-operator}
"#,
    );
    let translation = world.translate();
    let accepted = condition(&translation.classes[0].conditions, ACCEPTED);
    assert_eq!((accepted.status, accepted.reason), (false, REASON_INVALID_PARAMETERS));
    assert_eq!(
        accepted.message,
        "parametersRef names the Envoy envoy-operator/missing, which does not exist"
    );
    assert!(translation.gateways.is_empty(), "a class not accepted serves no Gateway");
}

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

/// `Programmed` follows the fleet: the address of the Service it controls, then a ready proxy.
#[test]
fn a_gateway_is_programmed_once_its_fleet_is_ready_and_reachable() {
    let mut world = World::conformance();
    let programmed =
        |world: &World| said(&gateway(&world.translate(), "same-namespace").conditions, PROGRAMMED);
    assert_eq!(programmed(&world), (false, REASON_ADDRESS_NOT_ASSIGNED));
    world.fleets.push(Arc::new(stored_fleet(&world, json!({}))));
    world.services.push(fleet_service("same-namespace-envoy-operator", Some("uid-fleet"), json!({})));
    assert_eq!(
        gateway(&world.translate(), "same-namespace").addresses,
        [api::GatewayStatusAddress { address_type: "IPAddress".into(), value: "10.96.0.10".into() }]
    );
    assert_eq!(programmed(&world), (false, REASON_PENDING));
    world.fleets = vec![Arc::new(stored_fleet(&world, json!({"readyReplicas": 1})))];
    assert_eq!(programmed(&world), (true, REASON_PROGRAMMED));
    let balanced =
        json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}, {"hostname": "lb.example.com"}]}});
    world.services = vec![fleet_service("same-namespace-envoy-operator", Some("uid-fleet"), balanced)];
    let addresses: Vec<(String, String)> = gateway(&world.translate(), "same-namespace")
        .addresses
        .iter()
        .map(|a| (a.address_type.clone(), a.value.clone()))
        .collect();
    assert_eq!(
        addresses,
        [
            ("IPAddress".to_owned(), "203.0.113.7".to_owned()),
            ("Hostname".to_owned(), "lb.example.com".to_owned())
        ]
    );
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

/// An Envoy of the fleet's name that is not the Gateway's fleet is never taken over.
#[test]
fn an_envoy_of_the_fleets_name_is_not_taken_over() {
    let mut world = World::conformance();
    world.fleets.push(Arc::new(read(json!({"apiVersion": "example.com/v1", "kind": "Envoy",
        "metadata": {"name": "same-namespace-envoy-operator", "namespace": INFRA}, "spec": {}}))));
    let translation = world.translate();
    let gateway = gateway(&translation, "same-namespace");
    assert!(gateway.fleet.is_none());
    let programmed = condition(&gateway.conditions, PROGRAMMED);
    assert_eq!((programmed.status, programmed.reason), (false, REASON_INVALID));
    assert!(
        programmed
            .message
            .contains("gateway-conformance-infra/same-namespace-envoy-operator is not this Gateway's fleet"),
        "{}",
        programmed.message
    );
}

/// A Gateway of any valid name has a fleet of a valid name (a dotted name is spelled as a DNS
/// label, with a hash); only one too long to label its fleet is not accepted.
#[test]
fn a_gateway_whose_name_cannot_label_a_fleet_is_not_accepted() {
    let mut world = World::conformance();
    let long = "g".repeat(64);
    world.apply(&format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: dotted.name, namespace: gateway-conformance-infra}}
spec:
  gatewayClassName: "{{GATEWAY_CLASS_NAME}}"
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: {long}, namespace: gateway-conformance-infra}}
spec:
  gatewayClassName: "{{GATEWAY_CLASS_NAME}}"
  listeners: [{{name: http, port: 80, protocol: HTTP}}]
"#
    ));
    let translation = world.translate();
    let dotted = gateway(&translation, "dotted.name");
    assert_eq!(said(&dotted.conditions, ACCEPTED), (true, REASON_ACCEPTED));
    let fleet_name = dotted.fleet.as_ref().and_then(|fleet| fleet.metadata.name.clone());
    assert_eq!(fleet_name, Some(fleet::name("dotted.name", CLASS)));

    let long = gateway(&translation, &long);
    assert!(long.fleet.is_none());
    let accepted = condition(&long.conditions, ACCEPTED);
    assert_eq!((accepted.status, accepted.reason), (false, REASON_INVALID));
    assert_eq!(
        accepted.message,
        "the Gateway's name is longer than 63 characters: it cannot label its fleet (envoy-operator.example.com/gateway)"
    );
}

/// A Gateway with nothing to serve has no fleet, and so no address even where its fleet's
/// Service still stands: every listener in conflict, or none valid.
#[test]
fn a_gateway_without_a_valid_listener_has_no_fleet() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: same-namespace, namespace: gateway-conformance-infra, uid: uid-same-namespace, generation: 2}
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - {name: https, port: 80, protocol: HTTPS, tls: {certificateRefs: [{name: tls-validity-checks-certificate}]}}
"#,
    );
    world.fleets.push(Arc::new(stored_fleet(&World::conformance(), json!({"readyReplicas": 1}))));
    world.services.push(fleet_service("same-namespace-envoy-operator", Some("uid-fleet"), json!({})));
    let translation = world.translate();
    let gateway = gateway(&translation, "same-namespace");
    assert_eq!(said(&gateway.conditions, ACCEPTED), (false, REASON_LISTENERS_NOT_VALID));
    assert!(gateway.fleet.is_none(), "no proxies for a Gateway with nothing to serve");
    assert!(gateway.addresses.is_empty());
    let programmed = condition(&gateway.conditions, PROGRAMMED);
    assert_eq!((programmed.status, programmed.reason), (false, REASON_INVALID));
    assert_eq!(programmed.message, "the Gateway is not accepted: it has no fleet");
}

/// Listeners sharing a port conflict on protocol, or on hostname; other protocols and the
/// proxies' reserved ports are refused; requested addresses are unsupported.
#[test]
fn listener_conflicts_and_unsupported_listeners() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: conflicts, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: "{GATEWAY_CLASS_NAME}"
  addresses: [{type: IPAddress, value: 192.0.2.1}]
  listeners:
  - {name: http-a, port: 80, protocol: HTTP, hostname: a.example.com}
  - {name: http-a-again, port: 80, protocol: HTTP, hostname: a.example.com}
  - {name: http-b, port: 80, protocol: HTTP, hostname: b.example.com}
  - {name: mixed-http, port: 8443, protocol: HTTP}
  - {name: mixed-https, port: 8443, protocol: HTTPS, tls: {certificateRefs: [{name: tls-validity-checks-certificate}]}}
  - {name: tcp, port: 9000, protocol: TCP}
  - {name: admin, port: 9901, protocol: HTTP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: to-conflicted, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: conflicts, sectionName: http-a}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: to-valid, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: conflicts, sectionName: http-b}]
"#,
    );
    let translation = world.translate();
    assert_eq!(
        parent_said(route(&translation, INFRA, "to-conflicted")).0,
        (false, REASON_NOT_ALLOWED_BY_LISTENERS)
    );
    assert_eq!(parent_said(route(&translation, INFRA, "to-valid")).0, (true, REASON_ACCEPTED));
    let gateway = gateway(&translation, "conflicts");
    let conflicted = |name| said(&listener(gateway, name).conditions, CONFLICTED);
    assert_eq!(conflicted("http-a"), (true, REASON_HOSTNAME_CONFLICT));
    assert_eq!(conflicted("http-a-again"), (true, REASON_HOSTNAME_CONFLICT));
    assert_eq!(conflicted("http-b"), (false, REASON_NO_CONFLICTS));
    assert_eq!(conflicted("mixed-http"), (true, REASON_PROTOCOL_CONFLICT));
    assert_eq!(conflicted("mixed-https"), (true, REASON_PROTOCOL_CONFLICT));
    assert_eq!(said(&listener(gateway, "tcp").conditions, ACCEPTED), (false, REASON_UNSUPPORTED_PROTOCOL));
    assert!(listener(gateway, "tcp").supported_kinds.is_empty());
    assert_eq!(said(&listener(gateway, "admin").conditions, ACCEPTED), (false, REASON_PORT_UNAVAILABLE));
    let programmed: Vec<bool> =
        gateway.listeners.iter().map(|l| condition(&l.conditions, PROGRAMMED).status).collect();
    assert_eq!(programmed, [false, false, true, false, false, false, false]);
    assert_eq!(said(&gateway.conditions, ACCEPTED), (false, REASON_UNSUPPORTED_ADDRESS));
    assert!(gateway.fleet.is_none(), "a Gateway not accepted has no fleet");
    let ports: Vec<&str> = gateway.ir.listeners.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(ports, ["http-80"], "only http-b is served");
}

/// A route using a filter the operator does not implement, or that its rules refuse, is not
/// accepted, and says why.
#[test]
fn unsupported_filters_and_invalid_routes_are_unsupported_values() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: extension, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules:
  - filters: [{type: ExtensionRef, extensionRef: {group: example.com, kind: Filter, name: f}}]
    backendRefs: [{name: infra-backend-v1, port: 8080}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad-path, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: same-namespace}]
  rules: [{matches: [{path: {type: PathPrefix, value: no-slash}}], backendRefs: [{name: infra-backend-v1, port: 8080}]}]
"#,
    );
    let translation = world.translate();
    let extension = &route(&translation, INFRA, "extension").parents[0].accepted;
    assert_eq!((extension.status, extension.reason), (false, REASON_UNSUPPORTED_VALUE));
    assert_eq!(
        extension.message,
        "spec.rules[0].filters[0]: filter type \"ExtensionRef\" is not supported (supported: RequestHeaderModifier, ResponseHeaderModifier, RequestMirror, RequestRedirect, URLRewrite)"
    );
    let bad = &route(&translation, INFRA, "bad-path").parents[0].accepted;
    assert_eq!((bad.status, bad.reason), (false, REASON_UNSUPPORTED_VALUE));
    assert!(
        bad.message.starts_with("The HTTPRoute \"bad-path\" is invalid: spec.rules[0].matches[0].path.value"),
        "{}",
        bad.message
    );
    let gateway = gateway(&translation, "same-namespace");
    assert_eq!(listener(gateway, "http").attached_routes, 0);
    assert!(port(gateway, "http-80").virtual_hosts.is_empty());
}

/// Routes naming Gateways of other controllers, or other kinds, get no outcome from the
/// operator; a route naming one of its Gateways twice is judged once per distinct parentRef.
#[test]
fn only_parent_refs_to_the_operators_gateways_have_outcomes() {
    let mut world = World::conformance();
    world.apply(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: theirs}
spec: {controllerName: example.com/someone-else}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: their-gateway, namespace: gateway-conformance-infra}
spec:
  gatewayClassName: theirs
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: theirs-only, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: their-gateway}, {name: same-namespace, kind: Service, group: ""}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: both, namespace: gateway-conformance-infra}
spec:
  parentRefs: [{name: their-gateway}, {name: same-namespace}, {name: same-namespace, group: gateway.networking.k8s.io, kind: Gateway}, {name: same-namespace}]
  rules: [{backendRefs: [{name: infra-backend-v1, port: 8080}]}]
"#,
    );
    let translation = world.translate();
    assert!(translation.routes.iter().all(|r| r.name != "theirs-only"));
    assert!(translation.gateways.iter().all(|g| g.name != "their-gateway"));
    let both = route(&translation, INFRA, "both");
    assert_eq!(both.parents.len(), 2, "two distinct parentRefs name our Gateway");
    assert!(both.parents.iter().all(|p| p.accepted.status));
    assert_eq!(listener(gateway(&translation, "same-namespace"), "http").attached_routes, 1, "counted once");
    assert_eq!(
        host(&port(gateway(&translation, "same-namespace"), "http-80").virtual_hosts, "*").len(),
        1,
        "served once"
    );
}
