//! The upstream conformance suite's fixtures, as the tests reproducing it use them: its three
//! infra backends, its `same-namespace` Gateway, references as a real API server stores them,
//! and its HTTPRoutes read from the golden inputs ([`golden_routes`]).

use std::path::PathBuf;

use envoy_operator_core::manifest::parse_documents;
use envoy_operator_testkit::fleet_world::{NS, at_in};
use serde_json::{Value, json};

use super::world::gateway;
use crate::support::backend::Backend;

/// The conformance suite's namespace, as the golden inputs name it; ours is [`NS`].
const SUITE_NAMESPACE: &str = "gateway-conformance-infra";
/// The port of the suite's Services, as the golden inputs' backendRefs name it; ours listen on 80.
const SUITE_SERVICE_PORT: u64 = 8080;

/// The suite's Gateway most of its tests route through.
pub const GATEWAY: &str = "same-namespace";

/// The suite's three infra backends, started.
pub struct Backends([Backend; 3]);

impl Backends {
    pub async fn start() -> Self {
        Backends([
            Backend::start("infra-backend-v1").await,
            Backend::start("infra-backend-v2").await,
            Backend::start("infra-backend-v3").await,
        ])
    }

    /// Their Services: (name, backend).
    pub fn services(&self) -> Vec<(&str, &Backend)> {
        self.0.iter().map(|backend| (backend.name.as_str(), backend)).collect()
    }
}

/// [`GATEWAY`] with one HTTP listener on `port` taking routes of its namespace.
pub fn same_namespace_gateway(port: u16) -> (String, Value) {
    gateway(
        GATEWAY,
        json!([{"name": "http", "port": port, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "Same"}}}]),
    )
}

/// A parentRef to Gateway `name` as a real API server stores it: the HTTPRoute CRD's schema
/// defaults `group` and `kind` (the in-memory API server applies no defaults), and the route's
/// status copies them, as the suite requires.
pub fn defaulted_parent_ref(name: &str) -> Value {
    json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": name})
}

/// A backendRef to Service `name` (our Services listen on 80, the suite's on 8080).
pub fn backend_ref(name: &str) -> Value {
    json!({"name": name, "port": 80})
}

/// The golden input `case` of the Gateway translation:
/// `crates/core/tests/testdata/golden/gateway/<case>.in.yaml`.
fn golden_input(case: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/core/tests/testdata/golden/gateway")
        .join(format!("{case}.in.yaml"))
}

/// The HTTPRoutes of golden input `case` (the upstream suite's manifest the golden files check
/// the translation of), as `(API path, object)` for [`GatewayWorld::start`], adapted to this
/// test world here and nowhere else:
///
/// - namespace `gateway-conformance-infra` (the object's, its parentRefs' and backendRefs') is
///   [`NS`];
/// - a backendRef's (or a mirror's) port 8080 (the suite's Services') is 80 (ours);
/// - parentRefs are written as a real API server stores them: `group` and `kind` defaulted (see
///   [`defaulted_parent_ref`]);
/// - metadata keeps name, namespace, labels and annotations: the API server sets the rest
///   (`uid`, `generation`, `creationTimestamp`).
///
/// The Gateway and its listener ports are the test's own (free ports of this host), so Gateways
/// of the input are left out, as are its other objects (the Services are the test's backends).
///
/// [`GatewayWorld::start`]: super::world::GatewayWorld::start
pub fn golden_routes(case: &str) -> Vec<(String, Value)> {
    golden_routes_of(case, "HTTPRoute", "httproutes")
}

/// The GRPCRoutes of golden input `case`, as [`golden_routes`] adapts HTTPRoutes.
pub fn golden_grpc_routes(case: &str) -> Vec<(String, Value)> {
    golden_routes_of(case, "GRPCRoute", "grpcroutes")
}

fn golden_routes_of(case: &str, kind: &str, resource: &str) -> Vec<(String, Value)> {
    let path = golden_input(case);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("no golden input for case {case:?}: {}: {error}", path.display()));
    let routes: Vec<(String, Value)> = parse_documents(&text)
        .into_iter()
        .map(|document| document.content.unwrap_or_else(|error| panic!("{}: {error}", path.display())))
        .filter(|object| object["kind"] == kind)
        .map(|route| {
            let route = in_this_world(route);
            let namespace = route["metadata"]["namespace"].as_str().expect("a namespace").to_owned();
            let name = route["metadata"]["name"].as_str().expect("a named route").to_owned();
            let api_version = route["apiVersion"].as_str().expect("an apiVersion").to_owned();
            (at_in(&namespace, &api_version, resource, &name), route)
        })
        .collect();
    assert!(!routes.is_empty(), "{}: no {kind}", path.display());
    routes
}

/// The HTTPRoute `name` of golden input `case`, as [`golden_routes`] adapts it.
pub fn golden_route(case: &str, name: &str) -> (String, Value) {
    golden_routes(case)
        .into_iter()
        .find(|(_, route)| route["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no HTTPRoute {name:?} in {}", golden_input(case).display()))
}

/// An HTTPRoute of a golden input as it is in this test world (see [`golden_routes`]).
fn in_this_world(route: Value) -> Value {
    let in_our_namespace = |reference: &mut Value| {
        if reference["namespace"] == SUITE_NAMESPACE {
            reference["namespace"] = json!(NS);
        }
    };
    let metadata = &route["metadata"];
    // As the golden harness reads it: a namespaced object without a namespace is in `default`.
    let namespace = metadata["namespace"].as_str().unwrap_or("default");
    let mut kept = json!({"name": metadata["name"], "namespace": namespace});
    for field in ["labels", "annotations"] {
        if let Some(value) = metadata.get(field) {
            kept[field] = value.clone();
        }
    }
    in_our_namespace(&mut kept);
    let mut route = route;
    route["metadata"] = kept;
    let spec = &mut route["spec"];
    for parent in items(spec, "parentRefs") {
        in_our_namespace(parent);
        let defaulted = defaulted_parent_ref(parent["name"].as_str().unwrap_or_default());
        for field in ["group", "kind"] {
            if parent.get(field).is_none() {
                parent[field] = defaulted[field].clone();
            }
        }
    }
    for rule in items(spec, "rules") {
        for filter in items(rule, "filters") {
            if let Some(mirrored) = filter.get_mut("requestMirror").and_then(|m| m.get_mut("backendRef")) {
                in_suite_service(mirrored, &in_our_namespace);
            }
        }
        for backend in items(rule, "backendRefs") {
            in_suite_service(backend, &in_our_namespace);
        }
    }
    route
}

/// A reference to one of the suite's Services as one to ours: our namespace, port 80.
fn in_suite_service(reference: &mut Value, in_our_namespace: &impl Fn(&mut Value)) {
    in_our_namespace(reference);
    if reference["port"] == SUITE_SERVICE_PORT {
        reference["port"] = json!(80);
    }
}

/// The items of list `field` of `object`, none if it has no such list. (Not `object[field]`,
/// which would add the field, `null`, to an object without it: a rule without backendRefs.)
fn items<'a>(object: &'a mut Value, field: &str) -> impl Iterator<Item = &'a mut Value> {
    object.get_mut(field).and_then(Value::as_array_mut).into_iter().flatten()
}
